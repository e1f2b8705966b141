"""The channel filter language: models, field catalog, validation, canonical JSON, evaluation."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Annotated, Literal, cast

from pydantic import AliasGenerator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from airwave_dagster.domain.errors import (
    FilterError,
    Issue,
    IssueList,
    Note,
    TooManyIssues,
    describe_value,
    did_you_mean,
    quoted,
)
from airwave_dagster.domain.library import MEDIA_TYPES, MediaItem, MediaType

Op = Literal["is", "isNot", "gte", "lte", "contains", "notContains"]
"""A condition's operator (docs/reference/domain.md §2.1)."""

FieldKind = Literal["tag", "string", "text", "int", "date", "recency", "bool"]
"""How a field's value is interpreted; decides the allowed operators (§2.2)."""

OPS: tuple[Op, ...] = ("is", "isNot", "gte", "lte", "contains", "notContains")

TEXT_OP_ALIASES: dict[str, Op] = {"is": "contains", "isNot": "notContains"}
"""What `is`/`isNot` on a text field means: the reference sends both to Plex as `contains`."""

MAX_FILTER_DEPTH = 32
"""Deepest nesting accepted; the UI offers two levels, so anything near this is a broken file."""

FilterIssue = Issue
"""A problem found in a `plexFilter` envelope (`validate_filter`)."""


class Condition(BaseModel):
    """A leaf of the filter tree: `field op value`, the value always a string."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["condition"] = "condition"
    id: str | None = Field(default=None, description="UI key; part of the dedupe signature.")
    field: str
    op: Op
    value: str


class Group(BaseModel):
    """An inner node of the filter tree combining its children with AND or OR."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["group"] = "group"
    id: str | None = Field(default=None, description="UI key; part of the dedupe signature.")
    combinator: Literal["and", "or"] = "and"
    children: list[FilterNode]


FilterNode = Annotated[Condition | Group, Field(discriminator="type")]
"""Either node of the filter tree, told apart by `type`."""

Group.model_rebuild()


class FilterEnvelope(BaseModel):
    """The `plexFilter` JSON stored on a PREDICATE definition (§1.5)."""

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
    )

    media_types: list[MediaType] = Field(
        default_factory=list[MediaType],
        description="Library types to search (`mediaTypes`); missing or empty means both.",
    )
    filter: FilterNode | None = Field(
        default=None, description="The condition tree; absent means whole libraries."
    )

    @property
    def effective_media_types(self) -> tuple[MediaType, ...]:
        """The library types actually searched: the listed ones, or both when none are listed."""
        return tuple(dict.fromkeys(self.media_types)) or MEDIA_TYPES


