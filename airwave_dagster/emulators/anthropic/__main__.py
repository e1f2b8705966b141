"""`python -m airwave_dagster.emulators.anthropic`: serve a scripted Messages API until stopped."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from airwave_dagster.emulators.anthropic.script import ScriptError, check_entry
from airwave_dagster.emulators.anthropic.server import run_llm_stub


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run the stub in the foreground."""
    parser = argparse.ArgumentParser(
        prog="python -m airwave_dagster.emulators.anthropic",
        description="Serve a scripted Anthropic Messages API to the real anthropic SDK.",
    )
    parser.add_argument("--port", type=int, default=8787, help="TCP port (0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind")
    parser.add_argument("--script", type=Path, help="JSON file holding a list of script entries")
    parser.add_argument(
        "--default-text", help="answer every request the script does not cover with this text"
    )
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added per call")
    parser.add_argument(
        "--min-cache-tokens",
        type=int,
        default=None,
        help="permissive: one shortest cacheable prefix for every model "
        "(default: each model's documented minimum)",
    )
    arguments = parser.parse_args(argv)
    try:
        script = _load_script(arguments.script) if arguments.script else []
    except (OSError, ValueError) as error:
        parser.error(str(error))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    run_llm_stub(
        port=arguments.port,
        host=arguments.host,
        script=script,
        default_text=arguments.default_text,
        latency=arguments.latency,
        min_cache_tokens=arguments.min_cache_tokens,
    )


def _load_script(path: Path) -> list[dict[str, object]]:
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: the script must be a JSON list of entries")
    try:
        return [check_entry(entry, f"{path}[{index}]") for index, entry in enumerate(entries)]
    except ScriptError as error:
        raise ValueError(str(error)) from None


if __name__ == "__main__":
    main()
