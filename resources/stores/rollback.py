"""Rolling back an AI lineup: the snapshot its wipe took, the checks, and the restore.

An approved `ai_lineup` run captures, in its wipe's transaction (`take_snapshot`, called by
`AiStore.replace_ai_packages`), every row of the lineup it replaces: the AI channels in scope with
their definitions, schedule rows, schedule state and provenance, and the AI packages they use or
the wipe deletes — each as PostgreSQL's `to_jsonb` of the row, so every column (those this
project never writes included) comes back as it was. Its report step records the fingerprint of
every AI channel it left on air (`record_after`).

`RollbackStore.plan` compares the air with that fingerprint and says why a restore would be
ambiguous (docs/ai-lineup.md "Rolling back"); `RollbackStore.apply` re-checks and restores in ONE
transaction, marking the snapshot rolled back by the rollback's root run id in it, so a crash
leaves either nothing or everything and a resumed apply finds its own mark and does nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine

from airwave_dagster import failpoints
from resources import tables as t
from resources.airwave_attached import Deployment

VOLATILE_CHANNEL_KEYS = (
    "createdAt",
    "updatedAt",
    "schedulePassSeed",
    "schedulePassIndex",
    "schedulePassPos",
    "scheduleRecent",
    "bumperRev",
)
"""Columns the schedule jobs move on their own (the cursor, `bumperRev`): not an edit."""
VOLATILE_DEFINITION_KEYS = ("id", "createdAt", "updatedAt")

_SNAPSHOT_PARTS: tuple[tuple[str, sa.Table, str], ...] = (
    ("channels", t.channel, "id"),
    ("definitions", t.channel_definition, "channel_id"),
    ("schedule_items", t.schedule_item, "channel_id"),
    ("schedule_states", t.channel_schedule_state, "channel_id"),
    ("origins", t.channel_origin, "channel_id"),
)
"""(part of `rows`, table, python key of the column naming the channel), in insert order."""


def _name(table: sa.Table) -> str:
    return f'"{table.schema}"."{table.name}"'


def _dump(conn: Connection, table: sa.Table, key: str, ids: Collection[str]) -> list[Any]:
    """Every row of `table` whose `key` is in `ids`, as `to_jsonb` objects in a stable order."""
    if not ids:
        return []
    column = table.c[key].name
    order = ", ".join(f'x."{c.name}"' for c in table.primary_key.columns)
    rows = conn.execute(
        sa.text(
            f"SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY {order}), '[]'::jsonb) "
            f'FROM {_name(table)} x WHERE x."{column}" = ANY(:ids)'
        ),
        {"ids": sorted(ids)},
    ).scalar_one()
    return list(rows)


def _load(conn: Connection, table: sa.Table, rows: Sequence[Any], *, upsert: bool = False) -> None:
    """Insert `to_jsonb` rows back into `table` as they were (upsert: by primary key)."""
    if not rows:
        return
    sql = (
        f"INSERT INTO {_name(table)} SELECT * FROM "
        f"jsonb_populate_recordset(NULL::{_name(table)}, CAST(:rows AS jsonb))"
    )
    if upsert:
        keys = [c.name for c in table.primary_key.columns]
        rest = [c.name for c in table.columns if c.name not in keys]
        conflict = ", ".join(f'"{k}"' for k in keys)
        updates = ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in rest)
        sql += f" ON CONFLICT ({conflict}) DO UPDATE SET {updates}"
    conn.execute(sa.text(sql), {"rows": json.dumps(list(rows))})


def _existing(conn: Connection, table: sa.Table, ids: Collection[str]) -> set[str]:
    if not ids:
        return set()
    return set(conn.execute(sa.select(table.c.id).where(table.c.id.in_(sorted(ids)))).scalars())


def take_snapshot(
    conn: Connection,
    *,
    ledger_id: str,
    source_id: str,
    attached: bool,
    channels: sa.ColumnElement[bool],
    packages: Collection[str],
) -> bool:
    """Record what the lineup `ledger_id` is about to replace, once (in the wipe's transaction).

    Args:
        conn: The wipe's transaction; the snapshot commits or vanishes with it.
        ledger_id: The lineup (its root run id).
        source_id: The media source whose AI lineup is replaced.
        attached: Whether the scope is every source (attached deployment).
        channels: Which channel rows the lineup replaces (every AI channel in scope).
        packages: Ids of the AI packages the wipe deletes; those the channels use are added.

    Returns:
        Whether it was taken now (False: an earlier attempt of the same lineup took it, and a
        retried wipe must not record its own leftovers as the previous lineup).
    """
    known = conn.execute(
        sa.select(t.ai_lineup_snapshot.c.ledger_id)
        .where(t.ai_lineup_snapshot.c.ledger_id == ledger_id)
        .with_for_update()
    ).one_or_none()
    if known is not None:
        return False
    c = t.channel.c
    ids = set(conn.execute(sa.select(c.id).where(channels)).scalars())
    used = set(
        conn.execute(
            sa.select(t.channel_package.c.id).where(
                t.channel_package.c.ai_generated.is_(True),
                t.channel_package.c.id.in_(sa.select(c.package_id).where(c.id.in_(sorted(ids)))),
            )
        ).scalars()
    )
    rows: dict[str, list[Any]] = {
        "packages": _dump(conn, t.channel_package, "id", used | set(packages))
    }
    for part, table, key in _SNAPSHOT_PARTS:
        rows[part] = _dump(conn, table, key, ids)
    conn.execute(
        pg_insert(t.ai_lineup_snapshot)
        .values(ledger_id=ledger_id, media_source_id=source_id, attached=attached, rows=rows)
        .on_conflict_do_nothing(index_elements=["ledger_id"])
    )
    return True


def fingerprint(channel: Mapping[str, Any], definitions: Sequence[Mapping[str, Any]]) -> str:
    """What a person can change of a channel (its row but the schedule's own columns, and its
    definitions), as one hash: equal fingerprints mean nobody edited it."""
    body = {
        "channel": {k: v for k, v in channel.items() if k not in VOLATILE_CHANNEL_KEYS},
        "definitions": sorted(
            (
                {k: v for k, v in d.items() if k not in VOLATILE_DEFINITION_KEYS}
                for d in definitions
            ),
            key=lambda d: json.dumps(d, sort_keys=True),
        ),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class AirChannel:
    """A channel on air as the rollback sees it."""

    id: str
    number: int
    name: str
    package: str | None
    ai: bool
    fingerprint: str
    origin: str = "ai"
    """ai, preset or manual (the lineup diff's words)."""


@dataclass(frozen=True)
class RollbackCheck:
    """A rollback's plan: what it removes and restores, or why it must not."""

    ledger_id: str
    refusals: tuple[str, ...]
    removed: tuple[AirChannel, ...] = ()
    restored: tuple[tuple[int, str, str | None], ...] = ()
    """(number, name, package name) of each snapshot channel put back."""
    unchanged: tuple[tuple[int, str, str | None], ...] = ()
    """Snapshot channels still on air as the lineup left them (rewritten from the snapshot)."""
    untouched: tuple[AirChannel, ...] = ()
    removed_packages: tuple[str, ...] = ()
    restored_packages: tuple[str, ...] = ()
    already_by: str | None = None
    """Set when this very rollback (its root run id) already applied: nothing to do."""
    remove_ids: tuple[str, ...] = field(default=(), repr=False)
    remove_package_ids: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class SnapshotInfo:
    """A lineup's snapshot row, without its rows."""

    ledger_id: str
    media_source_id: str
    taken_at: datetime
    channels: int
    packages: int
    after_at: datetime | None
    rolled_back_by: str | None
    rolled_back_at: datetime | None


class RollbackStore:
    """Repository of the AI lineup snapshots and the rollback's restore."""

    def __init__(self, engine: Engine, deployment: Deployment | None = None) -> None:
        self.engine = engine
        self.deployment = deployment or Deployment()

    # -- scope ---------------------------------------------------------------------------------

    def _scope(self, source_id: str, attached: bool) -> sa.ColumnElement[bool]:
        """The AI channels a lineup of `source_id` replaces (every source's when attached)."""
        c = t.channel.c
        if attached:
            return c.ai_generated.is_(True)
        return sa.and_(c.ai_generated.is_(True), c.media_source_id == source_id)

    def _air(self, conn: Connection, where: sa.ColumnElement[bool]) -> list[AirChannel]:
        c = t.channel.c
        ids = list(conn.execute(sa.select(c.id).where(where)).scalars())
        rows = {r["id"]: r for r in _dump(conn, t.channel, "id", ids)}
        definitions: dict[str, list[Any]] = {}
        for d in _dump(conn, t.channel_definition, "channel_id", ids):
            definitions.setdefault(d["channelId"], []).append(d)
        names = dict(
            conn.execute(sa.select(t.channel_package.c.id, t.channel_package.c.name)).tuples().all()
        )
        return sorted(
            (
                AirChannel(
                    id=row["id"],
                    number=row["number"],
                    name=row["name"],
                    package=names.get(row["packageId"]),
                    ai=row["aiGenerated"],
                    fingerprint=fingerprint(row, definitions.get(row["id"], [])),
                    origin="ai"
                    if row["aiGenerated"]
                    else "preset"
                    if row["generated"]
                    else "manual",
                )
                for row in rows.values()
            ),
            key=lambda a: (a.number, a.id),
        )

    # -- the lineup's side ---------------------------------------------------------------------

    def record_after(self, ledger_id: str) -> int:
        """Fingerprint every AI channel in scope as the lineup `ledger_id` leaves it (its report).

        Returns how many channels were recorded (0 and nothing written without a snapshot).
        """
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(t.ai_lineup_snapshot).where(t.ai_lineup_snapshot.c.ledger_id == ledger_id)
            ).one_or_none()
            if row is None:
                return 0
            air = self._air(conn, self._scope(row.media_source_id, row.attached))
            c = t.channel.c
            packages = set(
                conn.execute(
                    sa.select(c.package_id).where(
                        c.id.in_([a.id for a in air]), c.package_id.is_not(None)
                    )
                ).scalars()
            )
            ai_packages = sorted(
                conn.execute(
                    sa.select(t.channel_package.c.id).where(
                        t.channel_package.c.ai_generated.is_(True),
                        t.channel_package.c.id.in_(sorted(packages)),
                    )
                ).scalars()
            )
            conn.execute(
                t.ai_lineup_snapshot.update()
                .where(t.ai_lineup_snapshot.c.ledger_id == ledger_id)
                .values(
                    after={
                        "channels": {a.id: a.fingerprint for a in air},
                        "labels": {a.id: f"{a.number} ({a.name})" for a in air},
                        "packages": ai_packages,
                    },
                    after_at=sa.func.now(),
                )
            )
        return len(air)

    # -- reading -------------------------------------------------------------------------------

    def info(self, ledger_id: str) -> SnapshotInfo | None:
        """The snapshot of the lineup `ledger_id`, if its wipe took one."""
        s = t.ai_lineup_snapshot.c
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(t.ai_lineup_snapshot).where(s.ledger_id == ledger_id)
            ).one_or_none()
        if row is None:
            return None
        return SnapshotInfo(
            ledger_id=row.ledger_id,
            media_source_id=row.media_source_id,
            taken_at=row.taken_at,
            channels=len(row.rows.get("channels", [])),
            packages=len(row.rows.get("packages", [])),
            after_at=row.after_at,
            rolled_back_by=row.rolled_back_by,
            rolled_back_at=row.rolled_back_at,
        )

    # -- the rollback --------------------------------------------------------------------------

    def plan(self, ledger_id: str, rollback_id: str) -> RollbackCheck:
        """What rolling back the lineup `ledger_id` would do now, or why it must not (no write)."""
        with self.engine.connect() as conn:
            return self._check(conn, ledger_id, rollback_id)

    def _check(self, conn: Connection, ledger_id: str, rollback_id: str) -> RollbackCheck:
        s = t.ai_lineup_snapshot.c
        snap = conn.execute(
            sa.select(t.ai_lineup_snapshot).where(s.ledger_id == ledger_id)
        ).one_or_none()
        if snap is None:
            return RollbackCheck(
                ledger_id,
                (
                    f"run {ledger_id} has no lineup snapshot: it never reached its wipe, or it "
                    "ran before snapshots existed (migration 0011)",
                ),
            )
        if snap.rolled_back_by == rollback_id:
            return RollbackCheck(ledger_id, (), already_by=rollback_id)
        if snap.rolled_back_by is not None:
            return RollbackCheck(
                ledger_id,
                (
                    f"the lineup of run {ledger_id} was already rolled back by run "
                    f"{snap.rolled_back_by} at {snap.rolled_back_at:%Y-%m-%d %H:%M:%S %Z}",
                ),
            )
        refusals: list[str] = []
        later = conn.execute(
            sa.select(s.ledger_id, s.taken_at).where(
                s.taken_at > snap.taken_at,
                s.rolled_back_by.is_(None),
                s.ledger_id != ledger_id,
                sa.true()
                if snap.attached
                else sa.or_(s.media_source_id == snap.media_source_id, s.attached.is_(True)),
            )
        ).all()
        refusals.extend(
            f"run {row.ledger_id} replaced the AI lineup after this one "
            f"(at {row.taken_at:%Y-%m-%d %H:%M:%S %Z}); roll it back first"
            for row in later
        )
        parked = conn.execute(
            sa.select(sa.func.count())
            .select_from(t.ai_parked_channel)
            .where(
                t.ai_parked_channel.c.ledger_id == ledger_id,
                t.ai_parked_channel.c.restored_number.is_(None),
            )
        ).scalar_one()
        if parked:
            refusals.append(
                f"run {ledger_id} has not settled {parked} parked channel(s); resume it "
                f"(`airwave runs resume {ledger_id}`) before rolling it back"
            )
        if snap.after is None:
            refusals.append(
                f"run {ledger_id} never finished its lineup (no report recorded what it left "
                f"on air); resume it (`airwave runs resume {ledger_id}`) or cancel it first"
            )
            return RollbackCheck(ledger_id, tuple(refusals))
        after: dict[str, str] = snap.after["channels"]
        air = self._air(conn, self._scope(snap.media_source_id, snap.attached))
        on_air = {a.id: a for a in air}
        labels: dict[str, str] = snap.after.get("labels", {})
        refusals.extend(
            f"AI channel {labels.get(channel_id, channel_id)} was deleted since the lineup"
            for channel_id in sorted(set(after) - set(on_air))
        )
        for a in air:
            if a.id not in after:
                refusals.append(f"AI channel {a.number} ({a.name}) was added since the lineup")
            elif after[a.id] != a.fingerprint:
                refusals.append(f"AI channel {a.number} ({a.name}) was changed since the lineup")
        rows = snap.rows
        snapshot_ids = {c["id"] for c in rows["channels"]}
        snapshot_packages = {p["id"] for p in rows["packages"]}
        package_names = {p["id"]: p["name"] for p in rows["packages"]}
        # The lineup's own packages (AI ones it left on air that the snapshot does not hold) go
        # once they hold nothing else; a package of another scope keeps its channels.
        c = t.channel.c
        remove_ids = sorted(on_air)
        others = set(
            conn.execute(
                sa.select(c.package_id).where(
                    c.id.not_in(remove_ids) if remove_ids else sa.true(),
                    c.package_id.is_not(None),
                )
            ).scalars()
        )
        remove_packages = sorted(
            p
            for p in snap.after.get("packages", [])
            if p not in snapshot_packages and p not in others
        )
        surviving = conn.execute(
            sa.select(c.number, c.name, c.id).where(
                c.id.not_in(remove_ids) if remove_ids else sa.true()
            )
        ).all()
        holders = {row.number: row for row in surviving}
        for channel in rows["channels"]:
            holder = holders.get(channel["number"])
            if holder is not None and holder.id not in snapshot_ids:
                refusals.append(
                    f"number {channel['number']} of {channel['name']} is taken by channel "
                    f"{holder.name} (not part of the AI lineup)"
                )
        p = t.channel_package.c
        keys = dict(
            conn.execute(
                sa.select(p.key, p.id).where(
                    p.id.not_in([*remove_packages, *snapshot_packages])
                    if remove_packages or snapshot_packages
                    else sa.true()
                )
            )
            .tuples()
            .all()
        )
        refusals.extend(
            f"package key {package['key']!r} of {package['name']} is taken by another package"
            for package in rows["packages"]
            if package["key"] in keys
        )
        names = dict(conn.execute(sa.select(p.id, p.name)).tuples().all())
        present_packages = set(names)
        return RollbackCheck(
            ledger_id,
            tuple(refusals),
            removed=tuple(a for a in air if a.id not in snapshot_ids),
            restored=tuple(
                (ch["number"], ch["name"], package_names.get(ch["packageId"]))
                for ch in sorted(rows["channels"], key=lambda ch: ch["number"])
                if ch["id"] not in on_air
            ),
            unchanged=tuple(
                (ch["number"], ch["name"], package_names.get(ch["packageId"]))
                for ch in sorted(rows["channels"], key=lambda ch: ch["number"])
                if ch["id"] in on_air
            ),
            untouched=tuple(
                a
                for a in self._air(
                    conn,
                    sa.true()
                    if snap.attached
                    else t.channel.c.media_source_id == snap.media_source_id,
                )
                if not a.ai
            ),
            removed_packages=tuple(names[i] for i in remove_packages if i in names),
            restored_packages=tuple(
                package["name"]
                for package in rows["packages"]
                if package["id"] not in present_packages
            ),
            remove_ids=tuple(remove_ids),
            remove_package_ids=tuple(remove_packages),
        )

    def apply(self, ledger_id: str, rollback_id: str) -> RollbackCheck:
        """Restore the lineup `ledger_id` replaced, in ONE transaction (idempotent).

        Re-checks first, under a lock on the snapshot row: a refusal raised here means the air
        changed since the plan. Removes the lineup's AI channels in scope (definitions,
        schedule rows and private rows cascade) and its own empty AI packages, upserts the
        snapshot's packages, re-inserts its channels with their ids and the rows hanging off
        them, and marks the snapshot rolled back by `rollback_id`. A second call of the same
        rollback finds the mark and returns the check with `already_by` set.

        Raises:
            RollbackRefused: With the reasons, when the restore would be ambiguous now.
        """
        s = t.ai_lineup_snapshot.c
        with self.engine.begin() as conn:
            conn.execute(
                sa.select(s.ledger_id).where(s.ledger_id == ledger_id).with_for_update()
            ).all()
            check = self._check(conn, ledger_id, rollback_id)
            if check.already_by is not None:
                return check
            if check.refusals:
                raise RollbackRefused(check.refusals)
            rows = conn.execute(sa.select(s.rows).where(s.ledger_id == ledger_id)).scalar_one()
            if check.remove_ids:
                conn.execute(t.channel.delete().where(t.channel.c.id.in_(check.remove_ids)))
            if check.remove_package_ids:
                conn.execute(
                    t.channel_package.delete().where(
                        t.channel_package.c.id.in_(check.remove_package_ids)
                    )
                )
            _load(conn, t.channel_package, rows["packages"], upsert=True)
            users = _existing(
                conn, t.user, {c["createdById"] for c in rows["channels"] if c["createdById"]}
            )
            channels = [
                {**c, "createdById": c["createdById"] if c["createdById"] in users else None}
                for c in rows["channels"]
            ]
            _load(conn, t.channel, channels)
            _load(conn, t.channel_definition, rows["definitions"])
            media = _existing(
                conn,
                t.media_item,
                {
                    i[key]
                    for i in rows["schedule_items"]
                    for key in ("mediaItemId", "targetMediaItemId")
                    if i[key]
                },
            )
            _load(
                conn,
                t.schedule_item,
                [
                    {
                        **i,
                        "mediaItemId": i["mediaItemId"] if i["mediaItemId"] in media else None,
                        "targetMediaItemId": i["targetMediaItemId"]
                        if i["targetMediaItemId"] in media
                        else None,
                    }
                    for i in rows["schedule_items"]
                ],
            )
            _load(conn, t.channel_schedule_state, rows["schedule_states"])
            _load(conn, t.channel_origin, rows["origins"])
            failpoints.reach(failpoints.ROLLBACK_IN_APPLY, key=ledger_id)
            conn.execute(
                t.ai_lineup_snapshot.update()
                .where(s.ledger_id == ledger_id)
                .values(rolled_back_by=rollback_id, rolled_back_at=sa.func.now())
            )
        return check


class RollbackRefused(Exception):
    """A rollback whose restore would be ambiguous; `reasons` says why."""

    def __init__(self, reasons: Sequence[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = tuple(reasons)
