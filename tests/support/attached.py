"""An Airwave database as a running Airwave leaves it, built by a foreign owner, for attached mode.

The tables are created from the expected catalog of `tests/support/airwave_catalog.py` (written
from Airwave's contract and checked against a database built by Airwave's own eight Prisma
migrations), plus the tables attached mode meets but never writes (`ai_connection`, the access
grants, viewer state, `job`, Prisma's `_prisma_migrations`, the workflow engine's runs). They
belong to the role `airwave_owner`; the project connects as `airwave_dagster_app`, which may read
and write rows in `public` but holds no privilege to create, alter or drop anything there, so a
stray DDL statement of attached mode fails loudly instead of passing unnoticed.

Secrets are stored as Airwave stores them: AES-256-GCM under SHA-256 of `BETTER_AUTH_SECRET`.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import psycopg2
from psycopg2 import sql

from airwave_dagster.cli import environment
from resources.airwave_attached import SUPPORTED_MIGRATIONS, encrypt_secret
from tests.support import airwave_catalog as cat

OWNER = "airwave_owner"
APP = "airwave_dagster_app"
APP_PASSWORD = "attached-app-password"
AUTH_SECRET = "attached-test-better-auth-secret"

# Tables outside the eleven the project writes, in the catalog's notation
# (docs/reference/airwave-database.md §3.12 to §3.14).
_EXTRA_DDL = (
    """CREATE TABLE ai_connection (
        id TEXT NOT NULL, name TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
        "baseUrl" TEXT, "apiKeyEnc" TEXT,
        "isActive" BOOLEAN NOT NULL DEFAULT false, "isPlanner" BOOLEAN NOT NULL DEFAULT false,
        "isWorker" BOOLEAN NOT NULL DEFAULT false,
        "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
        "updatedAt" TIMESTAMP(3) NOT NULL, CONSTRAINT ai_connection_pkey PRIMARY KEY (id))""",
    """CREATE TABLE user_package_access (
        id TEXT NOT NULL, "userId" TEXT NOT NULL, "packageId" TEXT NOT NULL,
        mode "PackageAccessMode" NOT NULL DEFAULT 'FULL',
        "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
        "updatedAt" TIMESTAMP(3) NOT NULL, CONSTRAINT user_package_access_pkey PRIMARY KEY (id),
        CONSTRAINT "user_package_access_userId_fkey" FOREIGN KEY ("userId") REFERENCES "user"(id)
            ON DELETE CASCADE ON UPDATE CASCADE,
        CONSTRAINT "user_package_access_packageId_fkey" FOREIGN KEY ("packageId")
            REFERENCES channel_package(id) ON DELETE CASCADE ON UPDATE CASCADE)""",
    """CREATE TABLE user_channel_access (
        id TEXT NOT NULL, "userId" TEXT NOT NULL, "channelId" TEXT NOT NULL,
        "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT user_channel_access_pkey PRIMARY KEY (id),
        CONSTRAINT "user_channel_access_userId_fkey" FOREIGN KEY ("userId") REFERENCES "user"(id)
            ON DELETE CASCADE ON UPDATE CASCADE,
        CONSTRAINT "user_channel_access_channelId_fkey" FOREIGN KEY ("channelId")
            REFERENCES channel(id) ON DELETE CASCADE ON UPDATE CASCADE)""",
    """CREATE TABLE favorite (
        id TEXT NOT NULL, "userId" TEXT NOT NULL, "channelId" TEXT NOT NULL,
        "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
        CONSTRAINT favorite_pkey PRIMARY KEY (id),
        CONSTRAINT "favorite_channelId_fkey" FOREIGN KEY ("channelId") REFERENCES channel(id)
            ON DELETE CASCADE ON UPDATE CASCADE)""",
    """CREATE TABLE job (
        id TEXT NOT NULL, name TEXT NOT NULL, "cronSchedule" TEXT,
        enabled BOOLEAN NOT NULL DEFAULT true,
        "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
        "updatedAt" TIMESTAMP(3) NOT NULL, CONSTRAINT job_pkey PRIMARY KEY (id))""",
    """CREATE TABLE _prisma_migrations (
        id VARCHAR(36) NOT NULL, checksum VARCHAR(64) NOT NULL,
        finished_at TIMESTAMPTZ, migration_name VARCHAR(255) NOT NULL, logs TEXT,
        rolled_back_at TIMESTAMPTZ, started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        applied_steps_count INTEGER NOT NULL DEFAULT 0,
        CONSTRAINT _prisma_migrations_pkey PRIMARY KEY (id))""",
    "CREATE SCHEMA workflow",
    """CREATE TABLE workflow.workflow_runs (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL,
        started_at TIMESTAMPTZ, completed_at TIMESTAMPTZ,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now())""",
)


def _column_ddl(column: cat.Column) -> str:
    parts = [cat.quote_ident(column.name), column.type]
    if not column.nullable:
        parts.append("NOT NULL")
    if column.default is not None:
        parts.append(f"DEFAULT {column.default}")
    return " ".join(parts)


def _table_ddl(table: cat.Table) -> list[str]:
    name = cat.quote_ident(table.name)
    columns = ", ".join(_column_ddl(c) for c in table.columns)
    statements = [f"CREATE TABLE {name} ({columns}, CONSTRAINT {table.name}_pkey PRIMARY KEY (id))"]
    for index in table.indexes:
        if index.primary:
            continue
        keys = ", ".join(cat.quote_ident(k) for k in index.columns)
        unique = "UNIQUE " if index.unique else ""
        statements.append(f"CREATE {unique}INDEX {cat.quote_ident(index.name)} ON {name} ({keys})")
    return statements


def _foreign_keys(tables: Iterable[cat.Table]) -> list[str]:
    statements = []
    for table in tables:
        for constraint in table.constraints:
            if constraint.kind != cat.FOREIGN_KEY or constraint.referenced_table is None:
                continue
            statements.append(
                f"ALTER TABLE {cat.quote_ident(table.name)} ADD CONSTRAINT "
                f"{cat.quote_ident(constraint.name)} FOREIGN KEY "
                f"({', '.join(cat.quote_ident(c) for c in constraint.columns)}) REFERENCES "
                f"{cat.quote_ident(constraint.referenced_table)}(id) "
                f"ON DELETE {constraint.on_delete} ON UPDATE {constraint.on_update}"
            )
    return statements


def airwave_ddl() -> list[str]:
    """Every statement that builds Airwave's schema in `public` (enums, tables, indexes, FKs)."""
    enums = [
        f"CREATE TYPE {cat.quote_ident(name)} AS ENUM ({', '.join(repr(v) for v in values)})"
        for name, values in cat.ENUMS.items()
    ]
    tables = [statement for table in cat.TABLES.values() for statement in _table_ddl(table)]
    return [*enums, *tables, *_foreign_keys(cat.TABLES.values()), *_EXTRA_DDL]


