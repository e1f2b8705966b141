"""Fuzzing the lineup validator with mutations of valid files.

Every mutated file must either be accepted (and then plan, dump and store cleanly) or be refused
with a `LineupFileError` whose problems name JSON paths; nothing else may escape, and each example
is bounded in time, traced memory and message size. Mutations replace, delete or add values
anywhere in a real file, and splice raw tokens JSON parsers treat specially (huge integers,
`1e400`, `NaN`, repeated keys) into its text.

The default profile keeps this to a few seconds of `make test`; a longer run, by hand::

    AIRWAVE_FUZZ_PROFILE=long .venv/bin/pytest tests/domain/test_lineup_fuzz.py
"""

from __future__ import annotations

import copy
import json
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airwave_dagster.domain.errors import LineupFileError
from airwave_dagster.domain.filters import FilterEnvelope
from airwave_dagster.domain.import_plan import InstanceState, plan_import
from airwave_dagster.domain.lineup_file import dump_lineup, parse_lineup
from tests.support.exports import EXPORTS

REPO = Path(__file__).resolve().parents[2]
LINEUPS = REPO / "tests" / "data" / "lineups"

settings.register_profile(
    "default-fuzz",
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=20_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile(
    "long" if os.environ.get("AIRWAVE_FUZZ_PROFILE") == "long" else "default-fuzz"
)

BASES: list[Any] = [
    json.loads((EXPORTS / "presets-basic.json").read_bytes()),
    json.loads((LINEUPS / "spec_example.json").read_bytes()),
    json.loads((LINEUPS / "valid" / "defaults_and_extras.json").read_bytes()),
]
"""Valid files the mutations start from: a reference export and this project's examples."""

RAW_TOKENS = {
    "@@HUGE@@": "9" * 4_500,
    "@@BIG@@": str(2**53 + 1),
    "@@INF@@": "1e400",
    "@@NAN@@": "NaN",
    "@@NEGINF@@": "-Infinity",
}
"""Placeholders swapped for raw JSON text after encoding: values json.dumps cannot write."""

HOSTILE_VALUES = st.sampled_from(
    [
        None,
        True,
        0,
        -1,
        2**31,
        -(2**31) - 1,
        1.5,
        "",
        " ",
        "\u200b",
        "\ufeff\u202e",
        "\u0301",
        "nul\u0000",
        "lone\ud800",
        "x" * 5_000,
        "is",
        "isNot",
        "contains",
        "PREDICATE",
        "group",
        "condition",
        "title",
        "duration",
        "hdr",
        "titleSort",
        "addedAt:desc",
        "media_types",
        [],
        {},
        [0] * 50,
        {"type": "group", "children": []},
        {"type": "condition", "field": "title", "op": "is", "value": ""},
        {"type": "condition", "field": "hdr", "op": "is", "value": ""},
        *RAW_TOKENS,
    ]
)
KEYS = st.sampled_from(
    ["id", "type", "field", "op", "value", "children", "mediaTypes", "media_types", "number",
     "name", "key", "packageKey", "sortField", "sortIndex", "exportedAt", "kind", "plexFilter",
     "definitions", "x\ud800", "nul\u0000", "k" * 200]
)  # fmt: skip


def _fresh(value: Any) -> Any:
    # The sampled values are shared constants; a later mutation must never change them.
    return copy.deepcopy(value)


def _containers(value: Any) -> list[Any]:
    """Every object and array of a document, each once."""
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
    return found


@st.composite
def mutated_files(draw: st.DrawFn) -> bytes:
    """A valid file with one to five values replaced, deleted or added, then encoded."""
    document = json.loads(json.dumps(draw(st.sampled_from(BASES))))
    for _ in range(draw(st.integers(1, 5))):
        containers = _containers(document)
        target = containers[draw(st.integers(0, len(containers) - 1))]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if isinstance(target, dict):
            if action == "add" or not target:
                target[draw(KEYS)] = _fresh(draw(HOSTILE_VALUES))
            else:
                key = draw(st.sampled_from(sorted(target)))
                if action == "delete":
                    del target[key]
                else:
                    target[key] = _fresh(draw(HOSTILE_VALUES))
        elif action == "add" or not target:
            target.append(_fresh(draw(HOSTILE_VALUES)))
        else:
            index = draw(st.integers(0, len(target) - 1))
            if action == "delete":
                del target[index]
            else:
                target[index] = _fresh(draw(HOSTILE_VALUES))
    text = json.dumps(document)
    for placeholder, token in RAW_TOKENS.items():
        text = text.replace(json.dumps(placeholder), token)
    if draw(st.booleans()) and '"name": ' in text:
        # A repeated key, which json.loads would silently collapse.
        text = text.replace('"name": ', '"name": "dup", "name": ', 1)
    return text.encode("utf-8", "surrogatepass")


def _storable(lineup_text: str) -> bool:
    return "\u0000" not in lineup_text and lineup_text.encode("utf-8") is not None


@PROFILE
@given(mutated_files())
def test_mutated_files_are_accepted_or_refused_at_a_path(data: bytes) -> None:
    started = time.process_time()
    tracemalloc.start()
    try:
        _accepted_or_refused(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The files are small; a step that copies them per element or per problem shows up here.
    assert peak < 64 * 1024 * 1024 + 40 * len(data)
    assert time.process_time() - started < 2.0


def _accepted_or_refused(data: bytes) -> None:
    try:
        lineup = parse_lineup(data, source="fuzzed.json")
    except LineupFileError as error:
        assert error.issues
        assert all(issue.path.startswith("$") for issue in error.issues)
        message = str(error)
        assert len(message) <= 20_000
        message.encode("utf-8")  # printable and storable: no lone surrogate escapes
    else:
        plan = plan_import(lineup, InstanceState(channel_numbers=frozenset({1, 2, 3})))
        numbers = [c.assigned_number for c in plan.creates()]
        assert len(numbers) == len(set(numbers))
        assert all(1 <= number <= 2**31 - 1 for number in numbers)
        for channel in plan.channels:
            for definition in channel.definitions:
                if definition.plex_filter is not None:
                    FilterEnvelope.model_validate(definition.plex_filter)
        text = dump_lineup(lineup)
        assert _storable(text)
        assert plan.model_dump_json().encode("utf-8")
        parse_lineup(text.encode(), source="dumped.json")
