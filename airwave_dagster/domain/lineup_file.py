"""Lineup file format v1: models, parsing with full validation, dumping, and its JSON Schema."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, cast, get_args

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from airwave_dagster.domain.errors import (
    Issue,
    LineupFileError,
    LineupIssue,
    describe_value,
    did_you_mean,
)
from airwave_dagster.domain.filters import validate_filter

LINEUP_VERSION = 1
"""The only lineup file version this importer reads (and the one it writes)."""

MAX_LINEUP_BYTES = 10 * 1024 * 1024
"""Largest accepted file; a real export of a big instance is well under 1 MB."""

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects accepted; later steps walk the values recursively."""

MAX_INT = 2**31 - 1
"""Numbers land in 32-bit integer columns; anything larger could never be stored."""

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

    number: int = Field(gt=0, le=MAX_INT)
    name: str = Field(min_length=1)
    callsign: str | None = Field(default=None, description="Normalised on import (§1.3).")
    description: str | None = None
    icon: str | None = None
    tint: str | None = None
    enabled: bool = True
    sort_index: int = Field(default=0, ge=-MAX_INT - 1, le=MAX_INT)
    ordering: Ordering = "SHUFFLE"
    sort_field: SortField = "title"
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
    """A whole lineup file, version 1 (§3.1)."""

    version: Literal[1]
    exported_at: str | None = Field(default=None, description="ISO-8601 UTC; informational only.")
    packages: list[LineupPackage]
    channels: list[LineupChannel]


def dump_lineup(lineup: LineupFile) -> str:
    """Write a lineup as a v1 file: pretty JSON with camelCase keys, every key present.

    Args:
        lineup: The lineup to write.

    Returns:
        The file's text, ending with a newline.
    """
    payload = lineup.model_dump(mode="json", by_alias=True)
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

    Every problem is collected before anything is returned, so a user fixes a file in one pass.

    Args:
        data: The file's bytes, as uploaded.
        source: The file name or path shown to the user in error messages.

    Returns:
        The validated lineup, callsigns normalised.

    Raises:
        LineupFileError: The file is too large, not UTF-8, not JSON, or breaks the v1 format;
            `issues` lists every problem with its JSON path.
    """
    raw, issues = _decode(data)
    if not issues:
        issues = _check_file(raw)
    if issues:
        raise LineupFileError(source, issues)
    try:
        # By alias only: a snake_case key in a file is an unknown key, ignored like any other.
        return LineupFile.model_validate(raw, by_alias=True, by_name=False)
    except ValidationError as error:
        # The checks above are meant to leave nothing for pydantic to refuse; if they ever
        # miss a case the user still gets a located message instead of a traceback.
        raise LineupFileError(source, [_from_pydantic(item) for item in error.errors()]) from None


class _NotJson:
    """Stands in for NaN/Infinity, which Python's json accepts but JSON does not."""

    def __init__(self, text: str) -> None:
        self.text = text


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
    if len({key for key, _ in pairs}) < len(pairs):
        return _DuplicateKeys(pairs)
    return dict(pairs)


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


def _decode(data: bytes) -> tuple[object, list[Issue]]:
    if len(data) > MAX_LINEUP_BYTES:
        return None, [_size_issue(len(data))]
    # Editors on Windows like to prefix a byte-order mark; it is harmless, so skip it.
    skipped = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[skipped:].decode("utf-8")
    except UnicodeDecodeError as error:
        offset = skipped + error.start
        line = data[:offset].count(b"\n") + 1
        return None, [
            Issue(
                path="$",
                message=f"the file is not UTF-8 text: byte 0x{data[offset]:02x} at byte offset "
                f"{offset} (line {line}) is not valid UTF-8",
            )
        ]
    if not text.strip():
        return None, [Issue(path="$", message="the file is empty; expected a JSON object")]
    try:
        raw = json.loads(text, parse_constant=_NotJson, object_pairs_hook=_object_hook)
    except json.JSONDecodeError as error:
        return None, [
            Issue(
                path="$",
                message=f"the file is not valid JSON: {error.msg} at line {error.lineno}, "
                f"column {error.colno}",
            )
        ]
    except RecursionError:
        return None, [Issue(path="$", message="the file nests arrays or objects too deeply")]
    return raw, _check_json(raw)


_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f"{path}[{json.dumps(key)}]"


