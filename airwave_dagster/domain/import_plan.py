"""Import planning: what a lineup file will create on an instance, decided before any write."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from airwave_dagster.domain.filters import canonical_json
from airwave_dagster.domain.library import Library
from airwave_dagster.domain.lineup_file import (
    MAX_INT,
    BumperMode,
    DefinitionKind,
    DefinitionMode,
    LineupChannel,
    LineupDefinition,
    LineupFile,
    LineupPackage,
    Ordering,
    SortDir,
)

ChannelAction = Literal["create", "skip-duplicate"]
PackageAction = Literal["create", "reuse"]

ALREADY_ON_INSTANCE = "identical channel already exists"
"""`skip_reason` of a channel whose signature is already on the instance."""

# JavaScript's String.prototype.trim set, so names trim exactly as the reference's signatures did.
_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True)


class InstanceState(_Value):
    """What the planner reads from the instance (docs/reference/domain.md §4.3 step 1)."""

    channel_numbers: frozenset[int] = Field(
        default=frozenset(), description="Every channel number in use, any source or state."
    )
    package_keys: frozenset[str] = Field(default=frozenset(), description="Every package key.")
    libraries: tuple[Library, ...] = Field(
        default=(), description="All libraries of the target source, enabled or not."
    )
    channel_signatures: frozenset[str] = Field(
        default=frozenset(), description="`channel_signature` of every existing channel."
    )


class PlannedDefinition(_Value):
    """A PREDICATE definition as it will be stored."""

    mode: DefinitionMode
    sort_index: int
    plex_filter: dict[str, Any] | None = Field(description="The file's envelope, verbatim.")
    plex_library_key: str | None = Field(
        description="Target library matched by title; None means every library of the filter's "
        "media types."
    )
    plex_library_title: str | None = Field(description="The title the file named, if any.")


class PlannedChannel(_Value):
    """One chosen file channel and what the import will do with it."""

    signature: str
    original_number: int
    assigned_number: int = Field(description="Equals original_number for skipped duplicates.")
    number_reassigned: bool
    name: str
    callsign: str | None
    description: str | None
    icon: str | None
    tint: str | None
    enabled: bool = Field(description="False from the file, or because nothing is importable.")
    sort_index: int
    ordering: Ordering
    sort_field: str
    sort_dir: SortDir
    bumper_mode: BumperMode
    package_key: str | None
    action: ChannelAction
    disabled: bool = Field(description="No PREDICATE definition survived: created disabled.")
    skip_reason: str | None
    dropped_kinds: tuple[DefinitionKind, ...] = Field(
        description="Kinds of the definitions that cannot be imported, distinct, first-seen order."
    )
    library_unmatched: bool = Field(
        description="A definition named a library title the target does not have."
    )
    definitions: tuple[PlannedDefinition, ...]
    notes: tuple[str, ...] = Field(
        default=(),
        description="How the file's channel was normalised on import (`path: what was done`), "
        "for the dry-run and the report.",
    )
    renumber_reason: str | None = Field(
        default=None,
        description="Why the channel did not keep its file number (None when it kept it).",
    )


class PlannedPackage(_Value):
    """A package the imported channels need, created from the file or reused by key."""

    key: str
    name: str
    description: str | None
    icon: str | None
    tint: str | None
    sort_index: int | None = Field(description="None: place after every existing package.")
    action: PackageAction


class PlanCounts(_Value):
    """Totals of a plan (§4.3 step 6)."""

    to_create: int
    skip_duplicate: int
    disabled: int = Field(description="Channels created disabled (counted in to_create too).")
    reassigned: int


class ImportPlan(_Value):
    """The full, deterministic outcome of importing a lineup file, computed before any write.

    The plan is the import's checkpoint: a resumed run reuses it verbatim instead of re-planning
    against an instance it has already changed.
    """

    packages: tuple[PlannedPackage, ...] = Field(description="In creation order.")
    channels: tuple[PlannedChannel, ...] = Field(description="Every chosen channel, file order.")
    counts: PlanCounts

    def creates(self) -> tuple[PlannedChannel, ...]:
        """The channels to create, in fan-out order (the file's order)."""
        return tuple(channel for channel in self.channels if channel.action == "create")


def channel_signature(
    name: str,
    package_key: str | None,
    ordering: str,
    sort_field: str,
    sort_dir: str,
    predicate_filters: Sequence[object | None],
) -> str:
    """The content signature two channels share when they are the same recipe (§4.4).

    Number, callsign, styling, enabled, bumper mode and the definitions' mode, order and library
    are deliberately left out; the filters' order is too, but the order inside a filter counts.

    Args:
        name: Channel name; surrounding whitespace is ignored.
        package_key: Key of the channel's package, or None when ungrouped.
        ordering: Ordering as stored or written in the file.
        sort_field: Sort field as stored or written in the file.
        sort_dir: Sort direction as stored or written in the file.
        predicate_filters: The `plexFilter` JSON of each PREDICATE definition (None if absent).

    Returns:
        The canonical JSON text of the signature array.
    """
    filters = sorted(
        (canonical_json(plex_filter) for plex_filter in predicate_filters),
        key=lambda text: text.encode("utf-16-be", "surrogatepass"),
    )
    return canonical_json(
        [name.strip(_JS_WHITESPACE), package_key or "", ordering, sort_field, sort_dir, filters]
    )


def plan_import(
    lineup: LineupFile,
    state: InstanceState,
    *,
    selected_numbers: Sequence[int] | None = None,
) -> ImportPlan:
    """Decide what importing a lineup into an instance creates, reuses, skips and renumbers.

    Pure and deterministic (§4.3 to §4.6). Two deliberate departures from the reference: identical
    channels within one file are imported once (the later ones are skipped, naming the earlier
    number), and a matched library title yields a key for the resolver to honour.

    Args:
        lineup: A lineup file as returned by `parse_lineup`.
        state: The instance as it is now.
        selected_numbers: File channel numbers to import; None imports every channel and an
            empty sequence imports nothing. Channels sharing a number are selected together.

    Returns:
        The plan.
    """
    selected = None if selected_numbers is None else frozenset(selected_numbers)
    library_keys = {library.title.lower(): library.key for library in state.libraries}
    earlier: dict[str, int] = {}
    planned: list[PlannedChannel] = []
    for index, channel in enumerate(lineup.channels):
        if selected is not None and channel.number not in selected:
            continue
        draft = _plan_channel(channel, library_keys)
        notes = tuple(str(note) for note in lineup.notes_of(index))
        if notes:
            draft = draft.model_copy(update={"notes": notes})
        if draft.signature in state.channel_signatures:
            draft = _skip(draft, ALREADY_ON_INSTANCE)
        elif draft.signature in earlier:
            first = earlier[draft.signature]
            draft = _skip(draft, f"identical to channel {first} earlier in this file")
        else:
            earlier[draft.signature] = channel.number
        planned.append(draft)
    planned = _assign_numbers(planned, state.channel_numbers)
    packages = _plan_packages(planned, lineup.packages, state.package_keys)
    creates = [channel for channel in planned if channel.action == "create"]
    counts = PlanCounts(
        to_create=len(creates),
        skip_duplicate=len(planned) - len(creates),
        disabled=sum(channel.disabled for channel in creates),
        reassigned=sum(channel.number_reassigned for channel in creates),
    )
    return ImportPlan(packages=tuple(packages), channels=tuple(planned), counts=counts)


def _plan_channel(channel: LineupChannel, library_keys: dict[str, str]) -> PlannedChannel:
    predicates = [d for d in channel.definitions if d.kind == "PREDICATE"]
    dropped: dict[DefinitionKind, None] = dict.fromkeys(
        d.kind for d in channel.definitions if d.kind != "PREDICATE"
    )
    definitions = [
        _plan_definition(definition, position, library_keys)
        for position, definition in enumerate(predicates)
    ]
    definitions.sort(key=lambda definition: definition.sort_index)
    disabled = not predicates
    return PlannedChannel(
        signature=channel_signature(
            channel.name,
            channel.package_key,
            channel.ordering,
            channel.sort_field,
            channel.sort_dir,
            [definition.plex_filter for definition in predicates],
        ),
        original_number=channel.number,
        assigned_number=channel.number,
        number_reassigned=False,
        name=channel.name,
        callsign=channel.callsign,
        description=channel.description,
        icon=channel.icon,
        tint=channel.tint,
        enabled=channel.enabled and not disabled,
        sort_index=channel.sort_index,
        ordering=channel.ordering,
        sort_field=channel.sort_field,
        sort_dir=channel.sort_dir,
        bumper_mode=channel.bumper_mode,
        package_key=channel.package_key,
        action="create",
        disabled=disabled,
        skip_reason=None,
        dropped_kinds=tuple(dropped),
        library_unmatched=any(
            d.plex_library_title is not None and d.plex_library_key is None for d in definitions
        ),
        definitions=tuple(definitions),
    )


def _plan_definition(
    definition: LineupDefinition, position: int, library_keys: dict[str, str]
) -> PlannedDefinition:
    title = definition.plex_library_title
    return PlannedDefinition(
        mode=definition.mode,
        sort_index=position if definition.sort_index is None else definition.sort_index,
        plex_filter=definition.plex_filter,
        plex_library_key=None if title is None else library_keys.get(title.lower()),
        plex_library_title=title,
    )


def _skip(channel: PlannedChannel, reason: str) -> PlannedChannel:
    return channel.model_copy(update={"action": "skip-duplicate", "skip_reason": reason})


class _FreeNumbers:
    """The lowest free channel number at or above any number, in near-constant time.

    A union-find over taken numbers: each taken number points at a number above it that was free
    when last asked, and every lookup shortens the chain it walked. 20,000 channels sharing one
    number cost 20,000 short lookups instead of 200 million membership tests.
    """

    def __init__(self, taken: set[int]) -> None:
        self._taken = taken
        self._next: dict[int, int] = {}

    def take_from(self, start: int) -> int | None:
        """Reserve and return the lowest free number from `start` to MAX_INT, or None."""
        walked: list[int] = []
        number = start
        while number <= MAX_INT and number in self._taken:
            walked.append(number)
            number = self._next.get(number, number + 1)
        for step in walked:
            self._next[step] = number
        if number > MAX_INT:
            return None
        self._taken.add(number)
        self._next[number] = number + 1
        return number


def _assign_numbers(planned: list[PlannedChannel], in_use: frozenset[int]) -> list[PlannedChannel]:
    """Give every create a free number, keeping original numbers wherever possible (§4.5).

    A number of 0 or below (the reference's number box takes any integer) is treated as taken.
    No number past MAX_INT (the column's range) is ever assigned: when nothing above the original
    is free, the lowest free number from 1 is used instead.
    """
    reserved = set(in_use)
    order = sorted(
        (index for index, channel in enumerate(planned) if channel.action == "create"),
        key=lambda index: planned[index].original_number,
    )
    # Pass 1 lets every channel whose number is free keep it, so a collision further down the
    # file never pushes a later channel off a number it could have kept.
    displaced: list[int] = []
    keeper: dict[int, str] = {}
    for index in order:
        number = planned[index].original_number
        if number < 1 or number in reserved:
            displaced.append(index)
        else:
            reserved.add(number)
            keeper[number] = planned[index].name
    free = _FreeNumbers(reserved)
    result = list(planned)
    for index in displaced:
        original = planned[index].original_number
        found = free.take_from(max(original + 1, 1))
        if found is None:
            found = free.take_from(1)
        if found is None:  # pragma: no cover (a file holds at most MAX_CHANNELS channels)
            raise ValueError("no free channel number left")
        if original < 1:
            why = f"{original} is not a channel number"
        elif original in in_use:
            why = f"{original} is taken by a channel already on this server"
        else:
            why = f'{original} is kept by "{keeper[original]}", earlier in this file'
        result[index] = _renumbered(
            planned[index], found, f"{why}; {found} was the next free number"
        )
    return result


def _renumbered(channel: PlannedChannel, number: int, reason: str) -> PlannedChannel:
    # A new model from the old one's values, not model_copy: pydantic's compiled validator does
    # this several times faster, and a large file can displace thousands of channels.
    return PlannedChannel(
        **{
            **channel.__dict__,
            "assigned_number": number,
            "number_reassigned": True,
            "renumber_reason": reason,
        }
    )


def _plan_packages(
    planned: list[PlannedChannel],
    file_packages: Sequence[LineupPackage],
    existing_keys: frozenset[str],
) -> list[PlannedPackage]:
    by_key = {package.key: package for package in file_packages}
    creates = sorted(
        (channel for channel in planned if channel.action == "create"),
        key=lambda channel: channel.original_number,
    )
    keys = dict.fromkeys(channel.package_key for channel in creates if channel.package_key)
    # A skipped channel's package is on the server already (it holds the channel's twin) and is
    # reused as it is: counting it keeps a re-import from reporting "packages reused 0".
    skipped = sorted(
        (channel for channel in planned if channel.action != "create"),
        key=lambda channel: channel.original_number,
    )
    keys.update(
        dict.fromkeys(
            channel.package_key
            for channel in skipped
            if channel.package_key in existing_keys and channel.package_key not in keys
        )
    )
    packages: list[PlannedPackage] = []
    for key in keys:
        source = by_key.get(key)
        packages.append(
            PlannedPackage(
                key=key,
                # Only a lineup built in code can name a package it lacks; parse_lineup refuses it.
                name=source.name if source else key,
                description=source.description if source else None,
                icon=source.icon if source else None,
                tint=source.tint if source else None,
                sort_index=source.sort_index if source else None,
                action="reuse" if key in existing_keys else "create",
            )
        )
    return packages