class FieldSpec(BaseModel):
    """One filterable field of the catalog (§2.3)."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: FieldKind
    plex_name: str = Field(description="Plex's own filter name (e.g. 'rating' for criticRating).")
    tv_level: Literal["show", "episode"] = Field(
        description="Prefix used on show libraries: 'show.genre', 'episode.resolution'."
    )
    applies: frozenset[str] = Field(description="Library types the field exists on.")
    local: bool = Field(description="Supported by the in-memory evaluator (`evaluate`).")
    label: str


ALLOWED_OPS: dict[FieldKind, frozenset[Op]] = {
    "tag": frozenset({"is", "isNot"}),
    "string": frozenset({"is", "isNot"}),
    "text": frozenset({"contains", "notContains"}),
    "int": frozenset({"is", "gte", "lte"}),
    "date": frozenset({"gte", "lte"}),
    "recency": frozenset({"is"}),
    "bool": frozenset({"is"}),
}

_BOTH = frozenset({"movie", "show"})
_MOVIE = frozenset({"movie"})
_SHOW = frozenset({"show"})

_CATALOG: tuple[
    tuple[str, FieldKind, str, Literal["show", "episode"], frozenset[str], bool, str], ...
] = (
    ("title", "text", "title", "show", _BOTH, True, "Title"),
    ("episodeTitle", "text", "title", "episode", _SHOW, True, "Episode title"),
    ("genre", "tag", "genre", "show", _BOTH, True, "Genre"),
    ("label", "tag", "label", "show", _BOTH, False, "Label"),
    ("collection", "tag", "collection", "show", _BOTH, False, "Collection"),
    ("studio", "tag", "studio", "show", _BOTH, True, "Studio"),
    ("network", "tag", "network", "show", _SHOW, False, "Network"),
    ("director", "tag", "director", "show", _BOTH, True, "Director"),
    ("writer", "tag", "writer", "show", _BOTH, False, "Writer"),
    ("producer", "tag", "producer", "show", _BOTH, False, "Producer"),
    ("actor", "tag", "actor", "show", _BOTH, True, "Actor"),
    ("country", "tag", "country", "show", _BOTH, False, "Country"),
    ("contentRating", "tag", "contentRating", "show", _BOTH, True, "Content rating"),
    ("resolution", "tag", "resolution", "episode", _BOTH, True, "Resolution"),
    ("audioLanguage", "tag", "audioLanguage", "episode", _BOTH, False, "Audio language"),
    ("subtitleLanguage", "tag", "subtitleLanguage", "episode", _BOTH, False, "Subtitle language"),
    ("year", "int", "year", "show", _BOTH, True, "Year"),
    ("decade", "int", "decade", "show", _BOTH, True, "Decade"),
    ("audienceRating", "int", "audienceRating", "show", _BOTH, True, "Audience rating"),
    ("criticRating", "int", "rating", "show", _BOTH, True, "Critic rating"),
    ("duration", "int", "duration", "episode", _MOVIE, True, "Duration (minutes)"),
    ("releaseDate", "date", "originallyAvailableAt", "episode", _BOTH, True, "Release date"),
    ("addedWithin", "recency", "addedAt", "episode", _BOTH, False, "Added within (days)"),
    ("unwatched", "bool", "unwatched", "episode", _BOTH, False, "Unwatched"),
    ("inProgress", "bool", "inProgress", "episode", _BOTH, False, "In progress"),
    ("hdr", "bool", "hdr", "episode", _BOTH, True, "HDR"),
    ("dovi", "bool", "dovi", "episode", _BOTH, True, "Dolby Vision"),
    ("userRating", "int", "userRating", "show", _BOTH, False, "Personal rating"),
    ("viewCount", "int", "viewCount", "show", _BOTH, False, "Plays"),
    ("lastViewedAt", "date", "lastViewedAt", "show", _BOTH, False, "Last viewed"),
    ("unwatchedLeaves", "bool", "unwatchedLeaves", "show", _SHOW, False, "Has unwatched episodes"),
    ("episodeYear", "int", "year", "episode", _SHOW, True, "Episode year"),
    ("contentRatingAge", "int", "contentRatingAge", "show", _BOTH, False, "Content rating age"),
    ("editionTitle", "tag", "editionTitle", "show", _BOTH, False, "Edition"),
    ("location", "tag", "location", "episode", _BOTH, False, "File location"),
    ("unmatched", "bool", "unmatched", "show", _BOTH, False, "Unmatched"),
    ("duplicate", "bool", "duplicate", "episode", _BOTH, False, "Duplicate"),
    ("trash", "bool", "trash", "episode", _BOTH, False, "In trash"),
)

FIELDS: dict[str, FieldSpec] = {
    name: FieldSpec(
        name=name,
        kind=kind,
        plex_name=plex_name,
        tv_level=tv_level,
        applies=applies,
        local=local,
        label=label,
    )
    for name, kind, plex_name, tv_level, applies, local, label in _CATALOG
}
"""The 38 filterable fields by name, in catalog order."""


class LibraryFields(BaseModel):
    """The catalog fields one Plex library offers (read from its advertised filter fields)."""

    model_config = ConfigDict(frozen=True)

    type: MediaType
    fields: frozenset[str]


class OfferedFields(BaseModel):
    """The catalog fields a Plex server offers, per library: its filter vocabulary (issue 22).

    Real servers advertise their filter fields per library type and level, and they differ from
    the catalog: none offers `episode.director` or `episode.dovi`, and some lack optional fields
    such as `hdr` or `label`. Plex matches nothing on a field a library does not offer, so an
    in-memory evaluation that is to equal Plex-side filtering must not judge it either.
    """

    model_config = ConfigDict(frozen=True)

    libraries: dict[str, LibraryFields] = Field(
        default_factory=dict[str, LibraryFields], description="By library key."
    )

    def for_type(self, media_type: str) -> frozenset[str]:
        """Fields offered by at least one library of this type (`movie` or `show`)."""
        found: set[str] = set()
        for library in self.libraries.values():
            if library.type == media_type:
                found |= library.fields
        return frozenset(found)

    def offers(self, field: str, item: MediaItem) -> bool:
        """Whether Plex can filter the item's library on this field.

        An item of a library this vocabulary does not know is judged by its type: the field
        counts as offered when some library of that type offers it.
        """
        library = self.libraries.get(item.library_key or "")
        if library is not None:
            return field in library.fields
        return field in self.for_type("movie" if item.type == "movie" else "show")


SORT_FIELDS: dict[str, str] = {
    "title": "titleSort",
    "year": "year",
    "releaseDate": "originallyAvailableAt",
    "criticRating": "rating",
    "audienceRating": "audienceRating",
    "userRating": "userRating",
    "contentRating": "contentRating",
    "duration": "duration",
    "plays": "viewCount",
    "addedAt": "addedAt",
    "lastViewedAt": "lastViewedAt",
    "resolution": "mediaHeight",
    "bitrate": "mediaBitrate",
}
"""A channel's `sortField` → the Plex sort key (§2.8)."""

