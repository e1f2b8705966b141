"""The shared context: the prompt prefix every channel build of a run sends byte for byte.

`render_shared_context(profile, vocabulary)` joins the rendered profile, the filterable-field
catalog and the tag vocabulary (docs/reference/ai-lineup.md §4) into one text and its SHA-256.
The same inputs always give the same bytes: vocabulary fields are listed in `VOCABULARY_FIELDS`
order and then by name, values are de-duplicated and sorted case-insensitively, nothing depends
on mapping order, and there are no timestamps. The runtime renders it once per run, stores it as
the op's output, hands the stored value to every build and records `sha256` on every trace row.

Deliberate differences from the reference:
- the catalog says "values listed below" only for fields that really are in the vocabulary,
  and points to `discover_field_values` for every other tag field (the reference promised
  audioLanguage/subtitleLanguage values it never fetched); `VOCABULARY_FIELDS` also prefetches
  the two language fields, which have few values;
- `render_shared_context` refuses vocabulary for unknown or non-tag fields instead of printing it;
- given the connected server's filter vocabulary (`OfferedFields`), the catalog lists only the
  fields that server offers, scoped to the library types that offer them (issue 22): a real
  server has no `director` or `dovi` on episodes, and some lack optional fields. An empty
  preview naming a missing field stays the agent's fallback (`resources/ai_toolbox.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from airwave_dagster.domain.ai.profile import LibraryProfile
from airwave_dagster.domain.filters import ALLOWED_OPS, FIELDS, OPS, FieldSpec, OfferedFields
from airwave_dagster.domain.library import MEDIA_TYPES

VOCABULARY_FIELDS: tuple[str, ...] = (
    "genre",
    "studio",
    "network",
    "contentRating",
    "collection",
    "country",
    "resolution",
    "label",
    "audioLanguage",
    "subtitleLanguage",
)
"""Tag fields whose values the runtime fetches from Plex (once per field) for the context."""

HEAVY_TAG_FIELDS: tuple[str, ...] = ("actor", "director", "writer", "producer")
"""Tag fields with thousands of values: never preloaded; the agent discovers them on demand."""

CATALOG_EXCLUDED: tuple[str, ...] = ("trash", "duplicate", "unmatched", "location", "editionTitle")
"""Hygiene/storage fields that make no sense for a channel; left out of the catalog (33 remain)."""

CATALOG_HEADER = "FILTERABLE FIELDS (field, kind, operators, scope, values):"
VOCABULARY_HEADER = (
    "TAG VALUES: the exact values of these fields in this library. For these fields use only "
    "these values, spelled exactly:"
)
NO_VOCABULARY = "(no tag values available)"


class SharedContext(BaseModel):
    """The rendered shared prefix and its fingerprint."""

    model_config = ConfigDict(frozen=True)

    text: str
    sha256: str
    chars: int
    approx_tokens: int
    vocabulary_fields: tuple[str, ...]

    @classmethod
    def of(cls, text: str, vocabulary_fields: Sequence[str] = ()) -> SharedContext:
        """Wrap a rendered text (computes the hash and size)."""
        return cls(
            text=text,
            sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            chars=len(text),
            approx_tokens=(len(text) + 3) // 4,
            vocabulary_fields=tuple(vocabulary_fields),
        )


def catalog_fields() -> tuple[FieldSpec, ...]:
    """The fields offered to the models, in catalog order."""
    return tuple(spec for spec in FIELDS.values() if spec.name not in CATALOG_EXCLUDED)


def _scopes(spec: FieldSpec, offered: OfferedFields | None) -> frozenset[str]:
    """The library types in play on which the server offers the field."""
    if offered is None:
        return spec.applies
    return frozenset(t for t in spec.applies if spec.name in offered.for_type(t))


def _scope_note(scopes: frozenset[str], in_play: frozenset[str]) -> str:
    if scopes == in_play:
        return ""
    return " [movie only]" if scopes == frozenset({"movie"}) else " [show only]"


def render_field_catalog(
    preloaded: Sequence[str] = (), offered: OfferedFields | None = None
) -> str:
    """One line per catalog field: name, kind, operators, scope and where its values are.

    Args:
        preloaded: Tag fields whose values appear in the vocabulary section.
        offered: The connected server's filter vocabulary. Only fields some library of the
            server offers are listed, each scoped to the library types that offer it (real
            servers offer no `director` or `dovi` on episodes, and some lack optional fields
            such as `hdr`), so the models are never shown a field Plex would match nothing on.
            None lists the whole catalog.

    Returns:
        The catalog text.
    """
    present = set(preloaded)
    in_play = (
        frozenset(MEDIA_TYPES)
        if offered is None
        else frozenset(library.type for library in offered.libraries.values())
    )
    lines = []
    for spec in catalog_fields():
        scopes = _scopes(spec, offered) & in_play
        if not scopes:
            continue
        ops = ", ".join(op for op in OPS if op in ALLOWED_OPS[spec.kind])
        line = f"- {spec.name} ({spec.kind}; {ops}){_scope_note(scopes, in_play)}"
        if spec.name == "duration":
            line += " — minutes"
        elif spec.name == "addedWithin":
            line += " — value is a number of days"
        elif spec.kind == "bool":
            line += ' — "true" or "false"'
        elif spec.kind == "date":
            line += " — YYYY-MM-DD"
        elif spec.kind == "tag":
            if spec.name in present:
                line += " — values listed below"
            else:
                line += " — values not preloaded; use discover_field_values"
        lines.append(line)
    return "\n".join(lines)


def _field_order(name: str) -> tuple[int, str]:
    try:
        return (VOCABULARY_FIELDS.index(name), name)
    except ValueError:
        return (len(VOCABULARY_FIELDS), name)


def normalise_vocabulary(vocabulary: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Clean a fetched vocabulary: known tag fields only, values trimmed, unique, sorted.

    Fields with no values are left out.

    Raises:
        ValueError: A key is not a tag field of the catalog (names it).
    """
    cleaned: dict[str, list[str]] = {}
    for name in sorted(vocabulary, key=_field_order):
        spec = FIELDS.get(name)
        if spec is None or spec.kind != "tag":
            raise ValueError(f"vocabulary field {name!r} is not a tag field of the filter catalog")
        values = {" ".join(v.split()) for v in vocabulary[name] if v and v.strip()}
        if values:
            cleaned[name] = sorted(values, key=lambda v: (v.casefold(), v))
    return cleaned


