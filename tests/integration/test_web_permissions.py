"""Who may do what through the web: nginx with basic auth in front of `airwave serve`, chromium.

The setup of docs/security.md "Behind a proxy": `airwave serve` on loopback trusting only the
proxy's address (nginx connects from 127.0.0.3 with `proxy_bind`; Linux routes all of 127/8 to
the loopback device), a permissions file with a viewer, a launcher and an approver, and nginx
authenticating each. The browser logs in as each person; direct requests show what a client that
bypasses the proxy, or the UI, gets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airwave_dagster import settings
from airwave_dagster.permissions import PRINCIPAL_HEADER
from airwave_dagster.run_tags import AWAITING_APPROVAL, STARTED_BY_TAG, STATUS_TAG
from resources.stores.approvals import ApprovalStore, Interrupt
from tests.support import lineups
from tests.support.browser import CHROMIUM_ARGS, COMMUNITY_DIALOG, _chromium
from tests.support.dagster_dev import LAUNCH, wait_for
from tests.support.proxy import PROXY_ADDRESS, Proxy, nginx
from tests.support.schemas import empty_project_tables, fresh_schema
from tests.support.served import serve_env, serving_airwave

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.plex,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.timeout(900),
]

AIRWAVE = str(Path(sys.executable).parent / "airwave")
SCHEMA = "dagster_web_permissions"
USERS = {"vera": "viewer-pw", "lena": "launcher-pw", "abe": "approver-pw", "otto": "answer-pw"}
PERMISSIONS = """\
roles:
  viewer: []
  launcher: ["runs:start:import_lineup", "runs:resume:import_lineup", "runs:start:ai_lineup",
             "runs:cancel:*"]
  approver: ["approvals:resolve:*", "runs:start:answer_approval", "runs:resume:ai_lineup"]
  answerer: ["runs:start:answer_approval", "approvals:resolve:rollback_lineup"]
  admin: ["*"]
principals:
  vera: [viewer]
  lena: [launcher]
  abe: [approver]
  otto: [answerer]
  airwave-daemon: [launcher]
  ada: [admin]
identities:
  root: ada
"""
RUN_TIMEOUT_MS = 420_000
PERMISSIONS_QUERY = "{ permissions { permission value } }"
TERMINATE = """
mutation($id: String!) {
  terminateRun(runId: $id) { __typename ... on TerminateRunFailure { message } }
}
"""
START_SENSOR = """
mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename } }
"""
SENSOR = {
    "repositoryLocationName": "airwave",
    "repositoryName": "__repository__",
    "sensorName": "lineup_upload_sensor",
}
RUN = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status tags { key value } } } }"


@dataclass
class Stack:
    """`airwave serve` behind nginx, and how to reach each."""

    serve_port: int
    proxy: Proxy
    database_url: str
    env: dict[str, str]

    def request(
        self, base: str, query: str, variables: dict[str, Any] | None = None, **headers: str
    ) -> tuple[int, dict[str, Any]]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{base}/graphql",
            data=body,
            headers={"Content-Type": "application/json", **headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                return error.code, json.loads(raw or b"{}")
            except ValueError:
                return error.code, {"raw": raw.decode(errors="replace")}

    def as_user(
        self, user: str, query: str, variables: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        status, payload = self.request(
            self.proxy.url, query, variables, Authorization=self.proxy.authorization(user)
        )
        assert status == 200 and payload.get("data"), (status, payload)
        return dict(payload["data"])

    def launch(self, user: str, job: str, run_config: dict[str, Any]) -> dict[str, Any]:
        params = {
            "selector": {
                "repositoryLocationName": "airwave",
                "repositoryName": "__repository__",
                "jobName": job,
            },
            "runConfigData": run_config,
        }
        return dict(self.as_user(user, LAUNCH, {"params": params})["launchRun"])

    def run(self, run_id: str) -> tuple[str, dict[str, str]]:
        found = self.as_user("vera", RUN, {"id": run_id})["runOrError"]
        return found["status"], {t["key"]: t["value"] for t in found["tags"]}

    def finished(self, run_id: str, timeout: float = 420) -> tuple[str, dict[str, str]]:
        def done() -> tuple[str, dict[str, str]] | None:
            status, tags = self.run(run_id)
            stopped = ("SUCCESS", "FAILURE", "CANCELED", "SUSPENDED")
            return (status, tags) if status in stopped else None

        result: tuple[str, dict[str, str]] = wait_for(done, timeout, f"run {run_id}", poll=1)
        return result


@pytest.fixture(scope="module")
def stack(
    database_url: str, plex_emulator: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("web-permissions")
    empty_project_tables(database_url)
    fresh_schema(database_url, SCHEMA)
    (root / "permissions.yaml").write_text(PERMISSIONS)
    env = serve_env(
        database_url,
        SCHEMA,
        plex_emulator,
        root / "home",
        **{
            settings.TRUSTED_PROXIES_ENV: PROXY_ADDRESS,
            settings.PERMISSIONS_ENV: str(root / "permissions.yaml"),
        },
    )
    env.pop("DAGSTER_HOME", None)
    with serving_airwave(env, root) as served:
        served.wait_ready(400)
        with nginx(served.port, USERS, root / "nginx") as proxy:
            yield Stack(serve_port=served.port, proxy=proxy, database_url=database_url, env=env)


@pytest.fixture(scope="module")
def browser(playwright: Any) -> Iterator[Any]:
    """A chromium of this module's own (each person logs in in a context of it)."""
    launched = playwright.chromium.launch(
        executable_path=str(_chromium()), headless=True, args=CHROMIUM_ARGS
    )
    try:
        yield launched
    finally:
        launched.close()


