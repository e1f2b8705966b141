"""Lineup file format v1: models, parsing with full validation, dumping, and its JSON Schema."""

from __future__ import annotations

import codecs
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, cast, get_args

from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from airwave_dagster.domain.errors import (
    MAX_SUGGESTION_CHOICES,
    Issue,
    IssueList,
    LineupFileError,
    LineupIssue,
    Note,
    TooManyIssues,
    describe_value,
    did_you_mean,
    quoted,
    shorten,
)
from airwave_dagster.domain.filters import SORT_FIELDS, normalise_filter, validate_filter

LINEUP_VERSION = 1
"""The only lineup file version this importer reads (and the one it writes)."""

MAX_LINEUP_BYTES = 10 * 1024 * 1024
"""Largest accepted file; a real export of a big instance is well under 1 MB."""

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects accepted; later steps walk the values recursively."""

MAX_INT = 2**31 - 1
"""Numbers land in 32-bit integer columns; anything larger could never be stored."""

MIN_INT = -(2**31)
"""The other end of a 32-bit integer column."""

MAX_SAFE_INTEGER = 2**53
"""Largest integer a JavaScript number (the reference's) holds exactly; no file needs more."""

MAX_INTEGER_DIGITS = 20
"""Integer literals longer than this are refused unread (Python refuses 4,300 digits itself)."""

MAX_CHANNELS = 20_000
"""Most channels one file may hold: many times any real instance, and cheap to plan."""

MAX_PACKAGES = 20_000
"""Most packages one file may hold."""

MAX_DEFINITIONS = 40_000
"""Most definitions (all channels together) one file may hold; the reference's full preset
catalogue has 184."""

MAX_FILTER_NODES = 20_000
"""Most filter nodes (conditions and groups, all filters together) one file may hold; the
reference's full preset catalogue has 688. Bounds the cost of validating and signing filters."""

MAX_LISTED_KEYS = 20
"""Package keys named in a message about an unknown `packageKey` (listed once per file)."""

MAX_HINTED_KEYS = 50
"""Unknown `packageKey`s that get a fuzzy "did you mean"; only those are listed anyway."""

Ordering = Literal["SHUFFLE", "IN_ORDER", "BY_AIR_DATE"]
DefinitionKind = Literal["PREDICATE", "PLEX_COLLECTION", "PLEX_PLAYLIST", "MANUAL_ITEMS"]
DefinitionMode = Literal["INCLUDE", "EXCLUDE"]
BumperMode = Literal["INHERIT", "OFF", "INTERSTITIAL_ONLY", "FULL"]
SortDir = Literal["asc", "desc"]
SortField = Literal[
    "title",
    "year",
    "releaseDate",
    "criticRating",
    "audienceRating",
    "userRating",
    "contentRating",
    "duration",
    "plays",
    "addedAt",
    "lastViewedAt",
    "resolution",
    "bitrate",
]
"""The keys of `filters.SORT_FIELDS`, spelled out so the JSON Schema can list them."""

ORDERINGS: tuple[str, ...] = get_args(Ordering)
DEFINITION_KINDS: tuple[str, ...] = get_args(DefinitionKind)
DEFINITION_MODES: tuple[str, ...] = get_args(DefinitionMode)
BUMPER_MODES: tuple[str, ...] = get_args(BumperMode)
SORT_DIRS: tuple[str, ...] = get_args(SortDir)
SORT_FIELD_NAMES: tuple[str, ...] = get_args(SortField)


def normalise_callsign(raw: str | None) -> str | None:
    """Normalise a callsign as every write does (docs/reference/domain.md §1.3).

    Upper-cases, keeps only `A-Z` and `0-9`, and truncates to 6 characters. Unlike the reference,
    which stored `""` for input with no letters or digits, nothing usable means no callsign.

    Args:
        raw: The callsign as given, or None.

    Returns:
        The normalised callsign, or None when nothing usable remains.
    """
    if raw is None:
        return None
    kept = re.sub(r"[^A-Z0-9]", "", raw.upper())[:6]
    return kept or None


class _FileModel(BaseModel):
    # Strict: the file is JSON, so "5" is never a number and 5 never a string. Aliases are the
    # file's camelCase keys; Python code keeps the snake_case names (the generator, unlike
    # `alias=`, leaves the constructor's parameter names alone for type checkers).
    model_config = ConfigDict(
        frozen=True,
        strict=True,
        extra="ignore",
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
    )


class LineupDefinition(_FileModel):
    """One clause of a channel's pool (§3.4); only `PREDICATE` clauses are imported."""

    kind: DefinitionKind
    mode: DefinitionMode = "INCLUDE"
    sort_index: int | None = Field(
        default=None,
        ge=-MAX_INT - 1,
        le=MAX_INT,
        description="Evaluation order; absent means the index among the channel's PREDICATE defs.",
    )
    plex_filter: dict[str, Any] | None = Field(
        default=None,
        description="The filter envelope {mediaTypes, filter}, carried verbatim (node ids too).",
    )
    plex_library_title: str | None = Field(
        default=None,
        description="Title of the library the clause was scoped to; remapped by title on import.",
    )
    plex_collection_key: str | None = None
    plex_playlist_key: str | None = None
    manual_item_keys: list[str] = Field(default_factory=list[str])


class LineupPackage(_FileModel):
    """A package of channels, linked to its channels by `key` (§3.2)."""

    key: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str | None = None
    icon: str | None = Field(default=None, description='"lucide:Name" or "phosphor:Name".')
    tint: str | None = Field(default=None, description="Accent key; stored as given.")
    sort_index: int | None = Field(
        default=None,
        ge=-MAX_INT - 1,
        le=MAX_INT,
        description="Display order; absent means after every existing package.",
    )


class LineupChannel(_FileModel):
    """A channel recipe (§3.3); its number may be reassigned on import."""

    number: int = Field(
        ge=MIN_INT,
        le=MAX_INT,
        description="Channel number; 0 and below are imported with the next free number.",
    )
    name: str = Field(min_length=1)
    callsign: str | None = Field(default=None, description="Normalised on import (§1.3).")
    description: str | None = None
    icon: str | None = None
    tint: str | None = None
    enabled: bool = True
    sort_index: int = Field(default=0, ge=-MAX_INT - 1, le=MAX_INT)
    ordering: Ordering = "SHUFFLE"
    sort_field: SortField = Field(
        default="title",
        description="One of these once parsed; a file's Plex sort key or unknown name is mapped "
        "on import (docs/importer.md, Normalisations).",
    )
    sort_dir: SortDir = "asc"
    bumper_mode: BumperMode = "INHERIT"
    package_key: str | None = Field(
        default=None, description="Key of a package of this file; null = none."
    )
    definitions: list[LineupDefinition] = Field(default_factory=list[LineupDefinition])

    @field_validator("callsign")
    @classmethod
    def _normalise_callsign(cls, value: str | None) -> str | None:
        return normalise_callsign(value)


class LineupFile(_FileModel):
    """A whole lineup file, version 1 (§3.1).

    `parse_lineup` also records how it normalised values the reference writes but this format
    spells differently (`notes_of`); the notes are not part of the file and are never dumped.
    """

    version: Literal[1]
    exported_at: str | None = Field(default=None, description="ISO-8601 UTC; informational only.")
    packages: list[LineupPackage]
    channels: list[LineupChannel]

    _notes: dict[int, tuple[Note, ...]] = PrivateAttr(default_factory=dict[int, tuple[Note, ...]])

    def notes_of(self, index: int) -> tuple[Note, ...]:
        """The normalisations `parse_lineup` applied to channel `index` (file order), if any."""
        return self._notes.get(index, ())

    @property
    def notes(self) -> tuple[Note, ...]:
        """Every normalisation `parse_lineup` applied, in document order."""
        return tuple(note for index in sorted(self._notes) for note in self._notes[index])


def dump_lineup(lineup: LineupFile, *, now: datetime | None = None) -> str:
    """Write a lineup as a v1 file: pretty JSON with camelCase keys, every key present.

    The reference refuses `null` for `exportedAt` and for a `sortIndex`, so none is written: a
    missing export time becomes the time of the dump, a missing package `sortIndex` its position
    in the file, and a missing definition `sortIndex` the position `plan_import` gives it (its
    index among the channel's PREDICATE definitions, or among the others for other kinds).

    Args:
        lineup: The lineup to write.
        now: The time of the dump (defaults to the current time).

    Returns:
        The file's text, ending with a newline.
    """
    payload = lineup.model_dump(mode="json", by_alias=True)
    if payload["exportedAt"] is None:
        moment = now or datetime.now(UTC)
        payload["exportedAt"] = moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
    for position, package in enumerate(payload["packages"]):
        if package["sortIndex"] is None:
            package["sortIndex"] = position
    for channel in payload["channels"]:
        positions = {True: 0, False: 0}
        for definition in channel["definitions"]:
            predicate = definition["kind"] == "PREDICATE"
            if definition["sortIndex"] is None:
                definition["sortIndex"] = positions[predicate]
            positions[predicate] += 1
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def lineup_json_schema() -> dict[str, Any]:
    """The JSON Schema of lineup file v1, generated from the models, with camelCase keys.

    Cross-references (unique package keys, known `packageKey`s) and the filter language are
    checked by `parse_lineup` only; the schema describes shapes and value sets.

    Returns:
        A JSON Schema (draft 2020-12) document.
    """
    schema = LineupFile.model_json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": "Airwave lineup file v1",
    }


