"""Storage of the AI lineup builder: trace rows, the budget ledger, the profile, the AI lineup rows.

Everything here is shared by the step processes of an `ai_lineup` run through Postgres: the spend
ledger in particular is one row updated atomically (`UPDATE … SET spent = spent + x RETURNING`), so
six concurrent builds in six processes see one running total without a lock of their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine

from airwave_dagster.domain.ai.usage import Usage, add_usage
from airwave_dagster.domain.library import MediaItem
from resources import tables as t
from resources.airwave_attached import Deployment
from resources.stores.rollback import take_snapshot
from resources.stores.rows import STORE_LOG, cap_json, keyed, new_id

TRACE_TEXT_LIMIT = 20_000
"""Longest reason/error text kept on a trace row (the JSON columns are capped by `cap_json`)."""


@dataclass(frozen=True)
class LedgerState:
    """The budget ledger of one lineup (the root run and every re-execution of it)."""

    ledger_id: str
    budget_usd: float | None
    spent_usd: float
    calls: int

    @property
    def exhausted(self) -> bool:
        """True once the spend reached the budget (never without a budget)."""
        return self.budget_usd is not None and self.spent_usd >= self.budget_usd


@dataclass(frozen=True)
class WipeCounts:
    """What the wipe of a source's previous AI lineup deletes (or would delete)."""

    channels: int
    packages: int
    schedule_items: int
    parked: int = 0

    @property
    def anything(self) -> bool:
        """Whether a previous AI lineup of the source exists."""
        return self.channels > 0


@dataclass(frozen=True)
class PackageRow:
    """A package as the builder sees it."""

    id: str
    key: str
    name: str
    description: str | None
    generated: bool
    ai_generated: bool
    channel_count: int


@dataclass(frozen=True)
class NewPackage:
    """An AI package to create (its key already made unique by the caller)."""

    plan_key: str
    key: str
    name: str
    description: str | None
    icon: str | None
    tint: str


def _unsettled() -> sa.Select[tuple[str]]:
    """Ids of the channels parked by a lineup and not settled yet (never wiped meanwhile)."""
    k = t.ai_parked_channel.c
    return sa.select(k.channel_id).where(k.restored_number.is_(None))


@dataclass(frozen=True)
class ParkedChannel:
    """An AI channel set aside while the lineup that kept it rebuilds it."""

    channel_id: str
    previous_number: int
    previous_enabled: bool
    name: str


def _money(value: Decimal | float | None) -> float | None:
    return None if value is None else float(value)