def _ensure_role(cur: psycopg2.extensions.cursor, statement: sql.Composable) -> None:
    try:
        cur.execute("SAVEPOINT role")
        cur.execute(statement)
    except (psycopg2.errors.DuplicateObject, psycopg2.errors.UniqueViolation):
        cur.execute("ROLLBACK TO SAVEPOINT role")  # another test session made it first


def _connect(url: str) -> psycopg2.extensions.connection:
    return psycopg2.connect(environment.libpq_dsn(url))


@dataclass(frozen=True)
class AirwaveDatabase:
    """A foreign-owned Airwave database: the superuser URL (to seed and inspect) and the app's."""

    admin_url: str
    app_url: str
    name: str


def create_airwave_database(
    server_url: str, name: str, *, migrations: Sequence[str] = SUPPORTED_MIGRATIONS
) -> AirwaveDatabase:
    """Drop and rebuild database `name` as Airwave's migrations leave it, owned by `OWNER`.

    `migrations` are recorded as applied in `_prisma_migrations` (pass others to fake a newer or
    older Airwave). The app role gets what docs/attached.md asks an operator to grant.
    """
    admin = _connect(environment.with_database(server_url, "postgres"))
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            cur.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    finally:
        admin.close()
    admin_url = environment.with_database(server_url, name)
    conn = _connect(admin_url)
    try:
        with conn, conn.cursor() as cur:
            _ensure_role(cur, sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(OWNER)))
            _ensure_role(
                cur,
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(APP), sql.Literal(APP_PASSWORD)
                ),
            )
            # Airwave's role owns public; nobody else may create objects in it.
            cur.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(OWNER)))
            cur.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            cur.execute(
                sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                    sql.Identifier(name), sql.Identifier(OWNER)
                )
            )
            cur.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(OWNER)))
            for statement in airwave_ddl():
                cur.execute(statement)
            for migration in migrations:
                cur.execute(
                    "INSERT INTO _prisma_migrations (id, checksum, finished_at, migration_name, "
                    "applied_steps_count) VALUES (%s, %s, now(), %s, 1)",
                    (secrets.token_hex(16), secrets.token_hex(32), migration),
                )
            cur.execute("RESET ROLE")
            grants = (
                "GRANT CONNECT, CREATE ON DATABASE {db} TO {app}",
                "GRANT USAGE ON SCHEMA public, workflow TO {app}",
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {app}",
                # The private tables' foreign keys (claims, snapshot, costs) cascade from these.
                "GRANT REFERENCES ON public.channel, public.media_source, public.ai_lineup_trace "
                "TO {app}",
                "GRANT SELECT ON ALL TABLES IN SCHEMA workflow TO {app}",
            )
            for grant in grants:
                cur.execute(sql.SQL(grant).format(db=sql.Identifier(name), app=sql.Identifier(APP)))
    finally:
        conn.close()
    app_url = _with_user(admin_url, APP, APP_PASSWORD)
    return AirwaveDatabase(admin_url=admin_url, app_url=app_url, name=name)


