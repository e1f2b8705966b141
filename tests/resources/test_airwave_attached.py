"""Attached mode's reading of a running Airwave's database: schema check, secrets, configuration.

Against a foreign-owned Airwave database (`tests/support/attached.py`): Airwave's tables belong to
another role and the project's role may not create anything in `public`. The rules are Airwave's
contract (docs/reference/airwave-database.md §6 secrets, §7.5 the version check, §7.1 one engine).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg2
import pytest
import sqlalchemy as sa

from resources.airwave_attached import (
    SUPPORTED_MIGRATIONS,
    AttachedError,
    check_airwave_schema,
    decrypt_secret,
    encrypt_secret,
    looks_encrypted,
    require_airwave_schema,
    resolve_source,
    resolve_user,
)
from resources.migrations import ForeignAirwaveError, upgrade
from resources.tables import UTC_SESSION
from tests.support.attached import (
    AUTH_SECRET,
    AirwaveDatabase,
    create_airwave_database,
    database_name,
    public_catalog,
    seed_operator,
)

pytestmark = pytest.mark.postgres

TOKEN = "plex-owner-token-0123456789"


@pytest.fixture(scope="module")
def airwave_db(server_url: str) -> AirwaveDatabase:
    return create_airwave_database(server_url, database_name("attached_unit"))


@pytest.fixture
def seeded(airwave_db: AirwaveDatabase) -> Iterator[AirwaveDatabase]:
    """The database with one operator's rows, emptied again afterwards."""
    seed_operator(
        airwave_db,
        plex_url="http://127.0.0.1:32400",
        plex_token=TOKEN,
        libraries=[("1", "Movies", "movie", True), ("2", "TV Shows", "show", False)],
        api_key="sk-ant-test-key",
    )
    yield airwave_db
    _admin(
        airwave_db,
        'TRUNCATE ai_connection, media_library, media_source, "user", workflow.workflow_runs '
        "CASCADE",
    )


def _admin(database: AirwaveDatabase, statement: str, *params: object) -> None:
    conn = psycopg2.connect(database.admin_url.replace("postgresql+psycopg2", "postgresql"))
    try:
        with conn, conn.cursor() as cur:
            cur.execute(statement, params)
    finally:
        conn.close()


def _conn(database: AirwaveDatabase) -> sa.Connection:
    engine = sa.create_engine(
        database.app_url, poolclass=sa.pool.NullPool, connect_args=UTC_SESSION
    )
    return engine.connect()


def test_a_secret_decrypts_as_airwave_encrypted_it() -> None:
    """`ivB64:tagB64:ciphertextB64`, AES-256-GCM, key SHA-256 of the secret (§6.1)."""
    stored = encrypt_secret(TOKEN, AUTH_SECRET, iv=os.urandom(12))
    assert looks_encrypted(stored) and stored.count(":") == 2
    assert decrypt_secret(stored, AUTH_SECRET, what="the token") == TOKEN
    # A legacy plaintext token is not mistaken for an encrypted one.
    assert not looks_encrypted(TOKEN)
    assert not looks_encrypted("a:b:c")


def test_a_wrong_secret_is_a_clear_error_that_never_shows_the_secret_or_the_token() -> None:
    stored = encrypt_secret(TOKEN, AUTH_SECRET, iv=os.urandom(12))
    with pytest.raises(AttachedError) as refused:
        decrypt_secret(stored, "not-the-secret", what="the Plex token of media source 'Home'")
    message = str(refused.value)
    assert "BETTER_AUTH_SECRET" in message and "'Home'" in message
    for secret in ("not-the-secret", AUTH_SECRET, TOKEN, stored):
        assert secret not in message
    with pytest.raises(AttachedError, match="set BETTER_AUTH_SECRET"):
        decrypt_secret(stored, None, what="the token")


def test_the_source_token_and_user_come_from_airwave(seeded: AirwaveDatabase) -> None:
    with _conn(seeded) as conn:
        source = resolve_source(conn, None, auth_secret=AUTH_SECRET)
        assert (source.name, source.base_url, source.token) == (
            "Home Plex",
            "http://127.0.0.1:32400",
            TOKEN,
        )
        assert TOKEN not in repr(source)
        # PLEX_URL / PLEX_TOKEN override the row; the token then needs no secret.
        override = resolve_source(
            conn, None, auth_secret=None, plex_url="http://nas:32400", plex_token="other"
        )
        assert (override.id, override.base_url, override.token) == (
            source.id,
            "http://nas:32400",
            "other",
        )
        admin = conn.execute(sa.text("SELECT id FROM \"user\" WHERE role = 'admin'")).scalar()
        assert resolve_user(conn, None) == admin
        assert resolve_user(conn, "ADMIN@example.test") == admin
        with pytest.raises(AttachedError, match=r"AIRWAVE_USER=nobody@example\.test"):
            resolve_user(conn, "nobody@example.test")


