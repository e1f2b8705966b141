"""Parse plexapi's section-search query strings and evaluate them against the library.

Reference: docs/reference/plex-emulator.md (the "§N" and gotchas "GN" cited below).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

from airwave_dagster.emulators.plex.dataset import EmulatedLibrary, Item
from airwave_dagster.emulators.plex.vocabulary import (
    FIELDS,
    SORTS,
    TAG_TYPES,
    TYPE_NAMES,
    FieldDef,
    Getter,
    SortDef,
    find_sort,
    local_midnight,
)

Predicate = Callable[[Item], bool]

_TERM = re.compile(r"^([A-Za-z][\w.\-]*?)(!==|==|!=|>>=|<<=|<=|>=|=)(.*)$", re.DOTALL)
_RELATIVE_DATE = re.compile(r"^-?(\d+)(mon|[smhdwy])$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_UNIT_SECONDS = {
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86400,
    "w": 7 * 86400,
    "mon": 30 * 86400,
    "y": 365 * 86400,
}

CONTROL = frozenset({"push", "pop", "and", "or"})
PLAIN = frozenset(
    {
        "type",
        "sort",
        "limit",
        "checkFiles",
        "index",
        "X-Plex-Container-Start",
        "X-Plex-Container-Size",
        "X-Plex-Token",
        "asyncAugmentMetadata",
        "skipRefresh",
    }
)
"""Arguments that are never filter terms (besides any `include*` / `exclude*` switch)."""

NEGATED = {"!=": "=", "!==": "=="}

STRICT_RANGES = True
"""`>>=` / `<<=` are strict, as PMS's operator titles say (not checked on a real server)."""

UPWARD = {("episode", "show"), ("episode", "season"), ("season", "show")}
DOWNWARD = {("show", "episode"), ("show", "season"), ("season", "episode")}


class QueryError(ValueError):
    """A request the emulator refuses with 400 (unknown field, operator or sort, bad nesting)."""


@dataclass(frozen=True, slots=True)
class Term:
    """One decoded `name op value` part of a query string, in request order."""

    name: str
    op: str
    value: str


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """The parts of a `/all` query that select and order items (paging excluded)."""

    type_number: int | None
    sort: str | None
    limit: int | None
    terms: tuple[Term, ...]
    include_meta: bool
    include_streams: bool
    start: int | None
    size: int | None
    exclude_elements: frozenset[str] = frozenset()
    """Child elements an item is written without (`excludeElements=Media,Genre,…`)."""
    exclude_fields: frozenset[str] = frozenset()
    """Attributes an item is written without (`excludeFields=summary,tagline`)."""


def decode_query(raw: str) -> list[Term]:
    """Split on `&` first, then decode each part, keeping order and duplicates (G14)."""
    terms: list[Term] = []
    for part in raw.split("&"):
        if not part:
            continue
        match = _TERM.match(unquote_plus(part))
        if match:
            terms.append(Term(*match.groups()))
    return terms


def is_plain(name: str) -> bool:
    """Whether a query argument is a request option rather than a filter term."""
    return name in PLAIN or name.startswith(("include", "exclude"))


def parse_search(raw_query: str) -> SearchRequest:
    """Split a section search query into options and the ordered filter terms."""
    type_number = sort = limit = start = size = None
    include_meta = include_streams = False
    exclude_elements: frozenset[str] = frozenset()
    exclude_fields: frozenset[str] = frozenset()
    terms: list[Term] = []
    for term in decode_query(raw_query):
        if term.name in CONTROL:
            terms.append(term)
        elif not is_plain(term.name):
            terms.append(term)
        elif term.name == "type":
            type_number = _int(term.value, "type")
        elif term.name == "sort":
            sort = term.value
        elif term.name == "limit":
            limit = _int(term.value, "limit")
        elif term.name == "includeMeta":
            include_meta = term.value == "1"
        elif term.name == "includeElements":
            include_streams = "Stream" in term.value.split(",")
        elif term.name == "excludeElements":
            exclude_elements |= _names(term.value)
        elif term.name == "excludeFields":
            exclude_fields |= _names(term.value)
        elif term.name == "X-Plex-Container-Start":
            start = _int(term.value, term.name)
        elif term.name == "X-Plex-Container-Size":
            size = _int(term.value, term.name)
    return SearchRequest(
        type_number,
        sort,
        limit,
        tuple(terms),
        include_meta,
        include_streams,
        start,
        size,
        exclude_elements,
        exclude_fields,
    )


