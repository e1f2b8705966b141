"""Lineup-level checks: a channel is judged against the channels already kept in its lineup.

`verify_pool` judges one pool alone (size, runtime, whole library). A lineup a viewer keeps also
needs its channels to be *different* from each other and to suit the audience they are named
for, so the shared tools consult a `LineupGuard` before a commit (issue 10):

- **overlap** — a pool that is at least `LineupRules.max_jaccard` Jaccard-similar to a kept
  channel, or whose smaller side is at least `LineupRules.max_containment` inside the other
  (a near-subset in either direction), is refused with the kept channel's name;
- **audience** — a channel named for kids or a family (`audience_of`) may only carry items whose
  content rating is at or below its ceiling (`KIDS_RATINGS` / `FAMILY_RATINGS`); unrated items
  count as above it, because nobody vouched for them. The ceiling is enforced with an EXCLUDE
  definition (`ceiling_exclusion`: `contentRating isNot G and isNot TV-Y ...`, which an unrated
  item also matches, so it leaves the pool too). The pool the check judges is the channel's
  filter minus its exclusion, so a channel kept under the ceiling by it passes; the refusal
  names the exclusion to add, and the offline builder plans and revises kids and family
  channels with it.

The guard holds only rating keys and content ratings, so the same object serves the offline
builder and the Anthropic worker loop, and a test can replay a lineup in memory.

Also here: `negate` (De Morgan over the filter language, for excluding what another channel
plays) and `is_cut_short` (a callsign that is just the channel name truncated).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from airwave_dagster.domain.filters import ALLOWED_OPS, FIELDS, Condition, FilterNode, Group

Audience = Literal["kids", "family"]

KIDS_RATINGS: tuple[str, ...] = ("G", "TV-Y", "TV-Y7", "TV-G")
"""Ratings a kids' channel may carry."""

FAMILY_RATINGS: tuple[str, ...] = ("G", "PG", "TV-Y", "TV-Y7", "TV-G", "TV-PG")
"""Ratings a family channel may carry: nothing above PG / TV-PG."""

CEILINGS: Mapping[Audience, tuple[str, ...]] = {"kids": KIDS_RATINGS, "family": FAMILY_RATINGS}

MATURE_RATINGS: tuple[str, ...] = ("R", "NC-17", "TV-MA")
"""Ratings that make a channel mixed-audience when it also carries kids-rated items."""

UNRATED = "unrated"
"""How an item without a content rating is counted."""

_KIDS_WORDS = re.compile(
    r"\b(kids?|children|childrens|cartoons?|toons?|toddlers?|preschool|saturday morning)\b",
    re.IGNORECASE,
)
_FAMILY_WORDS = re.compile(r"\bfamil(y|ies)\b", re.IGNORECASE)


def audience_of(*texts: str) -> Audience | None:
    """The audience a channel is named for, read from its name and description.

    Args:
        texts: The channel's name, description, theme (any order).

    Returns:
        `kids` when the text speaks of kids, children or cartoons; `family` when it speaks of a
        family; None for a general-audience channel.
    """
    joined = " ".join(texts)
    if _KIDS_WORDS.search(joined):
        return "kids"
    if _FAMILY_WORDS.search(joined):
        return "family"
    return None


def rating_of(content_rating: str | None) -> str:
    """An item's content rating as the checks count it (blank → `unrated`)."""
    cleaned = (content_rating or "").strip()
    return cleaned or UNRATED


def above_ceiling(ratings: Mapping[str, int], audience: Audience) -> dict[str, int]:
    """The ratings (and how many items carry each) a channel for `audience` may not carry."""
    allowed = {r.casefold() for r in CEILINGS[audience]}
    return {r: n for r, n in sorted(ratings.items()) if n and r.casefold() not in allowed}


def ceiling_group(audience: Audience, present: Iterable[str] | None = None) -> FilterNode:
    """The `contentRating is …` group that keeps a channel at its audience's ceiling.

    Args:
        audience: Whose ceiling.
        present: The ratings the library spells (case-insensitive); only those are listed, so
            the group never names a value Plex does not have. None lists the whole ceiling.

    Returns:
        One condition, or an `or` group of them.
    """
    allowed = list(CEILINGS[audience])
    if present is not None:
        spelled = {r.casefold(): r for r in present}
        allowed = [spelled[r.casefold()] for r in allowed if r.casefold() in spelled]
    if not allowed:
        # Nothing of the library is at the ceiling: a condition no item meets keeps it empty.
        allowed = [CEILINGS[audience][0]]
    conditions: list[FilterNode] = [
        Condition(field="contentRating", op="is", value=r) for r in allowed
    ]
    if len(conditions) == 1:
        return conditions[0]
    return Group(combinator="or", children=conditions)