def _with_user(url: str, user: str, password: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


@dataclass(frozen=True)
class Operator:
    """What `seed_operator` created: ids of the admin, the Plex source, its libraries."""

    admin_id: str
    source_id: str
    library_ids: dict[str, str]


def seed_operator(
    database: AirwaveDatabase,
    *,
    plex_url: str,
    plex_token: str,
    libraries: Sequence[tuple[str, str, str, bool]],
    api_key: str | None = None,
    llm_base_url: str | None = None,
    planner_model: str = "claude-opus-4-8",
    worker_model: str = "claude-haiku-4-5",
    secret: str = AUTH_SECRET,
    encrypt_token: bool = True,
) -> Operator:
    """Seed what an operator's Airwave holds after setup: an admin, a Plex source, libraries.

    Args:
        libraries: `(key, title, type, enabled)` per Plex section, as Airwave's scan stores it.
        api_key: When set, a planner and a worker AI connection with this key (encrypted).
        encrypt_token: Store the Plex token encrypted (Airwave does at every start) or, False,
            as a legacy plaintext token.
    """
    admin_id, source_id = "cadmin" + secrets.token_hex(8), "csource" + secrets.token_hex(8)
    token = encrypt_secret(plex_token, secret, iv=os.urandom(12)) if encrypt_token else plex_token
    library_ids = {key: "clib" + secrets.token_hex(8) for key, _, _, _ in libraries}
    conn = _connect(database.admin_url)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SET TimeZone = 'UTC'")
            cur.execute(
                'INSERT INTO "user" (id, name, email, role, "updatedAt") '
                "VALUES (%s, 'Admin', 'admin@example.test', 'admin', now() - interval '1 day'), "
                "(%s, 'Viewer', 'viewer@example.test', NULL, now())",
                (admin_id, "cviewer" + secrets.token_hex(8)),
            )
            cur.execute(
                'INSERT INTO media_source (id, name, "baseUrl", token, "isDefault", '
                '"ownerUserId", "updatedAt") VALUES (%s, %s, %s, %s, true, %s, now())',
                (source_id, "Home Plex", plex_url, token, admin_id),
            )
            for key, title, kind, enabled in libraries:
                cur.execute(
                    'INSERT INTO media_library (id, "mediaSourceId", key, title, type, enabled, '
                    '"lastScanAt", "updatedAt") VALUES (%s, %s, %s, %s, %s, %s, now(), now())',
                    (library_ids[key], source_id, key, title, kind, enabled),
                )
            if api_key is not None:
                for role, model in (("isPlanner", planner_model), ("isWorker", worker_model)):
                    cur.execute(
                        sql.SQL(
                            'INSERT INTO ai_connection (id, name, provider, model, "baseUrl", '
                            '"apiKeyEnc", "isActive", {role}, "updatedAt") '
                            "VALUES (%s, %s, 'anthropic', %s, %s, %s, true, true, now())"
                        ).format(role=sql.Identifier(role)),
                        (
                            "cai" + secrets.token_hex(8),
                            f"Claude ({role[2:].lower()})",
                            model,
                            llm_base_url,
                            encrypt_secret(api_key, secret, iv=os.urandom(12)),
                        ),
                    )
    finally:
        conn.close()
    return Operator(admin_id=admin_id, source_id=source_id, library_ids=library_ids)


def public_catalog(database: AirwaveDatabase) -> cat.Catalog:
    """Airwave's schema as the catalog reports it (compared before and after a session)."""
    return cat.read_catalog(database.admin_url, "public")
