"""The per-channel agent's tools: definitions as data, the toolbox protocol, dispatch, checks.

Both providers (the Anthropic worker loop and the offline builder) drive a channel build through
the same `ToolSession`, so every commit is verified the same way (docs/reference/ai-lineup.md
§6.4, issue 4 item 7):

- `TOOL_DEFINITIONS` — the six tools (name, description, JSON input schema) in a fixed order;
  `tool_definitions_api()` renders them as the Messages API `tools` list. Nothing per-channel or
  per-library is embedded, so the cached prefix (tools → system → shared context) is identical
  for every build.
- `ChannelToolbox` — what the runtime implements against Plex and Postgres: `discover_field_values`,
  `preview_filter`, `commit_channel`, `give_up`. `list_filter_fields` (the static catalog) and
  `search_titles` (a preview of `title contains query`) are answered here from those, so they
  cannot drift between providers. A toolbox method signals a problem the model should see by
  raising `ToolError(message)`; any other exception is a real failure and propagates.
- `run_tool(toolbox, name, input)` — validates the input and dispatches one call, returning a
  `ToolResult` (JSON `content`, `is_error`). `commit_channel` never trusts the model's claimed
  count: it re-resolves the filter with `toolbox.preview_filter` and refuses the commit with the
  reasons from `verify_pool` (fewer than `PoolRules.min_items` items, less than
  `PoolRules.min_runtime_hours` of programming, or every item of the searched libraries); a
  filter that only excludes things is refused before it is even resolved. Given a
  `ChannelCheck`, the commit also runs the lineup-level checks of `lineup_checks` (overlap with
  the channels already kept, the audience's rating ceiling) and remembers the kept pool.
- `exclude` — `preview_filter` and `commit_channel` take an optional second filter whose items
  leave the pool; the commit stores it as an EXCLUDE definition after the filter's INCLUDE one
  (`channel_definitions`, combined as docs/reference/domain.md §2.6). Every check judges the
  pool *after* the exclusion, so an exclusion is how a kids or family channel is kept under its
  rating ceiling (`lineup_checks.ceiling_exclusion`).
- `ToolSession` — one build's state: the planned filter as default, commit/give-up at most once,
  the summarised trace (`TraceStep`, real matched counts), and `finish()` → `ChannelOutcome`.
- `summarise_pool(items)` — the pure `FilterPreview` of a resolved pool (counts, runtime hours,
  samples), for toolboxes that resolve to `MediaItem`s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from airwave_dagster.domain.ai.lineup_checks import (
    Audience,
    LineupGuard,
    audience_of,
    rating_counts,
)
from airwave_dagster.domain.ai.plan import selects_something
from airwave_dagster.domain.ai.usage import Usage
from airwave_dagster.domain.errors import FilterError, ToolError, did_you_mean
from airwave_dagster.domain.filters import (
    ALLOWED_OPS,
    FIELDS,
    OPS,
    Condition,
    FilterEnvelope,
    FilterNode,
    parse_filter,
)
from airwave_dagster.domain.library import MEDIA_TYPES, MediaItem, MediaType
from airwave_dagster.domain.lineup_file import DefinitionMode

MAX_MODEL_CALLS = 24
"""Model calls one channel's agent may make (docs/reference/ai-lineup.md §6.3)."""

MIN_POOL_ITEMS = 3
"""Fewest items a committed channel may have (docs/reference/ai-lineup.md §6.4)."""

MIN_RUNTIME_HOURS = 10.0
"""Least programming a committed channel may have, in hours (issue 4; configurable)."""


TRACE_RESULT_CHARS = 600
"""Characters of a tool result kept in the trace (docs/reference/ai-lineup.md §6.5)."""

TRACE_TEXT_CHARS = 1000
"""Characters of a model text block kept in the trace (docs/reference/ai-lineup.md §6.5)."""

QUICK_SAMPLES = 40
COMPACT_SAMPLES = 15

PreviewDetail = Literal["quick", "compact"]
BuildStatus = Literal["created", "skipped", "failed"]
Terminal = Literal["committed", "gave_up"]