SORT_FIELD_LABELS: dict[str, str] = {
    "title": "Title",
    "year": "Year",
    "releaseDate": "Release / air date",
    "criticRating": "Critic rating",
    "audienceRating": "Audience rating",
    "userRating": "Personal rating",
    "contentRating": "Content rating",
    "duration": "Duration",
    "plays": "Plays",
    "addedAt": "Date added",
    "lastViewedAt": "Date viewed",
    "resolution": "Resolution",
    "bitrate": "Bitrate",
}


def plex_sort(ordering: str, sort_field: str, sort_dir: str) -> str:
    """Build the Plex `sort` parameter for a channel (§2.8).

    Args:
        ordering: The channel's ordering (`SHUFFLE`, `IN_ORDER`, `BY_AIR_DATE`).
        sort_field: A key of `SORT_FIELDS`; anything else sorts by title.
        sort_dir: `"desc"` for descending; anything else is ascending.

    Returns:
        A value such as `"titleSort:asc"` or `"originallyAvailableAt:desc"`.
    """
    if ordering == "SHUFFLE":
        # The shuffle happens in the scheduler; a stable title order keeps its seed meaningful.
        return "titleSort:asc"
    if ordering == "BY_AIR_DATE":
        return "originallyAvailableAt:desc"
    direction = "desc" if sort_dir == "desc" else "asc"
    return f"{SORT_FIELDS.get(sort_field, 'titleSort')}:{direction}"


def parse_filter(raw: object, *, path: str = "$") -> FilterEnvelope:
    """Validate a raw `plexFilter` JSON value and turn it into a `FilterEnvelope`.

    Args:
        raw: The decoded JSON value.
        path: JSON path of `raw` inside its document, used in issue paths.

    Returns:
        The typed envelope.

    Raises:
        FilterError: `raw` has at least one problem `validate_filter` reports.
    """
    issues = validate_filter(raw, path=path)
    if issues:
        raise FilterError(issues)
    return FilterEnvelope.model_validate(raw, by_alias=True, by_name=False)


def validate_filter(
    raw: object, *, path: str, lenient: bool = False, issues: IssueList | None = None
) -> list[FilterIssue]:
    """Check a raw `plexFilter` envelope completely and report every problem.

    A value with no issues is guaranteed to load with `FilterEnvelope.model_validate`.

    Args:
        raw: The decoded JSON value of the envelope.
        path: JSON path of `raw` in its document, e.g. `$.channels[3].definitions[0].plexFilter`.
        lenient: Accept what the reference system writes and reads anyway (`is`/`isNot` on a
            text field, `""` for a boolean, a field that exists on none of the media types);
            `normalise_filter` then rewrites or notes each of them. Lineup files are read so.
        issues: Where to add the problems (a document's shared, bounded list); by default a
            new list. A full `IssueList` stops the walk with `TooManyIssues`, which propagates
            when `issues` is given and is absorbed when it is not.

    Returns:
        Every problem found, in document order; empty when the envelope is valid.
    """
    if issues is None:
        own = IssueList()
        try:
            _validate_envelope(raw, path, lenient, own)
        except TooManyIssues:
            pass
        return own
    _validate_envelope(raw, path, lenient, issues)
    return issues


def _validate_envelope(raw: object, path: str, lenient: bool, issues: list[Issue]) -> None:
    envelope = _as_object(raw)
    if envelope is None:
        issues.append(
            Issue(
                path=path,
                message='a plexFilter must be an object such as {"mediaTypes": ["movie"], '
                f'"filter": {{...}}}}, got {describe_value(raw)}',
            )
        )
        return
    media_types = _check_media_types(envelope, f"{path}.mediaTypes", issues)
    node = envelope.get("filter")
    if node is not None:
        # The inapplicable-field check is skipped by passing no media types: leniently read, such
        # a condition matches nothing, which normalise_filter notes.
        _check_node(node, f"{path}.filter", None if lenient else media_types, 1, lenient, issues)


