"""Attached mode: a running Airwave's own database is the configuration (docs/attached.md).

Everything here only *reads* Airwave's tables: the schema-version check, the media source and its
Plex token, the AI connections and their key, the user recorded as creator, and whether Airwave's
own workflow engine has runs in progress. Secrets at rest are decrypted as Airwave encrypts them
(docs/reference/airwave-database.md §6): AES-256-GCM, key = SHA-256 of `BETTER_AUTH_SECRET`,
stored as `ivB64:tagB64:ciphertextB64`. No message raised here ever carries a secret, a token or
a key; they name the row and the setting instead.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy.dialects import postgresql

from airwave_dagster.settings import SettingsError
from resources.tables import AIRWAVE_SCHEMA, AIRWAVE_TABLES

SUPPORTED_MIGRATIONS: tuple[str, ...] = (
    "0_init",
    "20260722135335_add_source_remote_urls",
    "20260722144529_add_playlog_connection",
    "20260731020629_add_import_trace",
    "20260731033612_add_user_access",
    "20260731154540_add_bumper_music",
    "20260804195103_add_channel_strategy",
    "20260804200542_add_schedule_recent",
)
"""Airwave's Prisma migrations this project's rows are written for, in order (§7.5)."""

SUPPORTED_VERSIONS = (
    "Airwave v0.11.73's schema: Prisma migrations 0_init through 20260804200542_add_schedule_recent"
)

AI_CONNECTION_COLUMNS: dict[str, tuple[str, bool]] = {
    "id": ("text", False),
    "name": ("text", False),
    "provider": ("text", False),
    "model": ("text", False),
    "baseUrl": ("text", True),
    "apiKeyEnc": ("text", True),
    "isActive": ("boolean", False),
    "isPlanner": ("boolean", False),
    "isWorker": ("boolean", False),
    "createdAt": ("timestamp(3) without time zone", False),
    "updatedAt": ("timestamp(3) without time zone", False),
}
"""The `ai_connection` columns attached mode reads (§3.13): name → (format_type, nullable)."""

READ_ONLY_TABLES = frozenset({"ai_connection", "user", "media_source", "media_library"})
"""Tables attached mode only reads: a column added to them cannot break an insert here."""

ENGINE_WORKFLOWS = ("importLineupWorkflow", "aiLineupWorkflow")
"""Airwave's own workflows that write what this project writes (§7.1)."""

ENGINE_ACTIVE_STATUSES = ("pending", "running")


class AttachedError(SettingsError):
    """Attached mode cannot start: the message says what is wrong and which setting fixes it."""


# -- secrets at rest -----------------------------------------------------------------------------


def _b64(segment: str) -> bytes | None:
    try:
        return base64.b64decode(segment, validate=True)
    except (binascii.Error, ValueError):
        return None


def looks_encrypted(value: str) -> bool:
    """Airwave's test of an encrypted value: three base64 segments, a 12-byte IV, a 16-byte tag."""
    parts = value.split(":")
    if len(parts) != 3 or not all(parts):
        return False
    iv, tag, body = (_b64(part) for part in parts)
    return (
        iv is not None and tag is not None and body is not None and len(iv) == 12 and len(tag) == 16
    )


def decrypt_secret(value: str, secret: str | None, *, what: str) -> str:
    """The plaintext of an Airwave secret at rest.

    Args:
        value: The stored `ivB64:tagB64:ciphertextB64`.
        secret: Airwave's `BETTER_AUTH_SECRET`.
        what: Names the value in errors ("the Plex token of media source 'Home'").

    Raises:
        AttachedError: No secret, a malformed value, or a secret that is not the one the value
            was encrypted with. The message never contains the secret or the value.
    """
    if not secret:
        raise AttachedError(
            f"{what} is stored encrypted; set BETTER_AUTH_SECRET to Airwave's own value"
        )
    parts = value.split(":")
    decoded = [_b64(part) for part in parts] if len(parts) == 3 else []
    if len(decoded) != 3 or any(part is None for part in decoded):
        raise AttachedError(f"{what} is not in Airwave's encrypted format (iv:tag:ciphertext)")
    iv, tag, body = (part or b"" for part in decoded)
    key = hashlib.sha256(secret.encode("utf-8")).digest()
    try:
        plain = AESGCM(key).decrypt(iv, body + tag, None)
    except (InvalidTag, ValueError):
        raise AttachedError(
            f"cannot decrypt {what} with BETTER_AUTH_SECRET: it is not the secret Airwave "
            "encrypted it with (Airwave's server must use the same value)"
        ) from None
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError:
        raise AttachedError(f"{what} decrypts to something that is not text") from None