def test_a_legacy_plaintext_token_is_used_as_airwave_uses_it(airwave_db: AirwaveDatabase) -> None:
    seed_operator(
        airwave_db, plex_url="http://p", plex_token=TOKEN, libraries=[], encrypt_token=False
    )
    try:
        with _conn(airwave_db) as conn:
            assert resolve_source(conn, None, auth_secret=None).token == TOKEN
    finally:
        _admin(airwave_db, 'TRUNCATE media_source, "user" CASCADE')


def test_source_choice_is_refused_with_the_list_when_ambiguous(seeded: AirwaveDatabase) -> None:
    _admin(seeded, 'UPDATE media_source SET "isDefault" = false')
    _admin(
        seeded,
        'INSERT INTO media_source (id, type, name, "baseUrl", token, "updatedAt") '
        "VALUES ('cjelly', 'JELLYFIN', 'Basement', 'http://j', '', now())",
    )
    with _conn(seeded) as conn:
        with pytest.raises(AttachedError) as refused:
            resolve_source(conn, None, auth_secret=AUTH_SECRET)
        message = str(refused.value)
        assert "AIRWAVE_SOURCE_ID" in message and "'Home Plex'" in message
        assert "cjelly ('Basement', JELLYFIN)" in message
        with pytest.raises(AttachedError, match="no such media source"):
            resolve_source(conn, "cmissing", auth_secret=AUTH_SECRET)
        with pytest.raises(AttachedError, match="JELLYFIN source; this project builds from Plex"):
            resolve_source(conn, "cjelly", auth_secret=AUTH_SECRET)


def test_a_supported_airwave_schema_passes_the_read_only_check(
    airwave_db: AirwaveDatabase,
) -> None:
    before = public_catalog(airwave_db)
    with _conn(airwave_db) as conn:
        report = check_airwave_schema(conn)
    assert report.problems == [] and report.migrations_table
    assert public_catalog(airwave_db) == before


def test_a_newer_or_older_airwave_is_refused_naming_the_migrations(server_url: str) -> None:
    newer = create_airwave_database(
        server_url,
        database_name("attached_newer"),
        migrations=(*SUPPORTED_MIGRATIONS[1:], "20270101000000_add_channel_colour"),
    )
    with _conn(newer) as conn, pytest.raises(AttachedError) as refused:
        require_airwave_schema(conn)
    message = str(refused.value)
    assert "20270101000000_add_channel_colour" in message and "0_init" in message
    assert "v0.11.73" in message


def test_a_database_that_is_not_airwave_is_refused_naming_what_is_missing(
    server_url: str, database_url: str
) -> None:
    from airwave_dagster.cli import environment

    empty = environment.ensure_database(server_url, database_name("attached_empty"))
    engine = sa.create_engine(empty, poolclass=sa.pool.NullPool)
    with engine.connect() as conn, pytest.raises(AttachedError) as refused:
        require_airwave_schema(conn)
    message = str(refused.value)
    missing = message.split("missing tables in schema public: ", 1)[1].split("\n")[0]
    assert {"channel", "channel_package", "schedule_item", "ai_connection"} <= set(
        missing.split(", ")
    )
    # A changed column is named with what was expected.
    with pytest.raises(AttachedError, match=r'channel\."number": type text, expected integer'):
        with _conn_admin_changed_column(server_url) as conn:
            require_airwave_schema(conn)


class _conn_admin_changed_column:
    """An Airwave database whose `channel.number` was retyped (a foreign migration)."""

    def __init__(self, server_url: str) -> None:
        self.database = create_airwave_database(server_url, database_name("attached_changed"))
        _admin(
            self.database,
            "ALTER TABLE channel ALTER COLUMN number TYPE text USING number::text",
        )

    def __enter__(self) -> sa.Connection:
        self.conn = _conn(self.database)
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def test_attached_migrations_touch_only_the_private_schema(server_url: str) -> None:
    """The first start creates the private tables and stamps them; `public` stays Airwave's."""
    database = create_airwave_database(server_url, database_name("attached_migrate"))
    before = public_catalog(database)
    upgrade(database.app_url, attached=True)
    upgrade(database.app_url, attached=True)  # a second start finds everything current
    assert public_catalog(database) == before
    with _conn(database) as conn:
        private = set(
            conn.execute(
                sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'airwave_dagster'")
            ).scalars()
        )
        assert {"channel_claim", "step_output", "alembic_version"} <= private
        with pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
            conn.execute(sa.text("CREATE TABLE public.stray (a int)"))
    # Standalone mode refuses the same database: its tables are a running Airwave's.
    with pytest.raises(ForeignAirwaveError, match="AIRWAVE_MODE=attached"):
        upgrade(database.admin_url)


