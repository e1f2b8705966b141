"""Writing channels the way a build does, for tests that need committed channels fast."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from airwave_dagster.domain.import_plan import PlannedChannel
from resources import tables as t
from resources.stores import Stores
from resources.stores.channels import AirwaveStore, ChannelCreation
from resources.stores.claims import Claimant


def create_channel(
    stores: Stores,
    planned: PlannedChannel,
    *,
    source_id: str,
    package_id: str | None,
    run_id: str,
) -> ChannelCreation:
    """Claim, write and enable a planned channel at once: the build's path with no work inside.

    The same reserve-don't-check path a build takes (`resources.stores.claims`), for callers
    that have nothing to do between the claim and the commit: a taken number is adopted only
    when the stored row has the plan's content signature, anything else is a conflict.
    """
    store, claims = stores.channels, stores.claims
    claimant = Claimant(run_id=run_id, step_key="create_channel", attempt=1)
    outcome = claims.claim(
        number=planned.assigned_number,
        claimant=claimant,
        signature=planned.signature,
        values=store.channel_values(planned, source_id=source_id, package_id=package_id),
    )
    if outcome.kind != "claimed" or outcome.channel_id is None:
        return ChannelCreation(
            status="existing" if outcome.kind == "existing" else "conflict",
            channel_id=outcome.channel_id,
            detail=outcome.detail,
        )
    with store.transaction() as conn:
        store.insert_definitions(conn, outcome.channel_id, planned)
        claims.commit(
            conn, outcome.channel_id, claimant, enabled=planned.enabled and not planned.disabled
        )
    return ChannelCreation(status="created", channel_id=outcome.channel_id)


def import_report(store: AirwaveStore, run_id: str) -> dict[str, Any]:
    """The project's full report of one import run: `summarize_import`'s stored output.

    Airwave's `import_trace` report row carries only the counts its run page reads
    (docs/reference/airwave-database.md §3.9); the per-channel outcomes (`channels`, with pool
    sizes and reasons) and the lineup's name are in the report op's output.
    """
    so = t.step_output.c
    with store.engine.connect() as conn:
        (value,) = conn.execute(
            sa.select(so.value).where(so.run_id == run_id, so.step_key == "summarize_import")
        ).scalars()
    return dict(value)
