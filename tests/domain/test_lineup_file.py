"""Tests for lineup file v1: parsing, every refusal with its path, dumping and the JSON Schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airwave_dagster.domain.errors import AirwaveError, LineupFileError
from airwave_dagster.domain.filters import SORT_FIELDS
from airwave_dagster.domain.lineup_file import (
    MAX_LINEUP_BYTES,
    SORT_FIELD_NAMES,
    LineupChannel,
    LineupFile,
    dump_lineup,
    has_visible,
    lineup_json_schema,
    normalise_callsign,
    parse_lineup,
)
from tests.domain.test_filters import valid_envelopes

LINEUPS = Path(__file__).parent.parent / "data" / "lineups"
SPEC_EXAMPLE = LINEUPS / "spec_example.json"


def refusal(data: bytes, source: str = "upload.json") -> LineupFileError:
    with pytest.raises(LineupFileError) as caught:
        parse_lineup(data, source=source)
    return caught.value


def document(**overrides: object) -> dict[str, Any]:
    base: dict[str, Any] = {"version": 1, "packages": [], "channels": []}
    base.update(overrides)
    return base


def channel(**overrides: object) -> dict[str, Any]:
    base: dict[str, Any] = {"number": 1, "name": "One"}
    base.update(overrides)
    return base


def predicate(plex_filter: object, **overrides: object) -> dict[str, Any]:
    base: dict[str, Any] = {"kind": "PREDICATE", "plexFilter": plex_filter}
    base.update(overrides)
    return base


def encode(value: object) -> bytes:
    return json.dumps(value).encode()


def test_spec_example_parses() -> None:
    lineup = parse_lineup(SPEC_EXAMPLE.read_bytes(), source=SPEC_EXAMPLE.name)
    assert lineup.version == 1
    assert lineup.exported_at == "2026-08-10T21:14:03.512Z"
    assert [p.key for p in lineup.packages] == ["late-night", "family-room", "time-machine"]
    assert [c.number for c in lineup.channels] == [101, 102, 103, 201, 202, 203, 301, 302, 101]
    first = lineup.channels[0]
    assert first.callsign == "MIDNT"
    assert first.package_key == "late-night"
    assert first.definitions[0].plex_library_title == "Movies"
    assert first.definitions[0].plex_filter is not None
    assert first.definitions[0].plex_filter["filter"]["id"] == "g1"
    assert lineup.channels[4].definitions[1].kind == "PLEX_COLLECTION"
    assert lineup.channels[5].definitions[0].manual_item_keys == ["90211", "90212", "90377"]
    assert lineup.channels[8].enabled is False
    assert lineup.channels[8].package_key is None


def test_defaults_extras_and_whole_library_predicates() -> None:
    path = LINEUPS / "valid" / "defaults_and_extras.json"
    lineup = parse_lineup(path.read_bytes(), source=path.name)
    everything, nothing, bare = lineup.channels
    assert everything.callsign == "CH7NEW"
    assert everything.ordering == "SHUFFLE"
    assert (everything.sort_field, everything.sort_dir) == ("title", "asc")
    assert everything.bumper_mode == "INHERIT"
    assert everything.enabled is True
    assert everything.sort_index == 0
    assert [d.plex_filter for d in everything.definitions] == [None, None]
    assert [d.mode for d in everything.definitions] == ["INCLUDE", "INCLUDE"]
    assert nothing.callsign is None
    assert nothing.definitions[0].plex_playlist_key == "77"
    assert bare.definitions == []
    assert lineup.packages[0].sort_index is None


def test_minimal_file_and_bom_are_accepted() -> None:
    data = (LINEUPS / "valid" / "minimal.json").read_bytes()
    assert parse_lineup(data, source="minimal.json") == LineupFile(
        version=1, packages=[], channels=[]
    )
    assert parse_lineup(b"\xef\xbb\xbf" + data, source="bom.json").channels == []


INVALID_FIXTURES: list[tuple[str, list[tuple[str, list[str]]]]] = [
    ("version_2.json", [("$.version", ["unsupported lineup file version 2", "version 1"])]),
    ("trailing_comma.json", [("$", ["not valid JSON", "line 5, column 1"])]),
    ("latin1.json", [("$", ["not UTF-8", "0xe9", "byte offset 75", "line 2"])]),
    (
        "wrong_kind_case.json",
        [("$.channels[0].definitions[0].kind", ["'predicate'", "did you mean 'PREDICATE'"])],
    ),
    (
        "unknown_package_key.json",
        [
            ("$.channels[0].packageKey", ["'late_night'", "did you mean 'late-night'"]),
            ("$.packages", ["the file's package keys", "'late-night'"]),
        ],
    ),
    (
        "duplicate_package_keys.json",
        [("$.packages[2].key", ["duplicate package key 'kids'", "$.packages[0]"])],
    ),
    (
        "bad_filter.json",
        [
            (
                "$.channels[2].definitions[0].plexFilter.filter.children[1].op",
                ["'contains' is not allowed", "'year' (int)", "is, gte, lte"],
            ),
            (
                "$.channels[2].definitions[0].plexFilter.filter.children[2].value",
                ["real date", "'1999-02-30'"],
            ),
            (
                "$.channels[2].definitions[0].plexFilter.filter.children[3].field",
                ["unknown field 'genres'", "did you mean 'genre'"],
            ),
        ],
    ),
    (
        "many_problems.json",
        [
            ("$.packages[0].key", ["missing required key 'key'"]),
            ("$.channels[0].ordering", ["'shuffle'", "did you mean 'SHUFFLE'", "'IN_ORDER'"]),
            ("$.channels[1].number", ["whole number", "number 5.5"]),
            ("$.channels[1].name", ["visible character", "string ''"]),
            ("$.channels[1].sortDir", ["'descending'", "allowed: 'asc', 'desc'"]),
            ("$.channels[2].number", ["missing required key 'number'"]),
            ("$.channels[2].bumperMode", ["'ON'", "'INTERSTITIAL_ONLY'"]),
            ("$.channels[2].definitions[0].mode", ["did you mean 'INCLUDE'", "'EXCLUDE'"]),
        ],
    ),
]


@pytest.mark.parametrize(("name", "expected"), INVALID_FIXTURES)
def test_invalid_fixture_files_are_refused_with_every_problem(
    name: str, expected: list[tuple[str, list[str]]]
) -> None:
    path = LINEUPS / "invalid" / name
    error = refusal(path.read_bytes(), source=str(path))
    assert [issue.path for issue in error.issues] == [path_ for path_, _ in expected]
    text = str(error)
    assert text.startswith(f"lineup file {str(path)!r} is invalid ({len(expected)} problem")
    for issue, (json_path, fragments) in zip(error.issues, expected, strict=True):
        assert f"\n  {json_path}: {issue.message}" in text
        for fragment in fragments:
            assert fragment in issue.message, (fragment, issue.message)


INVALID_DOCUMENTS: list[tuple[object, str, list[str]]] = [
    ([], "$", ["top level must be an object", "an array"]),
    ("lineup", "$", ["top level must be an object", "string 'lineup'"]),
    ({"packages": [], "channels": []}, "$.version", ["missing required key 'version'", "1"]),
    (document(version=0), "$.version", ["unsupported lineup file version 0"]),
    (document(version="1"), "$.version", ["the integer 1", "string '1'"]),
    (document(version=1.0), "$.version", ["the integer 1", "number 1.0"]),
    (document(version=True), "$.version", ["the integer 1", "boolean true"]),
    (document(version=None), "$.version", ["the integer 1", "null"]),
    (document(exportedAt=17), "$.exportedAt", ["ISO-8601 string or null", "number 17"]),
    ({"version": 1, "channels": []}, "$.packages", ["missing required key 'packages'"]),
    ({"version": 1, "packages": []}, "$.channels", ["missing required key 'channels'"]),
    (document(packages={}), "$.packages", ["must be an array", "an object"]),
    (document(channels=None), "$.channels", ["must be an array", "null"]),
    (document(packages=["news"]), "$.packages[0]", ["a package must be an object"]),
    (document(packages=[{}]), "$.packages[0].key", ["missing required key 'key'"]),
    (document(packages=[{"key": "k"}]), "$.packages[0].name", ["missing required key 'name'"]),
    (document(packages=[{"key": " ", "name": "N"}]), "$.packages[0].key", ["visible"]),
    (document(packages=[{"key": 3, "name": "N"}]), "$.packages[0].key", ["number 3"]),
    (
        document(packages=[{"key": "k", "name": "N", "sortIndex": "2"}]),
        "$.packages[0].sortIndex",
        ["whole number", "string '2'"],
    ),
    (
        document(packages=[{"key": "k", "name": "N", "tint": 5}]),
        "$.packages[0].tint",
        ["a string or null", "number 5"],
    ),
    (document(channels=[7]), "$.channels[0]", ["a channel must be an object", "number 7"]),
    (document(channels=[{"name": "x"}]), "$.channels[0].number", ["missing required key"]),
    (document(channels=[{"number": 1}]), "$.channels[0].name", ["missing required key 'name'"]),
    (
        document(channels=[channel(number=-(2**31) - 1)]),
        "$.channels[0].number",
        ["from -2147483648", "number -2147483649"],
    ),
    (document(channels=[channel(number="5")]), "$.channels[0].number", ["string '5'"]),
    (document(channels=[channel(number=True)]), "$.channels[0].number", ["boolean true"]),
    (document(channels=[channel(number=2**31)]), "$.channels[0].number", ["2147483647"]),
    (document(channels=[channel(name=None)]), "$.channels[0].name", ["visible", "null"]),
    (document(channels=[channel(callsign=7)]), "$.channels[0].callsign", ["string or null"]),
    (document(channels=[channel(enabled="yes")]), "$.channels[0].enabled", ["true or false"]),
    (document(channels=[channel(sortIndex=1.5)]), "$.channels[0].sortIndex", ["whole number"]),
    (document(channels=[channel(ordering="RANDOM")]), "$.channels[0].ordering", ["'SHUFFLE'"]),
    (document(channels=[channel(sortDir="DESC")]), "$.channels[0].sortDir", ["'desc'"]),
    (document(channels=[channel(sortField=None)]), "$.channels[0].sortField", ["a string"]),
    (document(channels=[channel(packageKey=1)]), "$.channels[0].packageKey", ["string or null"]),
    (
        document(channels=[channel(packageKey="kids")]),
        "$.channels[0].packageKey",
        ["'kids' names no package of this file"],
    ),
    (document(channels=[channel(definitions={})]), "$.channels[0].definitions", ["an array"]),
    (
        document(channels=[channel(definitions=["PREDICATE"])]),
        "$.channels[0].definitions[0]",
        ["a definition must be an object"],
    ),
    (
        document(channels=[channel(definitions=[{"mode": "INCLUDE"}])]),
        "$.channels[0].definitions[0].kind",
        ["missing required key 'kind'", "'PREDICATE', 'PLEX_COLLECTION'"],
    ),
    (
        document(channels=[channel(definitions=[{"kind": "FILTER"}])]),
        "$.channels[0].definitions[0].kind",
        ["unknown definition kind 'FILTER'", "'MANUAL_ITEMS'"],
    ),
    (
        document(channels=[channel(definitions=[{"kind": "plex_playlist"}])]),
        "$.channels[0].definitions[0].kind",
        ["did you mean 'PLEX_PLAYLIST'"],
    ),
    (
        document(channels=[channel(definitions=[predicate(None, sortIndex="0")])]),
        "$.channels[0].definitions[0].sortIndex",
        ["whole number"],
    ),
    (
        document(channels=[channel(definitions=[predicate(None, plexLibraryTitle=["Movies"])])]),
        "$.channels[0].definitions[0].plexLibraryTitle",
        ["string or null", "an array"],
    ),
    (
        document(channels=[channel(definitions=[predicate(None, manualItemKeys=[1])])]),
        "$.channels[0].definitions[0].manualItemKeys",
        ["an array of strings"],
    ),
    (
        document(channels=[channel(definitions=[predicate("genre=Horror")])]),
        "$.channels[0].definitions[0].plexFilter",
        ["plexFilter must be an object", "string 'genre=Horror'"],
    ),
    (
        document(channels=[channel(definitions=[{"kind": "MANUAL_ITEMS", "plexFilter": 3}])]),
        "$.channels[0].definitions[0].plexFilter",
        ["object or null", "number 3"],
    ),
    (
        document(
            channels=[
                channel(),
                channel(
                    definitions=[
                        predicate({"mediaTypes": ["movie"]}),
                        predicate({"filter": {"type": "group", "combinator": "both"}}),
                    ]
                ),
            ]
        ),
        "$.channels[1].definitions[1].plexFilter.filter.combinator",
        ["'and' or 'or'", "'both'"],
    ),
]


@pytest.mark.parametrize(("raw", "json_path", "fragments"), INVALID_DOCUMENTS)
def test_bad_documents_are_refused_naming_file_path_and_problem(
    raw: object, json_path: str, fragments: list[str]
) -> None:
    error = refusal(encode(raw), source="uploads/friday.json")
    assert [issue.path for issue in error.issues][:1] == [json_path]
    message = error.issues[0].message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "lineup file 'uploads/friday.json' is invalid" in str(error)
    assert f"{json_path}: {message}" in str(error)


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (b"", ["empty"]),
        (b"  \n", ["empty"]),
        (b'{"version": 1,\n "packages": [\n', ["not valid JSON", "line 3, column 1"]),
        (b"{'version': 1}", ["not valid JSON", "line 1, column 2"]),
        (b'{"version": 1, "packages": [], "channels": []} trailing', ["Extra data"]),
        (b'{"a": "\xff"}', ["not UTF-8", "0xff", "byte offset 7", "line 1"]),
        (b"\xef\xbb\xbf\n\n\xc3(", ["not UTF-8", "0xc3", "byte offset 5", "line 3"]),
        (b"[" * 100_000 + b"]" * 100_000, ["too deeply"]),
    ],
)
def test_unreadable_files_are_refused(data: bytes, fragments: list[str]) -> None:
    error = refusal(data, source="bad.json")
    assert [issue.path for issue in error.issues] == ["$"]
    for fragment in fragments:
        assert fragment in error.issues[0].message
    assert str(error).startswith("lineup file 'bad.json' is invalid (1 problem):\n  $: ")


def test_files_over_10_mb_are_refused_before_parsing() -> None:
    data = b" " * MAX_LINEUP_BYTES + b"{}"
    error = refusal(data)
    assert "limited to 10,485,760 bytes (10 MB)" in error.issues[0].message
    parse_lineup(encode(document()).ljust(MAX_LINEUP_BYTES), source="exactly-the-limit.json")


def test_non_standard_json_constants_and_repeated_keys_are_refused() -> None:
    data = (
        b'{"version": 1, "packages": [], "channels": [{"number": NaN, "name": "a", '
        b'"name": "b", "definitions": [{"kind": "PREDICATE", "plexFilter": {"filter": '
        b'{"type": "condition", "field": "year", "op": "is", "value": "1", "value": "2"}, '
        b'"x y": Infinity}}]}]}'
    )
    error = refusal(data)
    assert [(issue.path, issue.message) for issue in error.issues] == [
        ("$.channels[0].number", "NaN is not valid JSON; numbers must be finite"),
        ("$.channels[0].name", "key 'name' appears more than once in the same object"),
        (
            "$.channels[0].definitions[0].plexFilter.filter.value",
            "key 'value' appears more than once in the same object",
        ),
        (
            '$.channels[0].definitions[0].plexFilter["x y"]',
            "Infinity is not valid JSON; numbers must be finite",
        ),
    ]


def test_snake_case_keys_in_a_file_are_unknown_keys() -> None:
    raw = document(channels=[channel(sort_field="bogus", sortDir="desc", package_key="nope")])
    (parsed,) = parse_lineup(encode(raw), source="snake.json").channels
    assert (parsed.sort_field, parsed.sort_dir, parsed.package_key) == ("title", "desc", None)


def test_absurd_nesting_is_refused_with_its_path() -> None:
    deep: object = "bottom"
    for _ in range(120):
        deep = [deep]
    raw = document(channels=[channel(definitions=[{"kind": "MANUAL_ITEMS", "junk": deep}])])
    error = refusal(encode(raw))
    assert [issue.path for issue in error.issues] == [
        "$.channels[0].definitions[0].junk" + "[0]" * 96
    ]
    assert "nested more than 100 levels deep" in error.issues[0].message


def test_lineup_file_error_is_an_airwave_error() -> None:
    error = refusal(b"[]", source="x.json")
    assert isinstance(error, AirwaveError)
    assert error.source == "x.json"


def test_predicate_without_filter_is_allowed() -> None:
    lineup = parse_lineup(
        encode(document(channels=[channel(definitions=[predicate(None), {"kind": "PREDICATE"}])])),
        source="whole.json",
    )
    assert [d.plex_filter for d in lineup.channels[0].definitions] == [None, None]


def test_non_predicate_filters_are_not_validated() -> None:
    junk = {"filter": {"type": "nonsense"}}
    lineup = parse_lineup(
        encode(document(channels=[channel(definitions=[{"kind": "PLEX_COLLECTION",
                                                        "plexFilter": junk}])])),
        source="junk.json",
    )  # fmt: skip
    assert lineup.channels[0].definitions[0].plex_filter == junk


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, None),
        ("", None),
        ("!!!", None),
        ("midnt", "MIDNT"),
        ("Ch 7-News", "CH7NEW"),
        ("abcdefgh", "ABCDEF"),
        ("straße", "STRASS"),
        ("  k9  ", "K9"),
        ("ÉTÉ1", "T1"),
    ],
)
def test_normalise_callsign(raw: str | None, expected: str | None) -> None:
    assert normalise_callsign(raw) == expected
    assert LineupChannel(number=1, name="x", callsign=raw).callsign == expected


def test_dump_writes_every_key_in_camel_case_never_a_null_time_or_index() -> None:
    lineup = parse_lineup(encode(document(
        packages=[{"key": "k", "name": "K"}],
        channels=[channel(packageKey="k", definitions=[{"kind": "MANUAL_ITEMS"}])],
    )), source="x.json")  # fmt: skip
    now = datetime(2026, 12, 1, 19, 30, 5, 123456, tzinfo=UTC)
    dumped = json.loads(dump_lineup(lineup, now=now))
    assert dumped == {
        "version": 1,
        "exportedAt": "2026-12-01T19:30:05.123Z",
        "packages": [
            {
                "key": "k",
                "name": "K",
                "description": None,
                "icon": None,
                "tint": None,
                "sortIndex": 0,
            }
        ],
        "channels": [
            {
                "number": 1,
                "name": "One",
                "callsign": None,
                "description": None,
                "icon": None,
                "tint": None,
                "enabled": True,
                "sortIndex": 0,
                "ordering": "SHUFFLE",
                "sortField": "title",
                "sortDir": "asc",
                "bumperMode": "INHERIT",
                "packageKey": "k",
                "definitions": [
                    {
                        "kind": "MANUAL_ITEMS",
                        "mode": "INCLUDE",
                        "sortIndex": 0,
                        "plexFilter": None,
                        "plexLibraryTitle": None,
                        "plexCollectionKey": None,
                        "plexPlaylistKey": None,
                        "manualItemKeys": [],
                    }
                ],
            }
        ],
    }


def test_spec_example_round_trips_through_dump() -> None:
    lineup = parse_lineup(SPEC_EXAMPLE.read_bytes(), source="spec_example.json")
    text = dump_lineup(lineup)
    assert text.endswith("}\n")
    assert parse_lineup(text.encode(), source="again.json") == lineup
    # Every key of the original file is written back with the same value.
    assert json.loads(text) == json.loads(SPEC_EXAMPLE.read_bytes())


def test_dump_keeps_non_ascii_text() -> None:
    lineup = LineupFile(version=1, packages=[], channels=[LineupChannel(number=1, name="Café ☕")])
    assert '"Café ☕"' in dump_lineup(lineup)


def test_json_schema_is_camel_case_and_lists_value_sets() -> None:
    schema = lineup_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["required"]) == {"version", "packages", "channels"}
    assert schema["properties"]["version"]["const"] == 1
    assert "exportedAt" in schema["properties"]
    channel_schema = schema["$defs"]["LineupChannel"]
    assert set(channel_schema["required"]) == {"number", "name"}
    assert {"sortField", "sortDir", "bumperMode", "packageKey"} <= set(channel_schema["properties"])
    assert channel_schema["properties"]["sortField"]["enum"] == list(SORT_FIELDS)
    assert channel_schema["properties"]["number"]["minimum"] == -(2**31)
    definition_schema = schema["$defs"]["LineupDefinition"]
    assert definition_schema["required"] == ["kind"]
    assert definition_schema["properties"]["kind"]["enum"] == [
        "PREDICATE",
        "PLEX_COLLECTION",
        "PLEX_PLAYLIST",
        "MANUAL_ITEMS",
    ]
    assert "plexFilter" in definition_schema["properties"]
    json.dumps(schema)


def test_sort_field_names_match_the_filter_module() -> None:
    assert list(SORT_FIELD_NAMES) == list(SORT_FIELDS)


# Postgres stores no NUL nor a lone surrogate, and a name must show something (all refused by
# parse_lineup; `characters` draws surrogates unless their category is excluded).
_STORABLE = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
_TEXT = st.text(_STORABLE, min_size=1, max_size=12).filter(has_visible)


@st.composite
def lineups(draw: st.DrawFn) -> dict[str, Any]:
    """Random valid lineup documents whose PREDICATE filters are random valid trees."""
    keys = draw(st.lists(_TEXT, max_size=3, unique=True))
    packages = [{"key": key, "name": draw(_TEXT), "sortIndex": draw(st.none() | st.integers(0, 9))}
                for key in keys]  # fmt: skip
    channels = []
    for _ in range(draw(st.integers(0, 4))):
        definitions = [
            {
                "kind": draw(st.sampled_from(["PREDICATE", "PREDICATE", "PLEX_COLLECTION"])),
                "mode": draw(st.sampled_from(["INCLUDE", "EXCLUDE"])),
                "plexFilter": draw(st.none() | valid_envelopes()),
                "plexLibraryTitle": draw(st.none() | _TEXT),
            }
            for _ in range(draw(st.integers(0, 3)))
        ]
        channels.append(
            {
                "number": draw(st.integers(1, 999)),
                "name": draw(_TEXT),
                "callsign": draw(st.none() | st.text(_STORABLE, max_size=8)),
                "ordering": draw(st.sampled_from(["SHUFFLE", "IN_ORDER", "BY_AIR_DATE"])),
                "sortField": draw(st.sampled_from(list(SORT_FIELDS))),
                "packageKey": draw(st.sampled_from([None, *keys])),
                "definitions": definitions,
            }
        )
    return document(packages=packages, channels=channels)


@settings(max_examples=60, deadline=None)
@given(lineups())
def test_generated_lineups_survive_parse_dump_parse(raw: dict[str, Any]) -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    lineup = parse_lineup(encode(raw), source="generated.json")
    again = parse_lineup(dump_lineup(lineup, now=now).encode(), source="dumped.json")
    # The dump fills a missing time and sort indexes; everything else comes back unchanged.
    assert again.model_dump(exclude={"exported_at"}) == lineup.model_copy(
        update={"exported_at": None}
    ).model_dump(exclude={"exported_at"}) or _only_indexes_filled(lineup, again)
    assert dump_lineup(again, now=now) == dump_lineup(lineup, now=now)
    assert again.exported_at is not None


_LINEUP_WORDS = st.sampled_from(
    ["PREDICATE", "predicate", "SHUFFLE", "INCLUDE", "asc", "title", "k", "", "group", "genre"]
)
_NEAR_LINEUPS = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 3) | st.floats(allow_nan=False) | _LINEUP_WORDS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(
        st.sampled_from(
            ["version", "packages", "channels", "key", "name", "number", "packageKey", "kind",
             "definitions", "plexFilter", "mode", "sortIndex", "callsign", "filter", "type"]
        ),
        inner,
        max_size=6,
    ),
    max_leaves=30,
)  # fmt: skip


@settings(deadline=None)
@given(st.one_of(_NEAR_LINEUPS.map(encode), st.binary(max_size=64)))
def test_parse_lineup_only_ever_raises_lineup_file_error(data: bytes) -> None:
    try:
        lineup = parse_lineup(data, source="fuzz.json")
    except LineupFileError as error:
        assert error.issues
        assert all(issue.path.startswith("$") and issue.message for issue in error.issues)
    else:
        assert parse_lineup(dump_lineup(lineup).encode(), source="again.json") == lineup


def _only_indexes_filled(before: LineupFile, after: LineupFile) -> bool:
    """Whether `after` is `before` with only None sort indexes replaced."""
    left = before.model_dump()
    right = after.model_dump()
    for package_before, package_after in zip(left["packages"], right["packages"], strict=True):
        if package_before["sort_index"] is None:
            package_before["sort_index"] = package_after["sort_index"]
    for channel_before, channel_after in zip(left["channels"], right["channels"], strict=True):
        pairs = zip(channel_before["definitions"], channel_after["definitions"], strict=True)
        for definition_before, definition_after in pairs:
            if definition_before["sort_index"] is None:
                definition_before["sort_index"] = definition_after["sort_index"]
    left["exported_at"] = right["exported_at"]
    return left == right