def encrypt_secret(plain: str, secret: str, *, iv: bytes) -> str:
    """Encrypt as Airwave does (tests and `airwave` fixtures only; attached mode never writes)."""
    key = hashlib.sha256(secret.encode("utf-8")).digest()
    sealed = AESGCM(key).encrypt(iv, plain.encode("utf-8"), None)
    body, tag = sealed[:-16], sealed[-16:]
    return ":".join(base64.b64encode(part).decode("ascii") for part in (iv, tag, body))


# -- the schema-version check --------------------------------------------------------------------


def _expected_columns() -> dict[str, dict[str, tuple[str, bool]]]:
    dialect = postgresql.dialect()
    expected: dict[str, dict[str, tuple[str, bool]]] = {}
    for table in AIRWAVE_TABLES:
        columns: dict[str, tuple[str, bool]] = {}
        for column in table.columns:
            if isinstance(column.type, sa.Enum):
                spelled = f'"{column.type.name}"'  # format_type quotes a mixed-case name
            else:
                spelled = _normal_type(column.type.compile(dialect=dialect))
            columns[column.name] = (spelled, bool(column.nullable))
        expected[table.name] = columns
    expected["ai_connection"] = dict(AI_CONNECTION_COLUMNS)
    return expected


def _normal_type(spelled: str) -> str:
    """A type as both `format_type` and SQLAlchemy's compiler spell it, compared loosely."""
    lowered = spelled.lower()
    if lowered.startswith('"'):
        return spelled  # an enum: its quoted, mixed-case name
    return " ".join(lowered.split())


_COLUMNS_SQL = sa.text(
    """
    SELECT c.relname AS table_name, a.attname AS column_name,
           format_type(a.atttypid, a.atttypmod) AS type_name,
           NOT a.attnotnull AS nullable, a.atthasdef AS has_default
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = :schema AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
    """
)


@dataclass(frozen=True)
class SchemaReport:
    """What the read-only schema check found; `problems` empty means supported."""

    problems: list[str] = field(default_factory=list)
    migrations_table: bool = False


def check_airwave_schema(conn: sa.Connection) -> SchemaReport:
    """Compare the database with the Airwave schema this project writes for, read-only (§7.5).

    Two independent checks: Prisma's `_prisma_migrations` (when present) must list exactly the
    supported migrations as applied; and every table and column the project reads or writes
    must exist in `public` with the expected type and nullability. A column Airwave added that
    is NOT NULL without a default is also a problem (every insert here would fail on it).
    """
    problems: list[str] = []
    has_migrations = bool(
        conn.execute(
            sa.text("SELECT to_regclass(:name) IS NOT NULL"),
            {"name": f"{AIRWAVE_SCHEMA}._prisma_migrations"},
        ).scalar_one()
    )
    if has_migrations:
        applied = list(
            conn.execute(
                sa.text(
                    f"SELECT migration_name FROM {AIRWAVE_SCHEMA}._prisma_migrations "
                    "WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL "
                    "ORDER BY started_at, migration_name"
                )
            ).scalars()
        )
        unknown = [name for name in applied if name not in SUPPORTED_MIGRATIONS]
        missing = [name for name in SUPPORTED_MIGRATIONS if name not in applied]
        if unknown:
            problems.append(
                "applied Prisma migrations this version does not know (a newer Airwave?): "
                + ", ".join(unknown)
            )
        if missing:
            problems.append(
                "Prisma migrations not applied (an older Airwave?): " + ", ".join(missing)
            )
    actual: dict[str, dict[str, tuple[str, bool, bool]]] = {}
    for row in conn.execute(_COLUMNS_SQL, {"schema": AIRWAVE_SCHEMA}):
        actual.setdefault(row.table_name, {})[row.column_name] = (
            _normal_type(row.type_name),
            row.nullable,
            row.has_default,
        )
    missing_tables = [name for name in _expected_columns() if name not in actual]
    if missing_tables:
        problems.append("missing tables in schema public: " + ", ".join(missing_tables))
    for table, columns in _expected_columns().items():
        have = actual.get(table)
        if have is None:
            continue
        for name, (type_name, nullable) in columns.items():
            found = have.get(name)
            if found is None:
                problems.append(f'{table}."{name}": missing column')
            elif found[0] != type_name:
                problems.append(f'{table}."{name}": type {found[0]}, expected {type_name}')
            elif found[1] != nullable:
                want = "nullable" if nullable else "NOT NULL"
                problems.append(f'{table}."{name}": expected {want}')
        if table in READ_ONLY_TABLES:
            continue
        for name, (_, nullable, has_default) in have.items():
            if name not in columns and not nullable and not has_default:
                problems.append(
                    f'{table}."{name}": unknown NOT NULL column without a default '
                    "(a newer Airwave?)"
                )
    return SchemaReport(problems=problems, migrations_table=has_migrations)