_ENVELOPE_KEYS = ("mediaTypes", "filter")
_NODE_KEYS = {
    "condition": ("type", "id", "field", "op", "value"),
    "group": ("type", "id", "combinator", "children"),
}


def normalise_filter(raw: dict[str, object], *, path: str) -> tuple[dict[str, object], list[Note]]:
    """Rewrite a leniently valid envelope into exactly what the build step reads, noting changes.

    The result keeps only the keys `FilterEnvelope` reads, in the file's order (so a clean file's
    filter, and its signature, are unchanged), with the reference's spellings made explicit:
    `is`/`isNot` on a text field become `contains`/`notContains` and a boolean's `""` becomes
    `"true"`. A field that exists on none of the searched media types is kept and noted: such a
    condition matches nothing there. Dropping every other key is what makes validation and the
    build read the same thing: a snake_case `media_types`, say, can no longer reach the build.

    Args:
        raw: An envelope `validate_filter(..., lenient=True)` found no problem in.
        path: JSON path of `raw` in its document, used in the notes.

    Returns:
        The envelope to store, and one note per change.
    """
    notes: list[Note] = []
    clean = _kept(raw, _ENVELOPE_KEYS, path, notes)
    media_types = frozenset(cast("list[str]", clean.get("mediaTypes") or [])) or _BOTH
    node = clean.get("filter")
    if node is not None:
        clean["filter"] = _normalise_node(
            cast("dict[str, object]", node), f"{path}.filter", media_types, notes
        )
    return clean, notes


def _kept(
    raw: dict[str, object], keys: tuple[str, ...], path: str, notes: list[Note]
) -> dict[str, object]:
    ignored = [key for key in raw if key not in keys]
    if ignored:
        shown = ", ".join(quoted(key) for key in ignored[:5])
        more = f" and {len(ignored) - 5} more" if len(ignored) > 5 else ""
        notes.append(Note(path=path, message=f"ignored unknown key(s) {shown}{more}"))
    return {key: value for key, value in raw.items() if key in keys}


def _normalise_node(
    raw: dict[str, object], path: str, media_types: frozenset[str], notes: list[Note]
) -> dict[str, object]:
    node = _kept(raw, _NODE_KEYS[cast("str", raw["type"])], path, notes)
    if node["type"] == "group":
        children = cast("list[dict[str, object]]", node["children"])
        node["children"] = [
            _normalise_node(child, f"{path}.children[{index}]", media_types, notes)
            for index, child in enumerate(children)
        ]
        return node
    spec = FIELDS[cast("str", node["field"])]
    op = cast("str", node["op"])
    if spec.kind == "text" and op in TEXT_OP_ALIASES:
        node["op"] = TEXT_OP_ALIASES[op]
        notes.append(
            Note(
                path=f"{path}.op",
                message=f"{op!r} on text field {spec.name!r} read as {node['op']!r}, "
                "as the reference sends it to Plex",
            )
        )
    if spec.kind == "bool" and node["value"] == "":
        node["value"] = "true"
        notes.append(
            Note(
                path=f"{path}.value",
                message=f'empty value of boolean field {spec.name!r} read as "true", '
                'as the reference treats anything but "false"',
            )
        )
    if not spec.applies & media_types:
        # Only the case strict validation refuses is a normalisation; a field missing from one
        # of two searched types is ordinary (it matches nothing in that type's libraries).
        searched = " and ".join(sorted(media_types))
        notes.append(
            Note(
                path=f"{path}.field",
                message=f"field {spec.name!r} does not exist on {searched} libraries: "
                "this condition matches nothing",
            )
        )
    return node


def _as_object(value: object) -> dict[str, object] | None:
    return cast("dict[str, object]", value) if isinstance(value, dict) else None


def _as_array(value: object) -> list[object] | None:
    return cast("list[object]", value) if isinstance(value, list) else None


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(repr(name) for name in names)


def _shown(value: object) -> str:
    """A mistyped name as the user wrote it; other JSON values with their type."""
    return quoted(value) if isinstance(value, str) else describe_value(value)


