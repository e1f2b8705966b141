"""Fixtures of the durability tests: the project's run queue on the test Postgres."""

from tests.support.coordinator import queue_instance  # noqa: F401
