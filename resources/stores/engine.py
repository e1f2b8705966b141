"""One pooled SQLAlchemy engine per database URL per process."""

from __future__ import annotations

import threading

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from resources.tables import UTC_SESSION

_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def engine_for(url: str) -> Engine:
    """One pooled engine per URL per process (step processes each get their own)."""
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            engine = sa.create_engine(
                url,
                pool_pre_ping=True,
                pool_size=2,
                max_overflow=4,
                connect_args=UTC_SESSION,
            )
            _engines[url] = engine
        return engine
