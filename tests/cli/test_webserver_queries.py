"""The CLI's GraphQL documents are valid against the pinned dagster-graphql schema.

The CLI sends them as plain text (so it need not load Dagster); a field renamed in a Dagster
upgrade would otherwise only show as a refused submission at a user's terminal.
"""

from __future__ import annotations

import pytest
from dagster_graphql.schema import create_schema
from graphql import parse, validate

from airwave_dagster.cli import webserver

DOCUMENTS = [
    "RUN",
    "TAGGED",
    "GROUP",
    "LAUNCH",
    "TERMINATE",
    "REEXECUTE",
    "REEXECUTE_WITH",
    "VALID",
]


@pytest.fixture(scope="module")
def schema():  # type: ignore[no-untyped-def]
    return create_schema().graphql_schema


@pytest.mark.parametrize("name", DOCUMENTS)
def test_document_is_valid_against_the_schema(schema, name: str) -> None:  # type: ignore[no-untyped-def]
    assert validate(schema, parse(getattr(webserver, name))) == []


def test_a_refused_launch_gives_the_webservers_words() -> None:
    with pytest.raises(webserver.SubmissionRefused, match=r"^Missing required config entry"):
        webserver._launched(
            {
                "__typename": "RunConfigValidationInvalid",
                "errors": [{"message": 'Missing required config entry "ops" at the root.'}],
            }
        )
    with pytest.raises(webserver.SubmissionRefused, match=r"^code version changed"):
        webserver._launched(
            {
                "__typename": "PythonError",
                "message": "airwave.CodeVersionChanged: code version changed\n\nStack...",
            }
        )