def parse_lineup(data: bytes, *, source: str) -> LineupFile:
    """Read and fully validate a lineup file.

    Every problem is collected before anything is returned, so a user fixes a file in one pass
    (up to `errors.MAX_COLLECTED_ISSUES`, where checking stops). Values the reference system writes
    but this format spells differently are normalised, each change recorded as a note
    (`LineupFile.notes_of`); docs/importer.md lists them. Cost is bounded for any file under the
    size limit: linear walks, no message built per bad value beyond the collected ones.

    Args:
        data: The file's bytes, as uploaded.
        source: The file name or path shown to the user in error messages.

    Returns:
        The validated lineup, callsigns normalised.

    Raises:
        LineupFileError: The file is too large, not UTF-8, not JSON, or breaks the v1 format;
            `issues` lists the problems with their JSON paths.
    """
    issues = IssueList()
    notes: dict[int, list[Note]] = {}
    try:
        raw = _decode(data, issues)
        if not issues:
            _check_file(raw, issues, notes)
    except TooManyIssues:
        pass
    if issues:
        raise LineupFileError(source, issues)
    try:
        # By alias only: a snake_case key in a file is an unknown key, ignored like any other.
        lineup = LineupFile.model_validate(raw, by_alias=True, by_name=False)
    except ValidationError as error:
        # The checks above are meant to leave nothing for pydantic to refuse; if they ever
        # miss a case the user still gets a located message instead of a traceback.
        located = [_from_pydantic(item) for item in error.errors()[:50]]
        raise LineupFileError(source, located) from None
    lineup._notes = {index: tuple(found) for index, found in notes.items()}
    return lineup