def _check_media_types(
    envelope: dict[str, object], path: str, issues: list[Issue]
) -> frozenset[str] | None:
    """Return the media types the filter searches, or None when they are unusable."""
    if "mediaTypes" not in envelope:
        return _BOTH
    entries = _as_array(envelope["mediaTypes"])
    if entries is None:
        issues.append(
            Issue(
                path=path,
                message=f"mediaTypes must be an array of {_quoted(MEDIA_TYPES)}, "
                f"got {describe_value(envelope['mediaTypes'])}",
            )
        )
        return None
    valid = True
    for index, entry in enumerate(entries):
        if entry not in MEDIA_TYPES:
            valid = False
            hint = did_you_mean(entry, MEDIA_TYPES) if isinstance(entry, str) else ""
            issues.append(
                Issue(
                    path=f"{path}[{index}]",
                    message=f"unknown media type {_shown(entry)}{hint}; "
                    f"allowed: {_quoted(MEDIA_TYPES)}",
                )
            )
    if not valid:
        return None
    # An empty list searches both types, as the real build always has.
    return frozenset(cast("list[str]", entries)) or _BOTH


def _check_node(
    raw: object,
    path: str,
    media_types: frozenset[str] | None,
    depth: int,
    lenient: bool,
    issues: list[Issue],
) -> None:
    node = _as_object(raw)
    if node is None:
        issues.append(
            Issue(
                path=path,
                message="a filter node must be an object (a condition or a group), "
                f"got {describe_value(raw)}",
            )
        )
        return
    if depth > MAX_FILTER_DEPTH:
        issues.append(
            Issue(path=path, message=f"the filter is nested deeper than {MAX_FILTER_DEPTH} levels")
        )
        return
    _check_id(node, path, issues)
    node_type = node.get("type")
    if node_type == "condition":
        _check_condition(node, path, media_types, lenient, issues)
    elif node_type == "group":
        _check_group(node, path, media_types, depth, lenient, issues)
    elif "type" not in node:
        issues.append(
            Issue(
                path=f"{path}.type",
                message="missing 'type'; a node is either 'condition' or 'group'",
            )
        )
    else:
        hint = did_you_mean(node_type, ("condition", "group")) if isinstance(node_type, str) else ""
        issues.append(
            Issue(
                path=f"{path}.type",
                message=f"unknown node type {_shown(node_type)}{hint}; "
                "allowed: 'condition', 'group'",
            )
        )


def _check_id(node: dict[str, object], path: str, issues: list[Issue]) -> None:
    # The build step loads ids through the same model; anything but a string or null breaks it.
    if "id" in node and node["id"] is not None and not isinstance(node["id"], str):
        issues.append(
            Issue(
                path=f"{path}.id",
                message=f"a node id must be a string or null, got {describe_value(node['id'])}",
            )
        )


def _check_group(
    node: dict[str, object],
    path: str,
    media_types: frozenset[str] | None,
    depth: int,
    lenient: bool,
    issues: list[Issue],
) -> None:
    if "combinator" in node and node["combinator"] not in ("and", "or"):
        combinator = node["combinator"]
        hint = did_you_mean(combinator, ("and", "or")) if isinstance(combinator, str) else ""
        issues.append(
            Issue(
                path=f"{path}.combinator",
                message=f"combinator must be 'and' or 'or', got {describe_value(combinator)}{hint}",
            )
        )
    if "children" not in node:
        issues.append(
            Issue(path=f"{path}.children", message="a group needs a 'children' array of nodes")
        )
        return
    children = _as_array(node["children"])
    if children is None:
        issues.append(
            Issue(
                path=f"{path}.children",
                message="children must be an array of nodes, "
                f"got {describe_value(node['children'])}",
            )
        )
        return
    for index, child in enumerate(children):
        _check_node(child, f"{path}.children[{index}]", media_types, depth + 1, lenient, issues)


def _check_condition(
    node: dict[str, object],
    path: str,
    media_types: frozenset[str] | None,
    lenient: bool,
    issues: list[Issue],
) -> None:
    spec = _check_field(node, path, media_types, issues)
    _check_op(node, path, spec, lenient, issues)
    if "value" not in node:
        issues.append(
            Issue(
                path=f"{path}.value", message="missing 'value'; values are strings, e.g. \"1990\""
            )
        )
        return
    value = node["value"]
    if not isinstance(value, str):
        issues.append(
            Issue(
                path=f"{path}.value",
                message=f"value must be a string (quote it, e.g. {json.dumps(str(value))}), "
                f"got {describe_value(value)}",
            )
        )
        return
    if spec is not None and not (lenient and spec.kind == "bool" and value == ""):
        wanted = _VALUE_CHECKS[spec.kind](value)
        if wanted:
            issues.append(
                Issue(
                    path=f"{path}.value",
                    message=f"field {spec.name!r} ({spec.kind}) needs {wanted}, "
                    f"got {quoted(value)}",
                )
            )