def render_vocabulary(vocabulary: Mapping[str, Sequence[str]]) -> str:
    """One line per field: `field (N): v1, v2, ...`, all values, or a placeholder."""
    cleaned = normalise_vocabulary(vocabulary)
    if not cleaned:
        return NO_VOCABULARY
    return "\n".join(
        f"{name} ({len(values)}): {', '.join(values)}" for name, values in cleaned.items()
    )


def render_shared_context(
    profile: LibraryProfile,
    vocabulary: Mapping[str, Sequence[str]],
    offered: OfferedFields | None = None,
) -> SharedContext:
    """Render the shared prefix: profile, field catalog, tag vocabulary.

    Args:
        profile: The library profile.
        vocabulary: Tag values per field (as fetched; cleaned and sorted here).
        offered: The server's filter vocabulary: the catalog lists only what it offers
            (`render_field_catalog`); None lists the whole catalog.

    Returns:
        The context; identical inputs give identical `text` and `sha256`.

    Raises:
        ValueError: The vocabulary names a field that is not a tag field.
    """
    cleaned = normalise_vocabulary(vocabulary)
    text = "\n".join(
        [
            profile.render_text(),
            "",
            CATALOG_HEADER,
            render_field_catalog(list(cleaned), offered),
            "",
            VOCABULARY_HEADER,
            render_vocabulary(cleaned),
        ]
    )
    return SharedContext.of(text, list(cleaned))