class AiStore:
    """Repository of the AI lineup tables (and the AI rows of the channel tables)."""

    def __init__(self, engine: Engine, deployment: Deployment | None = None) -> None:
        self.engine = engine
        self.deployment = deployment or Deployment()

    def _wiped(self, source_id: str, keep: Collection[int] = ()) -> sa.ColumnElement[bool]:
        """The channels an AI wipe deletes.

        Standalone: the source's AI channels. Attached: every AI channel of every source, as
        Airwave's own wipe does (docs/reference/airwave-database.md §5.2), so a lineup built
        here replaces exactly what Airwave's builder would. Never the channels numbered in
        `keep` (those a `limit` leaves on air), nor parked ones (`park_kept`).
        """
        c = t.channel.c
        spared = [c.id.not_in(_unsettled())]
        if keep:
            spared.append(c.number.not_in(sorted(keep)))
        if self.deployment.attached:
            return sa.and_(c.ai_generated.is_(True), *spared)
        return sa.and_(c.ai_generated.is_(True), c.media_source_id == source_id, *spared)

    def _in_scope(self, source_id: str) -> sa.ColumnElement[bool]:
        """The channels the lineup diff shows: the source's, or all of them when attached."""
        if self.deployment.attached:
            return sa.true()
        return t.channel.c.media_source_id == source_id

    # -- trace ----------------------------------------------------------------------------------

    def record_trace(self, **fields: Any) -> None:
        """Append one `ai_lineup_trace` row. Best effort: a failure here never fails the step.

        JSON payloads (`input`, `output`, `trace`) are normalised and capped at 200,000
        characters (`{truncated, chars, preview}` beyond that).
        """
        for key in ("input", "output", "trace"):
            if fields.get(key) is not None:
                fields[key] = cap_json(fields[key])
        for key in ("reason", "error"):
            if isinstance(fields.get(key), str):
                fields[key] = fields[key][:TRACE_TEXT_LIMIT]
        fields.setdefault("finished_at", datetime.now(UTC))
        # Airwave's table has no place for these (docs/reference/airwave-database.md §3.10):
        # they go to a private row.
        private = {key: fields.pop(key, None) for key in ("cost_usd", "context_sha256")}
        trace_id = new_id()
        try:
            with self.engine.begin() as conn:
                conn.execute(t.ai_lineup_trace.insert().values(id=trace_id, **fields))
                if any(value is not None for value in private.values()):
                    conn.execute(t.ai_trace_cost.insert().values(trace_id=trace_id, **private))
        except Exception:
            # Any failure (a bad value, a lost connection) is logged, never raised: the trace
            # documents the step, it must not decide its outcome.
            STORE_LOG.warning("could not record an AI lineup trace row", exc_info=True)

    def traces(self, run_ids: str | Sequence[str]) -> list[dict[str, Any]]:
        """Trace rows of one run (or several: a run and its re-executions), oldest first.

        Each row also carries its private `cost_usd` and `context_sha256` (None when not kept).
        """
        ids = [run_ids] if isinstance(run_ids, str) else list(run_ids)
        a, k = t.ai_lineup_trace.c, t.ai_trace_cost.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.ai_lineup_trace, k.cost_usd, k.context_sha256)
                .select_from(t.ai_lineup_trace.outerjoin(t.ai_trace_cost, k.trace_id == a.id))
                .where(a.run_id.in_(ids))
                .order_by(a.started_at, a.id)
            )
            return [
                {
                    **keyed(row, t.ai_lineup_trace),
                    "cost_usd": row.cost_usd,
                    "context_sha256": row.context_sha256,
                }
                for row in rows
            ]

    # -- budget ledger --------------------------------------------------------------------------

    def open_ledger(self, ledger_id: str, budget_usd: float | None) -> LedgerState:
        """Create the ledger of a lineup once; a re-execution finds and keeps the original."""
        with self.engine.begin() as conn:
            conn.execute(
                pg_insert(t.ai_budget)
                .values(ledger_id=ledger_id, budget_usd=budget_usd)
                .on_conflict_do_nothing(index_elements=["ledger_id"])
            )
        return self.ledger(ledger_id)

    def ledger(self, ledger_id: str) -> LedgerState:
        """The ledger's current state (an unknown ledger reads as empty and unbounded)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(t.ai_budget).where(t.ai_budget.c.ledger_id == ledger_id)
            ).one_or_none()
        if row is None:
            return LedgerState(ledger_id=ledger_id, budget_usd=None, spent_usd=0.0, calls=0)
        return LedgerState(
            ledger_id=ledger_id,
            budget_usd=_money(row.budget_usd),
            spent_usd=_money(row.spent_usd) or 0.0,
            calls=row.calls,
        )

    def charge(
        self,
        ledger_id: str,
        *,
        run_id: str,
        step_key: str | None,
        attempt: int,
        phase: str,
        model: str,
        usage: Usage,
        cost_usd: float | None,
    ) -> LedgerState:
        """Record one model call's usage and add its cost to the ledger, atomically.

        The spend row and the running total change in one transaction; the total is one
        `UPDATE … RETURNING`, so concurrent step processes never lose an increment. An unpriced
        call (cost None) is recorded with its tokens and adds nothing to the total.
        """
        with self.engine.begin() as conn:
            conn.execute(
                t.ai_spend.insert().values(
                    ledger_id=ledger_id,
                    run_id=run_id,
                    step_key=step_key,
                    attempt=attempt,
                    phase=phase,
                    model=model,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                    cache_write_1h_tokens=usage.cache_write_1h_tokens,
                    cost_usd=cost_usd,
                )
            )
            conn.execute(
                pg_insert(t.ai_budget)
                .values(ledger_id=ledger_id, budget_usd=None)
                .on_conflict_do_nothing(index_elements=["ledger_id"])
            )
            row = conn.execute(
                t.ai_budget.update()
                .where(t.ai_budget.c.ledger_id == ledger_id)
                .values(
                    spent_usd=t.ai_budget.c.spent_usd + Decimal(str(cost_usd or 0.0)),
                    calls=t.ai_budget.c.calls + 1,
                    updated_at=sa.func.now(),
                )
                .returning(t.ai_budget.c.budget_usd, t.ai_budget.c.spent_usd, t.ai_budget.c.calls)
            ).one()
        return LedgerState(
            ledger_id=ledger_id,
            budget_usd=_money(row.budget_usd),
            spent_usd=_money(row.spent_usd) or 0.0,
            calls=row.calls,
        )

    def usage_by_model(self, ledger_id: str) -> dict[str, Usage]:
        """Every charged call of a ledger, summed per model (one call per row)."""
        usage: dict[str, Usage] = {}
        for row in self.spend_rows(ledger_id):
            usage = add_usage(
                usage,
                row["model"],
                Usage(
                    input_tokens=row["input_tokens"],
                    output_tokens=row["output_tokens"],
                    cache_read_tokens=row["cache_read_tokens"],
                    cache_write_tokens=row["cache_write_tokens"],
                    cache_write_1h_tokens=row["cache_write_1h_tokens"],
                    calls=1,
                ),
            )
        return usage

    def cost_by_model(self, ledger_id: str) -> dict[str, float | None]:
        """Every charged call's own price, summed per model; None when any call was unpriced."""
        costs: dict[str, float | None] = {}
        for row in self.spend_rows(ledger_id):
            model, cost = row["model"], _money(row["cost_usd"])
            before = costs.get(model, 0.0)
            costs[model] = None if cost is None or before is None else before + cost
        return costs

    def spend_rows(self, ledger_id: str) -> list[dict[str, Any]]:
        """Every charged call of a ledger, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.ai_spend)
                .where(t.ai_spend.c.ledger_id == ledger_id)
                .order_by(t.ai_spend.c.id)
            )
            return [keyed(row, t.ai_spend) for row in rows]

    # -- library profile ------------------------------------------------------------------------

    def save_profile(
        self, source_id: str, profile: Mapping[str, Any], sha256: str, run_id: str | None
    ) -> None:
        """Store the source's latest library profile (the `library_profile` asset's value)."""
        stmt = pg_insert(t.library_profile).values(
            media_source_id=source_id, profile=dict(profile), sha256=sha256, run_id=run_id
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["media_source_id"],
            set_={
                "profile": stmt.excluded.profile,
                "sha256": stmt.excluded.sha256,
                "run_id": stmt.excluded.run_id,
                "computed_at": sa.func.now(),
            },
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    def load_profile(self, source_id: str) -> tuple[dict[str, Any], str] | None:
        """The stored profile of a source and its sha256, if the asset was ever materialised."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(t.library_profile.c.profile, t.library_profile.c.sha256).where(
                    t.library_profile.c.media_source_id == source_id
                )
            ).one_or_none()
        return None if row is None else (dict(row.profile), row.sha256)

    def has_media_items(self, source_id: str) -> bool:
        """Whether the source's library snapshot has any available item."""
        li = t.library_item.c
        with self.engine.connect() as conn:
            return bool(
                conn.execute(
                    sa.select(
                        sa.exists().where(li.media_source_id == source_id, li.available.is_(True))
                    )
                ).scalar_one()
            )

    def snapshot_items(self, source_id: str) -> list[dict[str, Any]]:
        """Every available item of the source's library snapshot (the project's full item JSON).

        The snapshot is private (`airwave_dagster.library_item`): Airwave's `media_item.guide`
        keeps only the first few tags of each kind, too little for filters and the profile.
        """
        li = t.library_item.c
        with self.engine.connect() as conn:
            return list(
                conn.execute(
                    sa.select(li.item)
                    .where(li.media_source_id == source_id, li.available.is_(True))
                    .order_by(li.rating_key)
                ).scalars()
            )

    # -- packages and the wipe ------------------------------------------------------------------

    def packages(self) -> list[PackageRow]:
        """Every package with its channel count, ordered by sort index then name."""
        p = t.channel_package.c
        counts = (
            sa.select(t.channel.c.package_id, sa.func.count().label("n"))
            .group_by(t.channel.c.package_id)
            .subquery()
        )
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(
                    p.id,
                    p.key,
                    p.name,
                    p.description,
                    p.generated,
                    p.ai_generated,
                    sa.func.coalesce(counts.c.n, 0).label("n"),
                )
                .select_from(t.channel_package.outerjoin(counts, counts.c.package_id == p.id))
                .order_by(p.sort_index, p.name)
            ).all()
        return [
            PackageRow(
                id=r.id,
                key=r.key,
                name=r.name,
                description=r.description,
                generated=r.generated,
                ai_generated=r.ai_generated,
                channel_count=r.n,
            )
            for r in rows
        ]

    def wipe_counts(
        self, source_id: str, conn: Connection | None = None, keep: Collection[int] = ()
    ) -> WipeCounts:
        """What wiping the source's previous AI lineup deletes (read only)."""
        if conn is None:
            with self.engine.connect() as own:
                return self.wipe_counts(source_id, own, keep)
        c = t.channel.c
        ai_channels = sa.select(c.id).where(self._wiped(source_id, keep))
        channels = conn.execute(
            sa.select(sa.func.count()).select_from(ai_channels.subquery())
        ).scalar_one()
        items = conn.execute(
            sa.select(sa.func.count())
            .select_from(t.schedule_item)
            .where(t.schedule_item.c.channel_id.in_(ai_channels))
        ).scalar_one()
        packages = len(self._doomed_packages(conn, source_id, keep))
        return WipeCounts(channels=channels, packages=packages, schedule_items=items)

    def _doomed_packages(
        self, conn: Connection, source_id: str, keep: Collection[int] = ()
    ) -> list[str]:
        """AI packages that hold no AI channel the wipe keeps (another source's, standalone, or
        one a `limit` leaves on air). A parked channel keeps no package: it is put back into
        its plan package, or deleted."""
        c = t.channel.c
        p = t.channel_package.c
        others = sa.select(c.package_id).where(
            c.ai_generated.is_(True),
            sa.not_(self._wiped(source_id, keep)),
            c.id.not_in(_unsettled()),
            c.package_id.is_not(None),
        )
        return list(
            conn.execute(
                sa.select(p.id).where(p.ai_generated.is_(True), p.id.not_in(others))
            ).scalars()
        )

    def replace_ai_packages(
        self,
        source_id: str,
        *,
        reuse: Mapping[str, str],
        create: Sequence[NewPackage],
        keep: Collection[int] = (),
        park: Collection[int] = (),
        ledger_id: str = "",
    ) -> tuple[WipeCounts, dict[str, str], list[str]]:
        """Wipe the source's AI lineup and create the plan's packages, in ONE transaction.

        First, with a `ledger_id`, the rows it replaces are captured for a rollback
        (`resources/stores/rollback.py`), once per lineup.

        Only rows with `ai_generated` set are deleted: this source's AI channels (their
        definitions and schedules cascade), then AI packages no other source's AI lineup uses
        (manual or preset channels filed into one are detached first, never deleted). Because it
        is one transaction, a failed attempt leaves nothing behind and a retry converges.

        Channels numbered in `keep` stay as they are. Channels numbered in `park` (the approved
        diff kept them, and they are rebuilt) are not deleted but parked for the lineup
        `ledger_id`: number negated, disabled, recorded in `ai_parked_channel`, so the report
        step can delete each once its rebuild committed or put it back (`settle_parked`). A
        retry finds them parked already and leaves them so.

        Args:
            source_id: The media source whose AI lineup is replaced.
            reuse: Plan package key → existing package key (non-AI packages, or AI packages a
                `limit` leaves on air; looked up after the wipe, a key that no longer exists
                gets a new package instead).
            create: New packages; keys are re-checked against what exists after the wipe.
            keep: Numbers of AI channels on air that stay untouched.
            park: Numbers of AI channels on air to park while they are rebuilt.
            ledger_id: The lineup that parks them (its root run id).

        Returns:
            (what was wiped — `parked` counted apart —, plan key → package id, plan keys of
            packages created).
        """
        c = t.channel.c
        p = t.channel_package.c
        ids: dict[str, str] = {}
        created: list[str] = []
        with self.engine.begin() as conn:
            if ledger_id:
                # What a rollback of this lineup puts back: every AI channel in scope, taken
                # before anything moves (a retried wipe keeps the first attempt's snapshot).
                take_snapshot(
                    conn,
                    ledger_id=ledger_id,
                    source_id=source_id,
                    attached=self.deployment.attached,
                    channels=sa.and_(
                        t.channel.c.ai_generated.is_(True),
                        self._in_scope(source_id),
                        t.channel.c.id.not_in(_unsettled()),
                    ),
                    packages=self._doomed_packages(conn, source_id, keep),
                )
            self._park(conn, source_id, park, ledger_id)
            wiped = dataclasses.replace(
                self.wipe_counts(source_id, conn, keep),
                parked=len(self.parked(ledger_id, conn)),
            )
            doomed = self._doomed_packages(conn, source_id, keep)
            conn.execute(t.channel.delete().where(self._wiped(source_id, keep)))
            if doomed:
                conn.execute(
                    t.channel.update().where(c.package_id.in_(doomed)).values(package_id=None)
                )
                conn.execute(t.channel_package.delete().where(p.id.in_(doomed)))
            existing = dict(conn.execute(sa.select(p.key, p.id)).tuples().all())
            taken = set(existing)
            sort_index = conn.execute(
                sa.select(sa.func.coalesce(sa.func.max(p.sort_index), 0))
            ).scalar_one()
            for plan_key, existing_key in reuse.items():
                if existing_key in existing:
                    ids[plan_key] = existing[existing_key]
            for package in create:
                if package.plan_key in ids:
                    continue
                key = package.key
                suffix = 2
                while key in taken:
                    key = f"{package.key}-{suffix}"
                    suffix += 1
                taken.add(key)
                sort_index += 1
                package_id = new_id()
                conn.execute(
                    t.channel_package.insert().values(
                        id=package_id,
                        key=key,
                        name=package.name,
                        description=package.description,
                        icon=package.icon,
                        tint=package.tint,
                        sort_index=sort_index,
                        ai_generated=True,
                    )
                )
                ids[package.plan_key] = package_id
                created.append(package.plan_key)
        return wiped, ids, created

    def on_air(self, source_id: str) -> list[dict[str, Any]]:
        """Every channel of the source with its package name and provenance (the diff's input)."""
        c = t.channel.c
        p = t.channel_package.c
        query = (
            sa.select(c.number, c.name, c.ai_generated, c.generated, p.name.label("package"))
            .select_from(t.channel.outerjoin(t.channel_package, c.package_id == p.id))
            .where(self._in_scope(source_id))
            .order_by(c.number)
        )
        with self.engine.connect() as conn:
            return [
                {
                    "number": row.number,
                    "name": row.name,
                    "package": row.package,
                    "origin": "ai" if row.ai_generated else "preset" if row.generated else "manual",
                }
                for row in conn.execute(query)
            ]

    def doomed_package_names(self, source_id: str, keep: Collection[int] = ()) -> list[str]:
        """Names of the AI packages that replacing the source's AI lineup would delete."""
        with self.engine.connect() as conn:
            ids = self._doomed_packages(conn, source_id, keep)
            if not ids:
                return []
            p = t.channel_package.c
            return list(conn.execute(sa.select(p.name).where(p.id.in_(ids))).scalars())

    def numbering_state(
        self, source_id: str, keep: Collection[int] = ()
    ) -> tuple[dict[int, str | None], dict[str, str]]:
        """Live state as it will be right after the wipe, read without writing anything.

        Args:
            source_id: The media source whose AI lineup is replaced.
            keep: Numbers of AI channels the wipe leaves on air (a `limit`'s).

        Returns:
            (number → package id of every channel that survives the wipe — all but this
            source's AI channels not in `keep` —, key → id of every package that survives it).
        """
        c = t.channel.c
        p = t.channel_package.c
        with self.engine.connect() as conn:
            doomed = set(self._doomed_packages(conn, source_id, keep))
            rows = conn.execute(
                sa.select(c.number, c.package_id).where(sa.not_(self._wiped(source_id, keep)))
            )
            numbers = {
                row.number: None if row.package_id in doomed else row.package_id for row in rows
            }
            packages = {
                row.key: row.id
                for row in conn.execute(sa.select(p.key, p.id))
                if row.id not in doomed
            }
        return numbers, packages

    def surviving_ai_packages(self, source_id: str, keep: Collection[int]) -> dict[str, str]:
        """Name → key of the AI packages that still hold a channel of `keep` after the wipe."""
        if not keep:
            return {}
        c = t.channel.c
        p = t.channel_package.c
        with self.engine.connect() as conn:
            doomed = set(self._doomed_packages(conn, source_id, keep))
            rows = conn.execute(
                sa.select(p.id, p.key, p.name)
                .where(p.ai_generated.is_(True))
                .where(p.id.in_(sa.select(c.package_id).where(c.number.in_(sorted(keep)))))
            ).all()
        return {row.name: row.key for row in rows if row.id not in doomed}

    # -- parked channels (kept by the approved diff, rebuilt by the run) -----------------------

    def _park(
        self, conn: Connection, source_id: str, numbers: Collection[int], ledger_id: str
    ) -> None:
        """Set the AI channels numbered `numbers` aside for `ledger_id` (`replace_ai_packages`)."""
        if not numbers:
            return
        c = t.channel.c
        rows = conn.execute(
            sa.select(c.id, c.number, c.enabled).where(
                c.ai_generated.is_(True),
                self._in_scope(source_id),
                c.number.in_(sorted(numbers)),
                c.id.not_in(_unsettled()),
            )
        ).all()
        for row in rows:
            # A record of an earlier lineup that put this channel back is history now.
            conn.execute(
                t.ai_parked_channel.delete().where(t.ai_parked_channel.c.channel_id == row.id)
            )
            conn.execute(
                t.ai_parked_channel.insert().values(
                    channel_id=row.id,
                    ledger_id=ledger_id,
                    previous_number=row.number,
                    previous_enabled=row.enabled,
                )
            )
            conn.execute(
                t.channel.update().where(c.id == row.id).values(number=-row.number, enabled=False)
            )

    def parked(self, ledger_id: str, conn: Connection | None = None) -> list[ParkedChannel]:
        """The channels the lineup `ledger_id` parked and has not settled yet, by old number."""
        if conn is None:
            with self.engine.connect() as own:
                return self.parked(ledger_id, own)
        k = t.ai_parked_channel.c
        rows = conn.execute(
            sa.select(k.channel_id, k.previous_number, k.previous_enabled, t.channel.c.name)
            .select_from(t.ai_parked_channel.join(t.channel, t.channel.c.id == k.channel_id))
            .where(k.ledger_id == ledger_id, k.restored_number.is_(None))
            .order_by(k.previous_number)
        ).all()
        return [
            ParkedChannel(
                channel_id=row.channel_id,
                previous_number=row.previous_number,
                previous_enabled=row.previous_enabled,
                name=row.name,
            )
            for row in rows
        ]

    def restored(self, ledger_id: str) -> list[tuple[int, int, str, str]]:
        """(number, previous number, name, note) of every channel the lineup put back."""
        k = t.ai_parked_channel.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(k.restored_number, k.previous_number, t.channel.c.name, k.note)
                .select_from(t.ai_parked_channel.join(t.channel, t.channel.c.id == k.channel_id))
                .where(k.ledger_id == ledger_id, k.restored_number.is_not(None))
                .order_by(k.previous_number)
            ).all()
        return [(r.restored_number, r.previous_number, r.name, r.note or "") for r in rows]

    def drop_parked(self, channel_id: str) -> None:
        """Delete a parked channel: its rebuild committed, as the approved diff said."""
        with self.engine.begin() as conn:
            conn.execute(
                t.channel.delete().where(
                    t.channel.c.id == channel_id,
                    t.channel.c.id.in_(sa.select(t.ai_parked_channel.c.channel_id)),
                )
            )

    def restore_parked(
        self, parked: ParkedChannel, numbers: Sequence[int], package_id: str | None, note: str
    ) -> int | None:
        """Put a parked channel back on air at the first free number of `numbers`.

        One transaction: the row gets that number, `package_id` and its old `enabled`, and its
        parked record is marked restored with `note` (why), which `restored` reads back for a
        resumed report. Returns the number, or None when every number is taken (the channel
        stays parked; a resume tries again).
        """
        c = t.channel.c
        with self.engine.begin() as conn:
            taken = set(
                conn.execute(sa.select(c.number).where(c.number.in_(list(numbers)))).scalars()
            )
            free = next((n for n in numbers if n not in taken), None)
            if free is None:
                return None
            conn.execute(
                t.channel.update()
                .where(c.id == parked.channel_id)
                .values(number=free, package_id=package_id, enabled=parked.previous_enabled)
            )
            conn.execute(
                t.ai_parked_channel.update()
                .where(t.ai_parked_channel.c.channel_id == parked.channel_id)
                .values(restored_number=free, note=note)
            )
        return free

    def channel_numbers(self) -> dict[int, str | None]:
        """Every channel number on the instance with its package id (live state)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.channel.c.number, t.channel.c.package_id))
            return {row.number: row.package_id for row in rows}

    def remove_empty_ai_packages(self, package_ids: Sequence[str]) -> list[str]:
        """Delete the given AI packages that ended up with no channel; their keys."""
        if not package_ids:
            return []
        p = t.channel_package.c
        used = sa.select(t.channel.c.package_id).where(t.channel.c.package_id.is_not(None))
        with self.engine.begin() as conn:
            return list(
                conn.execute(
                    t.channel_package.delete()
                    .where(
                        p.id.in_(list(package_ids)),
                        p.ai_generated.is_(True),
                        p.id.not_in(used),
                    )
                    .returning(p.key)
                ).scalars()
            )

    def channel_row(self, channel_id: str) -> dict[str, Any] | None:
        """One channel row (tests, reports)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(t.channel).where(t.channel.c.id == channel_id)
            ).one_or_none()
        return None if row is None else keyed(row, t.channel)

    def write_definitions(
        self, conn: Connection, channel_id: str, definitions: Sequence[tuple[str, object]]
    ) -> None:
        """Replace the channel's definitions by the verified PREDICATE ones, in order.

        Args:
            conn: The commit's transaction.
            channel_id: The claimed channel.
            definitions: `(mode, plexFilter)` pairs: the filter's INCLUDE, then an EXCLUDE
                (a kids or family channel's rating ceiling) when there is one.
        """
        conn.execute(
            t.channel_definition.delete().where(t.channel_definition.c.channel_id == channel_id)
        )
        conn.execute(
            t.channel_definition.insert(),
            [
                {
                    "id": new_id(),
                    "channel_id": channel_id,
                    "kind": "PREDICATE",
                    "mode": mode,
                    "sort_index": index,
                    "plex_filter": plex_filter,
                }
                for index, (mode, plex_filter) in enumerate(definitions)
            ],
        )


def media_items(store: AiStore, source_id: str) -> list[MediaItem]:
    """The source's available snapshot items as domain items."""
    return [MediaItem.model_validate(item) for item in store.snapshot_items(source_id)]
