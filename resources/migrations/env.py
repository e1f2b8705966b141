"""Alembic environment: the project's tables in `public` and `airwave_dagster`, never Dagster's."""

from __future__ import annotations

from alembic import context

from resources.tables import AIRWAVE_SCHEMA, SCHEMA, metadata


def _include_name(name: str | None, type_: str, parent_names: object) -> bool:
    if type_ == "schema":
        return name in (SCHEMA, AIRWAVE_SCHEMA)
    return True


def run_migrations_online() -> None:
    """Run against the connection handed in by `resources.migrations.upgrade`."""
    connection = context.config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table_schema=SCHEMA,
        include_schemas=True,
        include_name=_include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
