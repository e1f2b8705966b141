"""Migrations: idempotent, concurrent-safe, and in step with the table declarations."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from resources import migrations, tables

pytestmark = pytest.mark.postgres


def _ours(name: str | None, type_: str, parent_names: object) -> bool:
    if type_ == "schema":
        return name in (tables.SCHEMA, tables.AIRWAVE_SCHEMA)
    return not (type_ == "table" and name == "alembic_version")


def test_heads_match_the_scripts(database_url: str) -> None:
    script = ScriptDirectory.from_config(migrations.alembic_config(database_url))
    assert migrations.heads() == frozenset(script.get_heads())
    assert len(migrations.heads()) >= 1


def test_upgrade_is_idempotent_and_safe_concurrently(database_url: str) -> None:
    errors: list[BaseException] = []

    def upgrade() -> None:
        try:
            migrations.upgrade(database_url)
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=upgrade) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert migrations.current_revisions(database_url) == migrations.heads()


def test_migrations_match_the_declared_tables(database_url: str) -> None:
    # Alembic reflects the session's default schema without its name; with the search path on
    # Dagster's schema, `public` and `airwave_dagster` are both reflected by name, as declared.
    engine = sa.create_engine(
        database_url,
        poolclass=sa.pool.NullPool,
        connect_args={"options": "-c search_path=dagster"},
    )
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "include_schemas": True,
                "include_name": _ours,
            },
        )
        diff = compare_metadata(context, tables.metadata)
    engine.dispose()
    assert diff == []
