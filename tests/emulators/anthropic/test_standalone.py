"""`python -m airwave_dagster.emulators.anthropic` serves the real SDK until it is told to stop."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import anthropic

from tests.emulators.anthropic.conftest import MODEL, user


def test_standalone_server_plays_a_script_file_then_default_text(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"kind": "text", "text": "from the file"}]), encoding="utf-8")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "airwave_dagster.emulators.anthropic",
            "--port",
            "0",
            "--script",
            str(script),
            "--default-text",
            "default answer",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        url = None
        deadline = time.monotonic() + 20
        while url is None and time.monotonic() < deadline:
            found = re.search(r"(http://127\.0\.0\.1:\d+)", process.stderr.readline())
            url = found.group(1) if found else None
        assert url is not None, "the stub never logged its URL"
        with anthropic.Anthropic(base_url=url, api_key="test-key", max_retries=0) as client:
            texts = [
                client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")])
                .content[0]
                .text  # type: ignore[union-attr]
                for _ in range(2)
            ]
        assert texts == ["from the file", "default answer"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)
    assert process.returncode == 0


def test_standalone_refuses_a_bad_script_naming_the_entry(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text(json.dumps([{"kind": "text"}]), encoding="utf-8")

    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "airwave_dagster.emulators.anthropic",
            "--port",
            "0",
            "--script",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert finished.returncode == 2
    assert f"{script}[0].text: must be a string" in finished.stderr


def test_control_endpoints_add_script_and_report_counters() -> None:
    from airwave_dagster.emulators.anthropic import LLMStub

    def call(stub: LLMStub, method: str, path: str, body: object = None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{stub.url}{path}", data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    with LLMStub() as stub:
        assert call(stub, "POST", "/__stub/script", [{"kind": "text", "text": "remote"}]) == (
            200,
            {"added": 1},
        )
        status, problem = call(stub, "POST", "/__stub/script", [{"kind": "text", "text": 3}])
        assert status == 400 and "script[1].text" in str(problem)
        with anthropic.Anthropic(base_url=stub.url, api_key="k", max_retries=0) as client:
            reply = client.messages.create(model=MODEL, max_tokens=8, messages=[user("q")])
        assert reply.content[0].text == "remote"  # type: ignore[union-attr]
        status, stats = call(stub, "GET", "/__stub/stats")
        assert status == 200 and isinstance(stats, dict)
        assert stats["requests"] == 1 and stats["by_status"] == {"200": 1}
        assert stats["remaining"] == 0
        assert len(stub.requests) == 1  # control calls are not API traffic