def require_airwave_schema(conn: sa.Connection) -> SchemaReport:
    """`check_airwave_schema`, raising `AttachedError` with every problem when there are any."""
    report = check_airwave_schema(conn)
    if report.problems:
        shown = report.problems[:12]
        more = len(report.problems) - len(shown)
        raise AttachedError(
            "AIRWAVE_MODE=attached: AIRWAVE_DATABASE_URL is not an Airwave database this "
            f"version supports ({SUPPORTED_VERSIONS}):\n- "
            + "\n- ".join(shown)
            + (f"\n- … and {more} more" if more > 0 else "")
        )
    return report


def foreign_airwave(conn: sa.Connection, *, fresh: bool) -> bool:
    """Whether `public` holds a running Airwave's tables, which standalone mode must not adopt.

    Prisma's `_prisma_migrations` always says so; Airwave's `channel` table says so when the
    project has not yet created anything here (`fresh`: no private version table).
    """
    prisma, channel = conn.execute(
        sa.text(
            "SELECT to_regclass('public._prisma_migrations') IS NOT NULL, "
            "to_regclass('public.channel') IS NOT NULL"
        )
    ).one()
    return bool(prisma or (fresh and channel))


def engine_runs_in_progress(conn: sa.Connection) -> list[str]:
    """Airwave's own import or AI runs still in progress in its workflow engine (§7.1).

    Airwave's workflow engine keeps runs in `workflow.workflow_runs` (`id`, `name`, `status`);
    its run pages find its two workflows by name. Absent schema: the engine never ran.
    """
    present = conn.execute(
        sa.text("SELECT to_regclass('workflow.workflow_runs') IS NOT NULL")
    ).scalar_one()
    if not present:
        return []
    readable = conn.execute(
        sa.text(
            "SELECT has_schema_privilege('workflow', 'USAGE') "
            "AND has_table_privilege('workflow.workflow_runs', 'SELECT')"
        )
    ).scalar_one()
    if not readable:
        raise AttachedError(
            "Airwave's workflow engine has a run table (workflow.workflow_runs) this role may not "
            "read, so whether it is running an import or AI lineup cannot be checked: grant "
            "USAGE on schema workflow and SELECT on that table (docs/attached.md)"
        )
    rows = conn.execute(
        sa.text(
            "SELECT id, name, status FROM workflow.workflow_runs "
            "WHERE status = ANY(:statuses) AND (name LIKE :imports OR name LIKE :lineups) "
            "ORDER BY created_at"
        ),
        {
            "statuses": list(ENGINE_ACTIVE_STATUSES),
            "imports": f"%{ENGINE_WORKFLOWS[0]}%",
            "lineups": f"%{ENGINE_WORKFLOWS[1]}%",
        },
    )
    return [f"{row.id} ({row.name.rsplit('//', 1)[-1]}, {row.status})" for row in rows]


# -- the operator's configuration ----------------------------------------------------------------


@dataclass(frozen=True)
class AirwaveSource:
    """The media source the jobs build against, with its Plex address and token."""

    id: str
    name: str
    base_url: str
    token: str = field(repr=False)


@dataclass(frozen=True)
class AiConnection:
    """One of Airwave's AI connections (§6.2); `api_key` is decrypted, None when not stored."""

    id: str
    name: str
    provider: str
    model: str
    base_url: str | None
    api_key: str | None = field(repr=False)


def _source_list(rows: Sequence[sa.Row[tuple[object, ...]]]) -> str:
    if not rows:
        return "none"
    return ", ".join(
        f"{row.id} ({row.name!r}, {row.type}{', default' if row.isDefault else ''})" for row in rows
    )


def select_source(conn: sa.Connection, source_id: str | None) -> sa.Row[tuple[object, ...]]:
    """The `media_source` row to build against: `source_id`, else the default, else the only one.

    Raises:
        AttachedError: The id is unknown, nothing or several match, or the source is not Plex;
            the message lists the sources (ids, names, types, which is default).
    """
    rows = list(
        conn.execute(
            sa.text(
                'SELECT id, name, type::text AS type, "baseUrl", token, "isDefault" '
                'FROM public.media_source ORDER BY "createdAt", id'
            )
        )
    )
    if source_id is not None:
        chosen = [row for row in rows if row.id == source_id]
        if not chosen:
            raise AttachedError(
                f"AIRWAVE_SOURCE_ID={source_id}: no such media source in Airwave "
                f"(sources: {_source_list(rows)})"
            )
    else:
        chosen = [row for row in rows if row.isDefault] or rows
        if len(chosen) != 1:
            reason = (
                "no media source" if not rows else "several media sources and no single default"
            )
            raise AttachedError(
                f"Airwave has {reason}; set AIRWAVE_SOURCE_ID to one of them "
                f"(sources: {_source_list(rows)})"
            )
    row = chosen[0]
    if row.type != "PLEX":
        raise AttachedError(
            f"media source {row.id} ({row.name!r}) is a {row.type} source; this project builds "
            "from Plex only (set AIRWAVE_SOURCE_ID to a Plex source)"
        )
    return row