class _NotJson:
    """Stands in for NaN/Infinity, which Python's json accepts but JSON does not."""

    def __init__(self, text: str) -> None:
        self.text = text


class _LongInteger:
    """Stands in for an integer literal too long to convert (Python refuses 4,300 digits)."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))


def _parse_int(text: str) -> int | _LongInteger:
    return int(text) if len(text) <= MAX_INTEGER_DIGITS else _LongInteger(text)


class _DuplicateKeys(dict[str, object]):
    """An object that repeated keys; JSON decoders silently keep the last value."""

    def __init__(self, pairs: Sequence[tuple[str, object]]) -> None:
        super().__init__(pairs)
        self.repeated: list[str] = []
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                self.repeated.append(key)
            seen.add(key)


def _object_hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
    mapping = dict(pairs)
    return _DuplicateKeys(pairs) if len(mapping) < len(pairs) else mapping


def _size_issue(size: int) -> Issue:
    return Issue(
        path="$",
        message=f"the file is {size:,} bytes; lineup files are limited to "
        f"{MAX_LINEUP_BYTES:,} bytes (10 MB)",
    )


def check_lineup_size(size: int, *, source: str) -> None:
    """Refuse a file by its size alone, before reading it into memory.

    Raises:
        LineupFileError: The file is over MAX_LINEUP_BYTES.
    """
    if size > MAX_LINEUP_BYTES:
        raise LineupFileError(source, [_size_issue(size)])


def _decode(data: bytes, issues: list[Issue]) -> object:
    if len(data) > MAX_LINEUP_BYTES:
        issues.append(_size_issue(len(data)))
        return None
    # Editors on Windows like to prefix a byte-order mark; it is harmless, so skip it.
    skipped = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[skipped:].decode("utf-8")
    except UnicodeDecodeError as error:
        offset = skipped + error.start
        line = data[:offset].count(b"\n") + 1
        issues.append(
            Issue(
                path="$",
                message=f"the file is not UTF-8 text: byte 0x{data[offset]:02x} at byte offset "
                f"{offset} (line {line}) is not valid UTF-8",
            )
        )
        return None
    if not text.strip():
        issues.append(Issue(path="$", message="the file is empty; expected a JSON object"))
        return None
    try:
        raw = json.loads(
            text, parse_constant=_NotJson, parse_int=_parse_int, object_pairs_hook=_object_hook
        )
    except json.JSONDecodeError as error:
        issues.append(
            Issue(
                path="$",
                message=f"the file is not valid JSON: {error.msg} at line {error.lineno}, "
                f"column {error.colno}",
            )
        )
        return None
    except RecursionError:
        issues.append(Issue(path="$", message="the file nests arrays or objects too deeply"))
        return None
    except ValueError as error:
        # Python's own limits (such as its integer-string conversion limit) must never escape
        # as a bare exception; _parse_int is meant to keep this branch unreachable.
        issues.append(Issue(path="$", message=f"the file cannot be read as JSON: {error}"))
        return None
    _check_json(raw, issues)
    return raw


_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _key_path(path: str, key: str) -> str:
    if _IDENTIFIER.fullmatch(key) and len(key) <= 80:
        return f"{path}.{key}"
    # A hostile key can be megabytes long; the path only has to point at it. Lone surrogates are
    # escaped as JSON writes them, so the path can always be printed and stored.
    shown = _SURROGATE.sub(_escaped, json.dumps(shorten(key), ensure_ascii=False))
    return f"{path}[{shown}]"


def _escaped(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""NUL (which Postgres text and jsonb refuse) and lone surrogates (which UTF-8 cannot encode)."""


