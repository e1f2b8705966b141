"""Alembic migrations of the project's tables, run automatically before use.

Standalone mode: they create Airwave's tables in `public` and the project's private schema
(`airwave_dagster`, which also holds Alembic's version table). Up to revision 0007 the project
kept its own layout in schema `airwave`; 0008 carries it over (docs/database.md). A database
whose `public` already holds an Airwave installation's tables is refused: those are a running
Airwave's, and only attached mode may use them.

Attached mode (docs/attached.md): `public` belongs to Airwave's Prisma migrations and is never
created, altered or dropped here. The first start checks Airwave's schema read-only, creates the
private tables as they are at the newest revision and stamps that revision; later revisions run
as usual, and a revision that touches `public` must do nothing when
`context.config.attributes["attached"]` is true.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from airwave_dagster.settings import SettingsError
from resources.airwave_attached import foreign_airwave, require_airwave_schema
from resources.tables import LEGACY_SCHEMA, PRIVATE_TABLES, SCHEMA, UTC_SESSION, metadata

_HERE = Path(__file__).resolve().parent

# Any fixed 64-bit number works; it only has to be the same in every process of the project.
_MIGRATION_LOCK_ID = 0x41_49_52_57_41_56_45


def alembic_config(database_url: str, *, attached: bool = False) -> Config:
    """An Alembic config for this package's scripts, bound to `database_url`."""
    config = Config()
    config.set_main_option("script_location", str(_HERE))
    config.set_main_option("version_locations", str(_HERE / "versions"))
    config.attributes["database_url"] = database_url
    config.attributes["attached"] = attached
    return config


def heads() -> frozenset[str]:
    """The newest revision of every branch of the scripts (normally exactly one)."""
    from alembic.script import ScriptDirectory

    return frozenset(ScriptDirectory.from_config(alembic_config("")).get_heads())


class ForeignAirwaveError(SettingsError):
    """Standalone mode was pointed at a database holding a running Airwave's tables."""


def upgrade(database_url: str, revision: str = "heads", *, attached: bool = False) -> None:
    """Bring the project's tables to `revision`; idempotent and safe to call concurrently.

    A transaction-scoped advisory lock serialises concurrent callers (a CLI command, a code server
    and several step processes may all start at once); later callers find the schema current.

    Raises:
        AttachedError: Attached, and the database is not an Airwave database of a supported
            schema version (every problem listed; nothing was changed).
        ForeignAirwaveError: Standalone, and `public` holds Airwave tables it did not create.
    """
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool, connect_args=UTC_SESSION)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
            if attached:
                require_airwave_schema(conn)
            if conn.execute(sa.text("SELECT to_regnamespace(:s)"), {"s": SCHEMA}).scalar() is None:
                # Only when missing: the statement needs CREATE on the database even when the
                # schema exists, which an attached deployment's role may not have.
                conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{SCHEMA}"'))
            _adopt_legacy_version_table(conn)
            config = alembic_config(database_url, attached=attached)
            config.attributes["connection"] = conn
            fresh = not _has_version_table(conn)
            if attached and fresh:
                metadata.create_all(conn, tables=list(PRIVATE_TABLES))
                command.stamp(config, "heads")
                return
            if not attached and foreign_airwave(conn, fresh=fresh):
                raise ForeignAirwaveError(
                    "this database already holds an Airwave installation's tables in schema "
                    "public, which standalone mode did not create and will not take over. To "
                    "run on a running Airwave's database set AIRWAVE_MODE=attached "
                    "(docs/attached.md); standalone mode needs a database of its own"
                )
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def _has_version_table(conn: sa.Connection) -> bool:
    return bool(
        conn.execute(
            sa.text("SELECT to_regclass(:name) IS NOT NULL"), {"name": f"{SCHEMA}.alembic_version"}
        ).scalar_one()
    )


def _adopt_legacy_version_table(conn: sa.Connection) -> None:
    """Move Alembic's version table of a database at 0007 or older into the private schema."""
    legacy = conn.execute(
        sa.text("SELECT to_regclass(:name) IS NOT NULL"),
        {"name": f"{LEGACY_SCHEMA}.alembic_version"},
    ).scalar_one()
    current = conn.execute(
        sa.text("SELECT to_regclass(:name) IS NOT NULL"), {"name": f"{SCHEMA}.alembic_version"}
    ).scalar_one()
    if legacy and not current:
        conn.execute(sa.text(f"ALTER TABLE {LEGACY_SCHEMA}.alembic_version SET SCHEMA {SCHEMA}"))


def current_revisions(database_url: str) -> frozenset[str]:
    """The revisions the database is at (one per branch), empty before the first upgrade."""
    from alembic.runtime.migration import MigrationContext

    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool, connect_args=UTC_SESSION)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"version_table_schema": SCHEMA})
            return frozenset(context.get_current_heads())
    finally:
        engine.dispose()


def ensure_current(database_url: str, *, attached: bool = False) -> None:
    """Upgrade unless the database is already at the heads (one cheap query in the common case)."""
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool, connect_args=UTC_SESSION)
    try:
        with engine.connect() as conn:
            versions = frozenset(
                conn.execute(sa.text(f"SELECT version_num FROM {SCHEMA}.alembic_version")).scalars()
            )
    except sa.exc.ProgrammingError:
        versions = frozenset()
    finally:
        engine.dispose()
    if versions != heads():
        upgrade(database_url, attached=attached)
