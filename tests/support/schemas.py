"""An empty schema of its own for a test's Dagster storage (or any store)."""

from __future__ import annotations

import psycopg2

from airwave_dagster.cli import environment


def fresh_schema(database_url: str, schema: str) -> str:
    """Drop `schema` if it exists and create it empty; the URL whose search path is `schema`.

    Runs of earlier tests left in a shared schema would answer a test's idempotency keys, take
    its queued runs or show in its UI: a test that starts its own Dagster processes gets its own.
    """
    conn = psycopg2.connect(environment.libpq_dsn(database_url))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            cur.execute(f'CREATE SCHEMA "{schema}"')
    finally:
        conn.close()
    return environment.with_search_path(database_url, schema)


def empty_project_tables(database_url: str) -> None:
    """Empty every table the project declares: Airwave's in `public` and its private ones."""
    import sqlalchemy as sa

    from resources import tables

    names = ", ".join(f'{table.schema}."{table.name}"' for table in tables.metadata.sorted_tables)
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()