def _check_field(
    node: dict[str, object], path: str, media_types: frozenset[str] | None, issues: list[Issue]
) -> FieldSpec | None:
    if "field" not in node:
        issues.append(Issue(path=f"{path}.field", message="missing 'field'"))
        return None
    name = node["field"]
    if not isinstance(name, str):
        issues.append(
            Issue(
                path=f"{path}.field",
                message=f"field must be a string naming a filter field, got {describe_value(name)}",
            )
        )
        return None
    spec = FIELDS.get(name)
    if spec is None:
        hint = did_you_mean(name, list(FIELDS))
        issues.append(
            Issue(
                path=f"{path}.field",
                message=f"unknown field {quoted(name)}"
                f"{hint or '; known fields: ' + ', '.join(FIELDS)}",
            )
        )
        return None
    if media_types is not None and not spec.applies & media_types:
        only = " and ".join(sorted(spec.applies))
        searched = " and ".join(sorted(media_types))
        issues.append(
            Issue(
                path=f"{path}.field",
                message=f"field {name!r} only exists on {only} libraries, "
                f"but this filter searches {searched} libraries (mediaTypes)",
            )
        )
    return spec


def _check_op(
    node: dict[str, object], path: str, spec: FieldSpec | None, lenient: bool, issues: list[Issue]
) -> None:
    allowed = [op for op in OPS if spec is None or op in ALLOWED_OPS[spec.kind]]
    if lenient and spec is not None and spec.kind == "text":
        # The reference sends `is` on a text field to Plex exactly like `contains`.
        allowed = [op for op in OPS if op in ALLOWED_OPS["text"] or op in TEXT_OP_ALIASES]
    scope = f" for field {spec.name!r} ({spec.kind})" if spec is not None else ""
    if "op" not in node:
        issues.append(
            Issue(path=f"{path}.op", message=f"missing 'op'; allowed{scope}: {', '.join(allowed)}")
        )
        return
    op = node["op"]
    if op not in OPS:
        hint = did_you_mean(op, OPS) if isinstance(op, str) else ""
        issues.append(
            Issue(
                path=f"{path}.op",
                message=f"unknown operator {_shown(op)}{hint}; "
                f"allowed{scope}: {', '.join(allowed)}",
            )
        )
    elif op not in allowed:
        issues.append(
            Issue(
                path=f"{path}.op",
                message=f"operator {op!r} is not allowed{scope}; allowed: {', '.join(allowed)}",
            )
        )


_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)")
_WHOLE = re.compile(r"\d+")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _parse_number(text: str) -> float | None:
    return float(text) if _NUMBER.fullmatch(text) else None


def _parse_date(text: str) -> dt.date | None:
    if not _ISO_DATE.fullmatch(text):
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


def _parse_bool(text: str) -> bool | None:
    folded = text.strip().lower()
    # "1"/"0" are read too because the reference's local evaluator treated "0" as false.
    if folded in ("true", "1"):
        return True
    if folded in ("false", "0"):
        return False
    return None


def _no_check(_: str) -> str | None:
    return None


def _check_number(value: str) -> str | None:
    return None if _parse_number(value) is not None else 'a number such as "1990" or "7.5"'


def _check_date(value: str) -> str | None:
    return (
        None if _parse_date(value) is not None else 'a real date as YYYY-MM-DD, e.g. "1969-12-31"'
    )


def _check_days(value: str) -> str | None:
    return None if _WHOLE.fullmatch(value) else 'a whole number of days (0 or more), e.g. "30"'


def _check_bool(value: str) -> str | None:
    return None if value in ("true", "false") else '"true" or "false"'


_VALUE_CHECKS: dict[FieldKind, Callable[[str], str | None]] = {
    "tag": _no_check,
    "string": _no_check,
    "text": _no_check,
    "int": _check_number,
    "date": _check_date,
    "recency": _check_days,
    "bool": _check_bool,
}
"""Per kind: None when a value is readable, else a description of what the kind needs."""