class PoolRules(BaseModel):
    """What a pool must have before a channel is committed."""

    model_config = ConfigDict(frozen=True)

    min_items: int = Field(default=MIN_POOL_ITEMS, ge=1)
    min_runtime_hours: float = Field(default=MIN_RUNTIME_HOURS, ge=0)


class ShowSample(BaseModel):
    """A show of a pool: its episodes in the pool and their runtime."""

    model_config = ConfigDict(frozen=True)

    title: str
    episodes: int
    hours: float


class FilterPreview(BaseModel):
    """The verified facts of a filter's complete pool (no cap), as tools report them."""

    model_config = ConfigDict(frozen=True)

    total_items: int = Field(ge=0, description="Movies plus episodes.")
    movie_count: int = Field(default=0, ge=0)
    episode_count: int = Field(default=0, ge=0)
    show_count: int = Field(default=0, ge=0, description="Distinct shows of the episodes.")
    total_runtime_hours: float = Field(default=0.0, ge=0)
    sample_titles: list[str] = Field(
        default_factory=list[str], description="Representative movie titles, e.g. 'Heat (1995)'."
    )
    top_shows: list[ShowSample] = Field(
        default_factory=list[ShowSample], description="Shows with the most episodes in the pool."
    )
    library_items: int | None = Field(
        default=None,
        description="Items in the searched libraries when known; a pool this big is the whole "
        "library and is refused.",
    )
    item_keys: tuple[str, ...] = Field(
        default=(),
        exclude=True,
        description="Rating keys of the pool, for the lineup checks (never shown or stored).",
    )
    content_ratings: dict[str, int] = Field(
        default_factory=dict[str, int],
        exclude=True,
        description="Items per content rating ('unrated' for none), for the audience check.",
    )


def summarise_pool(
    items: Sequence[MediaItem],
    *,
    detail: PreviewDetail = "quick",
    library_items: int | None = None,
) -> FilterPreview:
    """Describe a resolved pool: counts, runtime and a deterministic sample.

    Args:
        items: The complete pool (movies and episodes), unique by rating key.
        detail: `quick` samples more titles than `compact`.
        library_items: Items in the searched libraries, when the caller knows it.

    Returns:
        The preview.
    """
    movies = sorted(
        (item for item in items if item.type == "movie"),
        key=lambda item: (item.title.casefold(), item.rating_key),
    )
    shows: dict[str, list[MediaItem]] = {}
    for item in items:
        if item.type == "episode":
            shows.setdefault(item.show_rating_key or item.show_title or item.title, []).append(item)
    ranked = sorted(
        shows.values(),
        key=lambda eps: (-len(eps), (eps[0].show_title or eps[0].title).casefold()),
    )
    limit = QUICK_SAMPLES if detail == "quick" else COMPACT_SAMPLES
    show_limit = limit // 2
    top_shows = [
        ShowSample(
            title=eps[0].show_title or eps[0].title,
            episodes=len(eps),
            hours=round(sum(e.duration_ms for e in eps) / 3_600_000, 1),
        )
        for eps in ranked[:show_limit]
    ]
    step = max(1, len(movies) / limit) if movies else 1
    picked = [movies[int(index * step)] for index in range(min(limit, len(movies)))]
    samples = [f"{movie.title} ({movie.year})" if movie.year else movie.title for movie in picked]
    return FilterPreview(
        total_items=len(items),
        movie_count=len(movies),
        episode_count=sum(len(eps) for eps in shows.values()),
        show_count=len(shows),
        total_runtime_hours=round(sum(item.duration_ms for item in items) / 3_600_000, 2),
        sample_titles=samples,
        top_shows=top_shows,
        library_items=library_items,
        item_keys=tuple(sorted({item.rating_key for item in items})),
        content_ratings=rating_counts(item.content_rating for item in items),
    )


