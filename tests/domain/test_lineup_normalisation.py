"""What the reference system writes imports: each normalisation parsed, planned and noted.

One row per normalisation of docs/importer.md: the file as the reference writes it, what the
parsed lineup must hold instead, and the note (JSON path and wording) the plan carries into the
dry-run and the report. The job-level half (real Postgres, the Plex emulator) is
tests/integration/test_import_normalisations.py, driven by the same table.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, NamedTuple

import pytest

from airwave_dagster.domain.errors import LineupFileError
from airwave_dagster.domain.import_plan import InstanceState, plan_import
from airwave_dagster.domain.lineup_file import LineupChannel, dump_lineup, parse_lineup
from tests.support.exports import EXPORTS

FILTER = "$.channels[0].definitions[0].plexFilter"


def condition(field: str, op: str, value: str) -> dict[str, Any]:
    return {"type": "condition", "id": "c1", "field": field, "op": op, "value": value}


def filtered(media_types: list[str], node: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A channel with one PREDICATE of `node`, as the reference editor writes it."""
    envelope = {"mediaTypes": media_types, "filter": node}
    return {
        "number": 7,
        "name": "Reference channel",
        "definitions": [{"kind": "PREDICATE", "plexFilter": envelope}],
        **extra,
    }


class Case(NamedTuple):
    """One normalisation: the channel as written, the note expected, and what is stored."""

    id: str
    channel: dict[str, Any]
    note_path: str
    note_words: tuple[str, ...]
    stored: dict[str, Any]
    """Expected values: `op`/`value`/`field` of the first condition, or channel attributes."""


CASES: list[Case] = [
    Case(
        "is-on-text",
        filtered(["movie"], condition("title", "is", "Return to")),
        f"{FILTER}.filter.op",
        ("'is' on text field 'title'", "'contains'"),
        {"op": "contains", "value": "Return to"},
    ),
    Case(
        "isNot-on-text",
        filtered(["movie", "show"], condition("episodeTitle", "isNot", "Pilot")),
        f"{FILTER}.filter.op",
        ("'isNot' on text field 'episodeTitle'", "'notContains'"),
        {"op": "notContains", "value": "Pilot"},
    ),
    Case(
        "empty-boolean",
        filtered(["movie"], condition("hdr", "is", "")),
        f"{FILTER}.filter.value",
        ("boolean field 'hdr'", '"true"'),
        {"op": "is", "value": "true"},
    ),
    Case(
        "field-missing-on-media-types",
        filtered(["show"], condition("duration", "gte", "90")),
        f"{FILTER}.filter.field",
        ("'duration' does not exist on show libraries", "matches nothing"),
        {"field": "duration", "op": "gte", "value": "90"},
    ),
    Case(
        "plex-sort-key",
        filtered(["movie"], condition("genre", "is", "Drama"), sortField="originallyAvailableAt"),
        "$.channels[0].sortField",
        ("'originallyAvailableAt' read as 'releaseDate'",),
        {"sort_field": "releaseDate", "sort_dir": "asc"},
    ),
    Case(
        "plex-title-sort",
        filtered(["movie"], condition("genre", "is", "Drama"), sortField="titleSort"),
        "$.channels[0].sortField",
        ("'titleSort' read as 'title'",),
        {"sort_field": "title"},
    ),
    Case(
        "plex-view-count",
        filtered(["movie"], condition("genre", "is", "Drama"), sortField="viewCount"),
        "$.channels[0].sortField",
        ("'viewCount' read as 'plays'",),
        {"sort_field": "plays"},
    ),
    Case(
        "plex-sort-with-direction",
        filtered(["movie"], condition("genre", "is", "Drama"), sortField="addedAt:desc"),
        "$.channels[0].sortField",
        ("'addedAt:desc' read as 'addedAt'", "direction 'desc'"),
        {"sort_field": "addedAt", "sort_dir": "desc"},
    ),
    Case(
        "unknown-sort-key",
        filtered(["movie"], condition("genre", "is", "Drama"), sortField="random"),
        "$.channels[0].sortField",
        ("unknown sort field 'random'", "'title'"),
        {"sort_field": "title"},
    ),
    Case(
        "number-zero",
        filtered(["movie"], condition("genre", "is", "Drama"), number=0),
        "$.channels[0].number",
        ("0 is not a channel number", "next free number"),
        {"number": 0},
    ),
    Case(
        "number-negative",
        filtered(["movie"], condition("genre", "is", "Drama"), number=-12),
        "$.channels[0].number",
        ("-12 is not a channel number",),
        {"number": -12},
    ),
    Case(
        "snake-case-media-types",
        {
            **filtered(["movie"], condition("genre", "is", "Drama")),
            "definitions": [
                {
                    "kind": "PREDICATE",
                    "plexFilter": {
                        "media_types": ["show"],
                        "filter": condition("duration", "gte", "90"),
                    },
                }
            ],
        },
        FILTER,
        ("ignored unknown key(s) 'media_types'",),
        {"field": "duration", "op": "gte"},
    ),
]


def lineup_of(channel: dict[str, Any]) -> bytes:
    return json.dumps({"version": 1, "packages": [], "channels": [channel]}).encode()


