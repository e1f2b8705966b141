"""Interrupts: the durable approval rows a run stops at, each resolved exactly once.

One row per (run tree, gate id). A gate op records it and ends its run; nothing waits in a
process. An answer (`approve`, `reject`, a cancel, an expiry) is one conditional UPDATE from
status 'open', so any number of concurrent answers produce exactly one winner; every loser reads
the winner's row and reports "already <status> by <who> at <when>".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Engine

from resources import tables as t
from resources.stores.rows import new_id

Resolution = Literal["approved", "rejected", "canceled", "expired"]


@dataclass(frozen=True)
class Interrupt:
    """One interrupt row."""

    id: str
    root_run_id: str
    run_id: str
    gate_id: str
    status: str
    payload: dict[str, Any]
    expires_at: datetime | None
    resolved_by: str | None
    resolved_at: datetime | None
    reason: str | None
    continuation_run_id: str | None
    created_at: datetime

    @property
    def open(self) -> bool:
        """Whether nobody has answered it yet."""
        return self.status == "open"

    def describe(self) -> str:
        """`approved by alice at 2026-12-01 20:31:05 UTC` (or `open`)."""
        if self.open:
            return "open"
        when = self.resolved_at.strftime("%Y-%m-%d %H:%M:%S UTC") if self.resolved_at else "?"
        return f"{self.status} by {self.resolved_by} at {when}"


class ApprovalStore:
    """Interrupt rows in `airwave.interrupt`; every resolution is a conditional transaction."""

    def __init__(self, engine: Engine) -> None:
        """Use `engine` (the process's pooled engine)."""
        self.engine = engine

    def open_interrupt(
        self,
        *,
        root_run_id: str,
        run_id: str,
        gate_id: str,
        payload: dict[str, Any],
        expires_at: datetime | None,
    ) -> Interrupt:
        """Record the gate's interrupt unless the run tree already has one; return the row.

        A retried gate step finds its own earlier row (the unique key) instead of asking twice.
        """
        with self.engine.begin() as conn:
            conn.execute(
                pg_insert(t.interrupt)
                .values(
                    id=new_id(),
                    root_run_id=root_run_id,
                    run_id=run_id,
                    gate_id=gate_id,
                    payload=payload,
                    expires_at=expires_at,
                )
                .on_conflict_do_nothing(constraint="interrupt_one_per_gate")
            )
        found = self.find(root_run_id, gate_id)
        assert found is not None
        return found

    def find(self, root_run_id: str, gate_id: str | None = None) -> Interrupt | None:
        """The run tree's interrupt (of `gate_id`, else its latest), if any."""
        c = t.interrupt.c
        query = sa.select(t.interrupt).where(c.root_run_id == root_run_id)
        if gate_id is not None:
            query = query.where(c.gate_id == gate_id)
        with self.engine.connect() as conn:
            row = conn.execute(query.order_by(c.created_at.desc()).limit(1)).one_or_none()
        return None if row is None else Interrupt(**row._mapping)

    def resolve(
        self,
        interrupt_id: str,
        status: Resolution,
        *,
        resolved_by: str,
        reason: str | None = None,
    ) -> tuple[bool, Interrupt]:
        """Answer an open interrupt: (whether this call won, the row as it is now).

        The UPDATE only matches while the row is open, so of any number of concurrent calls
        exactly one changes it. An approval or rejection of an interrupt past its expiry does
        not win: the row is closed as 'expired' instead (by the same conditional statement's
        sibling), and the caller is told so.
        """
        c = t.interrupt.c
        now = sa.func.now()
        with self.engine.begin() as conn:
            if status in ("approved", "rejected"):
                # Past its expiry the answer comes too late: close it as expired instead.
                conn.execute(
                    t.interrupt.update()
                    .where(
                        c.id == interrupt_id,
                        c.status == "open",
                        c.expires_at.is_not(None),
                        c.expires_at <= now,
                    )
                    .values(status="expired", resolved_by="expiry", resolved_at=c.expires_at)
                )
            won = conn.execute(
                t.interrupt.update()
                .where(c.id == interrupt_id, c.status == "open")
                .values(status=status, resolved_by=resolved_by, resolved_at=now, reason=reason)
                .returning(c.id)
            ).scalar_one_or_none()
            row = conn.execute(sa.select(t.interrupt).where(c.id == interrupt_id)).one()
        return won is not None, Interrupt(**row._mapping)

    def record_continuation(self, interrupt_id: str, run_id: str) -> None:
        """Name the run that continued the tree after the approval (for `approvals show`)."""
        with self.engine.begin() as conn:
            conn.execute(
                t.interrupt.update()
                .where(t.interrupt.c.id == interrupt_id)
                .values(continuation_run_id=run_id)
            )