def verify_pool(
    preview: FilterPreview,
    min_items: int = MIN_POOL_ITEMS,
    min_runtime_hours: float = MIN_RUNTIME_HOURS,
) -> list[str]:
    """Reasons to refuse committing a channel with this pool; empty when it may be committed.

    Args:
        preview: The pool as re-resolved by the commit itself (never the model's claim).
        min_items: Fewest items allowed.
        min_runtime_hours: Least total runtime allowed.

    Returns:
        Human-readable reasons, in a fixed order.
    """
    reasons: list[str] = []
    if preview.total_items < min_items:
        noun = "item" if preview.total_items == 1 else "items"
        reasons.append(
            f"only {preview.total_items} {noun} matched; a channel needs at least {min_items}"
        )
    if preview.total_runtime_hours < min_runtime_hours:
        reasons.append(
            f"only {preview.total_runtime_hours:.1f} h of programming; a channel needs at least "
            f"{min_runtime_hours:g} h"
        )
    if preview.library_items and preview.total_items >= preview.library_items:
        reasons.append(
            f"the filter matches all {preview.library_items} items of the searched libraries; "
            "a channel must be narrower than the whole library"
        )
    return reasons


@dataclass(frozen=True)
class ChannelCheck:
    """The lineup-level checks of one channel's commit: its lineup's guard and its audience."""

    guard: LineupGuard
    name: str
    audience: Audience | None = None

    @classmethod
    def of(cls, guard: LineupGuard, name: str, *texts: str) -> ChannelCheck:
        """The check of a channel called `name`; the audience is read from name and texts."""
        return cls(guard=guard, name=name, audience=audience_of(name, *texts))

    def reasons(self, pool: FilterPreview) -> list[str]:
        """Why the lineup refuses this pool (empty when it may be kept)."""
        return self.guard.check(
            frozenset(pool.item_keys), pool.content_ratings, audience=self.audience
        )

    def keep(self, pool: FilterPreview, node: FilterNode | None) -> None:
        """Remember the committed pool as part of the lineup."""
        self.guard.keep(self.name, frozenset(pool.item_keys), node)


class CommittedChannel(BaseModel):
    """What the toolbox reports after enabling the reserved channel."""

    model_config = ConfigDict(frozen=True)

    channel_id: str
    number: int


class ChannelToolbox(Protocol):
    """The runtime side of the worker tools, bound to one reserved channel.

    Every method may raise `ToolError` for a problem the model should read (unknown tag field,
    Plex refusing a query it can fix); any other exception ends the build as failed.
    """

    def discover_field_values(self, field: str, media_types: tuple[MediaType, ...]) -> list[str]:
        """Sorted unique tag titles of a tag field across the libraries of those types."""
        ...

    def preview_filter(
        self, envelope: FilterEnvelope, detail: PreviewDetail, exclude: FilterNode | None = None
    ) -> FilterPreview:
        """Resolve the complete pool of `envelope`, minus what `exclude` matches; summarise it."""
        ...

    def commit_channel(
        self, envelope: FilterEnvelope, pool: FilterPreview, exclude: FilterNode | None = None
    ) -> CommittedChannel:
        """Store the verified definitions (`channel_definitions`) and enable the reserved channel.

        Called only after `verify_pool` accepted `pool`, which the commit resolved itself.
        """
        ...

    def give_up(self, reason: str) -> None:
        """Release the reserved channel (delete the claim)."""
        ...


def channel_definitions(
    envelope: FilterEnvelope, exclude: FilterNode | None = None
) -> list[tuple[DefinitionMode, FilterEnvelope]]:
    """The PREDICATE definitions of a channel, in evaluation order (docs/reference/domain.md §2.6).

    The filter is the INCLUDE definition; an exclusion follows as an EXCLUDE definition over the
    same media types, so it removes only what the filter added.
    """
    definitions: list[tuple[DefinitionMode, FilterEnvelope]] = [("INCLUDE", envelope)]
    if exclude is not None:
        definitions.append(
            ("EXCLUDE", FilterEnvelope(media_types=envelope.media_types, filter=exclude))
        )
    return definitions


class ToolDefinition(BaseModel):
    """One tool as the Messages API receives it."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]

    def to_api(self) -> dict[str, Any]:
        """The `tools` entry for the Messages API."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


_MEDIA_TYPES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "enum": list(MEDIA_TYPES)},
    "minItems": 1,
    "description": "Library types to search: movie and/or show.",
}