def test_an_unsupported_database_is_refused_before_anything_is_created(server_url: str) -> None:
    database = create_airwave_database(
        server_url, database_name("attached_refused"), migrations=SUPPORTED_MIGRATIONS[:-1]
    )
    with pytest.raises(AttachedError, match="20260804200542_add_schedule_recent"):
        upgrade(database.app_url, attached=True)
    with _conn(database) as conn:
        assert (
            conn.execute(sa.text("SELECT to_regclass('airwave_dagster.alembic_version')")).scalar()
            is None
        )


@pytest.mark.plex
def test_libraries_the_operator_disabled_feed_nothing(seeded: AirwaveDatabase) -> None:
    """Only `enabled` media_library rows feed pools (§3.7); a section Airwave never scanned
    feeds nothing either when attached."""
    from airwave_dagster.emulators.plex import start_emulator
    from resources.airwave_attached import Deployment
    from resources.plex import PlexClient
    from resources.stores import open_stores
    from resources.stores.library import apply_library_switches

    stores = open_stores(seeded.app_url, deployment=Deployment(mode="attached"))
    source_id = stores.channels.attached_source()
    with start_emulator(items=120, seed=3) as plex:
        client = PlexClient(plex.url, plex.token)
        everything = {item.type for item in client.resolve(None)}
        assert everything == {"movie", "episode"}
        apply_library_switches(client, stores.channels, source_id)
        assert {item.type for item in client.resolve(None)} == {"movie"}, "TV Shows is off"
        assert [lib.key for lib in client.libraries()] == ["1", "2"], "listing is unchanged"
        _admin(seeded, "DELETE FROM media_library WHERE key = '1'")
        apply_library_switches(client, stores.channels, source_id)
        assert client.resolve(None) == [], "a section without a row is not Airwave's yet"


def test_an_unreadable_workflow_engine_table_is_refused_with_the_grant(
    seeded: AirwaveDatabase,
) -> None:
    from resources.airwave_attached import engine_runs_in_progress

    with _conn(seeded) as conn:
        assert engine_runs_in_progress(conn) == []
    _admin(seeded, "REVOKE SELECT ON workflow.workflow_runs FROM airwave_dagster_app")
    try:
        with _conn(seeded) as conn, pytest.raises(AttachedError, match="grant USAGE on schema"):
            engine_runs_in_progress(conn)
    finally:
        _admin(seeded, "GRANT SELECT ON workflow.workflow_runs TO airwave_dagster_app")
    _admin(
        seeded,
        "INSERT INTO workflow.workflow_runs (id, name, status) VALUES "
        "('w1', 'workflow//aiLineupWorkflow', 'running'), "
        "('w2', 'workflow//importLineupWorkflow', 'completed'), "
        "('w3', 'workflow//somethingElse', 'running')",
    )
    with _conn(seeded) as conn:
        assert engine_runs_in_progress(conn) == ["w1 (aiLineupWorkflow, running)"]


def test_schedule_gap_fill_links_only_shows_airwaves_sync_stored(seeded: AirwaveDatabase) -> None:
    """Attached, `media_item` is Airwave's metadata sync's: a build adds the pool's missing rows
    create-only and links an episode to its show only when that show's row exists (§5.4)."""
    from airwave_dagster.domain.library import MediaItem
    from resources.airwave_attached import Deployment
    from resources.stores import open_stores

    stores = open_stores(seeded.app_url, deployment=Deployment(mode="attached"))
    source_id = stores.channels.attached_source()
    _admin(
        seeded,
        'INSERT INTO media_item (id, "mediaSourceId", "ratingKey", type, title, guide, '
        "\"updatedAt\") VALUES ('csynced', %s, '500', 'show', 'Synced', '{}', now())",
        source_id,
    )
    episodes = [
        MediaItem(
            rating_key=key,
            type="episode",
            title=f"Episode {key}",
            duration_ms=1_200_000,
            show_title=show_title,
            show_rating_key=show_key,
        )
        for key, show_key, show_title in (("501", "500", "Synced"), ("601", "600", "Unsynced"))
    ]
    with stores.channels.engine.begin() as conn:
        ids = stores.channels.media_item_ids(conn, source_id, episodes)
        rows = {
            row.ratingKey: row
            for row in conn.execute(
                sa.text('SELECT id, "ratingKey", type, "parentId" FROM media_item')
            )
        }
    assert set(ids) == {"501", "601"}
    assert rows["501"].parentId == "csynced" and rows["601"].parentId is None
    assert "600" not in rows, "no show row is made up: Airwave's sync owns them"
    _admin(seeded, "DELETE FROM media_item")
