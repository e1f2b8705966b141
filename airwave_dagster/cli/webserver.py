"""Runs submitted through a running webserver of this home (`airwave dev`), over its GraphQL API.

Starting a code server costs the CLI 10 to 20 s on the 2-core development machine; a
webserver already serving the code location takes a run at once. `airwave dev`, and `airwave
serve` once all three of its processes answer, announce themselves in
`<DAGSTER_HOME>/airwave-webserver.json` (port and pid); a command finds it there, checks that
the process lives and answers, and otherwise falls back to starting its own code server.
Submissions send the mutations the UI sends (`launchRun`, and `launchRunReexecution` for a
from-failure re-execution), so the run queue, the code-version guard and the complete resume are
the ones the UI gets. A re-execution with edited config is the exception: `launchRunReexecution`
takes no config, so the command computes the complete resume itself and sends
`launchPipelineReexecution` with the config and the steps, as the UI's Launchpad does (after
`isPipelineConfigValid` judged the config against the code the server runs). Plain HTTP and
JSON, not dagster-graphql's client: that client loads Dagster (about a second), and this path
exists to answer at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from airwave_dagster.cli import environment
from airwave_dagster.cli.starts import ConfigInvalid, LaunchRefused, RunInfo
from airwave_dagster.run_tags import IDEMPOTENCY_TAG

ANNOUNCEMENT = "airwave-webserver.json"
LOCATION_NAME = "airwave"
REPOSITORY_NAME = "__repository__"
_PROBE_SECONDS = 0.5

_RUN_FIELDS = "runId status jobName parentRunId creationTime tags { key value }"

RUN = f"""
query Run($runId: ID!) {{
  runOrError(runId: $runId) {{
    __typename ... on Run {{ {_RUN_FIELDS} }} ... on PythonError {{ message }}
  }}
}}
"""

TAGGED = f"""
query Tagged($key: String!, $value: String!) {{
  runsOrError(filter: {{tags: [{{key: $key, value: $value}}]}}, limit: 1) {{
    __typename ... on Runs {{ results {{ {_RUN_FIELDS} }} }} ... on PythonError {{ message }}
  }}
}}
"""

GROUP = f"""
query Group($runId: ID!) {{
  runGroupOrError(runId: $runId) {{
    __typename ... on RunGroup {{ runs {{ {_RUN_FIELDS} }} }} ... on PythonError {{ message }}
  }}
}}
"""

_LAUNCHED = """
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
"""
"""What a launch answers (`launchRun` and `launchRunReexecution` share the union)."""

LAUNCH = f"""
mutation Launch($params: ExecutionParams!) {{
  launchRun(executionParams: $params) {{ {_LAUNCHED} }}
}}
"""

TERMINATE = """
mutation Terminate($runId: String!) {
  terminateRun(runId: $runId) {
    __typename
    ... on TerminateRunSuccess { run { runId } }
    ... on TerminateRunFailure { message }
    ... on RunNotFoundError { message }
    ... on UnauthorizedError { message }
    ... on PythonError { message }
  }
}
"""

REEXECUTE_WITH = f"""
mutation ReexecuteWith($params: ExecutionParams!) {{
  launchPipelineReexecution(executionParams: $params) {{ {_LAUNCHED} }}
}}
"""
"""A re-execution whose config and steps the caller names: `launchRunReexecution` takes neither."""

VALID = """
query Valid($pipeline: PipelineSelector!, $config: RunConfigData) {
  isPipelineConfigValid(pipeline: $pipeline, mode: "default", runConfigData: $config) {
    __typename
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PipelineNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on PythonError { message }
  }
}
"""

REEXECUTE = f"""
mutation Reexecute(
  $parentRunId: String!, $strategy: ReexecutionStrategy!, $extraTags: [ExecutionTag!]
) {{
  launchRunReexecution(
    reexecutionParams: {{parentRunId: $parentRunId, strategy: $strategy, extraTags: $extraTags}}
  ) {{
    {_LAUNCHED}
  }}
}}
"""


class SubmissionRefused(LaunchRefused):
    """The webserver answered and refused the request; the message is its reason."""


@dataclass(frozen=True)
class Webserver:
    """A webserver of this home that answered a probe just now, and the services it runs with."""

    port: int
    database: str | None = None
    """Its application database, password redacted (None: announced by an older version)."""
    database_digest: str | None = None
    """SHA-256 of its database URL as normalised, to compare without storing the password."""
    plex_url: str | None = None

    @property
    def url(self) -> str:
        """Where it serves, always on 127.0.0.1."""
        return f"http://127.0.0.1:{self.port}"

    def submit(self, job_name: str, run_config: Mapping[str, Any], tags: Mapping[str, str]) -> str:
        """Submit a run of `job_name` (queued like a Launchpad launch); returns its id."""
        params = {
            "selector": {
                "repositoryLocationName": LOCATION_NAME,
                "repositoryName": REPOSITORY_NAME,
                "jobName": job_name,
            },
            "runConfigData": dict(run_config),
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
        }
        return _launched(self.graphql(LAUNCH, {"params": params})["launchRun"])

    def reexecute(
        self, run_id: str, *, from_failure: bool, tags: Mapping[str, str] | None = None
    ) -> str:
        """Re-execute `run_id` from failure (the complete resume) or entirely; the new run's id.

        `tags` go over the parent's (who started the re-execution).
        """
        strategy = "FROM_FAILURE" if from_failure else "ALL_STEPS"
        extra = [{"key": k, "value": v} for k, v in (tags or {}).items()]
        answer = self.graphql(
            REEXECUTE, {"parentRunId": run_id, "strategy": strategy, "extraTags": extra}
        )
        return _launched(answer["launchRunReexecution"])

    def validate(self, job_name: str, run_config: Mapping[str, Any]) -> None:
        """`ConfigInvalid` with Dagster's words when the job as served rejects `run_config`."""
        pipeline = {
            "repositoryLocationName": LOCATION_NAME,
            "repositoryName": REPOSITORY_NAME,
            "pipelineName": job_name,
        }
        answer = self.graphql(VALID, {"pipeline": pipeline, "config": dict(run_config)})
        verdict = answer["isPipelineConfigValid"]
        if verdict["__typename"] == "RunConfigValidationInvalid":
            detail = "; ".join(str(error["message"]) for error in verdict["errors"])
            raise ConfigInvalid(f"the run config is invalid: {detail}")
        _ok(verdict, "PipelineConfigValidationValid")

    def reexecute_with(
        self,
        job_name: str,
        run_config: Mapping[str, Any],
        tags: Mapping[str, str],
        *,
        parent_run_id: str,
        root_run_id: str,
        step_keys: list[str] | None,
    ) -> str:
        """A re-execution of `parent_run_id` with this config and these steps (None: all)."""
        params = {
            "selector": {
                "repositoryLocationName": LOCATION_NAME,
                "repositoryName": REPOSITORY_NAME,
                "jobName": job_name,
            },
            "runConfigData": dict(run_config),
            "executionMetadata": {
                "parentRunId": parent_run_id,
                "rootRunId": root_run_id,
                "tags": [{"key": k, "value": v} for k, v in tags.items()],
            },
            "stepKeys": step_keys,
        }
        answer = self.graphql(REEXECUTE_WITH, {"params": params})["launchPipelineReexecution"]
        if answer["__typename"] == "RunConfigValidationInvalid":  # against the current schema
            detail = "; ".join(str(error["message"]) for error in answer["errors"])
            raise ConfigInvalid(f"the run config is invalid: {detail}")
        return _launched(answer)

    def terminate(self, run_id: str) -> bool:
        """Ask the webserver to terminate a run; whether it accepted."""
        try:
            answer = self.graphql(TERMINATE, {"runId": run_id})["terminateRun"]
        except SubmissionRefused:
            return False
        return bool(answer["__typename"] == "TerminateRunSuccess")

    def run(self, run_id: str) -> RunInfo | None:
        """The run `run_id`, or None when the instance has none."""
        answer = self.graphql(RUN, {"runId": run_id})["runOrError"]
        if answer["__typename"] == "RunNotFoundError":
            return None
        return _run_info(_ok(answer, "Run"))

    def tagged(self, key: str, value: str) -> RunInfo | None:
        """The newest run tagged `key=value`, if any."""
        answer = self.graphql(TAGGED, {"key": key, "value": value})["runsOrError"]
        results = _ok(answer, "Runs")["results"]
        return _run_info(results[0]) if results else None

    def group(self, run_id: str) -> list[RunInfo]:
        """Every run of `run_id`'s group (empty when the run does not exist)."""
        answer = self.graphql(GROUP, {"runId": run_id})["runGroupOrError"]
        if answer["__typename"] == "RunGroupNotFoundError":
            return []
        return [_run_info(run) for run in _ok(answer, "RunGroup")["runs"]]

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


