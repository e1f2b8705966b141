"""A step task that raised is named by its innermost cause (ops/celery_executor.py)."""

from __future__ import annotations

import traceback

import sqlalchemy as sa

from ops.celery_executor import innermost_error


def _formatted(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def test_the_innermost_error_of_a_chain_is_the_driver_s() -> None:
    # A real driver error, from a connection nothing answers, wrapped as dagster-postgres does.
    engine = sa.create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none")
    try:
        try:
            engine.connect()
        except sa.exc.OperationalError as driver_error:
            raise RuntimeError("too many retries for DB connection") from driver_error
    except RuntimeError as wrapped:
        text = _formatted(wrapped)
    finally:
        engine.dispose()

    root = innermost_error(text)

    assert root is not None
    assert root.startswith("psycopg2.OperationalError: connection to server at")
    assert "Connection refused" in root


def test_no_traceback_names_nothing() -> None:
    assert innermost_error(None) is None
    assert innermost_error("") is None