def _page_as(browser: Any, stack: Stack, user: str) -> Any:
    """A page of a new browser context logged in (basic auth) as `user`."""
    context = browser.new_context(
        http_credentials={"username": user, "password": USERS[user]},
        viewport={"width": 1400, "height": 900},
    )
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.add_locator_handler(
        page.get_by_text(COMMUNITY_DIALOG),
        lambda: page.get_by_role("button", name="Skip").click(),
    )
    return page


def _expect_visible(locator: Any, timeout: float = 60_000) -> Any:
    from playwright.sync_api import expect

    expect(locator).to_be_visible(timeout=timeout)
    return locator


def _fill_launchpad(page: Any, yaml: str) -> None:
    editor = _expect_visible(page.locator(".CodeMirror").first)
    editor.click()
    page.keyboard.press("Control+A")
    # One input event, as a paste: CodeMirror would re-indent every typed newline.
    page.keyboard.insert_text(yaml)
    _expect_visible(page.get_by_text("No errors"))


def _interrupt(database_url: str, run_id: str) -> Interrupt | None:
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        return ApprovalStore(engine).find(run_id)
    finally:
        engine.dispose()


def test_a_forged_identity_straight_to_the_server_is_refused(stack: Stack) -> None:
    direct = f"http://127.0.0.1:{stack.serve_port}"
    for header in ("Remote-User", PRINCIPAL_HEADER):
        status, payload = stack.request(direct, PERMISSIONS_QUERY, **{header: "ada"})
        assert status == 403, payload
        assert "only from a trusted proxy" in payload["error"]
    # Without a header, a direct client is anonymous: it reads, and every mutation is refused.
    status, payload = stack.request(direct, PERMISSIONS_QUERY)
    assert status == 200
    granted = {p["permission"] for p in payload["data"]["permissions"] if p["value"]}
    assert granted == {"reload_repository_location", "reload_workspace"}
    # Through nginx without credentials: nginx answers 401 and the server never sees it.
    status, _ = stack.request(stack.proxy.url, PERMISSIONS_QUERY)
    assert status == 401


def test_a_viewer_sees_a_disabled_launch_button_and_graphql_refuses_its_launch(
    stack: Stack, browser: Any
) -> None:
    page = _page_as(browser, stack, "vera")
    page.goto(f"{stack.proxy.url}/locations/airwave/jobs/import_lineup/playground")
    from playwright.sync_api import expect

    # The permission map says no launch: Dagster sends her from the Launchpad to the overview,
    # with its tab disabled, and no Launch Run button anywhere.
    expect(page.get_by_role("tab", name="Launchpad")).to_be_disabled(timeout=60_000)
    assert not page.url.endswith("/playground"), page.url
    assert page.get_by_role("button", name="Launch Run").count() == 0
    lineup = {"lineup": {"inline": {"content": json.dumps(lineups.genre_lineup(1))}}}
    refused = stack.launch(
        "vera", "import_lineup", {"ops": {"plan_import_lineup": {"config": lineup}}}
    )
    assert refused["__typename"] == "UnauthorizedError", refused
    page.context.close()

    # An edited permissions file applies to the next request, without a restart.
    def can_launch() -> bool:
        granted = stack.as_user("vera", PERMISSIONS_QUERY)["permissions"]
        return any(p["value"] for p in granted if p["permission"] == "launch_pipeline_execution")

    path = Path(stack.env[settings.PERMISSIONS_ENV])
    path.write_text(PERMISSIONS.replace("vera: [viewer]", "vera: [launcher]"))
    try:
        assert can_launch()
    finally:
        path.write_text(PERMISSIONS)
    assert not can_launch()


