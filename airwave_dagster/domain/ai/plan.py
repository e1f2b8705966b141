"""The planner's output: a lineup of packages and channels, its JSON schema, parsing and sanitising.

The planner answers with one tool call whose input must follow `plan_input_schema()` (generated
from `LineupPlan`, camelCase keys). `parse_plan` turns that raw input into a `LineupPlan` or raises
`PlanSchemaError` listing every violation with its JSON path (the runtime retries the planner on
it). `sanitize_plan` then repairs what can be repaired deterministically and records every change
as a `PlanChange` (docs/reference/ai-lineup.md §5.2, docs/reference/domain.md §6.3):

- a condition is removed when its field is unknown, its operator is not allowed for the field's
  kind, its field does not exist on *every* searched media type, or its value cannot be read for
  the kind (e.g. year "nineties"); a group left without children is removed;
- a channel whose filter is removed entirely is **dropped** (never left to match the whole
  library), as is a channel whose media types, filter and exclusion repeat an earlier channel's;
  an `exclude` (the EXCLUDE definition) is cleaned the same way and dropped alone when nothing of
  it is usable;
- duplicate channel or package keys are made unique (`-2`, `-3`, ...), keys are slugged;
- an `existingKey` that names no offered package is ignored (a new package is created);
- a package left without channels is dropped.

Parsing is lenient where the intent is unambiguous (a number where a string value belongs, an
unknown accent coerced to `slate`, a lower-case ordering) and strict about shape.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from airwave_dagster.domain.errors import Issue, PlanSchemaError
from airwave_dagster.domain.filters import (
    ALLOWED_OPS,
    FIELDS,
    OPS,
    Condition,
    FilterEnvelope,
    FilterNode,
    Group,
    canonical_json,
    validate_filter,
)
from airwave_dagster.domain.library import MediaType
from airwave_dagster.domain.lineup_file import (
    SORT_FIELD_NAMES,
    Ordering,
    SortDir,
    normalise_callsign,
)

ACCENT_KEYS: tuple[str, ...] = (
    "purple",
    "violet",
    "indigo",
    "blue",
    "sky",
    "cyan",
    "teal",
    "mint",
    "green",
    "yellow",
    "amber",
    "orange",
    "red",
    "rose",
    "pink",
    "slate",
)
"""The 16 palette keys a package or channel tint may take (docs/reference/domain.md §6.4a)."""

_LEGACY_ACCENTS = {"gray": "slate", "grey": "slate", "lime": "green", "emerald": "mint"}

PackageOrigin = Literal["preset", "manual"]


def coerce_accent(raw: str | None) -> str:
    """Map any tint text to a palette key: legacy names translated, anything unknown is `slate`.

    Args:
        raw: The accent as written by the planner (or None).

    Returns:
        One of `ACCENT_KEYS`.
    """
    folded = (raw or "").strip().lower()
    if folded in ACCENT_KEYS:
        return folded
    return _LEGACY_ACCENTS.get(folded, "slate")


def number_text(value: float) -> str:
    """A number as a filter value: `1990` (not `1990.0`), `7.5`, never exponent notation."""
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return repr(value)
    if value.is_integer():
        return str(int(value))
    text = format(Decimal(repr(value)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def slugify(text: str, *, fallback: str = "package") -> str:
    """Lower-case kebab slug: runs of anything but `a-z0-9` become one `-`, trimmed.

    Args:
        text: Any name or key.
        fallback: Returned when nothing usable remains.

    Returns:
        The slug, never empty.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or fallback


def unique_key(base: str, taken: Collection[str]) -> str:
    """`base`, or `base-2`, `base-3`, ... : the first spelling not in `taken`."""
    if base not in taken:
        return base
    suffix = 2
    while f"{base}-{suffix}" in taken:
        suffix += 1
    return f"{base}-{suffix}"