def ceiling_exclusion(audience: Audience, present: Iterable[str] | None = None) -> FilterNode:
    """The filter of the EXCLUDE definition that keeps a channel at its audience's ceiling.

    It matches every item *not* rated at the ceiling (`contentRating isNot G and isNot TV-Y
    ...`, the negation of `ceiling_group`). An item without a rating matches every `isNot`
    (Plex's "is not" is none-of, and so is the local evaluator's), so unrated items leave the
    pool as well: nobody vouched for them.

    Args:
        audience: Whose ceiling.
        present: The ratings the library spells, as for `ceiling_group`; None lists the whole
            ceiling (a value the library lacks is harmless in an `isNot`).

    Returns:
        One `isNot` condition, or an `and` group of them.
    """
    negated = negate(ceiling_group(audience, present))
    assert negated is not None  # tag conditions always negate
    return negated


class LineupRules(BaseModel):
    """How different a channel must be from the channels already kept."""

    model_config = ConfigDict(frozen=True)

    max_jaccard: float = Field(default=0.5, gt=0, le=1)
    """A pool this Jaccard-similar to a kept one (or more) is refused."""
    max_containment: float = Field(default=0.9, gt=0, le=1)
    """A pool whose smaller side is this much (or more) inside the other is refused."""


@dataclass(frozen=True)
class KeptChannel:
    """A channel of the lineup, as the guard remembers it."""

    name: str
    keys: frozenset[str]
    filter: FilterNode | None = None


@dataclass(frozen=True)
class Overlap:
    """How a pool overlaps a kept channel."""

    kept: KeptChannel
    jaccard: float
    containment: float
    """Share of the smaller pool that is in both."""


def overlap(a: frozenset[str], b: frozenset[str]) -> tuple[float, float]:
    """Jaccard similarity and containment (share of the smaller set inside the other)."""
    if not a or not b:
        return 0.0, 0.0
    both = len(a & b)
    return both / len(a | b), both / min(len(a), len(b))


@dataclass
class LineupGuard:
    """The channels kept so far in one lineup, and the checks a new channel must pass."""

    rules: LineupRules = field(default_factory=LineupRules)
    kept: list[KeptChannel] = field(default_factory=list[KeptChannel])

    def conflicts(self, keys: frozenset[str]) -> list[Overlap]:
        """Every kept channel the pool is too close to, closest first."""
        found: list[Overlap] = []
        for kept in self.kept:
            jaccard, containment = overlap(keys, kept.keys)
            if jaccard >= self.rules.max_jaccard or containment >= self.rules.max_containment:
                found.append(Overlap(kept, jaccard, containment))
        found.sort(key=lambda o: (-o.jaccard, -o.containment, o.kept.name))
        return found

    def check(
        self,
        keys: frozenset[str],
        ratings: Mapping[str, int],
        *,
        audience: Audience | None,
    ) -> list[str]:
        """Reasons to refuse a channel with this pool; empty when it may be kept.

        Args:
            keys: The pool's rating keys.
            ratings: Items per content rating of the pool (`rating_of`).
            audience: The audience the channel is named for, if any.

        Returns:
            Human-readable reasons naming the fix, in a fixed order.
        """
        reasons = [
            f"the pool repeats channel {found.kept.name!r} (Jaccard {found.jaccard:.2f}; "
            f"{found.containment:.0%} of the smaller pool is in both); make the channel "
            "distinct from it (exclude what it plays with isNot, or pick another angle)"
            for found in self.conflicts(keys)[:3]
        ]
        if audience is not None:
            above = above_ceiling(ratings, audience)
            if above:
                allowed = ", ".join(CEILINGS[audience])
                listed = ", ".join(f"{rating} {count}" for rating, count in above.items())
                exclusion = ceiling_exclusion(audience).model_dump(mode="json", exclude_none=True)
                reasons.append(
                    f"a {audience} channel may only carry {allowed}; {sum(above.values())} "
                    f"items are above that ceiling ({listed}); unrated items count as above "
                    "it. Keep the filter and add an EXCLUDE definition for the ceiling: pass "
                    f"exclude={json.dumps(exclusion, separators=(',', ':'))} with it"
                )
        return reasons

    def keep(self, name: str, keys: frozenset[str], node: FilterNode | None = None) -> None:
        """Remember a committed channel."""
        self.kept.append(KeptChannel(name=name, keys=keys, filter=node))