def _check_json(raw: object) -> list[Issue]:
    """Find what Python's decoder let through but JSON forbids or leaves ambiguous."""
    issues: list[Issue] = []
    # Iterative so a deeply nested file cannot exhaust the stack after json.loads managed it;
    # an Issue on the stack is a finding queued so that issues come out in document order.
    stack: list[tuple[object, str, int] | Issue] = [(raw, "$", 0)]
    while stack:
        entry = stack.pop()
        if isinstance(entry, Issue):
            issues.append(entry)
            continue
        value, path, depth = entry
        if depth > MAX_JSON_DEPTH and isinstance(value, dict | list):
            message = f"nested more than {MAX_JSON_DEPTH} levels deep; no lineup needs that"
            issues.append(Issue(path=path, message=message))
        elif isinstance(value, _NotJson):
            issues.append(
                Issue(path=path, message=f"{value.text} is not valid JSON; numbers must be finite")
            )
        elif isinstance(value, dict):
            mapping = cast("dict[str, object]", value)
            repeated = mapping.repeated if isinstance(mapping, _DuplicateKeys) else []
            for key, item in reversed(mapping.items()):
                stack.append((item, _key_path(path, key), depth + 1))
                if key in repeated:
                    message = f"key {key!r} appears more than once in the same object"
                    stack.append(Issue(path=_key_path(path, key), message=message))
        elif isinstance(value, list):
            items = cast("list[object]", value)
            stack.extend((items[i], f"{path}[{i}]", depth + 1) for i in reversed(range(len(items))))
    return issues


def _whole(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _is_channel_number(value: object) -> bool:
    return _whole(value, 1, MAX_INT)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_name(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


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
            return f"unknown {self.noun} {value!r}{hint}; allowed: {listed}"
        return f"{self.key} must be {self.needs}, got {describe_value(value)}"


def _choice(key: str, noun: str, choices: tuple[str, ...], *, required: bool = False) -> _Rule:
    def accepts(value: object) -> bool:
        return value in choices

    needs = "one of " + ", ".join(repr(choice) for choice in choices)
    return _Rule(key, required, needs, accepts, noun, choices)


_NAME = "a non-empty string"
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
    _Rule("number", True, f"a whole number from 1 to {MAX_INT}", _is_channel_number),
    _Rule("name", True, _NAME, _is_name),
    _Rule("callsign", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("description", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("icon", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("tint", False, _OPTIONAL_STRING, _is_optional_string),
    _Rule("enabled", False, "true or false", _is_bool),
    _Rule("sortIndex", False, "a whole number", _is_sort_index),
    _choice("ordering", "ordering", ORDERINGS),
    _choice("sortField", "sort field", SORT_FIELD_NAMES),
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


def _check_file(raw: object) -> list[Issue]:
    issues: list[Issue] = []
    if not isinstance(raw, dict):
        issues.append(
            Issue(
                path="$",
                message="the top level must be an object with version, packages and channels, "
                f"got {describe_value(raw)}",
            )
        )
        return issues
    document = cast("dict[str, object]", raw)
    _check_version(document, issues)
    issues.extend(_check_keys(document, "$", _FILE_RULES))
    package_keys = _check_packages(
        _as_array(document, "packages", "$", issues, required=True), issues
    )
    channels = _as_array(document, "channels", "$", issues, required=True)
    for index, channel in enumerate(channels):
        _check_channel(channel, f"$.channels[{index}]", package_keys, issues)
    return issues


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
    entry: object, path: str, package_keys: dict[str, int], issues: list[Issue]
) -> None:
    channel = _as_object(entry, path, "a channel", issues)
    if channel is None:
        return
    issues.extend(_check_keys(channel, path, _CHANNEL_RULES))
    package_key = channel.get("packageKey")
    if isinstance(package_key, str) and package_key not in package_keys:
        hint = did_you_mean(package_key, list(package_keys))
        known = ", ".join(repr(key) for key in package_keys) or "none"
        issues.append(
            Issue(
                path=f"{path}.packageKey",
                message=f"packageKey {package_key!r} names no package of this file{hint}; "
                f"the file's package keys: {known}",
            )
        )
    definitions = _as_array(channel, "definitions", path, issues, required=False)
    for index, definition in enumerate(definitions):
        _check_definition(definition, f"{path}.definitions[{index}]", issues)


def _check_definition(entry: object, path: str, issues: list[Issue]) -> None:
    definition = _as_object(entry, path, "a definition", issues)
    if definition is None:
        return
    issues.extend(_check_keys(definition, path, _DEFINITION_RULES))
    plex_filter = definition.get("plexFilter")
    if plex_filter is None:
        # A PREDICATE without a filter is legal: it means every item of the searched libraries.
        return
    if definition.get("kind") == "PREDICATE":
        issues.extend(validate_filter(plex_filter, path=f"{path}.plexFilter"))
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