_NODE_DEFS: dict[str, Any] = {
    "node": {
        "anyOf": [
            {"$ref": "#/$defs/condition"},
            {"$ref": "#/$defs/group"},
        ]
    },
    "condition": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "const": "condition"},
            "field": {"type": "string", "description": "A field from list_filter_fields."},
            "op": {"type": "string", "enum": list(OPS)},
            "value": {"type": "string", "description": "Always a string."},
        },
        "required": ["type", "field", "op", "value"],
        "additionalProperties": False,
    },
    "group": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "const": "group"},
            "combinator": {"type": "string", "enum": ["and", "or"]},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        },
        "required": ["type", "combinator", "children"],
        "additionalProperties": False,
    },
}


_EXCLUDE_SCHEMA: dict[str, Any] = {
    "$ref": "#/$defs/node",
    "description": "Optional: items matching this filter are removed from the pool (an EXCLUDE "
    "definition stored after the filter). A kids or family channel keeps its rating ceiling "
    "with it: contentRating isNot each allowed rating.",
}


def _schema(
    properties: dict[str, Any], required: list[str], *, nodes: bool = False
) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if nodes:
        schema["$defs"] = _NODE_DEFS
    return schema


TOOL_DEFINITIONS: tuple[ToolDefinition, ...] = (
    ToolDefinition(
        name="list_filter_fields",
        description="List every filter field with its kind, allowed operators and the library "
        "types it exists on. Only needed to check an operator; the catalog is in your context.",
        input_schema=_schema({}, []),
    ),
    ToolDefinition(
        name="discover_field_values",
        description="List the exact tag values of one tag field (e.g. actor, director, writer, "
        "producer) across the libraries of the given types. Tag values of the preloaded fields "
        "are already in your context: do not fetch them again.",
        input_schema=_schema(
            {
                "field": {"type": "string", "description": "A tag field name."},
                "mediaTypes": _MEDIA_TYPES_SCHEMA,
            },
            ["field"],
        ),
    ),
    ToolDefinition(
        name="search_titles",
        description="Find items whose title (or show title) contains the text; returns a "
        "compact preview of the matches.",
        input_schema=_schema(
            {"query": {"type": "string", "minLength": 1}, "mediaTypes": _MEDIA_TYPES_SCHEMA},
            ["query"],
        ),
    ),
    ToolDefinition(
        name="preview_filter",
        description="Resolve a filter against the real library and report its complete pool: "
        "total items, movies, episodes, shows, total runtime hours and sample titles. Use "
        "detail 'compact' while iterating and 'quick' for the final check.",
        input_schema=_schema(
            {
                "mediaTypes": _MEDIA_TYPES_SCHEMA,
                "filter": {"$ref": "#/$defs/node"},
                "exclude": _EXCLUDE_SCHEMA,
                "detail": {"type": "string", "enum": ["quick", "compact"]},
            },
            ["mediaTypes", "filter"],
            nodes=True,
        ),
    ),
    ToolDefinition(
        name="commit_channel",
        description="Commit the channel with its final filter and exclusion (omit either to keep "
        "the proposed one). The commit resolves the pool itself and refuses pools that are too "
        "small, too short, the whole library, a repeat of another channel of the lineup, or "
        "above a kids or family channel's rating ceiling. Call it once, when a preview looked "
        "right.",
        input_schema=_schema(
            {
                "mediaTypes": _MEDIA_TYPES_SCHEMA,
                "filter": {"$ref": "#/$defs/node"},
                "exclude": _EXCLUDE_SCHEMA,
                "poolSize": {
                    "type": "integer",
                    "description": "Item count of your final preview (informational only).",
                },
            },
            ["mediaTypes"],
            nodes=True,
        ),
    ),
    ToolDefinition(
        name="give_up",
        description="Abandon this channel because the library cannot support it, after real "
        "alternatives failed. Never on the first preview.",
        input_schema=_schema({"reason": {"type": "string", "minLength": 1}}, ["reason"]),
    ),
)
"""The worker's tools, in the order every request sends them."""

TOOL_NAMES: tuple[str, ...] = tuple(tool.name for tool in TOOL_DEFINITIONS)


def tool_definitions_api() -> list[dict[str, Any]]:
    """`TOOL_DEFINITIONS` as the Messages API `tools` parameter (fresh copies)."""
    return [json.loads(json.dumps(tool.to_api())) for tool in TOOL_DEFINITIONS]