def _names(value: str) -> frozenset[str]:
    """The names of a comma-separated list argument, blanks dropped."""
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def result_type(section_type: str, type_number: int | None) -> str:
    """The item type a search returns: the `type` argument, else the section's own (G15)."""
    if type_number is None:
        return section_type
    name = TYPE_NAMES.get(type_number)
    if name is None:
        raise QueryError(f"unknown type {type_number}")
    return name


@dataclass(slots=True)
class _Group:
    """A push/pop group: OR of runs, each run an AND of nodes (AND binds tighter)."""

    joined_by: str = "and"
    """How this group joins the group around it: the connector seen before its `push`."""
    runs: list[list[Predicate]] = field(default_factory=list)

    def add(self, connector: str, node: Predicate) -> None:
        if connector == "or" or not self.runs:
            self.runs.append([node])
        else:
            self.runs[-1].append(node)

    def predicate(self) -> Predicate:
        runs = [tuple(run) for run in self.runs]
        if not runs:
            return _always
        if len(runs) == 1 and len(runs[0]) == 1:
            return runs[0][0]

        def evaluate(item: Item) -> bool:
            return any(all(node(item) for node in run) for run in runs)

        return evaluate


def _always(_: Item) -> bool:
    return True


class Compiler:
    """Turns the ordered terms of one search into a predicate over items of one type."""

    def __init__(
        self,
        library: EmulatedLibrary,
        item_type: str,
        now: float | None = None,
        *,
        missing: frozenset[str] = frozenset(),
    ) -> None:
        self.library = library
        self.item_type = item_type
        self.now = time.time() if now is None else now
        self.missing = missing

    def compile(self, terms: Sequence[Term]) -> Predicate:
        """Build the predicate; terms are ANDed unless joined by `or=1` inside a push/pop group."""
        stack = [_Group()]
        connector = "and"
        for term in terms:
            if term.name == "push":
                stack.append(_Group(joined_by=connector))
                connector = "and"
                continue
            if term.name == "pop":
                if len(stack) == 1:
                    raise QueryError("pop without push")
                group = stack.pop()
                stack[-1].add(group.joined_by, group.predicate())
                connector = "and"
                continue
            if term.name in ("and", "or"):
                connector = term.name
                continue
            stack[-1].add(connector, self.term(term))
            connector = "and"
        if len(stack) != 1:
            raise QueryError("push without pop")
        return stack[0].predicate()

    def term(self, term: Term) -> Predicate:
        """One filter term, evaluated on the item itself or on its related show/season/episodes."""
        if term.name == "guid":
            return self._guid_test(term.op, term.value)
        prefix, _, key = term.name.rpartition(".")
        entity = prefix or self.item_type
        definition = None if key in self.missing else FIELDS.get(entity, {}).get(key)
        if definition is None:
            raise QueryError(f"unknown filter field {term.name!r} for type {self.item_type}")
        if entity == self.item_type:
            return self.field_test(definition, term.op, term.value)
        if (self.item_type, entity) in UPWARD:
            return self._upward(entity, self.field_test(definition, term.op, term.value))
        if (self.item_type, entity) in DOWNWARD:
            return self._downward(entity, definition, term.op, term.value)
        raise QueryError(f"field {term.name!r} does not relate to type {self.item_type}")

    def _guid_test(self, op: str, value: str) -> Predicate:
        """`guid=plex://movie/…[,…]`: the items with these guids (Plex's published filter)."""
        if op not in ("=", "!="):
            raise QueryError(f"operator {op!r} is not valid for guid")
        wanted = set(value.split(","))
        negate = op == "!="

        def evaluate(item: Item) -> bool:
            hit = f"plex://{item.type}/emu{item.rating_key}" in wanted
            return not hit if negate else hit

        return evaluate

    def _upward(self, entity: str, test: Predicate) -> Predicate:
        items = self.library.items
        memo: dict[int, bool] = {}

        def parent_key(item: Item) -> int | None:
            if entity == "show":
                return item.show_rating_key
            return item.parent_rating_key

        def evaluate(item: Item) -> bool:
            key = parent_key(item)
            if key is None:
                return False
            if key not in memo:
                memo[key] = test(items[key])
            return memo[key]

        return evaluate

    def _downward(self, entity: str, definition: FieldDef, op: str, value: str) -> Predicate:
        # "Show whose episode matches": any child matches; a negated operator means none does.
        negated = op in NEGATED
        test = self.field_test(definition, NEGATED.get(op, op), value)
        library = self.library

        def related(item: Item) -> list[int]:
            if item.type == "show" and entity == "episode":
                return library.leaves.get(item.rating_key, [])
            return library.children.get(item.rating_key, [])

        def evaluate(item: Item) -> bool:
            found = any(test(library.items[key]) for key in related(item))
            return not found if negated else found

        return evaluate

    def field_test(self, definition: FieldDef, op: str, value: str) -> Predicate:
        """The test of one field against one operator and its comma-separated values."""
        allowed = {
            "tag": ("=", "!="),
            "resolution": ("=", "!="),
            "audioLanguage": ("=", "!="),
            "subtitleLanguage": ("=", "!="),
            "integer": ("=", "!=", ">>=", "<<=", ">=", "<="),
            "string": ("=", "!=", "==", "!==", "<=", ">="),
            "boolean": ("=", "!="),
            "date": (">>=", "<<=", ">=", "<=", "=", "!="),
        }[definition.type]
        if op not in allowed:
            raise QueryError(f"operator {op!r} is not valid for {definition.key}")
        if definition.type in TAG_TYPES:
            return self._tag_test(definition, op, value)
        builder = {
            "integer": self._number_test,
            "string": self._string_test,
            "boolean": self._boolean_test,
            "date": self._date_test,
        }[definition.type]
        return builder(definition, op, value)

    def _tag_test(self, definition: FieldDef, op: str, value: str) -> Predicate:
        # plexapi sends the choice key (a tag id) when it found one, else the raw title (§4.2).
        wanted: set[str] = set()
        for raw in value.split(","):
            name = raw
            if definition.tag_kind and raw.isdigit():
                name = self.library.tags.name_of(definition.tag_kind, int(raw)) or raw
            wanted.add(name.casefold())
        get, library = definition.get, self.library
        negate = op == "!="

        def evaluate(item: Item) -> bool:
            values = get(library, item)
            assert isinstance(values, tuple)  # list-typed fields always read as tuples
            hit = any(v.casefold() in wanted for v in values)
            return not hit if negate else hit

        return evaluate

    def _number_test(self, definition: FieldDef, op: str, value: str) -> Predicate:
        try:
            numbers = [float(v) for v in value.split(",")]
        except ValueError:
            raise QueryError(f"{definition.key} needs a number, got {value!r}") from None
        get, library, first = definition.get, self.library, numbers[0]

        def actual(item: Item) -> float | None:
            raw = get(library, item)
            return None if raw is None else float(raw)

        tests: dict[str, Callable[[float], bool]] = {
            "=": lambda a: a in numbers,
            "!=": lambda a: a not in numbers,
            ">>=": (lambda a: a > first) if STRICT_RANGES else (lambda a: a >= first),
            "<<=": (lambda a: a < first) if STRICT_RANGES else (lambda a: a <= first),
            ">=": lambda a: a >= first,
            "<=": lambda a: a <= first,
        }
        check = tests[op]

        def evaluate(item: Item) -> bool:
            found = actual(item)
            return found is not None and check(found)

        return evaluate

    def _string_test(self, definition: FieldDef, op: str, value: str) -> Predicate:
        needles = [v.casefold() for v in value.split(",")]
        get, library = definition.get, self.library
        tests: dict[str, Callable[[str], bool]] = {
            "=": lambda a: any(n in a for n in needles),
            "!=": lambda a: not any(n in a for n in needles),
            "==": lambda a: a in needles,
            "!==": lambda a: a not in needles,
            "<=": lambda a: a.startswith(tuple(needles)),
            ">=": lambda a: a.endswith(tuple(needles)),
        }
        check = tests[op]

        def evaluate(item: Item) -> bool:
            raw = get(library, item)
            return check("" if raw is None else str(raw).casefold())

        return evaluate

    def _boolean_test(self, definition: FieldDef, op: str, value: str) -> Predicate:
        expected = value.strip().lower() in ("1", "true")
        get, library = definition.get, self.library
        if op == "!=":
            expected = not expected

        def evaluate(item: Item) -> bool:
            return bool(get(library, item)) is expected

        return evaluate

    def _date_test(self, definition: FieldDef, op: str, value: str) -> Predicate:
        text = value.split(",")[0]
        threshold = self.date_value(text)
        # A day compared with `=` / `!=` is the whole day; any other value is one instant.
        end = threshold + 86400 if _DAY.match(text) else threshold + 1
        get, library = definition.get, self.library
        strict_after = (lambda m: m > threshold) if STRICT_RANGES else (lambda m: m >= threshold)
        strict_before = (lambda m: m < threshold) if STRICT_RANGES else (lambda m: m <= threshold)
        tests: dict[str, Callable[[float], bool]] = {
            ">>=": strict_after,
            "<<=": strict_before,
            ">=": lambda m: m >= threshold,
            "<=": lambda m: m <= threshold,
            "=": lambda m: threshold <= m < end,
            "!=": lambda m: not threshold <= m < end,
        }
        check = tests[op]

        def evaluate(item: Item) -> bool:
            raw = get(library, item)
            return raw is not None and check(int(raw))

        return evaluate

    def date_value(self, text: str) -> float:
        """Epoch seconds of a date term: `-30d` / `-2592000` (relative to now, with or without a
        unit: no unit is seconds), epoch seconds, or a day."""
        relative = _RELATIVE_DATE.match(text)
        if relative:
            return self.now - int(relative.group(1)) * _UNIT_SECONDS[relative.group(2)]
        if re.fullmatch(r"-\d+", text):
            return self.now - int(text[1:])  # relative without a unit: seconds ago
        if re.fullmatch(r"\d+", text):
            return int(text)
        if _DAY.match(text):
            return local_midnight(text)
        raise QueryError(f"unreadable date {text!r}")