def _launched(answer: dict[str, Any]) -> str:
    """The new run's id from a launch answer, or `SubmissionRefused` with the webserver's words."""
    if answer["__typename"] == "LaunchRunSuccess":
        return str(answer["run"]["runId"])
    if answer.get("errors"):  # config that does not validate: one line per error
        detail = "; ".join(str(error["message"]) for error in answer["errors"])
    else:
        detail = answer.get("message") or json.dumps(answer)
    raise SubmissionRefused(_first_paragraph(str(detail)))


def _ok(answer: dict[str, Any], typename: str) -> dict[str, Any]:
    if answer["__typename"] != typename:
        detail = answer.get("message") or json.dumps(answer)
        raise SubmissionRefused(_first_paragraph(str(detail)))
    return answer


def _run_info(run: dict[str, Any]) -> RunInfo:
    return RunInfo(
        run_id=str(run["runId"]),
        status=str(run["status"]),
        job_name=str(run["jobName"]),
        parent_run_id=run.get("parentRunId"),
        created=float(run.get("creationTime") or 0.0),
        tags={tag["key"]: tag["value"] for tag in run.get("tags") or ()},
    )


def _first_paragraph(message: str) -> str:
    # A PythonError reads "<module.ExceptionClass>: <words>" and then a stack; the words are what
    # a person at a terminal needs (the UI shows the rest).
    head = message.strip().split("\n\n")[0].strip()
    return re.sub(r"^[A-Za-z_][\w.]*\.[A-Za-z_]\w*: ", "", head)