class FieldInfo(BaseModel):
    """One row of `list_filter_fields`."""

    model_config = ConfigDict(frozen=True)

    field: str
    label: str
    kind: str
    operators: list[str]
    applies_to: list[str]
    has_discoverable_values: bool


def filter_field_infos() -> list[FieldInfo]:
    """All 38 filter fields in catalog order, as `list_filter_fields` returns them."""
    return [
        FieldInfo(
            field=spec.name,
            label=spec.label,
            kind=spec.kind,
            operators=[op for op in OPS if op in ALLOWED_OPS[spec.kind]],
            applies_to=sorted(spec.applies),
            has_discoverable_values=spec.kind == "tag",
        )
        for spec in FIELDS.values()
    ]


class ToolResult(BaseModel):
    """The outcome of one tool call, ready to be sent back as a `tool_result` block."""

    model_config = ConfigDict(frozen=True)

    tool: str
    content: str = Field(description="Compact JSON text for the tool_result block.")
    is_error: bool = False
    terminal: Terminal | None = Field(
        default=None, description="Set when this call committed the channel or gave it up."
    )
    matched: int | None = Field(default=None, description="Real pool size, for previews/commits.")
    preview: FilterPreview | None = None
    committed: CommittedChannel | None = None
    envelope: FilterEnvelope | None = Field(
        default=None, description="The filter this call previewed or committed."
    )
    exclude: FilterNode | None = Field(
        default=None, description="The exclusion this call previewed or committed, if any."
    )
    reason: str | None = Field(default=None, description="give_up's reason / refusal reasons.")


def _dumps(payload: object) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _error(tool: str, message: str, *, reason: str | None = None) -> ToolResult:
    return ToolResult(tool=tool, content=_dumps({"error": message}), is_error=True, reason=reason)


def _media_types(raw: object, tool: str) -> tuple[MediaType, ...]:
    if raw is None:
        return MEDIA_TYPES
    if not isinstance(raw, list) or not raw:
        raise ToolError(f"{tool}: mediaTypes must be a non-empty array of 'movie'/'show'")
    found: list[MediaType] = []
    for entry in raw:
        if entry == "movie" or entry == "show":
            if entry not in found:
                found.append(entry)
        else:
            raise ToolError(f"{tool}: unknown media type {entry!r}; allowed: 'movie', 'show'")
    return tuple(found)


def _envelope(media_types: tuple[MediaType, ...], raw_filter: object, tool: str) -> FilterEnvelope:
    try:
        return parse_filter({"mediaTypes": list(media_types), "filter": raw_filter}, path="$")
    except FilterError as error:
        problems = "; ".join(str(issue).replace("$.filter", "filter", 1) for issue in error.issues)
        raise ToolError(f"{tool}: the filter is invalid: {problems}") from None


def _preview_payload(preview: FilterPreview) -> dict[str, Any]:
    """The preview as the model reads it (camelCase, like the tool inputs)."""
    return {
        "totalItems": preview.total_items,
        "movieCount": preview.movie_count,
        "episodeCount": preview.episode_count,
        "showCount": preview.show_count,
        "totalRuntimeHours": preview.total_runtime_hours,
        "sampleTitles": preview.sample_titles,
        "topShows": [show.model_dump() for show in preview.top_shows],
    }


def run_tool(
    toolbox: ChannelToolbox,
    name: str,
    tool_input: Mapping[str, Any] | None,
    *,
    rules: PoolRules | None = None,
    default_envelope: FilterEnvelope | None = None,
    check: ChannelCheck | None = None,
    default_exclude: FilterNode | None = None,
) -> ToolResult:
    """Validate and execute one tool call.

    Args:
        toolbox: The runtime side of the tools.
        name: The tool's name as the model called it.
        tool_input: The call's input object.
        rules: Pool verification rules for `commit_channel` (defaults: 3 items, 10 h).
        default_envelope: The planned filter, used by `commit_channel` when its filter is omitted.
        check: The lineup-level checks `commit_channel` also applies (none: the pool alone).
        default_exclude: The planned exclusion, used by `commit_channel` when its exclude is
            omitted.

    Returns:
        The result; `is_error` for bad input, a refused commit or a `ToolError`.
    """
    if tool_input is not None and not isinstance(tool_input, Mapping):
        return _error(name, f"{name}: the input must be a JSON object")
    payload = dict(tool_input or {})
    handler = _HANDLERS.get(name)
    if handler is None:
        hint = did_you_mean(name, TOOL_NAMES)
        return _error(name, f"unknown tool {name!r}{hint}; tools: {', '.join(TOOL_NAMES)}")
    try:
        if name == "commit_channel":
            return _commit(
                toolbox, payload, rules or PoolRules(), default_envelope, check, default_exclude
            )
        return handler(toolbox, payload, rules or PoolRules(), default_envelope)
    except ToolError as error:
        return _error(name, error.message)
    except ValidationError as error:
        return _error(name, f"{name}: invalid input: {error.errors()[0]['msg']}")