def test_a_launcher_starts_an_import_from_the_launchpad(
    stack: Stack, browser: Any, tmp_path: Path
) -> None:
    path = lineups.write(tmp_path, lineups.genre_lineup(2), "from-the-web.json")
    page = _page_as(browser, stack, "lena")
    page.goto(f"{stack.proxy.url}/locations/airwave/jobs/import_lineup/playground")
    _fill_launchpad(
        page,
        "ops:\n  plan_import_lineup:\n    config:\n      lineup:\n        file:\n"
        f"          path: {path}\n      dry_run: true\n",
    )
    page.get_by_role("button", name="Launch Run").click()
    page.wait_for_url("**/runs/*")
    run_id = page.url.rstrip("/").split("/runs/")[1][:36]
    status, tags = stack.finished(run_id)
    assert status == "SUCCESS"
    assert tags[STARTED_BY_TAG] == "lena" and tags["user"] == "lena"
    # Her role holds no automation:toggle: switching a sensor on is refused by GraphQL.
    refused = stack.as_user("lena", START_SENSOR, {"s": SENSOR})["startSensor"]
    assert refused["__typename"] == "UnauthorizedError", refused
    # The viewer may not terminate a run; the launcher (runs:cancel:*) is only told it has ended.
    refused = stack.as_user("vera", TERMINATE, {"id": run_id})["terminateRun"]
    assert "do not have permission" in refused["message"], refused
    ended = stack.as_user("lena", TERMINATE, {"id": run_id})["terminateRun"]
    assert "permission" not in ended.get("message", ""), ended
    page.context.close()


def test_an_approver_answers_from_the_launchpad_and_the_interrupt_records_them(
    stack: Stack, browser: Any
) -> None:
    config = {"limit": 1, "provider": "offline", "approval": "required", "confirm_wipe": False}
    launched = stack.launch("lena", "ai_lineup", {"ops": {"analyze_library": {"config": config}}})
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    status, tags = stack.finished(run_id)
    assert status == "SUSPENDED" and tags[STATUS_TAG] == AWAITING_APPROVAL, tags

    # Otto may launch an answer but approves only rollbacks: the op refuses, nothing changes.
    answer = {"ops": {"resolve_interrupt": {"config": {"run_id": run_id, "decision": "approve"}}}}
    launched = stack.launch("otto", "answer_approval", answer)
    assert stack.finished(launched["run"]["runId"])[0] == "FAILURE"
    still = _interrupt(stack.database_url, run_id)
    assert still is not None and still.open

    page = _page_as(browser, stack, "abe")
    page.goto(f"{stack.proxy.url}/runs/{run_id}")
    # The run page: Dagster's Suspended badge, the gate's diff as a table, and the tag saying it
    # waits for approval.
    _expect_visible(page.get_by_text("Suspended", exact=True).first)
    _expect_visible(page.get_by_text("AWAITING APPROVAL").first)
    for table in ("lineup diff", "approval summary"):
        _expect_visible(page.get_by_text(table, exact=True).first)
    page.get_by_role("button", name="View tags and config").click()
    _expect_visible(page.get_by_text(AWAITING_APPROVAL, exact=True).first)
    page.keyboard.press("Escape")
    page.goto(f"{stack.proxy.url}/locations/airwave/jobs/answer_approval/playground")
    _fill_launchpad(
        page,
        "ops:\n  resolve_interrupt:\n    config:\n"
        f"      run_id: {run_id}\n      decision: approve\n      reason: looks right\n",
    )
    page.get_by_role("button", name="Launch Run").click()
    page.wait_for_url("**/runs/*")
    answer_id = page.url.rstrip("/").split("/runs/")[1][:36]
    status, tags = stack.finished(answer_id)
    assert status == "SUCCESS" and tags[STARTED_BY_TAG] == "abe", tags

    interrupt = _interrupt(stack.database_url, run_id)
    assert interrupt is not None and interrupt.status == "approved"
    assert interrupt.resolved_by == "abe"
    assert interrupt.continuation_run_id
    status, tags = stack.finished(interrupt.continuation_run_id)
    assert status == "SUCCESS" and tags[STARTED_BY_TAG] == "abe", tags
    status, tags = stack.run(run_id)
    assert status == "SUCCESS" and tags[STATUS_TAG] == "approved", (status, tags)

    # One answer wins, whichever surface comes second: a UI answer after it fails naming it...
    again = stack.launch(
        "abe",
        "answer_approval",
        {"ops": {"resolve_interrupt": {"config": {"run_id": run_id, "decision": "reject"}}}},
    )
    assert stack.finished(again["run"]["runId"])[0] == "FAILURE"
    # ... and so does a CLI answer (root is ada, an admin, in this file).
    late = subprocess.run(
        [AIRWAVE, "reject", run_id, "--reason", "too late"],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert late.returncode == 4 and "conflict: already approved by abe" in late.stderr, late
    # A launcher holds no runs:start:answer_approval: the run coordinator refuses her answer.
    params = {
        "selector": {
            "repositoryLocationName": "airwave",
            "repositoryName": "__repository__",
            "jobName": "answer_approval",
        },
        "runConfigData": {
            "ops": {"resolve_interrupt": {"config": {"run_id": run_id, "decision": "reject"}}}
        },
    }
    _, payload = stack.request(
        stack.proxy.url, LAUNCH, {"params": params}, Authorization=stack.proxy.authorization("lena")
    )
    refusal = payload["data"]["launchRun"]
    assert "lena may not runs:start:answer_approval" in refusal["message"], refusal
    assert _interrupt(stack.database_url, run_id).status == "approved"  # type: ignore[union-attr]
    page.context.close()
