"""Runs submitted through a running webserver of this home (`airwave dev`), over its GraphQL API.

Starting a code server costs the CLI about 18 s on the demo machine before the first line; a
webserver already serving the code location takes a run at once. `airwave dev` announces itself
in `<DAGSTER_HOME>/airwave-webserver.json` (port and pid); a command finds it there, checks that
the process lives and answers, and otherwise falls back to starting its own code server.
Submissions use dagster-graphql's `DagsterGraphQLClient` where it has the call, and the same
`launchRunReexecution` mutation the UI sends for a from-failure re-execution, so the run queue,
the code-version guard and the complete resume are the ones the UI gets.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ANNOUNCEMENT = "airwave-webserver.json"
LOCATION_NAME = "airwave"
REPOSITORY_NAME = "__repository__"
_PROBE_SECONDS = 0.5

REEXECUTE = """
mutation Reexecute($parentRunId: String!, $strategy: ReexecutionStrategy!) {
  launchRunReexecution(reexecutionParams: {parentRunId: $parentRunId, strategy: $strategy}) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidStepError { invalidStepKey }
    ... on InvalidOutputError { stepKey invalidOutputName }
    ... on RunConflict { message }
    ... on UnauthorizedError { message }
    ... on PipelineNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""


class SubmissionRefused(Exception):
    """The webserver answered and refused the request; the message is its reason."""


@dataclass(frozen=True)
class Webserver:
    """A webserver of this home that answered a probe just now."""

    port: int

    @property
    def url(self) -> str:
        """Where it serves, always on 127.0.0.1."""
        return f"http://127.0.0.1:{self.port}"

    def _client(self) -> Any:
        from dagster_graphql import DagsterGraphQLClient

        return DagsterGraphQLClient("127.0.0.1", port_number=self.port, timeout=60)

    def submit(self, job_name: str, run_config: Mapping[str, Any], tags: Mapping[str, str]) -> str:
        """Submit a run of `job_name` (queued like a Launchpad launch); returns its id."""
        from dagster_graphql import DagsterGraphQLClientError

        try:
            return str(
                self._client().submit_job_execution(
                    job_name,
                    repository_location_name=LOCATION_NAME,
                    repository_name=REPOSITORY_NAME,
                    run_config=dict(run_config),
                    tags=dict(tags),
                )
            )
        except DagsterGraphQLClientError as error:
            raise SubmissionRefused(_words(error)) from error

    def reexecute(self, run_id: str, *, from_failure: bool) -> str:
        """Re-execute `run_id` from failure (the complete resume) or entirely; the new run's id."""
        strategy = "FROM_FAILURE" if from_failure else "ALL_STEPS"
        answer = self.graphql(REEXECUTE, {"parentRunId": run_id, "strategy": strategy})
        launched = answer["launchRunReexecution"]
        if launched["__typename"] == "LaunchRunSuccess":
            return str(launched["run"]["runId"])
        detail = launched.get("message") or json.dumps(launched)
        raise SubmissionRefused(_first_paragraph(str(detail)))

    def terminate(self, run_id: str) -> bool:
        """Ask the webserver to terminate a run; whether it accepted."""
        from dagster_graphql import DagsterGraphQLClientError

        try:
            self._client().terminate_run(run_id)
        except DagsterGraphQLClientError:
            return False
        return True

    def graphql(self, query: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        """One GraphQL request; its `data`, or `SubmissionRefused` with the errors."""
        body = json.dumps({"query": query, "variables": dict(variables)}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as error:  # GraphQL errors come back as 4xx/5xx JSON
            payload = json.loads(error.read() or b"{}")
        if not payload.get("data"):
            raise SubmissionRefused(f"the webserver refused the request: {payload.get('errors')}")
        return dict(payload["data"])


def _first_paragraph(message: str) -> str:
    # A PythonError reads "<module.ExceptionClass>: <words>" and then a stack; the words are what
    # a person at a terminal needs (the UI shows the rest).
    head = message.strip().split("\n\n")[0].strip()
    return re.sub(r"^[A-Za-z_][\w.]*\.[A-Za-z_]\w*: ", "", head)


def _words(error: Exception) -> str:
    return _first_paragraph(str(error)) or type(error).__name__


def announcement(dagster_home: Path) -> Path:
    """Where `airwave dev` writes its port and pid for the CLI."""
    return dagster_home / ANNOUNCEMENT


def announce(dagster_home: Path, port: int) -> None:
    """Record that this process serves the UI of `dagster_home` on `port`.

    `airwave dev` replaces itself with `dagster dev` (same pid), so the pid written here is the
    server's; a stale file (the server is gone) is ignored by `find`.
    """
    path = announcement(dagster_home)
    path.write_text(json.dumps({"port": port, "pid": os.getpid()}), encoding="utf-8")


def find(dagster_home: Path) -> Webserver | None:
    """The running webserver of this home, if one is announced, alive and answering."""
    try:
        announced = json.loads(announcement(dagster_home).read_text(encoding="utf-8"))
        port, pid = int(announced["port"]), int(announced["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's: not ours to submit to
        return None
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/server_info", timeout=_PROBE_SECONDS
        ) as response:
            json.loads(response.read())
    except (OSError, ValueError):
        return None
    return Webserver(port=port)
