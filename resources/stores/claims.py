"""Reserve, don't check: a build claims its channel number before doing the expensive work.

A claim is the channel row itself, inserted **disabled** (Airwave's server and schedule jobs skip
disabled rows), plus a private `airwave_dagster.channel_claim` row naming its claimant (run id,
step key, attempt) with a heartbeat, and a `channel_origin` row with the channel's content
signature, all inserted in one transaction. Nothing of the claim is added to Airwave's `channel`
table. The unique channel number makes the reservation atomic: of two builds of the same channel,
one inserts the row and the other finds it. What the loser does depends on what it finds:

- a committed row this project created with the same content signature → an earlier attempt
  already did the work: adopt it (``existing``), never redo it (a row with no origin row is not
  the project's, whatever it contains: docs/reference/airwave-database.md §7.3);
- a live claim with the same signature → another attempt (a retry, a resumed run, or an orphaned
  step process of a crashed run) is doing the work right now: wait for it to commit (then adopt)
  or to release (then claim);
- a claim whose heartbeat stopped for ``stale_after`` → its process died: take it over;
- anything else → the number belongs to another channel: ``conflict``.

While the work runs, ``held()`` refreshes the heartbeat from a background thread. ``commit()``
enables the row inside the caller's transaction (with its definitions and schedule) and fails with
`ClaimLost` if the claim was taken over meanwhile; ``release()`` deletes the row (and, by cascade,
its claim) on give-up or failure. All timing is Postgres's ``now()``, so step processes never
compare their own clocks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine

from airwave_dagster import tracing
from resources import tables as t
from resources.stores.rows import new_id

DEFAULT_STALE_SECONDS = 60.0
"""A claim without a heartbeat for this long belongs to a dead process and may be taken over."""


class ClaimLost(RuntimeError):
    """The claim was taken over (its heartbeat had gone stale) before this attempt committed."""


class ClaimBusy(RuntimeError):
    """Another live attempt still held the number when the wait ran out."""


@dataclass(frozen=True)
class Claimant:
    """Who holds a claim: one attempt of one step of one run."""

    run_id: str
    step_key: str
    attempt: int

    def describe(self) -> str:
        """Human-readable identity for messages."""
        return f"run {self.run_id} step {self.step_key} attempt {self.attempt}"


@dataclass(frozen=True)
class ClaimOutcome:
    """The result of trying to claim a number."""

    kind: Literal["claimed", "existing", "conflict"]
    channel_id: str | None
    detail: str | None = None
    took_over: Claimant | None = None


_TRACED_OUTCOMES = {"claimed": "claimed", "existing": "adopted", "conflict": "conflict"}
"""A claim's outcome as its step span names it (`existing` is the adoption of a finished row)."""


def _owned_by(claimant: Claimant) -> sa.ColumnElement[bool]:
    """The claim row of `claimant` (on `channel_claim`)."""
    c = t.channel_claim.c
    return sa.and_(
        c.run_id == claimant.run_id,
        c.step_key == claimant.step_key,
        c.attempt == claimant.attempt,
    )


def _claim_values(claimant: Claimant) -> dict[str, Any]:
    return {
        "run_id": claimant.run_id,
        "step_key": claimant.step_key,
        "attempt": claimant.attempt,
        "heartbeat_at": sa.func.now(),
    }