def package_slug(name: str, taken_keys: Collection[str]) -> str:
    """The database key of a new AI package: the slug of its name, made unique (§5.3).

    Args:
        name: The package's display name.
        taken_keys: Every package key already on the instance (after the wipe).

    Returns:
        A key not in `taken_keys`.
    """
    return unique_key(slugify(name), taken_keys)


class ExistingPackage(BaseModel):
    """A non-AI package the planner may file channels into (docs/reference/ai-lineup.md §5.1)."""

    model_config = ConfigDict(frozen=True)

    key: str
    name: str
    description: str | None = None
    origin: PackageOrigin = "manual"
    channel_count: int = 0


def render_existing_packages(packages: Sequence[ExistingPackage]) -> str:
    """One line per package for the planner prompt; a placeholder when there are none."""
    if not packages:
        return "none — this is the first lineup; create packages as needed"
    lines = []
    for package in packages:
        noun = "channel" if package.channel_count == 1 else "channels"
        line = (
            f'{package.key} — "{package.name}" ({package.origin}, {package.channel_count} {noun})'
        )
        if package.description:
            line += f": {package.description}"
        lines.append(line)
    return "\n".join(lines)


class _PlanModel(BaseModel):
    # camelCase on the wire (the schema the planner sees), snake_case in Python; stored outputs
    # dump by field name, so both spellings must validate. Unknown keys are schema violations.
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
    )


class PlanCondition(_PlanModel):
    """A leaf `field op value`; `value` is always a string (numbers are converted)."""

    type: Literal["condition"]
    field: str = Field(min_length=1, description="A field of the filterable-field catalog.")
    op: str = Field(
        json_schema_extra={"enum": list(OPS)},
        description="An operator allowed for the field's kind (see the catalog).",
    )
    value: str = Field(description="Always a string: tag title, number, YYYY-MM-DD, true/false.")

    @field_validator("value", mode="before")
    @classmethod
    def _value_as_text(cls, value: object) -> object:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return number_text(value)
        return value


class PlanInnerGroup(_PlanModel):
    """A nested group; holds conditions only (one nesting level, no recursion in the schema)."""

    type: Literal["group"]
    combinator: Literal["and", "or"]
    children: list[PlanCondition] = Field(min_length=1)


PlanChild = Annotated[PlanCondition | PlanInnerGroup, Field(discriminator="type")]


class PlanGroup(_PlanModel):
    """The top group of a planned filter."""

    type: Literal["group"]
    combinator: Literal["and", "or"]
    children: list[PlanChild] = Field(min_length=1)


PlanFilter = Annotated[PlanCondition | PlanGroup, Field(discriminator="type")]
"""A planned filter: one condition, or a group of conditions and condition-only groups."""


def _media_type_alias(value: object) -> object:
    if not isinstance(value, list):
        return value
    aliases = {"movies": "movie", "film": "movie", "shows": "show", "tv": "show"}
    out: list[object] = []
    for entry in value:
        if isinstance(entry, str):
            folded = entry.strip().lower()
            entry = aliases.get(folded, folded)
        if entry not in out:
            out.append(entry)
    return out