def _string_problem(text: str) -> str | None:
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (\\u0000), which cannot be stored"
    return (
        f"contains a lone surrogate (\\u{ord(found.group()):04x}), which is not a character; "
        "it cannot be stored"
    )


def _scalar_problem(value: object) -> str | None:
    """What JSON allows (or Python's decoder lets through) but no stored value can hold."""
    if isinstance(value, str):
        return _string_problem(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return None
        return "the number is beyond ±2^53; no lineup value needs that"
    if isinstance(value, float):
        return None if math.isfinite(value) else "the number is too large to represent"
    if isinstance(value, _LongInteger):
        return f"an integer of {value.digits:,} digits; no lineup value needs that"
    if isinstance(value, _NotJson):
        return f"{value.text} is not valid JSON; numbers must be finite"
    return None


def _child_path(path: str, key: str | int) -> str:
    return _key_path(path, key) if isinstance(key, str) else f"{path}[{key}]"


def _children(value: object) -> Iterator[tuple[str | int, Any]] | None:
    if isinstance(value, dict):
        return iter(cast("dict[str, object]", value).items())
    if isinstance(value, list):
        return enumerate(cast("list[object]", value))
    return None


class _Frame(NamedTuple):
    """An open container of `_check_json`'s walk: what is left of it, and where it sits."""

    items: Iterator[tuple[str | int, Any]]
    key: str | int | None
    """Its key or index in its parent (None for the document itself)."""
    repeated: set[str]


def _frame_path(stack: list[_Frame]) -> str:
    # Built only when a problem is found: the walk itself never formats a path.
    path = "$"
    for frame in stack[1:]:
        path = _child_path(path, cast("str | int", frame.key))
    return path


def _check_json(raw: object, issues: list[Issue]) -> None:
    """Find what Python's decoder let through but JSON forbids, leaves ambiguous, or no column
    can store, in document order.

    Iterative, so a deeply nested file cannot exhaust the stack after json.loads managed it, and
    lazy: one iterator per open container and no path string unless a problem is found, so a
    wide array costs no memory beyond what json.loads already spent. Plain scalars are checked in
    the inner loop without a call, which keeps 10 MB of values to a fraction of a second.
    """
    problem = _scalar_problem(raw)
    if problem is not None:
        issues.append(Issue(path="$", message=problem))
    top = _children(raw)
    if top is None:
        return
    search = _UNSTORABLE.search
    low, high = -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER
    stack = [_Frame(top, None, set(raw.repeated) if isinstance(raw, _DuplicateKeys) else set())]
    while stack:
        frame = stack[-1]
        repeated = frame.repeated
        value: Any
        for key, value in frame.items:
            if repeated or (type(key) is str and search(key)):
                _check_key(key, _frame_path(stack), repeated, issues)
            kind = type(value)
            if kind is str:
                if search(value) is None:
                    continue
            elif kind is int:
                if low <= value <= high:
                    continue
            elif kind is dict:
                stack.append(_Frame(iter(value.items()), key, set()))
                break
            elif kind is list:
                stack.append(_Frame(enumerate(value), key, set()))
                break
            elif kind is bool or value is None:
                continue
            if isinstance(value, dict | list):
                # _DuplicateKeys, the only other container json.loads returns here.
                marks = set(value.repeated) if isinstance(value, _DuplicateKeys) else set()
                stack.append(_Frame(_children(value) or iter(()), key, marks))
                break
            problem = _scalar_problem(value)
            if problem is not None:
                issues.append(Issue(path=_child_path(_frame_path(stack), key), message=problem))
        else:
            stack.pop()
            continue
        if len(stack) > MAX_JSON_DEPTH + 1:
            stack.pop()
            message = f"nested more than {MAX_JSON_DEPTH} levels deep; no lineup needs that"
            issues.append(Issue(path=_child_path(_frame_path(stack), key), message=message))


def _check_key(key: str | int, path: str, repeated: set[str], issues: list[Issue]) -> None:
    if not isinstance(key, str):
        return
    child = _key_path(path, key)
    if key in repeated:
        message = f"key {quoted(key)} appears more than once in the same object"
        issues.append(Issue(path=child, message=message))
        repeated.discard(key)
    problem = _string_problem(key)
    if problem is not None:
        issues.append(Issue(path=child, message=f"the key {problem}"))


def _whole(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _is_channel_number(value: object) -> bool:
    return _whole(value, MIN_INT, MAX_INT)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Me"})
"""Unicode categories that show nothing on their own: controls, format characters (zero-width,
BOM, bidi controls), unassigned, separators and combining marks."""


def has_visible(text: str) -> bool:
    """Whether a name shows something: at least one character outside the invisible categories.

    Args:
        text: A name or key.

    Returns:
        False for "", whitespace, zero-width characters, bidi controls and lone combining marks.
    """
    return any(unicodedata.category(char) not in _INVISIBLE_CATEGORIES for char in text)


def _is_name(value: object) -> bool:
    return isinstance(value, str) and has_visible(value)


def _is_string(value: object) -> bool:
    return isinstance(value, str)


def _is_optional_string(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_sort_index(value: object) -> bool:
    return _whole(value, -MAX_INT - 1, MAX_INT)


def _is_optional_sort_index(value: object) -> bool:
    return value is None or _is_sort_index(value)


def _is_strings(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, str) for item in cast("list[object]", value)
    )


class _Rule(NamedTuple):
    """What one key of a file object must hold."""

    key: str
    required: bool
    needs: str
    accepts: Callable[[object], bool]
    noun: str = ""
    choices: tuple[str, ...] = ()

    def problem(self, value: object) -> str | None:
        if self.accepts(value):
            return None
        if self.choices and isinstance(value, str):
            listed = ", ".join(repr(choice) for choice in self.choices)
            hint = did_you_mean(value, self.choices)
            return f"unknown {self.noun} {quoted(value)}{hint}; allowed: {listed}"
        return f"{self.key} must be {self.needs}, got {describe_value(value)}"


def _choice(key: str, noun: str, choices: tuple[str, ...], *, required: bool = False) -> _Rule:
    def accepts(value: object) -> bool:
        return value in choices

    needs = "one of " + ", ".join(repr(choice) for choice in choices)
    return _Rule(key, required, needs, accepts, noun, choices)


_NAME = "a string with at least one visible character"
_OPTIONAL_STRING = "a string or null"
_FILE_RULES = (_Rule("exportedAt", False, "an ISO-8601 string or null", _is_optional_string),)
_PACKAGE_RULES = (
    _Rule("key", True, _NAME, _is_name),
    _Rule("name", True, _NAME, _is_name),
    _Rule("description", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("icon", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("tint", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("sortIndex", False, "a whole number or null", _is_optional_sort_index),
)
_CHANNEL_RULES = (
    _Rule(
        "number",
        True,
        f"a whole number from {MIN_INT} to {MAX_INT} (0 and below get a free number)",
        _is_channel_number,
    ),
    _Rule("name", True, _NAME, _is_name),
    _Rule("callsign", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("description", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("icon", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("tint", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("enabled", False, "true or false", _is_bool),
    _Rule("sortIndex", False, "a whole number", _is_sort_index),
    _choice("ordering", "ordering", ORDERINGS),
    # Any string: the reference's AI planner writes Plex sort keys; `_normalise_sort` maps them.
    _Rule("sortField", False, "a string naming a sort field", _is_string),
    _choice("sortDir", "sort direction", SORT_DIRS),
    _choice("bumperMode", "bumper mode", BUMPER_MODES),
    _Rule("packageKey", False, _OPTIONAL_STRING, _is_optional_string),
)
_DEFINITION_RULES = (
    _choice("kind", "definition kind", DEFINITION_KINDS, required=True),
    _choice("mode", "definition mode", DEFINITION_MODES),
    _Rule("sortIndex", False, "a whole number or null", _is_optional_sort_index),
    _Rule("plexLibraryTitle", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("plexCollectionKey", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("plexPlaylistKey", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("manualItemKeys", False, "an array of strings", _is_strings),
)


def _check_keys(obj: dict[str, object], path: str, rules: tuple[_Rule, ...]) -> list[Issue]:
    issues: list[Issue] = []
    for rule in rules:
        if rule.key not in obj:
            if rule.required:
                message = f"missing required key {rule.key!r} ({rule.needs})"
                issues.append(Issue(path=f"{path}.{rule.key}", message=message))
            continue
        problem = rule.problem(obj[rule.key])
        if problem is not None:
            issues.append(Issue(path=f"{path}.{rule.key}", message=problem))
    return issues


def _as_object(
    value: object, path: str, what: str, issues: list[Issue]
) -> dict[str, object] | None:
    if isinstance(value, dict):
        return cast("dict[str, object]", value)
    issues.append(
        Issue(path=path, message=f"{what} must be an object, got {describe_value(value)}")
    )
    return None


def _as_array(
    obj: dict[str, object], key: str, path: str, issues: list[Issue], *, required: bool
) -> list[object]:
    if key not in obj:
        if required:
            issues.append(
                Issue(path=f"{path}.{key}", message=f"missing required key {key!r} (an array)")
            )
        return []
    value = obj[key]
    if isinstance(value, list):
        return cast("list[object]", value)
    issues.append(
        Issue(path=f"{path}.{key}", message=f"{key} must be an array, got {describe_value(value)}")
    )
    return []


def _check_file(raw: object, issues: list[Issue], notes: dict[int, list[Note]]) -> None:
    if not isinstance(raw, dict):
        issues.append(
            Issue(
                path="$",
                message="the top level must be an object with version, packages and channels, "
                f"got {describe_value(raw)}",
            )
        )
        return
    document = cast("dict[str, object]", raw)
    _check_version(document, issues)
    issues.extend(_check_keys(document, "$", _FILE_RULES))
    packages = _as_array(document, "packages", "$", issues, required=True)
    channels = _as_array(document, "channels", "$", issues, required=True)
    # Counted before anything else is checked: the cost of every later step grows with them.
    for key, entries, limit in (
        ("packages", packages, MAX_PACKAGES),
        ("channels", channels, MAX_CHANNELS),
    ):
        if len(entries) > limit:
            issues.append(
                Issue(
                    path=f"$.{key}",
                    message=f"the file has {len(entries):,} {key}; at most {limit:,} are accepted",
                )
            )
    definitions = sum(
        len(cast("list[object]", entry.get("definitions")))
        for entry in channels
        if isinstance(entry, dict) and isinstance(entry.get("definitions"), list)
    )
    if definitions > MAX_DEFINITIONS:
        issues.append(
            Issue(
                path="$.channels",
                message=f"the file's channels hold {definitions:,} definitions; at most "
                f"{MAX_DEFINITIONS:,} are accepted",
            )
        )
    if issues:
        return
    package_keys = _PackageKeys(_check_packages(packages, issues))
    nodes = _NodeBudget()
    for index, channel in enumerate(channels):
        found: list[Note] = []
        _check_channel(channel, f"$.channels[{index}]", package_keys, issues, found, nodes)
        if found:
            notes[index] = found
    if package_keys.unknown:
        # Listed once, not in every problem: a file with thousands of typos stays readable.
        issues.append(Issue(path="$.packages", message=package_keys.listing()))


class _NodeBudget:
    """Filter nodes counted so far across the file, against MAX_FILTER_NODES."""

    def __init__(self) -> None:
        self.used = 0

    def spend(self, plex_filter: object, path: str, issues: list[Issue]) -> bool:
        """Count a filter's nodes; False (and one issue, the first time) once over budget."""
        over = self.used > MAX_FILTER_NODES
        self.used += _count_nodes(plex_filter)
        if self.used <= MAX_FILTER_NODES:
            return True
        if not over:
            issues.append(
                Issue(
                    path=path,
                    message=f"the file's filters hold more than {MAX_FILTER_NODES:,} conditions "
                    "and groups by here; no lineup needs that many",
                )
            )
        return False


def _count_nodes(plex_filter: object) -> int:
    """Objects in a filter envelope's tree (conditions, groups, anything else), iteratively."""
    count = 0
    stack = [plex_filter.get("filter") if isinstance(plex_filter, dict) else None]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            count += 1
            children = cast("dict[str, object]", node).get("children")
            if isinstance(children, list):
                stack.extend(cast("list[object]", children))
        elif isinstance(node, list):
            count += 1
    return count


class _PackageKeys:
    """The file's package keys, with bounded-cost suggestions for unknown ones."""

    def __init__(self, keys: dict[str, int]) -> None:
        self.keys = keys
        self.folded: dict[str, str] = {}
        for key in keys:
            self.folded.setdefault(key.casefold(), key)
        self.unknown = 0

    def problem(self, key: str) -> str:
        self.unknown += 1
        hint = ""
        if len(key) <= 80:
            same = self.folded.get(key.casefold())
            if same is not None:
                hint = f" (did you mean {quoted(same)}?)"
            elif self.unknown <= MAX_HINTED_KEYS and len(self.keys) <= MAX_SUGGESTION_CHOICES:
                hint = did_you_mean(key, list(self.keys))
        return f"packageKey {quoted(key)} names no package of this file{hint}"

    def listing(self) -> str:
        if not self.keys:
            return "the file has no packages, so no channel can name a packageKey"
        shown = ", ".join(quoted(key) for key in list(self.keys)[:MAX_LISTED_KEYS])
        more = len(self.keys) - MAX_LISTED_KEYS
        tail = f" and {more:,} more" if more > 0 else ""
        return f"the file's package keys, for the unknown packageKeys above: {shown}{tail}"


def _check_version(document: dict[str, object], issues: list[Issue]) -> None:
    if "version" not in document:
        issues.append(
            Issue(
                path="$.version",
                message=f"missing required key 'version'; this importer reads lineup files of "
                f"version {LINEUP_VERSION}",
            )
        )
        return
    version = document["version"]
    if _whole(version, LINEUP_VERSION, LINEUP_VERSION):
        return
    if isinstance(version, int) and not isinstance(version, bool):
        message = (
            f"unsupported lineup file version {version}; only version {LINEUP_VERSION} is supported"
        )
    else:
        message = f"version must be the integer {LINEUP_VERSION}, got {describe_value(version)}"
    issues.append(Issue(path="$.version", message=message))


def _check_packages(packages: list[object], issues: list[Issue]) -> dict[str, int]:
    """Check every package and return the file's package keys with their first index."""
    keys: dict[str, int] = {}
    for index, entry in enumerate(packages):
        path = f"$.packages[{index}]"
        package = _as_object(entry, path, "a package", issues)
        if package is None:
            continue
        issues.extend(_check_keys(package, path, _PACKAGE_RULES))
        key = package.get("key")
        if not isinstance(key, str) or not key.strip():
            continue
        if key in keys:
            issues.append(
                Issue(
                    path=f"{path}.key",
                    message=f"duplicate package key {key!r}; already used by "
                    f"$.packages[{keys[key]}]",
                )
            )
        else:
            keys[key] = index
    return keys


def _check_channel(
    entry: object,
    path: str,
    package_keys: _PackageKeys,
    issues: list[Issue],
    notes: list[Note],
    nodes: _NodeBudget,
) -> None:
    channel = _as_object(entry, path, "a channel", issues)
    if channel is None:
        return
    issues.extend(_check_keys(channel, path, _CHANNEL_RULES))
    package_key = channel.get("packageKey")
    if isinstance(package_key, str) and package_key not in package_keys.keys:
        issues.append(Issue(path=f"{path}.packageKey", message=package_keys.problem(package_key)))
    number = channel.get("number")
    if _is_channel_number(number) and cast("int", number) < 1:
        notes.append(
            Note(
                path=f"{path}.number",
                message=f"{number} is not a channel number: treated as taken, so the channel "
                "gets the next free number",
            )
        )
    _normalise_sort(channel, path, notes)
    definitions = _as_array(channel, "definitions", path, issues, required=False)
    for index, definition in enumerate(definitions):
        _check_definition(definition, f"{path}.definitions[{index}]", issues, notes, nodes)


_PLEX_SORT_KEYS: dict[str, str] = {
    **{plex.casefold(): field for field, plex in SORT_FIELDS.items()},
    **{field.casefold(): field for field in SORT_FIELDS},
    "viewcount": "plays",
    "rating": "criticRating",
    "originallyavailableat": "releaseDate",
    "titlesort": "title",
    "title": "title",
}
"""Sort keys the reference's AI planner writes (Plex's, any case) → this format's sort field."""


def _normalise_sort(channel: dict[str, object], path: str, notes: list[Note]) -> None:
    """Map a `sortField` outside the 13 known ones, as the reference's sort resolution does.

    A Plex sort key with an equivalent maps to it (`originallyAvailableAt` → `releaseDate`,
    `titleSort` → `title`, `viewCount` → `plays`, ...); a `key:desc` / `key:asc` suffix sets the
    direction; anything else sorts by title, the reference's fallback.
    """
    written = channel.get("sortField")
    if not isinstance(written, str) or written in SORT_FIELD_NAMES:
        return
    key, colon, suffix = written.partition(":")
    field = _PLEX_SORT_KEYS.get(key.strip().casefold())
    channel["sortField"] = field or "title"
    if field is None:
        message = (
            f"unknown sort field {quoted(written)} sorted by 'title', the reference's fallback"
        )
    else:
        message = f"sort field {quoted(written)} read as {field!r}"
    direction = suffix.strip().lower()
    if colon and field is not None and direction in SORT_DIRS:
        channel["sortDir"] = direction
        message += f", direction {direction!r}"
    notes.append(Note(path=f"{path}.sortField", message=message))


def _check_definition(
    entry: object, path: str, issues: list[Issue], notes: list[Note], nodes: _NodeBudget
) -> None:
    definition = _as_object(entry, path, "a definition", issues)
    if definition is None:
        return
    issues.extend(_check_keys(definition, path, _DEFINITION_RULES))
    plex_filter = definition.get("plexFilter")
    if plex_filter is None:
        # A PREDICATE without a filter is legal: it means every item of the searched libraries.
        return
    if definition.get("kind") == "PREDICATE":
        before = len(issues)
        filter_path = f"{path}.plexFilter"
        if not nodes.spend(plex_filter, filter_path, issues):
            return
        validate_filter(
            plex_filter, path=filter_path, lenient=True, issues=cast("IssueList", issues)
        )
        if len(issues) == before:
            # What is stored, and read by the build step, is exactly what was validated.
            clean, found = normalise_filter(
                cast("dict[str, object]", plex_filter), path=filter_path
            )
            definition["plexFilter"] = clean
            notes.extend(found)
    elif not isinstance(plex_filter, dict):
        issues.append(
            Issue(
                path=f"{path}.plexFilter",
                message=f"plexFilter must be an object or null, got {describe_value(plex_filter)}",
            )
        )


def _from_pydantic(error: ErrorDetails) -> LineupIssue:
    path = "$"
    for part in error["loc"]:
        path = f"{path}[{part}]" if isinstance(part, int) else _key_path(path, part)
    return Issue(path=path, message=error["msg"])
