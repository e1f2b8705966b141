"""Writing channels the way a build does, for tests that need committed channels fast."""

from __future__ import annotations

from airwave_dagster.domain.import_plan import PlannedChannel
from resources.stores import Stores
from resources.stores.channels import ChannelCreation
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
