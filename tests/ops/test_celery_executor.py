"""A step task that raised is named by its innermost cause; a silent worker is seen as gone."""

from __future__ import annotations

import traceback
import uuid

import sqlalchemy as sa
from celery import Celery

from ops.celery_executor import LOST_AFTER_SECONDS, WorkerWatch, innermost_error
from tests.support.celery_workers import REDIS_URL, require_broker


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


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_worker_that_never_answers_grows_silent_and_a_dead_broker_silences_no_one() -> None:
    require_broker(REDIS_URL)
    app = Celery(broker=REDIS_URL, backend=REDIS_URL)
    clock = _Clock()
    watch = WorkerWatch(clock)
    gone = f"celery@gone-{uuid.uuid4().hex[:8]}"

    assert watch.silent_for(app, gone) == 0.0  # counted from when the run first needs it
    clock.now += LOST_AFTER_SECONDS + 1
    assert watch.silent_for(app, gone) >= LOST_AFTER_SECONDS  # a real ping; no such worker

    unreachable = Celery(broker="redis://127.0.0.1:1/0", backend="redis://127.0.0.1:1/0")
    unreachable.conf.broker_connection_retry = False
    unreachable.conf.broker_connection_max_retries = 0
    offline = WorkerWatch(clock)
    offline.silent_for(unreachable, gone)
    clock.now += LOST_AFTER_SECONDS + 1
    assert offline.silent_for(unreachable, gone) < LOST_AFTER_SECONDS
