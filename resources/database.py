"""The application database as a Dagster resource: migrated on first use, handing out the stores."""

from __future__ import annotations

import threading
from datetime import timedelta

import dagster as dg
from pydantic import Field

from resources.airwave_attached import Deployment
from resources.migrations import ensure_current
from resources.stores import Stores, open_stores

_migrated: set[str] = set()
_migrated_lock = threading.Lock()


class DatabaseResource(dg.ConfigurableResource):
    """The project's PostgreSQL database, migrated to head on first use.

    Standalone, it holds Airwave's tables (created here) and the private schema; attached, it is a
    running Airwave's database whose tables are only read and written (docs/attached.md).

    Examples:
        database = DatabaseResource(url=dg.EnvVar("AIRWAVE_DATABASE_URL"))
    """

    url: str = Field(
        description="SQLAlchemy URL of the project database (postgresql+psycopg2://…)."
    )
    claim_stale_seconds: float = Field(
        default=60.0,
        gt=0,
        description=(
            "A channel claim whose heartbeat is older than this may be taken over by another "
            "attempt (the holder is presumed dead)."
        ),
    )

    mode: str = Field(
        default="standalone",
        description="`standalone`, or `attached` to a running Airwave's database (AIRWAVE_MODE).",
    )
    source_id: str | None = Field(
        default=None,
        description="Attached: the Airwave media source to build against (AIRWAVE_SOURCE_ID).",
    )
    user_email: str | None = Field(
        default=None,
        description="Email of the Airwave user recorded as creator of new channels (AIRWAVE_USER).",
    )

    @property
    def deployment(self) -> Deployment:
        """The layout and attached-mode choices the stores follow."""
        return Deployment(mode=self.mode, source_id=self.source_id, user_email=self.user_email)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Make sure the schema is current before any op touches it (once per process)."""
        with _migrated_lock:
            if self.url in _migrated:
                return
        ensure_current(self.url, attached=self.deployment.attached)
        with _migrated_lock:
            _migrated.add(self.url)

    def stores(self) -> Stores:
        """Every repository over this database (one pooled engine per process)."""
        return open_stores(
            self.url,
            claim_stale_after=timedelta(seconds=self.claim_stale_seconds),
            deployment=self.deployment,
        )
