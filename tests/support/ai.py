"""Fixtures of the AI lineup tests: a synced library, the LLM stub, run config helpers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

# The stub accepts any key. It lives in its own variable, set before any step process is
# forked, so ANTHROPIC_API_KEY stays unset and the offline default is what other tests see.
STUB_KEY_ENV = "AIRWAVE_TEST_STUB_ANTHROPIC_KEY"
os.environ.setdefault(STUB_KEY_ENV, "stub-test-key")


@pytest.fixture(scope="session")
def library_snapshot(plex_emulator) -> tuple[list[Any], list[Any]]:
    """The emulator's libraries and playable items, read through plexapi once per session."""
    from resources.plex import PlexClient

    client = PlexClient(plex_emulator.url, plex_emulator.token)
    return client.libraries(), client.resolve(None)


@pytest.fixture
def synced(store, plex_emulator, library_snapshot) -> str:
    """A clean database holding the emulator's library snapshot; the media source id.

    The rows are what `resources.stores.library.sync_library` writes (its own tests cover it);
    inserting the session's copy saves re-reading 2,000 items through plexapi in every test.
    """
    libraries, items = library_snapshot
    return write_snapshot(store, plex_emulator.url, libraries, items)


def write_snapshot(store: Any, plex_url: str, libraries: list[Any], items: list[Any]) -> str:
    """Record a complete library snapshot of `plex_url` in `store`'s database; the source id."""
    import sqlalchemy as sa

    from resources import tables as t

    source_id = store.sync_source(plex_url, libraries)
    insert_items(store, source_id, items)
    with store.transaction() as conn:  # what a complete snapshot records
        conn.execute(
            t.source_state.insert().values(
                media_source_id=source_id, library_synced_at=sa.func.now()
            )
        )
    return source_id


def insert_items(store: Any, source_id: str, items: list[Any]) -> None:
    """Write the private snapshot's items and Airwave's rows, as a library refresh would."""
    from resources import tables as t
    from resources.stores.rows import media_item_row

    rows = [media_item_row(source_id, item) for item in items]
    snapshot = [
        {
            "media_source_id": source_id,
            "rating_key": item.rating_key,
            "item": item.model_dump(mode="json", exclude_none=True),
        }
        for item in items
    ]
    with store.transaction() as conn:
        conn.execute(t.media_item.insert(), rows)
        conn.execute(t.library_item.insert(), snapshot)


@pytest.fixture(scope="session")
def stub_server() -> Iterator[Any]:
    """One Messages-API stub for the session (its URL goes into run config, never the env)."""
    from airwave_dagster.emulators.anthropic import LLMStub

    with LLMStub() as stub:
        yield stub


@pytest.fixture
def stub(stub_server) -> Iterator[Any]:
    """The session stub with an empty script, no responder, no records and a cold cache."""
    stub_server.clear_script()
    stub_server.responder = None
    stub_server.latency = 0.0
    stub_server.reset_requests()
    stub_server.reset_cache()
    yield stub_server
    stub_server.responder = None
    stub_server.clear_script()


def lineup_config(stub: Any = None, *, max_retries: int = 0, **config: Any) -> dict[str, Any]:
    """Run config of `ai_lineup`: op config for the first step, the LLM resource on the stub."""
    run_config: dict[str, Any] = {"ops": {"analyze_library": {"config": config}}}
    if stub is not None:
        run_config["resources"] = {
            "llm": {
                "config": {
                    "api_key_env_var": STUB_KEY_ENV,
                    "base_url": stub.url,
                    "max_retries": max_retries,
                }
            }
        }
    return run_config
