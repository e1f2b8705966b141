"""Integration-only pytest hooks: each test's outcome, for fixtures that keep failure artefacts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import browser_context, playwright, ui  # noqa: F401


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Record the call phase's report on the item (`ui` keeps its screenshots when it failed)."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
