"""Tests for the filter language: catalog, validation, canonical JSON, local evaluation, sorting."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from airwave_dagster.domain.errors import FilterError
from airwave_dagster.domain.filters import (
    ALLOWED_OPS,
    FIELDS,
    MAX_FILTER_DEPTH,
    SORT_FIELDS,
    Condition,
    FilterEnvelope,
    Group,
    LibraryFields,
    OfferedFields,
    canonical_json,
    evaluate,
    parse_filter,
    plex_sort,
    validate_filter,
)
from airwave_dagster.domain.library import MediaItem

PATH = "$.channels[3].definitions[0].plexFilter"


def cond(field: object, op: str, value: object, **extra: object) -> dict[str, object]:
    return {"type": "condition", "field": field, "op": op, "value": value, **extra}


def group(*children: object, **extra: object) -> dict[str, object]:
    return {"type": "group", "children": list(children), **extra}


def envelope(node: object, media_types: object = ("movie", "show")) -> dict[str, object]:
    return {
        "mediaTypes": list(media_types) if isinstance(media_types, tuple) else media_types,
        "filter": node,
    }


def test_catalog_has_the_38_fields_of_the_spec() -> None:
    assert len(FIELDS) == 38
    assert all(spec.name == name for name, spec in FIELDS.items())
    assert all(spec.kind in ALLOWED_OPS for spec in FIELDS.values())
    assert {name for name, spec in FIELDS.items() if spec.local} == {
        "title", "episodeTitle", "genre", "studio", "director", "actor", "contentRating",
        "resolution", "year", "decade", "audienceRating", "criticRating", "duration",
        "releaseDate", "hdr", "dovi", "episodeYear",
    }  # fmt: skip
    assert {name for name, spec in FIELDS.items() if spec.applies == {"show"}} == {
        "episodeTitle", "network", "unwatchedLeaves", "episodeYear",
    }  # fmt: skip
    assert {name for name, spec in FIELDS.items() if spec.applies == {"movie"}} == {"duration"}


@pytest.mark.parametrize(
    ("name", "kind", "plex_name", "tv_level"),
    [
        ("criticRating", "int", "rating", "show"),
        ("episodeYear", "int", "year", "episode"),
        ("releaseDate", "date", "originallyAvailableAt", "episode"),
        ("addedWithin", "recency", "addedAt", "episode"),
        ("resolution", "tag", "resolution", "episode"),
        ("unwatchedLeaves", "bool", "unwatchedLeaves", "show"),
        ("title", "text", "title", "show"),
    ],
)
def test_catalog_entries_match_the_spec(
    name: str, kind: str, plex_name: str, tv_level: str
) -> None:
    spec = FIELDS[name]
    assert (spec.kind, spec.plex_name, spec.tv_level) == (kind, plex_name, tv_level)
    assert spec.label


def test_allowed_ops_per_kind() -> None:
    assert ALLOWED_OPS == {
        "tag": {"is", "isNot"},
        "string": {"is", "isNot"},
        "text": {"contains", "notContains"},
        "int": {"is", "gte", "lte"},
        "date": {"gte", "lte"},
        "recency": {"is"},
        "bool": {"is"},
    }


def test_envelope_parses_the_spec_tree_ignoring_unknown_keys() -> None:
    raw = {
        "mediaTypes": ["show"],
        "uiState": {"expanded": True},
        "filter": group(
            cond("genre", "is", "Animation", id="c1", uiColour="red"),
            group(cond("contentRating", "is", "TV-Y"), combinator="or"),
            id="g1",
            combinator="and",
        ),
    }
    parsed = FilterEnvelope.model_validate(raw)
    assert parsed.media_types == ["show"]
    assert isinstance(parsed.filter, Group)
    assert parsed.filter.id == "g1"
    first, second = parsed.filter.children
    assert first == Condition(type="condition", id="c1", field="genre", op="is", value="Animation")
    assert isinstance(second, Group)
    assert second.combinator == "or"


def test_envelope_defaults_and_population_by_name() -> None:
    bare = FilterEnvelope.model_validate({})
    assert bare.filter is None
    assert bare.effective_media_types == ("movie", "show")
    by_name = FilterEnvelope(media_types=["movie", "movie"], filter=None)
    assert by_name.effective_media_types == ("movie",)
    assert Group.model_validate({"type": "group", "children": []}).combinator == "and"


def test_envelope_refuses_a_non_string_value() -> None:
    with pytest.raises(ValidationError):
        FilterEnvelope.model_validate({"filter": cond("year", "is", 1990)})


VALID_ENVELOPES: list[object] = [
    {},
    {"mediaTypes": []},
    {"mediaTypes": ["movie"], "filter": None},
    envelope(cond("decade", "is", "1980")),
    envelope(group(), ("show",)),
    envelope(group(combinator="or")),
    envelope(cond("audienceRating", "gte", "7.5")),
    envelope(cond("year", "lte", "-12")),
    envelope(cond("releaseDate", "lte", "2024-02-29")),
    envelope(cond("addedWithin", "is", "0")),
    envelope(cond("unwatched", "is", "false")),
    envelope(cond("duration", "lte", "110"), ("movie",)),
    envelope(cond("duration", "lte", "110")),
    envelope(cond("episodeTitle", "notContains", "")),
    envelope(group(group(group(cond("genre", "isNot", "Horror"))), id="root")),
]


@pytest.mark.parametrize("raw", VALID_ENVELOPES)
def test_validate_filter_accepts_valid_envelopes(raw: object) -> None:
    assert validate_filter(raw, path=PATH) == []
    assert isinstance(parse_filter(raw, path=PATH), FilterEnvelope)


INVALID_ENVELOPES: list[tuple[object, str, list[str]]] = [
    (["movie"], "", ["must be an object", "an array"]),
    ({"mediaTypes": "movie"}, ".mediaTypes", ["must be an array", "'movie', 'show'"]),
    ({"mediaTypes": ["movie", "shows"]}, ".mediaTypes[1]", ["'shows'", "did you mean 'show'"]),
    ({"mediaTypes": ["episode"]}, ".mediaTypes[0]", ["unknown media type", "'movie', 'show'"]),
    (envelope("genre=Horror"), ".filter", ["node must be an object", "string 'genre=Horror'"]),
    (envelope({"field": "genre"}), ".filter.type", ["missing 'type'", "'condition' or 'group'"]),
    (envelope({"type": "rule"}), ".filter.type", ["unknown node type", "'rule'"]),
    (envelope({"type": "Group", "children": []}), ".filter.type", ["did you mean 'group'"]),
    (envelope({"type": "group"}), ".filter.children", ["needs a 'children' array"]),
    (envelope({"type": "group", "children": {}}), ".filter.children", ["must be an array"]),
    (envelope(group(combinator="AND")), ".filter.combinator", ["'and' or 'or'", "'AND'"]),
    (envelope(group(combinator="xor")), ".filter.combinator", ["'and' or 'or'", "'xor'"]),
    (envelope(group(combinator=None)), ".filter.combinator", ["got null"]),
    (envelope(cond("genres", "is", "x")), ".filter.field", ["unknown field 'genres'", "'genre'"]),
    (envelope(cond("zzzz", "is", "x")), ".filter.field", ["unknown field 'zzzz'", "releaseDate"]),
    (envelope({"type": "condition", "op": "is", "value": "x"}), ".filter.field", ["missing"]),
    (envelope(cond(7, "is", "x")), ".filter.field", ["must be a string", "number 7"]),
    (envelope(cond("genre", "gte", "x")), ".filter.op", ["'gte' is not allowed", "is, isNot"]),
    (envelope(cond("year", "contains", "1")), ".filter.op", ["'year' (int)", "is, gte, lte"]),
    (envelope(cond("releaseDate", "is", "2020-01-01")), ".filter.op", ["gte, lte"]),
    (envelope(cond("genre", "equals", "x")), ".filter.op", ["unknown operator", "is, isNot"]),
    (envelope(cond("genre", "isnot", "x")), ".filter.op", ["did you mean 'isNot'"]),
    (envelope({"type": "condition", "field": "genre", "value": "x"}), ".filter.op", ["missing"]),
    (envelope(cond("year", "is", 1990)), ".filter.value", ["must be a string", '"1990"']),
    (envelope(cond("unwatched", "is", True)), ".filter.value", ["boolean true"]),
    (envelope({"type": "condition", "field": "year", "op": "is"}), ".filter.value", ["missing"]),
    (envelope(cond("year", "is", "nineteen")), ".filter.value", ["a number", "'nineteen'"]),
    (envelope(cond("year", "is", "1990 ")), ".filter.value", ["a number"]),
    (envelope(cond("audienceRating", "gte", "NaN")), ".filter.value", ["a number"]),
    (envelope(cond("releaseDate", "lte", "1999-02-30")), ".filter.value", ["real date"]),
    (envelope(cond("releaseDate", "lte", "31/12/1969")), ".filter.value", ["YYYY-MM-DD"]),
    (envelope(cond("addedWithin", "is", "-3")), ".filter.value", ["whole number of days"]),
    (envelope(cond("addedWithin", "is", "2.5")), ".filter.value", ["whole number of days"]),
    (envelope(cond("hdr", "is", "1")), ".filter.value", ['"true" or "false"', "'1'"]),
    (envelope(cond("hdr", "is", "TRUE")), ".filter.value", ['"true" or "false"']),
    (
        envelope(cond("duration", "lte", "90"), ("show",)),
        ".filter.field",
        ["'duration' only exists on movie libraries", "searches show"],
    ),
    (
        envelope(group(cond("genre", "is", "x"), cond("episodeYear", "is", "1990")), ("movie",)),
        ".filter.children[1].field",
        ["'episodeYear' only exists on show libraries"],
    ),
    (
        envelope(group(cond("genre", "is", "x"), group(cond("year", "is", "x")))),
        ".filter.children[1].children[0].value",
        ["field 'year' (int) needs a number"],
    ),
]


@pytest.mark.parametrize(("raw", "suffix", "fragments"), INVALID_ENVELOPES)
def test_validate_filter_reports_path_and_problem(
    raw: object, suffix: str, fragments: list[str]
) -> None:
    issues = validate_filter(raw, path=PATH)
    assert [issue.path for issue in issues] == [PATH + suffix]
    for fragment in fragments:
        assert fragment in issues[0].message


def test_validate_filter_reports_every_problem_in_document_order() -> None:
    raw = envelope(
        group(
            cond("genre", "gte", 5),
            {"type": "condition", "field": "nope"},
            group(cond("decade", "is", "eighties"), combinator="nor"),
        ),
        ("movie",),
    )
    paths = [issue.path.removeprefix(PATH) for issue in validate_filter(raw, path=PATH)]
    assert paths == [
        ".filter.children[0].op",
        ".filter.children[0].value",
        ".filter.children[1].field",
        ".filter.children[1].op",
        ".filter.children[1].value",
        ".filter.children[2].combinator",
        ".filter.children[2].children[0].value",
    ]


def test_validate_filter_limits_nesting() -> None:
    node: dict[str, object] = cond("genre", "is", "x")
    for _ in range(MAX_FILTER_DEPTH):
        node = group(node)
    issues = validate_filter(envelope(node), path="$")
    assert len(issues) == 1
    assert "nested deeper" in issues[0].message


def test_parse_filter_raises_with_every_issue() -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter(envelope(group(cond("genres", "is", "x"), cond("year", "is", "y"))))
    assert [issue.path for issue in caught.value.issues] == [
        "$.filter.children[0].field",
        "$.filter.children[1].value",
    ]
    assert "$.filter.children[0].field: unknown field 'genres'" in str(caught.value)


SPEC_301 = {
    "mediaTypes": ["movie", "show"],
    "filter": {"type": "condition", "field": "decade", "op": "is", "value": "1980"},
}


def test_canonical_json_matches_the_spec_example() -> None:
    assert canonical_json(SPEC_301) == (
        '{"filter":{"field":"decade","op":"is","type":"condition","value":"1980"},'
        '"mediaTypes":["movie","show"]}'
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "true"),
        ({"b": None, "a": False}, '{"a":false,"b":null}'),
        ([3, 2, 1], "[3,2,1]"),
        (1.0, "1"),
        (-0.0, "0"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (1.5e300, "1.5e+300"),
        (-2.5e-10, "-2.5e-10"),
        (123456789.125, "123456789.125"),
        (float("nan"), "null"),
        (2**53, "9007199254740992"),
        (2**53 + 1, "9007199254740992"),
        (10**30, "1e+30"),
        (-(10**400), "null"),
        ("é ☃ 😀", '"é ☃ 😀"'),
        ("\u2028", '"\u2028"'),
        ('"\\\n\t\r\b\f\x01\x7f', '"\\"\\\\\\n\\t\\r\\b\\f\\u0001\x7f"'),
        ("\ud800", '"\\ud800"'),
        # JavaScript compares UTF-16 code units: U+1F600 (D83D DE00) sorts before U+FFFF.
        ({"\uffff": 1, "\U0001f600": 2, "Z": 3, "a": 4}, '{"Z":3,"a":4,"😀":2,"\uffff":1}'),
        (("tuple", 1), '["tuple",1]'),
    ],
)
def test_canonical_json_prints_like_javascript(value: object, expected: str) -> None:
    assert canonical_json(value) == expected


@pytest.mark.parametrize("value", [{1: "int key"}, {"a": {1, 2}}, b"bytes"])
def test_canonical_json_refuses_non_json(value: object) -> None:
    with pytest.raises(TypeError):
        canonical_json(value)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def _reorder(value: Any, data: st.DataObject) -> Any:
    if isinstance(value, dict):
        keys = data.draw(st.permutations(list(value)))
        return {key: _reorder(value[key], data) for key in keys}
    if isinstance(value, list):
        return [_reorder(item, data) for item in value]
    return value


@given(JSON_VALUES)
def test_canonical_json_is_idempotent_and_valid_json(value: object) -> None:
    text = canonical_json(value)
    assert canonical_json(json.loads(text)) == text
    assert canonical_json(json.loads(json.dumps(value))) == text


@given(JSON_VALUES, st.data())
def test_canonical_json_ignores_key_order(value: object, data: st.DataObject) -> None:
    assert canonical_json(_reorder(value, data)) == canonical_json(value)


# No NUL: valid envelopes end up in lineup files, where Postgres could not store one.
_STORABLE = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
_VALUE_BY_KIND: dict[str, st.SearchStrategy[str]] = {
    "tag": st.text(_STORABLE, min_size=1, max_size=10),
    "string": st.text(_STORABLE, max_size=10),
    "text": st.text(_STORABLE, max_size=10),
    "int": st.from_regex(r"-?[0-9]{1,4}(\.[0-9]{1,2})?", fullmatch=True),
    "date": st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31)).map(dt.date.isoformat),
    "recency": st.integers(0, 3650).map(str),
    "bool": st.sampled_from(["true", "false"]),
}
_IDS = st.none() | st.text(_STORABLE, max_size=6)


def _with_id(node: dict[str, object], node_id: str | None) -> dict[str, object]:
    return node if node_id is None else {**node, "id": node_id}


@st.composite
def _conditions(draw: st.DrawFn, media_types: frozenset[str]) -> dict[str, object]:
    spec = draw(st.sampled_from([s for s in FIELDS.values() if s.applies & media_types]))
    op = draw(st.sampled_from(sorted(ALLOWED_OPS[spec.kind])))
    value = draw(_VALUE_BY_KIND[spec.kind])
    return _with_id(cond(spec.name, op, value), draw(_IDS))


@st.composite
def _groups(draw: st.DrawFn, children: st.SearchStrategy[dict[str, object]]) -> dict[str, object]:
    node = group(*draw(st.lists(children, max_size=4)))
    combinator = draw(st.sampled_from([None, "and", "or"]))
    if combinator is not None:
        node["combinator"] = combinator
    return _with_id(node, draw(_IDS))


@st.composite
def valid_envelopes(draw: st.DrawFn) -> dict[str, object]:
    """Random valid plexFilter envelopes, including absent mediaTypes and absent filters."""
    listed = draw(st.none() | st.lists(st.sampled_from(["movie", "show"]), max_size=2))
    searched = frozenset(listed or ("movie", "show"))
    tree = st.recursive(_conditions(searched), lambda children: _groups(children), max_leaves=8)
    raw: dict[str, object] = {} if listed is None else {"mediaTypes": listed}
    node = draw(st.none() | tree)
    if node is not None or draw(st.booleans()):
        raw["filter"] = node
    return raw


@given(valid_envelopes())
def test_validate_filter_accepts_every_generated_valid_tree(raw: dict[str, object]) -> None:
    assert validate_filter(raw, path="$") == []


@given(valid_envelopes())
def test_generated_trees_survive_parse_dump_parse(raw: dict[str, object]) -> None:
    parsed = FilterEnvelope.model_validate(raw)
    dumped = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert validate_filter(dumped, path="$") == []
    assert FilterEnvelope.model_validate(json.loads(json.dumps(dumped))) == parsed


MOVIE = MediaItem(
    rating_key="m1",
    type="movie",
    title="Alien",
    duration_ms=117 * 60000,
    year=1979,
    originally_available_at="1979-05-25",
    studio="20th Century Fox",
    content_rating="R",
    genres=("Horror", "Science Fiction", "Thriller", "Mystery", "Action", "Classic"),
    directors=("Ridley Scott",),
    cast=("Sigourney Weaver", "Tom Skerritt"),
    audience_rating=9.4,
    critic_rating=9.8,
    resolution="1080",
)
EPISODE = MediaItem(
    rating_key="e1",
    type="episode",
    title="The Crawling Eye",
    show_title="Mystery Science Theater 3000",
    duration_ms=95 * 60000,
    year=1988,
    originally_available_at="1988-11-24",
    genres=("Comedy",),
    content_rating="TV-PG",
    hdr="HDR10",
    dovi=True,
)


@pytest.mark.parametrize(
    ("node", "item", "expected"),
    [
        (None, MOVIE, True),
        (cond("title", "contains", "ALI"), MOVIE, True),
        (cond("title", "contains", "science"), EPISODE, True),
        (cond("title", "notContains", "science"), EPISODE, False),
        (cond("episodeTitle", "contains", "crawling"), EPISODE, True),
        (cond("episodeTitle", "contains", "science"), EPISODE, False),
        (cond("episodeTitle", "contains", "alien"), MOVIE, False),
        (cond("genre", "is", "classic"), MOVIE, True),
        (cond("genre", "isNot", "horror"), MOVIE, False),
        (cond("actor", "is", "tom skerritt"), MOVIE, True),
        (cond("director", "is", "Ridley"), MOVIE, False),
        (cond("studio", "is", "20th century fox"), MOVIE, True),
        (cond("studio", "isNot", "HBO"), EPISODE, True),
        (cond("contentRating", "is", "tv-pg"), EPISODE, True),
        (cond("resolution", "is", "1080"), MOVIE, True),
        (cond("resolution", "is", "1080p"), MOVIE, True),
        (cond("resolution", "isNot", "1080P"), MOVIE, False),
        (cond("resolution", "is", "720p"), MOVIE, False),
        (cond("resolution", "is", "4K"), MOVIE.model_copy(update={"resolution": "4k"}), True),
        (cond("resolution", "is", "SD"), MOVIE.model_copy(update={"resolution": "sd"}), True),
        (cond("year", "gte", "1979"), MOVIE, True),
        (cond("year", "lte", "1978.5"), MOVIE, False),
        (cond("year", "is", "1979"), MOVIE, True),
        (cond("year", "is", "1979"), EPISODE.model_copy(update={"year": None}), False),
        (cond("year", "is", "soon"), MOVIE, False),
        (cond("episodeYear", "is", "1988"), EPISODE, True),
        (cond("decade", "is", "1970"), MOVIE, True),
        (cond("decade", "is", "1980"), EPISODE, True),
        (cond("audienceRating", "gte", "9.4"), MOVIE, True),
        (cond("criticRating", "lte", "9"), MOVIE, False),
        (cond("criticRating", "gte", "1"), EPISODE, False),
        (cond("duration", "lte", "117"), MOVIE, True),
        (cond("duration", "lte", "116.9"), MOVIE, False),
        (cond("duration", "lte", "200"), EPISODE, False),
        (cond("hdr", "is", "true"), EPISODE, True),
        (cond("hdr", "is", "false"), MOVIE, True),
        (cond("hdr", "is", "0"), MOVIE, True),
        (cond("hdr", "is", "maybe"), MOVIE, False),
        (cond("dovi", "is", "true"), MOVIE, False),
        (cond("releaseDate", "lte", "1979-05-25"), MOVIE, True),
        (cond("releaseDate", "gte", "1979-05-26"), MOVIE, False),
        (cond("releaseDate", "gte", "someday"), MOVIE, False),
        (cond("releaseDate", "gte", "1900-01-01"), MOVIE.model_copy(
            update={"originally_available_at": None}), False),
        (cond("genre", "gte", "Horror"), MOVIE, False),
        (cond("label", "is", "anything"), MOVIE, False),
        (cond("label", "isNot", "anything"), MOVIE, False),
        (cond("unwatched", "is", "true"), MOVIE, False),
        (cond("noSuchField", "is", "x"), MOVIE, False),
        (group(), MOVIE, True),
        (group(combinator="or"), MOVIE, False),
        (group(cond("genre", "is", "Horror"), cond("year", "lte", "1970")), MOVIE, False),
        (group(cond("genre", "is", "Horror"), cond("year", "lte", "1970"), combinator="or"),
         MOVIE, True),
        (group(cond("genre", "is", "Comedy"), group(cond("decade", "is", "1980"),
               cond("title", "contains", "x"), combinator="or")), EPISODE, True),
    ],
)  # fmt: skip
def test_evaluate(node: dict[str, object] | None, item: MediaItem, expected: bool) -> None:
    parsed = None if node is None else FilterEnvelope.model_validate({"filter": node}).filter
    assert evaluate(parsed, item) is expected


@pytest.mark.parametrize(
    ("ordering", "sort_field", "sort_dir", "expected"),
    [
        ("SHUFFLE", "year", "desc", "titleSort:asc"),
        ("BY_AIR_DATE", "title", "asc", "originallyAvailableAt:desc"),
        ("IN_ORDER", "year", "desc", "year:desc"),
        ("IN_ORDER", "criticRating", "asc", "rating:asc"),
        ("IN_ORDER", "plays", "sideways", "viewCount:asc"),
        ("IN_ORDER", "resolution", "desc", "mediaHeight:desc"),
        ("IN_ORDER", "nonsense", "desc", "titleSort:desc"),
    ],
)
def test_plex_sort(ordering: str, sort_field: str, sort_dir: str, expected: str) -> None:
    assert plex_sort(ordering, sort_field, sort_dir) == expected


def test_sort_fields_match_the_spec_table() -> None:
    assert len(SORT_FIELDS) == 13
    assert SORT_FIELDS["releaseDate"] == "originallyAvailableAt"
    assert SORT_FIELDS["bitrate"] == "mediaBitrate"


_FILTER_WORDS = st.sampled_from(
    ["condition", "group", "and", "or", "AND", "genre", "year", "duration", "releaseDate",
     "hdr", "addedWithin", "is", "gte", "contains", "1990", "1990-01-01", "true", "30", "movie",
     "show", ""]
)  # fmt: skip
_NEAR_FILTERS = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | _FILTER_WORDS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "field",
                    "op",
                    "value",
                    "combinator",
                    "children",
                    "id",
                    "mediaTypes",
                    "filter",
                ]
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=25,
)


@given(_NEAR_FILTERS)
def test_whatever_validate_filter_accepts_loads_as_an_envelope(raw: object) -> None:
    if validate_filter(raw, path="$") == []:
        assert isinstance(FilterEnvelope.model_validate(raw), FilterEnvelope)
    else:
        with pytest.raises(FilterError):
            parse_filter(raw)


REAL_SERVER = OfferedFields(
    libraries={
        "1": LibraryFields(type="movie", fields=frozenset(FIELDS) - {"episodeTitle"}),
        "2": LibraryFields(
            type="show", fields=frozenset(FIELDS) - {"director", "dovi", "duration", "hdr"}
        ),
    }
)
"""A TV library without `director`/`dovi` (no real server offers them on episodes) and, as an
older server or a library without media analysis, without the optional `hdr` (issue 22)."""

DIRECTED_EPISODE = EPISODE.model_copy(update={"directors": ("Kevin Murphy",), "library_key": "2"})


@pytest.mark.parametrize(
    ("node", "item", "offered", "expected"),
    [
        (cond("director", "is", "Kevin Murphy"), DIRECTED_EPISODE, None, True),
        (cond("director", "is", "Kevin Murphy"), DIRECTED_EPISODE, REAL_SERVER, False),
        (cond("director", "isNot", "Someone Else"), DIRECTED_EPISODE, None, True),
        (cond("director", "isNot", "Someone Else"), DIRECTED_EPISODE, REAL_SERVER, False),
        (cond("dovi", "is", "true"), DIRECTED_EPISODE, REAL_SERVER, False),
        (cond("dovi", "is", "false"), DIRECTED_EPISODE, REAL_SERVER, False),
        (cond("hdr", "is", "true"), DIRECTED_EPISODE, REAL_SERVER, False),
        (cond("genre", "is", "comedy"), DIRECTED_EPISODE, REAL_SERVER, True),
        (group(cond("director", "is", "Kevin Murphy"), cond("genre", "is", "Comedy"),
               combinator="or"), DIRECTED_EPISODE, REAL_SERVER, True),
        (group(cond("director", "isNot", "x"), cond("genre", "is", "Comedy")),
         DIRECTED_EPISODE, REAL_SERVER, False),
        (cond("director", "is", "Ridley Scott"), MOVIE.model_copy(update={"library_key": "1"}),
         REAL_SERVER, True),
        # An item of a library the vocabulary does not know is judged by its type.
        (cond("director", "is", "Ridley Scott"), MOVIE, REAL_SERVER, True),
        (cond("director", "is", "Kevin Murphy"), EPISODE.model_copy(
            update={"directors": ("Kevin Murphy",)}), REAL_SERVER, False),
    ],
)  # fmt: skip
def test_evaluate_follows_the_servers_vocabulary(
    node: dict[str, object], item: MediaItem, offered: OfferedFields | None, expected: bool
) -> None:
    """Plex matches nothing on a filter field a library does not advertise, whatever the
    operator. python-plexapi validates filters against `LibrarySection.listFields(libtype)`
    (`_validateFilterField` raises NotFound, "Unknown filter field ... for libtype"), and a
    real server's episode-level fields carry no `director` or `dovi` (issue 22, captured
    `<Meta>` blocks; docs/reference/plex-emulator.md). In-memory evaluation given the
    vocabulary agrees."""
    parsed = FilterEnvelope.model_validate({"filter": node}).filter
    assert evaluate(parsed, item, offered) is expected


def test_offered_fields_per_type_is_the_union_of_its_libraries() -> None:
    offered = OfferedFields(
        libraries={
            "1": LibraryFields(type="movie", fields=frozenset({"genre"})),
            "3": LibraryFields(type="movie", fields=frozenset({"hdr"})),
        }
    )
    assert offered.for_type("movie") == {"genre", "hdr"}
    assert offered.for_type("show") == frozenset()
    assert OfferedFields.model_validate_json(offered.model_dump_json()) == offered