def _list_fields(
    _toolbox: ChannelToolbox,
    _payload: dict[str, Any],
    _rules: PoolRules,
    _default: FilterEnvelope | None,
) -> ToolResult:
    fields = [info.model_dump() for info in filter_field_infos()]
    return ToolResult(tool="list_filter_fields", content=_dumps({"fields": fields}))


def _discover(
    toolbox: ChannelToolbox,
    payload: dict[str, Any],
    _rules: PoolRules,
    _default: FilterEnvelope | None,
) -> ToolResult:
    tool = "discover_field_values"
    field = payload.get("field")
    if not isinstance(field, str) or not field:
        raise ToolError(f"{tool}: 'field' must name a filter field")
    spec = FIELDS.get(field)
    if spec is None:
        raise ToolError(f"{tool}: unknown field {field!r}{did_you_mean(field, list(FIELDS))}")
    media_types = _media_types(payload.get("mediaTypes"), tool)
    if spec.kind != "tag":
        note = f"{field!r} is a {spec.kind} field; it has no list of values"
        return ToolResult(tool=tool, content=_dumps({"field": field, "values": [], "note": note}))
    values = sorted(set(toolbox.discover_field_values(field, media_types)), key=_value_order)
    return ToolResult(tool=tool, content=_dumps({"field": field, "values": values}))


def _value_order(value: str) -> tuple[str, str]:
    return (value.casefold(), value)


def _search(
    toolbox: ChannelToolbox,
    payload: dict[str, Any],
    _rules: PoolRules,
    _default: FilterEnvelope | None,
) -> ToolResult:
    tool = "search_titles"
    query = payload.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError(f"{tool}: 'query' must be non-empty text")
    media_types = _media_types(payload.get("mediaTypes"), tool)
    envelope = FilterEnvelope(
        media_types=list(media_types),
        filter=Condition(field="title", op="contains", value=query.strip()),
    )
    preview = toolbox.preview_filter(envelope, "compact")
    return _preview_result(tool, preview, envelope)


def _preview_result(
    tool: str,
    preview: FilterPreview,
    envelope: FilterEnvelope,
    exclude: FilterNode | None = None,
) -> ToolResult:
    """What a previewing tool returns to the model: the pool summary and its real count."""
    return ToolResult(
        tool=tool,
        content=_dumps(_preview_payload(preview)),
        matched=preview.total_items,
        preview=preview,
        envelope=envelope,
        exclude=exclude,
    )


def _exclusion(
    payload: Mapping[str, Any], media_types: tuple[MediaType, ...], tool: str
) -> FilterNode | None:
    """The call's `exclude` filter; None when omitted."""
    raw = payload.get("exclude")
    return None if raw is None else _envelope(media_types, raw, f"{tool} (exclude)").filter


def _preview(
    toolbox: ChannelToolbox,
    payload: dict[str, Any],
    _rules: PoolRules,
    _default: FilterEnvelope | None,
) -> ToolResult:
    tool = "preview_filter"
    media_types = _media_types(payload.get("mediaTypes"), tool)
    if payload.get("filter") is None:
        raise ToolError(f"{tool}: 'filter' is required (a condition or a group)")
    envelope = _envelope(media_types, payload["filter"], tool)
    exclude = _exclusion(payload, media_types, tool)
    detail = payload.get("detail", "quick")
    if detail not in ("quick", "compact"):
        raise ToolError(f"{tool}: detail must be 'quick' or 'compact', got {detail!r}")
    preview = toolbox.preview_filter(envelope, detail, exclude)
    return _preview_result(tool, preview, envelope, exclude)