def canonical_json(value: object) -> str:
    """Serialise a JSON value canonically, byte for byte like the reference's signature code (§4.4).

    Object keys are sorted by UTF-16 code unit (JavaScript's default string order), output is
    compact, `null` is kept, numbers print as JavaScript prints them (`1`, not `1.0`) and non-ASCII
    text is kept as is, with JSON.stringify's escapes.

    Args:
        value: A JSON value (dict with string keys, list or tuple, str, int, float, bool, None).

    Returns:
        The canonical text.

    Raises:
        TypeError: `value` contains something JSON cannot represent.
    """
    if _plain(value):
        # Nothing in `value` prints differently in Python and JavaScript, so the C encoder gives
        # the same text many times faster; the planner signs every channel of a file this way.
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        if _LONE_SURROGATE.search(text) is None:
            return text
        return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    parts: list[str] = []
    _emit(value, parts)
    return "".join(parts)


def _plain(value: object) -> bool:
    """Whether json.dumps(sort_keys=True) writes `value` exactly as JavaScript would.

    True when it holds no float and no integer beyond 2**53 (JavaScript prints those its own way)
    and every object key is an ASCII string (code point order is then UTF-16 order).
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is dict:
            mapping = cast("dict[object, object]", item)
            for key in mapping:
                if type(key) is not str or not cast("str", key).isascii():
                    return False
            stack.extend(mapping.values())
        elif kind is list or kind is tuple:
            stack.extend(cast("list[object]", item))
        elif kind is int:
            if abs(cast("int", item)) > 2**53:
                return False
        else:
            return False
    return True


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_encode_string: Callable[[str], str] = json.encoder.encode_basestring


def _utf16_order(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like JavaScript's code-unit string comparison.
    return key.encode("utf-16-be", "surrogatepass")


def _emit(value: object, parts: list[str]) -> None:
    # Strings first: they are most of any filter, and the planner signs every channel.
    if type(value) is str:
        parts.append(_js_string(cast("str", value)))
    elif value is None:
        parts.append("null")
    elif isinstance(value, bool):
        parts.append("true" if value else "false")
    elif isinstance(value, int):
        parts.append(_js_integer(value))
    elif isinstance(value, float):
        parts.append(_js_number(value))
    elif isinstance(value, str):
        parts.append(_js_string(value))
    elif isinstance(value, list | tuple):
        parts.append("[")
        for index, item in enumerate(cast("list[object] | tuple[object, ...]", value)):
            if index:
                parts.append(",")
            _emit(item, parts)
        parts.append("]")
    elif isinstance(value, dict):
        mapping = cast("dict[object, object]", value)
        if not all(isinstance(key, str) for key in mapping):
            raise TypeError("canonical_json: object keys must be strings")
        keys = sorted(cast("list[str]", list(mapping)), key=_utf16_order)
        parts.append("{")
        for index, key in enumerate(keys):
            if index:
                parts.append(",")
            parts.append(_js_string(key))
            parts.append(":")
            _emit(mapping[key], parts)
        parts.append("}")
    else:
        raise TypeError(f"canonical_json: {type(value).__name__} is not a JSON value")


def _js_string(text: str) -> str:
    # What json.dumps(text, ensure_ascii=False) returns, without its per-call encoder set-up.
    encoded: str = _encode_string(text)
    if _LONE_SURROGATE.search(encoded) is None:
        return encoded
    # A lone surrogate cannot be written as UTF-8; JSON.stringify escapes it, so do the same.
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", encoded)


def _js_integer(number: int) -> str:
    if abs(number) <= 2**53:
        return str(number)
    # Beyond 2**53 JavaScript holds a rounded double (or Infinity), so print what it would.
    try:
        return _js_number(float(number))
    except OverflowError:
        return "null"


def _js_number(number: float) -> str:
    """Print a float the way JavaScript's Number.prototype.toString does."""
    if not math.isfinite(number):
        return "null"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr gives the shortest round-tripping digits, which is also what JavaScript picks.
    _, digit_tuple, exponent = Decimal(repr(abs(number))).as_tuple()
    digits = "".join(str(digit) for digit in digit_tuple).rstrip("0")
    exponent = cast("int", exponent) + len(digit_tuple) - len(digits)
    k = len(digits)
    n = exponent + k
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return sign + text


def evaluate(
    node: FilterNode | None, item: MediaItem, offered: OfferedFields | None = None
) -> bool:
    """Decide locally whether a resolved item matches a filter tree (§2.9).

    Unlike the reference, an OR group with no children matches nothing (as Plex resolves it) and
    an AND group with none matches everything, and a resolution matches by Plex's key or title
    ('1080' or '1080p', '4k' or '4K'; the reference compares the title with the key). Fields the
    local evaluator does not support, fields that do not exist on the item's library type,
    operators not allowed for the field and values that cannot be read all yield False: the
    evaluator never claims an item it cannot judge.

    Args:
        node: The filter tree; None matches every item.
        item: A resolved movie or episode.
        offered: The server's filter vocabulary. A condition on a field the item's library does
            not offer is False whatever its operator, as Plex matches nothing on it (a director
            condition never matches an episode on a real server). None judges every catalog
            field the item's library type has.

    Returns:
        Whether the item matches.
    """
    if node is None:
        return True
    if isinstance(node, Group):
        matches = (evaluate(child, item, offered) for child in node.children)
        return any(matches) if node.combinator == "or" else all(matches)
    return _evaluate_condition(node, item, offered)


