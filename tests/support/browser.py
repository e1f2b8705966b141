"""Debian's chromium, driven by Playwright, against the shared `airwave dev` fixture.

The browser is the system package (`apt-get install chromium`), never one Playwright downloads:
this machine has no route to Playwright's CDN, and CI installs the package in `.ci/run`. Each
step of a test saves a screenshot under `.airwave/artifacts/browser/<test>/`; the folder is
removed when the test passes, so what is left there is the record of a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airwave_dagster.cli import environment

CHROMIUM = Path("/usr/bin/chromium")
INSTALL = "sudo apt-get install -y chromium"
ARTIFACTS = environment.project_root() / ".airwave" / "artifacts" / "browser"
# Chromium's background services (updates, sync, field trials, QUIC probes) try to reach the
# internet; on a closed network they stall start-up or the first navigation, so they are off.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # the suite runs as root in CI, where the setuid sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
COMMUNITY_DIALOG = "Join the Dagster community"


@dataclass
class UI:
    """One browser page on the dev server, and the screenshots taken along the way."""

    page: Any
    base_url: str
    shots: Path
    taken: list[Path] = field(default_factory=list)

    def open(self, path: str) -> None:
        """Navigate to `path` of the Dagster UI."""
        self.page.goto(self.base_url + path)

    def shot(self, step: str) -> Path:
        """Save a full-page screenshot of the current step."""
        self.shots.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_-]+", "-", step)
        target = self.shots / f"{len(self.taken) + 1:02d}-{name}.png"
        self.page.screenshot(path=str(target), full_page=True)
        self.taken.append(target)
        return target


def _chromium() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    message = f"the browser tests need Debian's chromium at {CHROMIUM}: {INSTALL}"
    # CI must never pass by skipping what it was asked to test (.ci/run installs the package).
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def playwright() -> Iterator[Any]:
    """The process's one Playwright driver: every browser fixture launches through it.

    Playwright's sync API runs its event loop on this thread for as long as the driver lives, and
    refuses a second `sync_playwright()` while one runs ("Sync API inside the asyncio loop"): a
    module that started its own failed whenever a test worker had run a browser test before it.
    """
    _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser_context(playwright: Any) -> Iterator[Any]:
    """A headless chromium with a fresh profile, shared by every browser test."""
    profile = tempfile.mkdtemp(prefix="airwave-chromium-")
    try:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(_chromium()),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 900},
        )
        context.set_default_timeout(30_000)
        try:
            yield context
        finally:
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def ui(browser_context: Any, fresh: Any, request: pytest.FixtureRequest) -> Iterator[UI]:
    """A new page on the shared dev server; its screenshots are kept only if the test fails."""
    page = browser_context.new_page()
    # Dagster asks every new instance once to join its community, in a modal over whatever page
    # comes first; a handler dismisses it whenever it shows, so it never hides what a test reads.
    page.add_locator_handler(
        page.get_by_text(COMMUNITY_DIALOG),
        lambda: page.get_by_role("button", name="Skip").click(),
    )
    shots = ARTIFACTS / re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)
    shutil.rmtree(shots, ignore_errors=True)
    driven = UI(page=page, base_url=f"http://127.0.0.1:{fresh.port}", shots=shots)
    try:
        yield driven
    finally:
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            try:
                driven.shot("at-failure")
            except Exception as error:  # the page may be gone; the earlier shots still count
                print(f"no screenshot at failure: {error}")  # noqa: T201
            print(f"browser screenshots: {shots}")  # noqa: T201
        else:
            shutil.rmtree(shots, ignore_errors=True)
        page.close()
