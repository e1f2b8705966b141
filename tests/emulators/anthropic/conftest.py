"""Fixtures for the LLM stub tests: a running stub and real `anthropic` clients pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import pytest

from airwave_dagster.emulators.anthropic import LLMStub

MODEL = "claude-sonnet-4-6"  # not on the SDK's deprecated list, so no warning on every call
API_KEY = "test-key-SECRET-0123"

ClientFactory = Callable[..., anthropic.Anthropic]


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's proxy and ANTHROPIC_* settings away from the SDK.

    httpx2 honours HTTP(S)_PROXY for 127.0.0.1 unless NO_PROXY covers it, and the SDK always merges
    ANTHROPIC_CUSTOM_HEADERS; either would make these tests test the machine, not the stub.
    """
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    for name in ("ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def stub() -> Iterator[LLMStub]:
    """An empty stub; tests queue what they need with `stub.add(...)`."""
    with LLMStub() as running:
        yield running


@pytest.fixture
def client_for() -> Iterator[ClientFactory]:
    """Build real SDK clients for a stub (closed at teardown); retries off unless asked for."""
    made: list[anthropic.Anthropic] = []

    def build(target: LLMStub, **options: Any) -> anthropic.Anthropic:
        options.setdefault("max_retries", 0)
        client = anthropic.Anthropic(base_url=target.url, api_key=API_KEY, **options)
        made.append(client)
        return client

    yield build
    for client in made:
        client.close()


@pytest.fixture
def client(stub: LLMStub, client_for: ClientFactory) -> anthropic.Anthropic:
    """A client for the `stub` fixture, with the SDK's retries off."""
    return client_for(stub)


def user(text: str) -> dict[str, Any]:
    """A user turn with plain text."""
    return {"role": "user", "content": text}