def _commit(
    toolbox: ChannelToolbox,
    payload: dict[str, Any],
    rules: PoolRules,
    default: FilterEnvelope | None,
    check: ChannelCheck | None = None,
    default_exclude: FilterNode | None = None,
) -> ToolResult:
    tool = "commit_channel"
    media_types = _media_types(payload.get("mediaTypes"), tool)
    raw_filter = payload.get("filter")
    node: FilterNode | None
    if raw_filter is not None:
        node = _envelope(media_types, raw_filter, tool).filter
    else:
        node = default.filter if default is not None else None
    if node is None:
        raise ToolError(f"{tool}: a channel needs a filter; a missing filter is the whole library")
    if not selects_something(node):
        raise ToolError(
            f"{tool}: the filter only excludes things (isNot / notContains), so it matches nearly "
            "the whole library; add a condition that selects what the channel is about"
        )
    envelope = FilterEnvelope(media_types=list(media_types), filter=node)
    exclude = _exclusion(payload, media_types, tool)
    if "exclude" not in payload:
        exclude = default_exclude
    pool = toolbox.preview_filter(envelope, "compact", exclude)
    reasons = verify_pool(pool, rules.min_items, rules.min_runtime_hours)
    if check is not None:
        reasons += check.reasons(pool)
    if reasons:
        message = (
            "commit refused: " + "; ".join(reasons) + ". Broaden or narrow the filter and "
            "preview again, or give_up if the library cannot support this channel."
        )
        refused = _error(tool, message, reason="; ".join(reasons))
        return refused.model_copy(
            update={
                "matched": pool.total_items,
                "preview": pool,
                "envelope": envelope,
                "exclude": exclude,
            }
        )
    committed = toolbox.commit_channel(envelope, pool, exclude)
    if check is not None:
        check.keep(pool, node)
    content = {
        "ok": True,
        "channelId": committed.channel_id,
        "number": committed.number,
        "totalItems": pool.total_items,
        "totalRuntimeHours": pool.total_runtime_hours,
    }
    return ToolResult(
        tool=tool,
        content=_dumps(content),
        terminal="committed",
        matched=pool.total_items,
        preview=pool,
        committed=committed,
        envelope=envelope,
        exclude=exclude,
    )


def _give_up(
    toolbox: ChannelToolbox,
    payload: dict[str, Any],
    _rules: PoolRules,
    _default: FilterEnvelope | None,
) -> ToolResult:
    reason = payload.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ToolError("give_up: 'reason' must say why the library cannot support the channel")
    toolbox.give_up(reason.strip())
    return ToolResult(
        tool="give_up", content=_dumps({"ok": True}), terminal="gave_up", reason=reason.strip()
    )


_Handler = Callable[[ChannelToolbox, dict[str, Any], PoolRules, FilterEnvelope | None], ToolResult]


_HANDLERS: dict[str, _Handler] = {
    "list_filter_fields": _list_fields,
    "discover_field_values": _discover,
    "search_titles": _search,
    "preview_filter": _preview,
    "commit_channel": _commit,
    "give_up": _give_up,
}


