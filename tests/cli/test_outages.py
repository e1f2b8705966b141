"""A command waiting for a run reads through a database outage, and gives up after a bound."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from airwave_dagster.cli import outages


@pytest.fixture
def unreachable() -> Iterator[sa.Engine]:
    """An engine on a port nothing listens on: every connect fails as a stopped server's does."""
    engine = sa.create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none")
    yield engine
    engine.dispose()


def test_a_short_outage_is_waited_out_and_said_once(
    unreachable: sa.Engine, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(outages, "_POLL_SECONDS", 0.01)
    reads = []

    def read() -> str:
        reads.append(1)
        if len(reads) <= 3:
            unreachable.connect()
        return "STARTED"

    assert outages.patiently(read, waiting_for="run r1") == "STARTED"

    assert len(reads) == 4
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2, said
    assert said[0].startswith("the database is unreachable (OperationalError: connection to")
    assert "still waiting for run r1" in said[0]
    assert said[1].startswith("the database is reachable again after")


def test_an_outage_past_the_bound_ends_the_wait_naming_the_driver_error(
    unreachable: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outages, "_POLL_SECONDS", 0.01)
    monkeypatch.setattr(outages, "OUTAGE_PATIENCE_SECONDS", 0.2)

    with pytest.raises(outages.DatabaseUnreachable) as raised:
        outages.patiently(unreachable.connect, waiting_for="run r1")

    assert "while waiting for run r1 (OperationalError: connection to server at" in str(
        raised.value
    )
    assert "airwave runs show RUN_ID" in str(raised.value)


def test_other_errors_are_not_waited_out() -> None:
    def read() -> None:
        raise ValueError("not an outage")

    with pytest.raises(ValueError, match="not an outage"):
        outages.patiently(read, waiting_for="run r1")