def _evaluate_condition(
    condition: Condition, item: MediaItem, offered: OfferedFields | None
) -> bool:
    spec = FIELDS.get(condition.field)
    if spec is None or not spec.local or condition.op not in ALLOWED_OPS[spec.kind]:
        return False
    library_type = "movie" if item.type == "movie" else "show"
    if library_type not in spec.applies:
        return False
    if offered is not None and not offered.offers(spec.name, item):
        return False
    if spec.kind == "text":
        return _text_test(condition, _LOCAL_TEXT[spec.name](item))
    if spec.name == "resolution":
        return _resolution_test(condition, item.resolution)
    if spec.kind == "tag":
        return _tag_test(condition, _LOCAL_TAGS[spec.name](item))
    if spec.kind == "int":
        return _number_test(condition, _LOCAL_NUMBERS[spec.name](item))
    if spec.kind == "bool":
        expected = _parse_bool(condition.value)
        return expected is not None and _LOCAL_FLAGS[spec.name](item) == expected
    if spec.kind == "date":
        return _date_test(condition, item.originally_available_at)
    return False


def _text_test(condition: Condition, texts: tuple[str | None, ...]) -> bool:
    needle = condition.value.lower()
    found = any(needle in text.lower() for text in texts if text is not None)
    return not found if condition.op == "notContains" else found


def _tag_test(condition: Condition, tags: tuple[str | None, ...]) -> bool:
    wanted = condition.value.lower()
    found = any(tag.lower() == wanted for tag in tags if tag is not None)
    return not found if condition.op == "isNot" else found


def _resolution_key(text: str) -> str:
    """A resolution as Plex keys it: its title '1080p' is the key '1080', '4K' is '4k'."""
    folded = text.strip().lower()
    return folded[:-1] if folded.endswith("p") and folded[:-1].isdigit() else folded


def _resolution_test(condition: Condition, actual: str | None) -> bool:
    # Items carry the key; lineup files (and Airwave's editor) write the title. Plex matches a
    # value to the choice by either, so both spellings of one resolution are the same value.
    found = actual is not None and _resolution_key(actual) == _resolution_key(condition.value)
    return not found if condition.op == "isNot" else found


def _number_test(condition: Condition, actual: float | None) -> bool:
    expected = _parse_number(condition.value)
    if actual is None or expected is None:
        return False
    if condition.op == "gte":
        return actual >= expected
    if condition.op == "lte":
        return actual <= expected
    return actual == expected


def _date_test(condition: Condition, actual_text: str | None) -> bool:
    expected = _parse_date(condition.value)
    actual = _parse_date(actual_text[:10]) if actual_text else None
    if actual is None or expected is None:
        return False
    return actual <= expected if condition.op == "lte" else actual >= expected


def _decade(item: MediaItem) -> float | None:
    return None if item.year is None else item.year // 10 * 10


_LOCAL_TEXT: dict[str, Callable[[MediaItem], tuple[str | None, ...]]] = {
    "title": lambda item: (item.title, item.show_title),
    "episodeTitle": lambda item: (item.title,),
}
_LOCAL_TAGS: dict[str, Callable[[MediaItem], tuple[str | None, ...]]] = {
    "genre": lambda item: item.genres,
    "director": lambda item: item.directors,
    "actor": lambda item: item.cast,
    "studio": lambda item: (item.studio,),
    "contentRating": lambda item: (item.content_rating,),
}
_LOCAL_NUMBERS: dict[str, Callable[[MediaItem], float | None]] = {
    "year": lambda item: item.year,
    "episodeYear": lambda item: item.year,
    "decade": _decade,
    "audienceRating": lambda item: item.audience_rating,
    "criticRating": lambda item: item.critic_rating,
    "duration": lambda item: item.duration_ms / 60000,
}
_LOCAL_FLAGS: dict[str, Callable[[MediaItem], bool]] = {
    "hdr": lambda item: item.hdr is not None,
    "dovi": lambda item: item.dovi,
}
