"""The repositories over the project database, handed out together by `open_stores`.

Nothing outside this package builds a store from an engine: the Dagster resource
(`DatabaseResource.stores()`) and the CLI (`open_stores(url)`) both get the same set.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from resources.airwave_attached import Deployment
from resources.stores.ai import AiStore
from resources.stores.approvals import ApprovalStore
from resources.stores.channels import AirwaveStore
from resources.stores.claims import DEFAULT_STALE_SECONDS, ChannelClaims
from resources.stores.engine import engine_for
from resources.stores.maintenance import MaintenanceStore
from resources.stores.rollback import RollbackStore


@dataclass(frozen=True)
class Stores:
    """Every repository over one database, sharing the process's pooled engine."""

    channels: AirwaveStore
    claims: ChannelClaims
    ai: AiStore
    maintenance: MaintenanceStore
    approvals: ApprovalStore
    rollback: RollbackStore


def open_stores(
    url: str,
    *,
    claim_stale_after: timedelta | None = None,
    deployment: Deployment | None = None,
) -> Stores:
    """The repositories over the database at `url`.

    Args:
        url: SQLAlchemy URL of the project database.
        claim_stale_after: How long a channel claim without a heartbeat stays its holder's.
        deployment: Standalone (default) or attached to a running Airwave's database.
    """
    engine = engine_for(url)
    deployment = deployment or Deployment()
    channels = AirwaveStore(engine, deployment)
    return Stores(
        channels=channels,
        claims=ChannelClaims(
            engine, stale_after=claim_stale_after or timedelta(seconds=DEFAULT_STALE_SECONDS)
        ),
        ai=AiStore(engine, deployment),
        maintenance=MaintenanceStore(channels),
        approvals=ApprovalStore(engine),
        rollback=RollbackStore(engine, deployment),
    )