def parse_sort(item_type: str, spec: str) -> list[tuple[str | None, SortDef, bool]]:
    """Decode `sort=episode.titleSort:asc,show.year:desc` into (relation, sort, descending)."""
    keys: list[tuple[str | None, SortDef, bool]] = []
    for part in spec.split(","):
        name, _, direction = part.strip().partition(":")
        if direction not in ("", "asc", "desc", "nullsLast"):
            raise QueryError(f"unknown sort direction {direction!r}")
        own = SORTS.get(item_type, {}).get(name.removeprefix(f"{item_type}."))
        if "." in name.removeprefix(f"{item_type}.") and own is not None:
            # A sort whose key is itself dotted (`episode.addedAt` of shows).
            keys.append((None, own, direction == "desc"))
            continue
        prefix, _, key = name.rpartition(".")
        # plexapi always prefixes the result type; a different prefix sorts by a related record.
        entity = prefix if prefix and prefix != item_type else item_type
        definition = find_sort(entity, key)
        if definition is None:
            raise QueryError(f"unknown sort {name!r} for type {item_type}")
        relation = None if entity == item_type else entity
        if relation is not None and (item_type, relation) not in UPWARD:
            raise QueryError(f"sort {name!r} does not relate to type {item_type}")
        keys.append((relation, definition, direction == "desc"))
    return keys


def sort_items(
    library: EmulatedLibrary,
    items: list[Item],
    keys: Sequence[tuple[str | None, SortDef, bool]],
) -> list[Item]:
    """Stable multi-key sort over the default order; ties keep it, and nulls always go last."""
    ordered = items
    for relation, definition, descending in reversed(keys):
        get = definition.get

        def value(item: Item, relation: str | None = relation, get: Getter = get) -> Any:
            if relation is None:
                return get(library, item)
            related_key = item.show_rating_key if relation == "show" else item.parent_rating_key
            return None if related_key is None else get(library, library.items[related_key])

        pairs = [(value(item), item) for item in ordered]
        present = [p for p in pairs if p[0] is not None]
        present.sort(key=lambda p: p[0], reverse=descending)
        ordered = [p[1] for p in present] + [p[1] for p in pairs if p[0] is None]
    return ordered


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise QueryError(f"{name} must be an integer, got {text!r}") from None