def first_condition(channel: LineupChannel) -> dict[str, Any]:
    envelope = channel.definitions[0].plex_filter
    assert envelope is not None
    return envelope["filter"]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_reference_spelling_is_parsed_planned_and_noted(case: Case) -> None:
    lineup = parse_lineup(lineup_of(case.channel), source="reference.json")

    (channel,) = lineup.channels
    node = first_condition(channel)
    for key, expected in case.stored.items():
        actual = node[key] if key in ("op", "value", "field") else getattr(channel, key)
        assert actual == expected, key
    (note,) = lineup.notes_of(0)
    assert note.path == case.note_path
    for words in case.note_words:
        assert words in note.message, (words, note.message)
    # The planner carries the note to the build step, which lists it in the dry-run and report.
    (planned,) = plan_import(lineup, InstanceState(channel_numbers=frozenset({1}))).channels
    assert planned.notes == (f"{note.path}: {note.message}",)
    assert planned.assigned_number >= 1
    assert planned.number_reassigned is (channel.number < 1)


def test_a_number_below_one_gets_the_next_free_number_by_the_second_pass() -> None:
    channels = [
        filtered(["movie"], condition("genre", "is", "Drama"), number=0, name="Zero"),
        filtered(["movie"], condition("genre", "is", "Comedy"), number=1, name="One"),
        filtered(["movie"], condition("genre", "is", "Horror"), number=-4, name="Minus four"),
    ]
    data = json.dumps({"version": 1, "packages": [], "channels": channels}).encode()

    plan = plan_import(parse_lineup(data, source="x.json"), InstanceState())

    assigned = {c.name: (c.assigned_number, c.number_reassigned) for c in plan.channels}
    assert assigned == {"One": (1, False), "Minus four": (2, True), "Zero": (3, True)}
    assert plan.counts.reassigned == 2


def test_renumbering_never_passes_the_column_range() -> None:
    top = 2**31 - 1
    channels = [
        filtered(["movie"], condition("genre", "is", genre), number=top, name=genre)
        for genre in ("Drama", "Comedy")
    ]
    data = json.dumps({"version": 1, "packages": [], "channels": channels}).encode()

    plan = plan_import(parse_lineup(data, source="x.json"), InstanceState(channel_numbers={1}))

    assert sorted(c.assigned_number for c in plan.channels) == [2, top]


def test_clean_reference_files_get_no_notes_and_keep_their_filters_verbatim() -> None:
    for path in sorted(EXPORTS.glob("*.json")):
        data = path.read_bytes()
        lineup = parse_lineup(data, source=path.name)
        assert lineup.notes == ()
        raw = json.loads(data)
        stored = [d.plex_filter for c in lineup.channels for d in c.definitions]
        written = [d.get("plexFilter") for c in raw["channels"] for d in c["definitions"]]
        assert stored == written


@pytest.mark.parametrize("name", ["presets-basic.json", "presets-full-catalog.json"])
def test_reference_exports_round_trip_byte_for_byte(name: str) -> None:
    data = (EXPORTS / name).read_bytes()

    text = dump_lineup(parse_lineup(data, source=name))

    # The reference writes no final newline; everything else is reproduced exactly.
    assert text == data.decode("utf-8") + "\n"


def test_dump_never_writes_null_for_a_time_or_a_sort_index() -> None:
    raw = {
        "version": 1,
        "exportedAt": None,
        "packages": [{"key": "a", "name": "A"}, {"key": "b", "name": "B", "sortIndex": None}],
        "channels": [
            {
                "number": 1,
                "name": "One",
                "definitions": [
                    {"kind": "PLEX_COLLECTION", "plexCollectionKey": "9"},
                    {"kind": "PREDICATE", "sortIndex": None},
                    {"kind": "PREDICATE"},
                ],
            }
        ],
    }
    lineup = parse_lineup(json.dumps(raw).encode(), source="nulls.json")

    text = dump_lineup(lineup, now=datetime(2026, 12, 1, 21, 0, tzinfo=UTC))

    dumped = json.loads(text)
    assert dumped["exportedAt"] == "2026-12-01T21:00:00.000Z"
    assert [p["sortIndex"] for p in dumped["packages"]] == [0, 1]
    assert [d["sortIndex"] for d in dumped["channels"][0]["definitions"]] == [0, 0, 1]
    assert '"sortIndex": null' not in text
    # The planner orders the dumped file's definitions exactly as it ordered the original's.
    again = parse_lineup(text.encode(), source="again.json")
    before = plan_import(lineup, InstanceState()).channels[0].definitions
    after = plan_import(again, InstanceState()).channels[0].definitions
    assert [d.sort_index for d in after] == [d.sort_index for d in before]


@pytest.mark.parametrize(
    ("node", "path", "words"),
    [
        (condition("title", "gte", "A"), ".filter.op", "'gte' is not allowed"),
        (condition("year", "is", ""), ".filter.value", "needs a number"),
        (condition("hdr", "is", "maybe"), ".filter.value", '"true" or "false"'),
        (condition("titel", "is", "A"), ".filter.field", "did you mean 'title'"),
        ({**condition("genre", "is", "Drama"), "id": 5}, ".filter.id", "string or null"),
        ({"type": "group", "id": ["x"], "children": []}, ".filter.id", "string or null"),
    ],
)
def test_everything_else_stays_strict(node: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(LineupFileError) as caught:
        parse_lineup(lineup_of(filtered(["movie"], node)), source="strict.json")

    (issue,) = caught.value.issues
    assert issue.path == FILTER + path
    assert words in issue.message