def announcement(dagster_home: Path) -> Path:
    """Where `airwave dev` and `airwave serve` write their port and pid for the CLI."""
    return dagster_home / ANNOUNCEMENT


def announce(dagster_home: Path, port: int, database_url: str, plex_url: str | None) -> None:
    """Record that this process serves the UI of `dagster_home` on `port`, and with what.

    `airwave dev` runs Dagster's dev server in this same process, so the pid written here is the
    server's; `airwave serve` writes its supervisor's, whose children die with it. A stale file
    (the server is gone) is ignored by `find`. The database is written
    redacted, with a digest of the whole URL, so a command can tell whether its own settings
    name the same database without the password being stored.
    """
    path = announcement(dagster_home)
    path.write_text(
        json.dumps(
            {
                "port": port,
                "pid": os.getpid(),
                "database": environment.redact(database_url),
                "database_digest": database_digest(database_url),
                "plex_url": plex_url,
            }
        ),
        encoding="utf-8",
    )


def withdraw(dagster_home: Path) -> None:
    """Remove this process's announcement, if the file still names it (`airwave serve` stops).

    A file another process wrote since (a second server of the home) is left alone.
    """
    path = announcement(dagster_home)
    try:
        if int(json.loads(path.read_text(encoding="utf-8"))["pid"]) == os.getpid():
            path.unlink()
    except (OSError, ValueError, KeyError, TypeError):
        return


def database_digest(database_url: str) -> str:
    """The digest `announce` records of a database URL (driver prefix normalised)."""
    return hashlib.sha256(environment.normalise_url(database_url).encode()).hexdigest()


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
    return Webserver(
        port=port,
        database=announced.get("database"),
        database_digest=announced.get("database_digest"),
        plex_url=announced.get("plex_url"),
    )


@dataclass(frozen=True)
class WebserverTarget:
    """`starts.Target` over a running webserver: no Dagster is loaded in this process.

    Only a run that claims to be in progress needs Dagster here, to ask whether its worker
    still lives (`fail_if_dead`); `airwave dev` and `airwave serve` always run a daemon.
    """

    server: Webserver

    def run(self, run_id: str) -> RunInfo | None:
        """See `starts.Target`."""
        return self.server.run(run_id)

    def tagged(self, key: str) -> RunInfo | None:
        """See `starts.Target`."""
        return self.server.tagged(IDEMPOTENCY_TAG, key[:200])

    def tree(self, run_id: str) -> list[RunInfo]:
        """See `starts.Target`."""
        return self.server.group(run_id)

    def submit(
        self, job_name: str, run_config: Mapping[str, object], tags: Mapping[str, str]
    ) -> str:
        """See `starts.Target`."""
        return self.server.submit(job_name, run_config, tags)

    def reexecute(
        self,
        run_id: str,
        *,
        from_failure: bool,
        config: Mapping[str, object] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """See `starts.Target`.

        With `config` this process loads Dagster: the complete resume's steps and the check of
        the change are computed here from the instance (`reconfigured_resume`), and the run is
        sent as a re-execution with explicit config and steps; the run queue's version guard
        still judges it on submit.
        """
        if config is None:
            return self.server.reexecute(run_id, from_failure=from_failure, tags=tags)
        import dagster as dg

        from airwave_dagster.durability import resume
        from airwave_dagster.durability.reconfig import ConfigChangeRefused

        plan = resume.reconfigured_resume if from_failure else resume.reconfigured_all_steps
        with dg.DagsterInstance.get() as instance:
            parent = instance.get_run_by_id(run_id)
            if parent is None:
                raise LaunchRefused(f"no run {run_id}")
            try:
                planned = plan(
                    instance, parent, config, partial(self.server.validate, parent.job_name)
                )
            except (ConfigChangeRefused, dg.DagsterInvalidSubsetError) as error:
                raise LaunchRefused(str(error)) from error
        return self.server.reexecute_with(
            parent.job_name,
            planned.run_config,
            {**planned.tags, **(tags or {})},
            parent_run_id=parent.run_id,
            root_run_id=parent.root_run_id or parent.run_id,
            step_keys=planned.step_keys or None,
        )

    def fail_if_dead(self, run: RunInfo) -> RunInfo:
        """See `starts.Target`."""
        if not run.in_progress:
            return run
        from airwave_dagster.cli import launcher

        launcher.fail_if_dead_by_id(run.run_id)
        return self.server.run(run.run_id) or run

    def daemon_running(self) -> bool:
        """See `starts.Target`."""
        return True

    def take_if_unserved(self, run_id: str) -> str | None:
        """See `starts.Target`: the server's own daemon takes its queue (supervised with it)."""
        return None
