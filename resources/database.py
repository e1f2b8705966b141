"""The application database as a Dagster resource: migrated on first use, handing out the stores."""

from __future__ import annotations

import threading
from datetime import timedelta

import dagster as dg
from pydantic import Field

from resources.migrations import ensure_current
from resources.stores import Stores, open_stores

_migrated: set[str] = set()
_migrated_lock = threading.Lock()


class DatabaseResource(dg.ConfigurableResource):
    """The project's PostgreSQL database (schema `airwave`), migrated to head on first use.

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

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Make sure the schema is current before any op touches it (once per process)."""
        with _migrated_lock:
            if self.url in _migrated:
                return
        ensure_current(self.url)
        with _migrated_lock:
            _migrated.add(self.url)

    def stores(self) -> Stores:
        """Every repository over this database (one pooled engine per process)."""
        return open_stores(self.url, claim_stale_after=timedelta(seconds=self.claim_stale_seconds))