def resolve_source(
    conn: sa.Connection,
    source_id: str | None,
    *,
    auth_secret: str | None,
    plex_url: str | None = None,
    plex_token: str | None = None,
) -> AirwaveSource:
    """The chosen source with its Plex URL and decrypted token (PLEX_URL/PLEX_TOKEN override).

    A token that is not in the encrypted format is a legacy plaintext token and is used as it is,
    as Airwave does (§6.1).
    """
    row = select_source(conn, source_id)
    base_url = plex_url or row.baseUrl
    if not base_url:
        raise AttachedError(
            f"media source {row.id} ({row.name!r}) has no server address (baseUrl); set it in "
            "Airwave's settings, or set PLEX_URL"
        )
    token = plex_token
    if not token:
        stored = str(row.token or "")
        if looks_encrypted(stored):
            token = decrypt_secret(
                stored, auth_secret, what=f"the Plex token of media source {row.name!r}"
            )
        else:
            token = stored
    if not token:
        raise AttachedError(
            f"media source {row.id} ({row.name!r}) has no Plex token; sign in to Plex in "
            "Airwave's settings, or set PLEX_TOKEN"
        )
    return AirwaveSource(id=str(row.id), name=str(row.name), base_url=str(base_url), token=token)


def resolve_user(conn: sa.Connection, email: str | None) -> str | None:
    """The id recorded as `createdById`: the user with `email`, else the oldest admin, else None.

    Raises:
        AttachedError: `email` names no Airwave user.
    """
    if email:
        found = conn.execute(
            sa.text('SELECT id FROM public."user" WHERE lower(email) = lower(:email)'),
            {"email": email},
        ).scalar_one_or_none()
        if found is None:
            raise AttachedError(f"AIRWAVE_USER={email}: no Airwave user has this email")
        return str(found)
    admin = conn.execute(
        sa.text(
            'SELECT id FROM public."user" WHERE role = \'admin\' ORDER BY "createdAt", id LIMIT 1'
        )
    ).scalar_one_or_none()
    return None if admin is None else str(admin)


def ai_connections(
    conn: sa.Connection, auth_secret: str | None, *, with_keys: bool = True
) -> tuple[AiConnection | None, AiConnection | None]:
    """Airwave's planner and worker connections (first row of each role, §6.2).

    Keys are decrypted strictly (no plaintext tolerance, as Airwave reads them); a connection
    without a stored key, or read `with_keys=False`, has `api_key` None.
    """

    def first(role: str) -> AiConnection | None:
        row = conn.execute(
            sa.text(
                'SELECT id, name, provider, model, "baseUrl", "apiKeyEnc" '
                f'FROM public.ai_connection WHERE "{role}" ORDER BY "createdAt", id LIMIT 1'
            )
        ).one_or_none()
        if row is None:
            return None
        key = None
        if row.apiKeyEnc and with_keys:
            key = decrypt_secret(
                str(row.apiKeyEnc), auth_secret, what=f"the API key of AI connection {row.name!r}"
            )
        return AiConnection(
            id=str(row.id),
            name=str(row.name),
            provider=str(row.provider),
            model=str(row.model),
            base_url=row.baseUrl,
            api_key=key,
        )

    return first("isPlanner"), first("isWorker")


# -- the deployment the stores serve -------------------------------------------------------------


@dataclass(frozen=True)
class Deployment:
    """Which database layout the stores write, and what attached mode builds against.

    Standalone (the default): the project owns Airwave's tables in its own database, syncs its
    media source by the Plex URL, and scopes the AI wipe to that source. Attached: the database is
    a running Airwave's; the media source is Airwave's (`source_id`, else its default), nothing of
    `media_source`, `media_library` or existing `media_item` rows is written, pools draw only from
    libraries Airwave has enabled, and the AI wipe is Airwave's own (every AI channel and package).
    """

    mode: str = "standalone"
    source_id: str | None = None
    user_email: str | None = None

    @property
    def attached(self) -> bool:
        """True on a running Airwave's database."""
        return self.mode == "attached"
