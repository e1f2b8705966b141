"""The migrated database holds Airwave's tables in `public`, exactly, and nothing of ours there.

The expected shapes (tests/support/airwave_catalog.py) were checked against a database built
from Airwave's own Prisma migrations; these tests hold the project's migrations to them.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg2
import pytest
import sqlalchemy as sa

from airwave_dagster.cli import environment
from tests.support import airwave_catalog as ac
from tests.support.airwave_catalog import (
    BOOLEAN,
    CASCADE,
    FOREIGN_KEY,
    INTEGER,
    PRIMARY_KEY,
    SET_NULL,
    TEXT,
    TEXT_ARRAY,
    TIMESTAMP,
    Catalog,
    Column,
    Constraint,
    Index,
    Table,
)

pytestmark = pytest.mark.postgres

PUBLIC = "public"
PRIVATE = "airwave_dagster"
DAGSTER = "dagster"
# The schema of the project's tables before issue 21; a fresh database must have none there.
OLD_PRIVATE = "airwave"

TABLE_NAMES = sorted(ac.TABLES)


@pytest.fixture(scope="module")
def public(database_url: str) -> Catalog:
    return ac.read_catalog(database_url, PUBLIC)


def _table(catalog: Catalog, name: str) -> Table:
    found = catalog.tables.get(name)
    if found is None:
        pytest.fail(
            f"{name}: table missing from schema {catalog.schema} "
            f"(it holds {sorted(catalog.tables) or 'no tables'})"
        )
    return found


def _report(problems: list[str]) -> str:
    return "\n".join(problems)


@pytest.mark.parametrize("name", TABLE_NAMES)
def test_columns_match_airwave(public: Catalog, name: str) -> None:
    expected = ac.TABLES[name]
    problems = ac.column_differences(expected, _table(public, name))
    assert not problems, _report(problems)


@pytest.mark.parametrize("name", TABLE_NAMES)
def test_column_order_matches_airwave(public: Catalog, name: str) -> None:
    # Order is part of the shape `SELECT *`, `COPY` without a column list and pg_dump rely on;
    # kept apart from the column test so that it cannot hide a type or default mismatch.
    expected = ac.TABLES[name]
    problems = ac.column_order_differences(expected, _table(public, name))
    assert not problems, _report(problems)


@pytest.mark.parametrize("name", TABLE_NAMES)
def test_indexes_match_airwave(public: Catalog, name: str) -> None:
    expected = ac.TABLES[name]
    problems = ac.index_differences(PUBLIC, expected, _table(public, name))
    assert not problems, _report(problems)


@pytest.mark.parametrize("name", TABLE_NAMES)
def test_constraints_match_airwave(public: Catalog, name: str) -> None:
    expected = ac.TABLES[name]
    problems = ac.constraint_differences(expected, _table(public, name))
    assert not problems, _report(problems)


@pytest.mark.parametrize("name", TABLE_NAMES)
def test_no_trigger_on_airwave_tables(public: Catalog, name: str) -> None:
    expected = ac.TABLES[name]
    problems = ac.trigger_differences(expected, _table(public, name))
    assert not problems, _report(problems)


def test_enum_types_match_airwave(public: Catalog) -> None:
    used = {name: ac.ENUMS[name] for name in sorted(ac.ENUMS_OF_TABLES)}
    problems = ac.enum_differences(used, public)
    # PackageAccessMode may exist (Airwave's access tables use it) but nothing else may.
    problems.extend(
        f"enum {PUBLIC}.{name}: not one of Airwave's ({list(labels)})"
        for name, labels in public.enums.items()
        if name not in ac.ENUMS
    )
    assert not problems, _report(problems)


def test_public_holds_only_airwave_tables(public: Catalog) -> None:
    extra = sorted(set(public.tables) - set(ac.TABLES))
    missing = sorted(set(ac.TABLES) - set(public.tables))
    assert (extra, missing, dict(public.other_relations)) == ([], [], {}), (
        f"schema {PUBLIC}: extra tables {extra}, missing tables {missing}, "
        f"other relations {dict(public.other_relations)}"
    )


def _declared_tables() -> list[sa.Table]:
    # Every MetaData of resources.tables, however many the declarations are split into.
    from resources import tables

    found = {
        table.fullname: table
        for value in vars(tables).values()
        if isinstance(value, sa.MetaData)
        for table in value.sorted_tables
    }
    return [found[name] for name in sorted(found)]


def test_private_tables_live_in_airwave_dagster(database_url: str) -> None:
    declared_tables = _declared_tables()
    problems = [
        f"declared table {table.name}: schema {table.schema!r}, expected {home!r}"
        for table in declared_tables
        if table.schema != (home := PUBLIC if table.name in ac.TABLES else PRIVATE)
    ]
    private = ac.read_catalog(database_url, PRIVATE)
    if "alembic_version" not in private.tables:
        problems.append(f"schema {PRIVATE}: no alembic_version (it holds {sorted(private.tables)})")
    declared = {t.name for t in declared_tables if t.name not in ac.TABLES}
    missing = sorted(declared - set(private.tables))
    if missing:
        problems.append(f"schema {PRIVATE}: declared private tables missing: {missing}")
    old = ac.read_catalog(database_url, OLD_PRIVATE)
    if old.tables:
        problems.append(f"schema {OLD_PRIVATE}: still holds tables {sorted(old.tables)}")
    assert not problems, _report(problems)


def test_dagster_storage_lives_in_dagster(database_url: str, dagster_instance: object) -> None:
    storage = ac.read_catalog(database_url, DAGSTER)
    assert {"runs", "event_logs"} <= set(storage.tables), (
        f"schema {DAGSTER}: Dagster's run storage missing (it holds {sorted(storage.tables)})"
    )
    # Both the project and Dagster keep an alembic_version, each in its own schema.
    dagster_tables = set(storage.tables) - {"alembic_version"}
    problems = [
        f"schema {schema}: holds Dagster's tables {sorted(shared)}"
        for schema in (PUBLIC, PRIVATE)
        if (shared := dagster_tables & set(ac.read_catalog(database_url, schema).tables))
    ]
    assert not problems, _report(problems)


# ---------------------------------------------------------------------------------------------
# The reader itself, on a schema of known shape (independent of the project's migrations)
# ---------------------------------------------------------------------------------------------

PROBE = "airwave_catalog_probe"

# Written for this test: one enum, two tables, a unique and a plain index, a self-explanatory FK.
_PROBE_DDL = f"""
CREATE SCHEMA {PROBE};
CREATE TYPE {PROBE}."Mood" AS ENUM ('CALM', 'LOUD', 'WILD');
CREATE TABLE {PROBE}."user" (
    id TEXT NOT NULL,
    "joinedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT user_pkey PRIMARY KEY (id)
);
CREATE TABLE {PROBE}.pet (
    id TEXT NOT NULL,
    "ownerId" TEXT,
    mood {PROBE}."Mood" NOT NULL DEFAULT 'LOUD',
    name TEXT NOT NULL DEFAULT 'rex',
    legs INTEGER NOT NULL DEFAULT 4,
    tame BOOLEAN,
    tags TEXT[],
    "bornAt" TIMESTAMP(3),
    CONSTRAINT pet_pkey PRIMARY KEY (id),
    CONSTRAINT "pet_ownerId_fkey" FOREIGN KEY ("ownerId") REFERENCES {PROBE}."user"(id)
        ON DELETE SET NULL ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "pet_ownerId_name_key" ON {PROBE}.pet ("ownerId", name);
CREATE INDEX pet_mood_idx ON {PROBE}.pet (mood);
"""

# Each object a second writer could add by mistake; the diff must name every one.
_PROBE_STRAY_DDL = f"""
ALTER TABLE {PROBE}.pet ADD COLUMN extra INTEGER;
ALTER TABLE {PROBE}.pet ADD CONSTRAINT pet_legs_check CHECK (legs >= 0);
ALTER TABLE {PROBE}.pet ADD CONSTRAINT pet_name_key UNIQUE (name);
ALTER TABLE {PROBE}.pet ALTER COLUMN legs SET DEFAULT 3;
CREATE FUNCTION {PROBE}.touch() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TRIGGER pet_touch BEFORE UPDATE ON {PROBE}.pet
    FOR EACH ROW EXECUTE FUNCTION {PROBE}.touch();
CREATE SEQUENCE {PROBE}.pet_counter;
"""

PROBE_PET = Table(
    name="pet",
    columns=(
        Column("id", TEXT, nullable=False),
        Column("ownerId", TEXT, nullable=True),
        Column("mood", '"Mood"', nullable=False, default="'LOUD'::\"Mood\""),
        Column("name", TEXT, nullable=False, default="'rex'::text"),
        Column("legs", INTEGER, nullable=False, default="4"),
        Column("tame", BOOLEAN, nullable=True),
        Column("tags", TEXT_ARRAY, nullable=True),
        Column("bornAt", TIMESTAMP, nullable=True),
    ),
    indexes=(
        Index(
            "pet_mood_idx",
            ("mood",),
            definition=f"CREATE INDEX pet_mood_idx ON {PROBE}.pet USING btree (mood)",
        ),
        Index(
            "pet_ownerId_name_key",
            ("ownerId", "name"),
            unique=True,
            definition=(
                f'CREATE UNIQUE INDEX "pet_ownerId_name_key" ON {PROBE}.pet '
                'USING btree ("ownerId", name)'
            ),
        ),
        Index(
            "pet_pkey",
            ("id",),
            unique=True,
            primary=True,
            definition=f"CREATE UNIQUE INDEX pet_pkey ON {PROBE}.pet USING btree (id)",
        ),
    ),
    constraints=(
        Constraint(
            "pet_ownerId_fkey",
            FOREIGN_KEY,
            ("ownerId",),
            referenced_table="user",
            referenced_columns=("id",),
            on_delete=SET_NULL,
            on_update=CASCADE,
            definition=(
                'FOREIGN KEY ("ownerId") REFERENCES "user"(id) ON UPDATE CASCADE ON DELETE SET NULL'
            ),
        ),
        Constraint("pet_pkey", PRIMARY_KEY, ("id",), definition="PRIMARY KEY (id)"),
    ),
)


def _execute(database_url: str, statements: str) -> None:
    conn = psycopg2.connect(environment.libpq_dsn(database_url))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(statements)
    finally:
        conn.close()


@pytest.fixture
def probe(database_url: str) -> Iterator[str]:
    _execute(database_url, f"DROP SCHEMA IF EXISTS {PROBE} CASCADE;{_PROBE_DDL}")
    try:
        yield database_url
    finally:
        _execute(database_url, f"DROP SCHEMA IF EXISTS {PROBE} CASCADE")


def test_reader_returns_a_known_schema_exactly(probe: str) -> None:
    catalog = ac.read_catalog(probe, PROBE)
    assert catalog.enums == {"Mood": ("CALM", "LOUD", "WILD")}
    assert sorted(catalog.tables) == ["pet", "user"]
    assert catalog.tables["pet"] == PROBE_PET
    assert catalog.tables["user"].columns == (
        Column("id", TEXT, nullable=False),
        Column("joinedAt", TIMESTAMP, nullable=False, default="CURRENT_TIMESTAMP"),
    )
    assert [i.definition for i in catalog.tables["user"].indexes] == [
        f'CREATE UNIQUE INDEX user_pkey ON {PROBE}."user" USING btree (id)'
    ]
    assert dict(catalog.other_relations) == {}


def test_expected_definitions_render_as_postgres_reports_them(probe: str) -> None:
    # The same probe through the expected side: definitions left empty are rendered from the
    # names and must equal what the reader got back.
    expected = Table(
        name="pet",
        columns=PROBE_PET.columns,
        indexes=tuple(Index(i.name, i.columns, i.unique, i.primary) for i in PROBE_PET.indexes),
        constraints=tuple(
            Constraint(
                c.name,
                c.kind,
                c.columns,
                c.referenced_table,
                c.referenced_columns,
                c.on_delete,
                c.on_update,
            )
            for c in PROBE_PET.constraints
        ),
    )
    actual = ac.read_catalog(probe, PROBE).tables["pet"]
    assert ac.table_differences(PROBE, expected, actual) == []


def test_diff_names_every_stray_object(probe: str) -> None:
    _execute(probe, _PROBE_STRAY_DDL)
    catalog = ac.read_catalog(probe, PROBE)
    problems = ac.table_differences(PROBE, PROBE_PET, catalog.tables["pet"])
    assert problems == [
        "pet.legs: default expected '4', got '3'",
        "pet.extra: extra column "
        "Column(name='extra', type='integer', nullable=True, default=None, collation=None, "
        "identity='', generated='')",
        f"pet: extra index pet_name_key: CREATE UNIQUE INDEX pet_name_key ON {PROBE}.pet "
        "USING btree (name)",
        "pet: extra CHECK constraint pet_legs_check: CHECK ((legs >= 0))",
        "pet: extra UNIQUE constraint pet_name_key: UNIQUE (name)",
        "pet: extra trigger pet_touch",
    ]
    assert catalog.other_relations == {"pet_counter": "sequence"}


def test_missing_schema_reads_as_empty(database_url: str) -> None:
    catalog = ac.read_catalog(database_url, "airwave_catalog_no_such_schema")
    assert (dict(catalog.tables), dict(catalog.enums)) == ({}, {})