class TraceStep(BaseModel):
    """One summarised step of a build: a tool call, its result, or what the model said."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["call", "result", "says"]
    tool: str | None = None
    input: dict[str, Any] | None = None
    matched: int | None = Field(default=None, description="Real pool size (never items shown).")
    is_error: bool | None = None
    sample: str | None = None


class ChannelOutcome(BaseModel):
    """How one channel build ended, with everything the trace row and the report need."""

    model_config = ConfigDict(frozen=True)

    status: BuildStatus
    reason: str | None = None
    channel_id: str | None = None
    number: int | None = None
    envelope: FilterEnvelope | None = Field(default=None, description="The committed filter.")
    exclude: FilterNode | None = Field(
        default=None, description="The committed exclusion (the EXCLUDE definition), if any."
    )
    pool: FilterPreview | None = Field(default=None, description="The pool the commit verified.")
    tool_calls: int = 0
    model_calls: int = 0
    trace: tuple[TraceStep, ...] = ()
    usage: dict[str, Usage] = Field(default_factory=dict[str, Usage])


class ToolSession:
    """One channel build's tool state, shared by both providers.

    The planned filter and exclusion are the defaults for `commit_channel`; a commit or a give-up
    ends the build and any later tool call is answered with an error; every call and result is
    summarised into `trace` with the real pool size. With a `check`, a commit is also judged against
    the lineup kept so far (and joins it when it passes).
    """

    def __init__(
        self,
        toolbox: ChannelToolbox,
        *,
        planned: FilterEnvelope | None = None,
        rules: PoolRules | None = None,
        check: ChannelCheck | None = None,
        planned_exclude: FilterNode | None = None,
    ) -> None:
        self.toolbox = toolbox
        self.planned = planned
        self.planned_exclude = planned_exclude
        self.rules = rules or PoolRules()
        self.check = check
        self.trace: list[TraceStep] = []
        self.tool_calls = 0
        self.terminal: ToolResult | None = None
        self.last_refusal: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the channel was committed or given up."""
        return self.terminal is not None

    def call(self, name: str, tool_input: Mapping[str, Any] | None) -> ToolResult:
        """Run one tool call (see `run_tool`) and record it."""
        self.tool_calls += 1
        recorded_input = dict(tool_input) if isinstance(tool_input, Mapping) else {}
        self.trace.append(TraceStep(kind="call", tool=name, input=recorded_input))
        if self.terminal is not None:
            done = "committed" if self.terminal.terminal == "committed" else "given up"
            result = _error(name, f"this channel is already {done}; stop calling tools")
        else:
            result = run_tool(
                self.toolbox,
                name,
                tool_input,
                rules=self.rules,
                default_envelope=self.planned,
                check=self.check,
                default_exclude=self.planned_exclude,
            )
        if result.terminal is not None:
            self.terminal = result
        elif name == "commit_channel" and result.is_error and result.reason:
            self.last_refusal = result.reason
        self.trace.append(
            TraceStep(
                kind="result",
                tool=name,
                matched=result.matched,
                is_error=result.is_error or None,
                sample=result.content[:TRACE_RESULT_CHARS],
            )
        )
        return result

    def says(self, text: str) -> None:
        """Record a text block of the model (trimmed to `TRACE_TEXT_CHARS`)."""
        if text.strip():
            self.trace.append(TraceStep(kind="says", sample=text[:TRACE_TEXT_CHARS]))

    def finish(
        self,
        *,
        model_calls: int = 0,
        usage: Mapping[str, Usage] | None = None,
        error: str | None = None,
    ) -> ChannelOutcome:
        """Settle the build.

        Args:
            model_calls: Model calls made (0 for the offline provider).
            usage: Tokens per model, failed calls included.
            error: Set when the loop raised: the build failed with this message.

        Returns:
            `created` after a commit; `skipped` after a give-up, or when the last commit was
            refused and nothing else happened; `failed` otherwise, with the reason.
        """
        common: dict[str, Any] = {
            "tool_calls": self.tool_calls,
            "model_calls": model_calls,
            "trace": tuple(self.trace),
            "usage": dict(usage or {}),
        }
        terminal = self.terminal
        if terminal is not None and terminal.terminal == "committed":
            assert terminal.committed is not None
            return ChannelOutcome(
                status="created",
                channel_id=terminal.committed.channel_id,
                number=terminal.committed.number,
                envelope=terminal.envelope,
                exclude=terminal.exclude,
                pool=terminal.preview,
                **common,
            )
        if error is not None:
            return ChannelOutcome(status="failed", reason=error, **common)
        if terminal is not None:
            return ChannelOutcome(status="skipped", reason=terminal.reason, **common)
        if self.last_refusal is not None:
            return ChannelOutcome(
                status="skipped", reason=f"commit refused: {self.last_refusal}", **common
            )
        if model_calls >= MAX_MODEL_CALLS:
            reason = f"agent stopped after {model_calls} model calls without committing a channel"
        else:
            reason = "agent finished without committing a channel"
        return ChannelOutcome(status="failed", reason=reason, **common)