class ChannelClaims:
    """Claims on channel numbers, shared by every step process through Postgres."""

    def __init__(
        self,
        engine: Engine,
        *,
        stale_after: timedelta | None = None,
        poll_seconds: float = 0.5,
    ) -> None:
        self.engine = engine
        self.stale_after = stale_after or timedelta(seconds=DEFAULT_STALE_SECONDS)
        self.poll_seconds = poll_seconds

    @property
    def heartbeat_every(self) -> float:
        """Seconds between heartbeats: four beats fit in one stale period."""
        return max(self.stale_after.total_seconds() / 4, 0.1)

    def claim(
        self,
        *,
        number: int,
        claimant: Claimant,
        signature: str,
        values: Mapping[str, Any],
        wait_seconds: float = 600.0,
    ) -> ClaimOutcome:
        """Reserve `number` for `claimant`, or say why not (see the module docstring).

        `values` are the channel's other columns (name, media_source_id, package_id, ...); the row
        is inserted with them but disabled. Raises `ClaimBusy` if a live attempt of the same
        channel still holds the number after `wait_seconds`.
        """
        deadline = time.monotonic() + wait_seconds
        while True:
            outcome = self._try_claim(number, claimant, signature, values)
            if outcome is not None:
                tracing.note(
                    {
                        "airwave.channel.number": number,
                        "airwave.claim.outcome": _TRACED_OUTCOMES[outcome.kind]
                        if outcome.took_over is None
                        else "took_over",
                    }
                )
                return outcome
            if time.monotonic() >= deadline:
                holder = self.holder(number)
                raise ClaimBusy(
                    f"channel number {number} is still being built by "
                    f"{holder.describe() if holder else 'another attempt'}"
                )
            time.sleep(self.poll_seconds)

    def _try_claim(
        self, number: int, claimant: Claimant, signature: str, values: Mapping[str, Any]
    ) -> ClaimOutcome | None:
        """One round: insert, adopt, take over, or None to wait for a live claim."""
        c, k, o = t.channel.c, t.channel_claim.c, t.channel_origin.c
        with self.engine.begin() as conn:
            # The row, its claim and its origin in one statement (one round trip): the claim
            # and origin inserts read the id the row insert returns, and insert nothing when
            # the number was taken.
            row = (
                pg_insert(t.channel)
                # Column defaults computed in Python are not applied inside a WITH: given here.
                .values(
                    {
                        "updated_at": t.utc_now(),
                        **values,
                        "id": new_id(),
                        "number": number,
                        "enabled": False,
                    }
                )
                .on_conflict_do_nothing(index_elements=[c.number])
                .returning(c.id)
                .cte("claimed_row")
            )
            claim = t.channel_claim.insert().from_select(
                [k.channel_id, k.run_id, k.step_key, k.attempt, k.heartbeat_at],
                sa.select(
                    row.c.id,
                    sa.literal(claimant.run_id),
                    sa.literal(claimant.step_key),
                    sa.literal(claimant.attempt),
                    sa.func.now(),
                ),
            )
            origin = t.channel_origin.insert().from_select(
                [o.channel_id, o.signature, o.run_id],
                sa.select(row.c.id, sa.literal(signature), sa.literal(claimant.run_id)),
            )
            inserted = conn.execute(
                sa.select(row.c.id).add_cte(claim.cte("claim")).add_cte(origin.cte("origin"))
            ).scalar_one_or_none()
            if inserted is not None:
                return ClaimOutcome(kind="claimed", channel_id=inserted)
            current = conn.execute(
                sa.select(
                    c.id,
                    o.signature,
                    k.run_id,
                    k.step_key,
                    k.attempt,
                    (k.heartbeat_at < sa.func.now() - self.stale_after).label("stale"),
                )
                .select_from(
                    t.channel.outerjoin(t.channel_origin, o.channel_id == c.id).outerjoin(
                        t.channel_claim, k.channel_id == c.id
                    )
                )
                .where(c.number == number)
                .with_for_update(of=t.channel)
            ).one_or_none()
            if current is None:
                return None  # released between our insert and select: try again at once
            if current.run_id is None:
                if current.signature is not None and current.signature == signature:
                    return ClaimOutcome(kind="existing", channel_id=current.id)
                return ClaimOutcome(
                    kind="conflict",
                    channel_id=None,
                    detail=(
                        f"number {number} is taken by another channel; re-plan to get a free number"
                    ),
                )
            holder = Claimant(current.run_id, current.step_key, current.attempt)
            if holder == claimant:
                return ClaimOutcome(kind="claimed", channel_id=current.id)
            if current.stale:
                # The holder's process died (no heartbeat): take the row over as it stands,
                # replacing whatever the dead attempt had started with this attempt's values.
                conn.execute(t.channel.update().where(c.id == current.id).values(**values))
                conn.execute(
                    t.channel_claim.update()
                    .where(k.channel_id == current.id)
                    .values(**_claim_values(claimant))
                )
                conn.execute(
                    pg_insert(t.channel_origin)
                    .values(channel_id=current.id, signature=signature, run_id=claimant.run_id)
                    .on_conflict_do_update(
                        index_elements=[o.channel_id],
                        set_={o.signature: signature, o.run_id: claimant.run_id},
                    )
                )
                conn.execute(
                    t.channel_definition.delete().where(
                        t.channel_definition.c.channel_id == current.id
                    )
                )
                conn.execute(
                    t.schedule_item.delete().where(t.schedule_item.c.channel_id == current.id)
                )
                return ClaimOutcome(kind="claimed", channel_id=current.id, took_over=holder)
            if current.signature != signature:
                return ClaimOutcome(
                    kind="conflict",
                    channel_id=None,
                    detail=(
                        f"number {number} is being built for another channel by {holder.describe()}"
                    ),
                )
            return None  # a live attempt of this same channel: wait for its outcome

    def holder(self, number: int) -> Claimant | None:
        """The live claimant of `number`, if the row is currently claimed."""
        k = t.channel_claim.c
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(k.run_id, k.step_key, k.attempt)
                .select_from(t.channel_claim.join(t.channel, t.channel.c.id == k.channel_id))
                .where(t.channel.c.number == number)
            ).one_or_none()
        return None if row is None else Claimant(*row)

    def heartbeat(self, channel_id: str, claimant: Claimant) -> bool:
        """Refresh the claim's heartbeat; False if the claim is no longer ours."""
        with self.engine.begin() as conn:
            result = conn.execute(
                t.channel_claim.update()
                .where(t.channel_claim.c.channel_id == channel_id, _owned_by(claimant))
                .values(heartbeat_at=sa.func.now())
            )
        return result.rowcount == 1

    @contextmanager
    def held(self, channel_id: str, claimant: Claimant) -> Iterator[None]:
        """Keep the claim alive with a background heartbeat while the body runs."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat_every):
                try:
                    if not self.heartbeat(channel_id, claimant):
                        return  # taken over or released: commit() will say so
                except Exception:  # a missed beat is retried; only staleness matters
                    continue

        thread = threading.Thread(target=beat, name=f"claim-heartbeat-{channel_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)

    def commit(
        self,
        conn: Connection,
        channel_id: str,
        claimant: Claimant,
        *,
        enabled: bool = True,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """Turn the claim into a finished channel inside the caller's transaction.

        One statement: the claim is deleted and the row enabled only if the claim was still
        this claimant's.
        """
        released = (
            t.channel_claim.delete()
            .where(t.channel_claim.c.channel_id == channel_id, _owned_by(claimant))
            .returning(t.channel_claim.c.channel_id)
            .cte("released")
        )
        finished = conn.execute(
            t.channel.update()
            .where(t.channel.c.id.in_(sa.select(released.c.channel_id)))
            # With a WITH, the Python-side `onupdate` is not applied either: given here.
            .values({"updated_at": t.utc_now(), **(values or {}), "enabled": enabled})
            .returning(t.channel.c.id)
            .add_cte(released)
        ).all()
        if not finished:
            raise ClaimLost(
                f"the claim on channel {channel_id} held by {claimant.describe()} was taken over "
                "after its heartbeat went stale; the attempt that took it over finishes the build"
            )

    def release(self, channel_id: str, claimant: Claimant) -> bool:
        """Delete the claimed row if it is still ours (give-up or failure); True if deleted."""
        mine = sa.select(t.channel_claim.c.channel_id).where(
            t.channel_claim.c.channel_id == channel_id, _owned_by(claimant)
        )
        with self.engine.begin() as conn:
            result = conn.execute(t.channel.delete().where(t.channel.c.id.in_(mine)))
        return result.rowcount == 1

    def open_claims(self) -> list[tuple[int, Claimant]]:
        """Every number currently claimed (for reports, cancel and the crash tests)."""
        c, k = t.channel.c, t.channel_claim.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(c.number, k.run_id, k.step_key, k.attempt)
                .select_from(t.channel_claim.join(t.channel, c.id == k.channel_id))
                .order_by(c.number)
            ).all()
        return [(row.number, Claimant(row[1], row[2], row[3])) for row in rows]

    def release_run(self, run_ids: set[str] | frozenset[str]) -> int:
        """Delete every claim held by these runs (cancel); returns how many were removed."""
        if not run_ids:
            return 0
        held = sa.select(t.channel_claim.c.channel_id).where(
            t.channel_claim.c.run_id.in_(sorted(run_ids))
        )
        with self.engine.begin() as conn:
            result = conn.execute(t.channel.delete().where(t.channel.c.id.in_(held)))
        return int(result.rowcount)