class PlannedChannel(_PlanModel):
    """One channel the planner designed (no number yet; numbering assigns it)."""

    key: str = Field(min_length=1, description="kebab-case, unique across the whole lineup")
    name: str = Field(min_length=1, description="short on-screen name")
    description: str = Field(description="one guide sentence")
    theme: str = Field(
        default="",
        description="plain-language brief for the channel's builder, naming concrete titles, "
        "genres, studios or eras",
    )
    target_pool_size: int = Field(default=0, ge=0, description="expected item count; a loose hint")
    ordering: Ordering = Field(
        default="SHUFFLE", description="SHUFFLE for most; IN_ORDER/BY_AIR_DATE for sequential"
    )
    sort_field: str | None = Field(
        default=None, json_schema_extra={"enum": [*SORT_FIELD_NAMES, None]}
    )
    sort_dir: SortDir | None = None
    callsign: str | None = Field(default=None, description="up to 6 upper-case letters/digits")
    icon: str | None = Field(default=None, description='"lucide:Name" or "phosphor:Name"')
    media_types: list[MediaType] = Field(min_length=1, description="movie and/or show")
    filter: PlanFilter
    exclude: PlanFilter | None = Field(
        default=None,
        description="optional: items matching it are removed from the pool (stored as an "
        "EXCLUDE definition after the filter); a kids or family channel's rating ceiling",
    )

    @field_validator("ordering", mode="before")
    @classmethod
    def _upper_ordering(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("media_types", mode="before")
    @classmethod
    def _media_types(cls, value: object) -> object:
        return _media_type_alias(value)

    def filter_node(self) -> FilterNode:
        """The filter in the project's filter language (valid once the plan is sanitised)."""
        return to_filter_node(self.filter)

    def envelope(self) -> FilterEnvelope:
        """The `plexFilter` envelope `{mediaTypes, filter}` a PREDICATE definition stores."""
        return FilterEnvelope(media_types=list(self.media_types), filter=self.filter_node())

    def exclude_node(self) -> FilterNode | None:
        """The exclusion in the filter language, or None when the channel has none."""
        return None if self.exclude is None else to_filter_node(self.exclude)


class PlannedPackage(_PlanModel):
    """A package of the plan: a new one, or an existing one named by `existing_key`."""

    key: str = Field(min_length=1, description="kebab-case, unique in the plan")
    existing_key: str | None = Field(
        default=None,
        description="key of an existing package to file these channels into; its own name and "
        "appearance are kept",
    )
    name: str = Field(min_length=1, description="short sidebar name")
    description: str = ""
    icon: str | None = None
    accent: str = Field(default="slate", json_schema_extra={"enum": list(ACCENT_KEYS)})
    channels: list[PlannedChannel] = Field(min_length=1)

    @field_validator("accent", mode="before")
    @classmethod
    def _accent(cls, value: object) -> object:
        return coerce_accent(value) if isinstance(value, str) or value is None else value


class LineupPlan(_PlanModel):
    """The whole planned lineup: packages in display order, each with its channels."""

    packages: list[PlannedPackage] = Field(min_length=1)

    def channels(self) -> list[tuple[PlannedPackage, PlannedChannel]]:
        """Every `(package, channel)` pair in plan order."""
        return [(package, channel) for package in self.packages for channel in package.channels]

    def only(self, keys: Collection[str]) -> LineupPlan:
        """The plan with only the channels of these keys, in plan order; emptied packages go.

        What a capped run (`limit`) builds: its diff and its lineup checks see only these.
        """
        packages = [
            package.model_copy(update={"channels": [c for c in package.channels if c.key in keys]})
            for package in self.packages
        ]
        return self.model_copy(update={"packages": [p for p in packages if p.channels]})

    def channel(self, key: str) -> PlannedChannel:
        """The channel with this key.

        Raises:
            KeyError: No channel has the key.
        """
        for _, channel in self.channels():
            if channel.key == key:
                return channel
        raise KeyError(key)


def plan_input_schema() -> dict[str, Any]:
    """The planner tool's `input_schema`: `LineupPlan` as JSON Schema, camelCase keys.

    Pydantic's generated `title`s (e.g. "Targetpoolsize") are removed: they only add tokens.
    """
    schema = _without_titles(LineupPlan.model_json_schema(by_alias=True))
    assert isinstance(schema, dict)
    return schema


def _without_titles(schema: object, *, in_properties: bool = False) -> object:
    if isinstance(schema, list):
        return [_without_titles(entry) for entry in schema]
    if not isinstance(schema, dict):
        return schema
    cleaned: dict[str, object] = {}
    for key, value in schema.items():
        if key == "title" and not in_properties and isinstance(value, str):
            continue
        # Under "properties" and "$defs" the keys are names, not schema keywords.
        cleaned[key] = _without_titles(value, in_properties=key in ("properties", "$defs"))
    return cleaned


def to_filter_node(node: PlanCondition | PlanGroup | PlanInnerGroup) -> FilterNode:
    """Convert a planned filter into the project's filter tree.

    Raises:
        ValueError: A condition's operator is not one of the language's operators (sanitise the
            plan first).
    """
    if isinstance(node, PlanCondition):
        return Condition.model_validate({"field": node.field, "op": node.op, "value": node.value})
    return Group(combinator=node.combinator, children=[to_filter_node(c) for c in node.children])


def parse_plan(raw: object) -> LineupPlan:
    """Validate the planner's raw tool input as a `LineupPlan`.

    Args:
        raw: The decoded tool input (a dict from the API).

    Returns:
        The plan, not yet sanitised.

    Raises:
        PlanSchemaError: Anything in `raw` breaks the schema; every violation is listed.
    """
    if not isinstance(raw, Mapping):
        raise PlanSchemaError(
            [
                Issue(
                    path="$",
                    message=f"expected an object with 'packages', got {type(raw).__name__}",
                )
            ]
        )
    try:
        return LineupPlan.model_validate(raw)
    except ValidationError as error:
        raise PlanSchemaError([_issue(detail) for detail in error.errors()]) from None


def _issue(detail: ErrorDetails) -> Issue:
    path = "$"
    for part in detail["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("condition", "group", "PlanCondition", "PlanInnerGroup", "PlanGroup"):
            continue  # union tags pydantic adds to the location, not keys of the document
        else:
            path += f".{part}"
    return Issue(path=path, message=detail["msg"])


ChangeAction = Literal[
    "removed-condition",
    "removed-group",
    "dropped-channel",
    "dropped-package",
    "renamed-key",
    "ignored-existing-key",
    "normalised",
]


class PlanChange(BaseModel):
    """One repair the sanitiser made, for the trace and the report."""

    model_config = ConfigDict(frozen=True)

    action: ChangeAction
    package_key: str | None = None
    channel_key: str | None = None
    path: str = Field(
        description="JSON path in the raw plan, e.g. $.packages[0].channels[1].filter"
    )
    reason: str


class DroppedChannel(BaseModel):
    """A planned channel the sanitiser removed, and why."""

    model_config = ConfigDict(frozen=True)

    package_key: str
    channel_key: str
    name: str
    reason: str


class SanitizedPlan(BaseModel):
    """A plan every remaining channel of which has a usable, non-empty filter."""

    model_config = ConfigDict(frozen=True)

    plan: LineupPlan
    changes: tuple[PlanChange, ...] = ()
    dropped_channels: tuple[DroppedChannel, ...] = ()

    @property
    def channel_count(self) -> int:
        """Channels left in the plan."""
        return sum(len(package.channels) for package in self.plan.packages)


def sanitize_plan(
    raw: LineupPlan | Mapping[str, Any],
    *,
    existing_package_keys: Collection[str] = (),
) -> SanitizedPlan:
    """Repair a planned lineup so that every channel can be built, recording each change.

    Args:
        raw: A `LineupPlan`, or the planner's raw tool input (parsed with `parse_plan` first).
        existing_package_keys: Keys of the packages offered to the planner (non-AI, still present).

    Returns:
        The cleaned plan with the changes and dropped channels.

    Raises:
        PlanSchemaError: `raw` is not a plan that follows the schema, or nothing usable is left
            (every channel dropped).
    """
    plan = raw if isinstance(raw, LineupPlan) else parse_plan(raw)
    changes: list[PlanChange] = []
    dropped: list[DroppedChannel] = []
    package_keys: set[str] = set()
    channel_keys: set[str] = set()
    signatures: dict[str, str] = {}
    offered = set(existing_package_keys)
    packages: list[PlannedPackage] = []
    for p_index, package in enumerate(plan.packages):
        p_path = f"$.packages[{p_index}]"
        key = _unique_slug(package.key, package_keys, p_path, None, None, changes)
        existing_key = package.existing_key
        if existing_key is not None and existing_key not in offered:
            changes.append(
                PlanChange(
                    action="ignored-existing-key",
                    package_key=key,
                    path=f"{p_path}.existingKey",
                    reason=f"existingKey {existing_key!r} names no offered package; "
                    "a new package is created instead",
                )
            )
            existing_key = None
        channels: list[PlannedChannel] = []
        for c_index, channel in enumerate(package.channels):
            c_path = f"{p_path}.channels[{c_index}]"
            kept = _sanitize_channel(channel, key, c_path, channel_keys, signatures, changes)
            if isinstance(kept, DroppedChannel):
                dropped.append(kept)
            else:
                channels.append(kept)
        if not channels:
            package_keys.discard(key)  # free the spelling for a later package
            changes.append(
                PlanChange(
                    action="dropped-package",
                    package_key=key,
                    path=p_path,
                    reason="no channel of this package survived sanitising",
                )
            )
            continue
        packages.append(
            package.model_copy(
                update={"key": key, "existing_key": existing_key, "channels": channels}
            )
        )
    if not packages:
        raise PlanSchemaError(
            [Issue(path="$.packages", message="no channel has a usable filter after sanitising")]
            + [Issue(path="$", message=f"{c.channel_key}: {c.reason}") for c in dropped]
        )
    return SanitizedPlan(
        plan=LineupPlan(packages=packages), changes=tuple(changes), dropped_channels=tuple(dropped)
    )


def _unique_slug(
    key: str,
    taken: set[str],
    path: str,
    package_key: str | None,
    channel_key: str | None,
    changes: list[PlanChange],
) -> str:
    slug = unique_key(slugify(key, fallback="channel" if package_key else "package"), taken)
    taken.add(slug)
    if slug != key:
        changes.append(
            PlanChange(
                action="renamed-key",
                package_key=package_key if package_key is not None else slug,
                channel_key=slug if package_key is not None else channel_key,
                path=f"{path}.key",
                reason=f"key {key!r} is not a unique kebab-case key; using {slug!r}",
            )
        )
    return slug


def _sanitize_channel(
    channel: PlannedChannel,
    package_key: str,
    path: str,
    channel_keys: set[str],
    signatures: dict[str, str],
    changes: list[PlanChange],
) -> PlannedChannel | DroppedChannel:
    key = _unique_slug(channel.key, channel_keys, path, package_key, None, changes)
    media = frozenset(channel.media_types)
    cleaned = _clean_node(channel.filter, media, f"{path}.filter", package_key, key, changes)
    if cleaned is None:
        reason = (
            "every condition of its filter was removed; a channel without a filter would match "
            "the whole library, so it is dropped"
        )
        return _drop(package_key, key, channel.name, path, reason, changes)
    if not selects_something(to_filter_node(cleaned)):
        reason = (
            "what is left of its filter only excludes (isNot / notContains) and would match "
            "nearly the whole library, so it is dropped"
        )
        return _drop(package_key, key, channel.name, path, reason, changes)
    exclude = None
    if channel.exclude is not None:
        # An exclusion left without a usable condition is dropped, not the channel: it only
        # ever narrows the pool, which the commit verifies anyway.
        exclude = _clean_node(channel.exclude, media, f"{path}.exclude", package_key, key, changes)
    signature = canonical_json(
        {
            "mediaTypes": sorted(media),
            "filter": to_filter_node(cleaned).model_dump(mode="json", exclude_none=True),
            "exclude": None
            if exclude is None
            else to_filter_node(exclude).model_dump(mode="json", exclude_none=True),
        }
    )
    if signature in signatures:
        reason = f"same media types and filter as channel {signatures[signature]!r}"
        return _drop(package_key, key, channel.name, path, reason, changes)
    signatures[signature] = key
    update: dict[str, object] = {"key": key, "filter": cleaned, "exclude": exclude}
    callsign = normalise_callsign(channel.callsign)
    if callsign != channel.callsign:
        update["callsign"] = callsign
        _note(changes, package_key, key, f"{path}.callsign", f"callsign normalised to {callsign!r}")
    if channel.sort_field is not None and channel.sort_field not in SORT_FIELD_NAMES:
        update["sort_field"] = None
        _note(
            changes,
            package_key,
            key,
            f"{path}.sortField",
            f"unknown sortField {channel.sort_field!r}; sorting by title",
        )
    return channel.model_copy(update=update)


_NEGATIVE_OPS = frozenset({"isNot", "notContains"})


def selects_something(node: FilterNode) -> bool:
    """Whether a filter selects something rather than only excluding things.

    An AND selects when any child does; an OR only when every child does (one "everything
    except X" branch makes the whole OR match nearly everything). An empty AND selects nothing
    in particular (it is everything); an empty OR is treated as selecting (it matches nothing).
    """
    if isinstance(node, Condition):
        return node.op not in _NEGATIVE_OPS
    results = [selects_something(child) for child in node.children]
    return any(results) if node.combinator == "and" else all(results)


def _note(changes: list[PlanChange], package_key: str, key: str, path: str, reason: str) -> None:
    changes.append(
        PlanChange(
            action="normalised", package_key=package_key, channel_key=key, path=path, reason=reason
        )
    )


def _drop(
    package_key: str, key: str, name: str, path: str, reason: str, changes: list[PlanChange]
) -> DroppedChannel:
    changes.append(
        PlanChange(
            action="dropped-channel",
            package_key=package_key,
            channel_key=key,
            path=path,
            reason=reason,
        )
    )
    return DroppedChannel(package_key=package_key, channel_key=key, name=name, reason=reason)


def condition_problem(condition: PlanCondition, media_types: Collection[str]) -> str | None:
    """Why a planned condition cannot be used on these media types, or None when it can.

    Args:
        condition: The condition.
        media_types: The channel's media types; the field must exist on every one of them.

    Returns:
        A reason naming the field, operator or value, or None.
    """
    spec = FIELDS.get(condition.field)
    if spec is None:
        return f"unknown field {condition.field!r}"
    if condition.op not in OPS:
        return f"unknown operator {condition.op!r}"
    if condition.op not in ALLOWED_OPS[spec.kind]:
        allowed = ", ".join(op for op in OPS if op in ALLOWED_OPS[spec.kind])
        return f"operator {condition.op!r} is not allowed for {spec.kind} field {spec.name!r} " + (
            f"(allowed: {allowed})"
        )
    missing = sorted(set(media_types) - spec.applies)
    if missing:
        return (
            f"field {spec.name!r} does not exist on {' and '.join(missing)} libraries, "
            "which this channel searches"
        )
    issues = validate_filter(
        {"mediaTypes": sorted(media_types), "filter": condition.model_dump(by_alias=True)},
        path="$",
    )
    if issues:
        return issues[0].message
    return None


def _clean_node(
    node: PlanCondition | PlanGroup | PlanInnerGroup,
    media: frozenset[str],
    path: str,
    package_key: str,
    channel_key: str,
    changes: list[PlanChange],
) -> Any:
    """The node with unusable parts removed, or None when nothing usable is left."""
    if isinstance(node, PlanCondition):
        problem = condition_problem(node, media)
        if problem is None:
            return node
        changes.append(
            PlanChange(
                action="removed-condition",
                package_key=package_key,
                channel_key=channel_key,
                path=path,
                reason=problem,
            )
        )
        return None
    kept = []
    for index, child in enumerate(node.children):
        cleaned = _clean_node(
            child, media, f"{path}.children[{index}]", package_key, channel_key, changes
        )
        if cleaned is not None:
            kept.append(cleaned)
    if not kept:
        changes.append(
            PlanChange(
                action="removed-group",
                package_key=package_key,
                channel_key=channel_key,
                path=path,
                reason="no usable condition left in this group",
            )
        )
        return None
    return node.model_copy(update={"children": kept})