def rating_counts(ratings: Iterable[str | None]) -> dict[str, int]:
    """Items per content rating (`rating_of`), sorted by rating."""
    return dict(sorted(Counter(rating_of(r) for r in ratings).items()))


_NEGATED_OP = {"is": "isNot", "isNot": "is", "contains": "notContains", "notContains": "contains"}


def negate(node: FilterNode) -> FilterNode | None:
    """The filter matching exactly what `node` does not (De Morgan), or None if not expressible.

    Tag, text and boolean conditions flip their operator; an integer bound flips to the
    neighbouring integer (`year gte 1990` → `year lte 1989`, `decade is 1990` → `lte 1989 or
    gte 1991`); a decimal bound (scores) cannot be negated exactly, so the whole negation is
    None. An item without the integer (no year) matches neither side.
    """
    if isinstance(node, Group):
        children: list[FilterNode] = []
        for child in node.children:
            negated = negate(child)
            if negated is None:
                return None
            children.append(negated)
        return Group(combinator="and" if node.combinator == "or" else "or", children=children)
    spec = FIELDS.get(node.field)
    if spec is None:
        return None
    if spec.kind == "bool" and node.op == "is":
        flipped = "false" if node.value.strip().lower() in ("true", "1") else "true"
        return node.model_copy(update={"value": flipped})
    if node.op in _NEGATED_OP and node.op in ALLOWED_OPS[spec.kind] and spec.kind != "int":
        return node.model_copy(update={"op": _NEGATED_OP[node.op]})
    if spec.kind == "int" and node.op == "is":
        try:
            value = int(node.value)
        except ValueError:
            return None
        below = node.model_copy(update={"op": "lte", "value": str(value - 1)})
        above = node.model_copy(update={"op": "gte", "value": str(value + 1)})
        return Group(combinator="or", children=[below, above])
    if spec.kind == "int" and node.op in ("gte", "lte"):
        try:
            value = int(node.value)
        except ValueError:
            return None
        moved = value - 1 if node.op == "gte" else value + 1
        return node.model_copy(
            update={"op": "lte" if node.op == "gte" else "gte", "value": str(moved)}
        )
    return None


def compact(text: str) -> str:
    """Upper-case letters and digits only, as a callsign is normalised."""
    return re.sub(r"[^A-Z0-9]", "", text.upper())


def is_cut_short(callsign: str, name: str) -> bool:
    """Whether the callsign is the channel name truncated (a word cut short) rather than made.

    A callsign is cut short when it reads as pieces of the name's words in order — each piece a
    prefix of its word, words may be skipped — and some piece of two or more characters stops
    inside its word: `COMED` ("Comedy"), `T202` ("The 2020s"), `SFIC` ("Science Fiction"),
    `HNET` ("Harbor Network"). Whole words (`ACTION`), initials (`UHD`, `CNTV`) and made-up
    tokens (`LAFF`, `DCVRS`) are not.
    """
    sign = compact(callsign)
    words = [word for word in (compact(w) for w in name.split()) if word]
    if not sign or not words:
        return False
    # A state is (characters of the sign read, next word usable, whether a piece was cut).
    seen: set[tuple[int, int, bool]] = set()
    frontier = [(0, 0, False)]
    endings: set[bool] = set()
    while frontier:
        state = frontier.pop()
        if state in seen:
            continue
        seen.add(state)
        position, start, cut = state
        if position == len(sign):
            endings.add(cut)
            continue
        for index in range(start, len(words)):
            word = words[index]
            longest = 0
            while (
                longest < len(word)
                and position + longest < len(sign)
                and word[longest] == sign[position + longest]
            ):
                longest += 1
            frontier.extend(
                (position + length, index + 1, cut or 1 < length < len(word))
                for length in range(1, longest + 1)
            )
    # Cut short when the sign only reads as the name with some word cut in the middle.
    return True in endings and False not in endings
