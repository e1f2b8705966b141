"""Prompt text for the planner and the per-channel worker (static, so the cached prefix is stable).

The worker request is laid out as: tools (`tools.TOOL_DEFINITIONS`) → `system` =
`WORKER_SYSTEM_PROMPT` → one user message with two text blocks: `CONTEXT_HEADING` + the shared
context (the block that carries the ephemeral `cache_control` breakpoint), then the per-channel
brief from `render_channel_brief` (uncached). Nothing per-channel goes before the breakpoint.
The planner gets `PLANNER_SYSTEM_PROMPT` and `render_planner_prompt(context, existing_packages)`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from airwave_dagster.domain.ai.plan import (
    ACCENT_KEYS,
    ExistingPackage,
    PlannedChannel,
    render_existing_packages,
)

PLANNER_SYSTEM_PROMPT = f"""\
You program television. From a statistical profile of one person's media library you design \
their personal lineup: always-on channels grouped into packages. You answer by calling the \
submit_lineup tool exactly once.

What makes a good lineup:
- Concepts specific to this library: eras, moods, dayparts, studios and networks with depth, \
marathons of the biggest shows, score windows (acclaimed, crowd-pleasers, guilty pleasures), \
runtime bands. Every idea must be visible in the profile; never invent content.
- Mix broad and niche channels, movies and series, old and new. Follow the audience the library \
shows (kids, anime, prestige drama).
- Coverage: most of the library should have a home. Several channels where the library is deep; \
no padding; near-identical pools belong in one channel. There is no target count.
- Packages group channels by audience, mood or occasion. When an existing package fits, file \
channels into it by setting existingKey (near-synonyms count as a fit); create a new package only \
for an idea no existing package covers.

Filters are the quality bar:
- Every channel needs a complete, working filter. A lone genre is a weak channel; combine at least \
two dimensions, add title exclusions (title notContains) or explicit inclusions (OR'd titles).
- Tag values must come from the TAG VALUES list, spelled exactly; fields come from the catalog. \
Groups use "combinator" ("and"/"or"), conditions use "op"; at most one level of nested groups.
- Numeric fields make distinctive channels: prefer windows (gte and lte) to bare floors. Runtime \
bands signal intent (duration is movies only, in minutes).
- A field that exists only on movies or only on shows forces mediaTypes to that type; otherwise \
default mediaTypes to both.
- Judge size by runtime, not title count; targetPoolSize is a loose hint.

Appearance: every package and channel gets an icon "lucide:Name" or "phosphor:Name" (PascalCase); \
packages pick an accent from: {", ".join(ACCENT_KEYS)}. Keys are unique kebab-case.
"""

PLANNER_TOOL_NAME = "submit_lineup"
PLANNER_TOOL_DESCRIPTION = (
    "Submit the complete lineup: packages, each with its channels and filters."
)

WORKER_SYSTEM_PROMPT = """\
You build exactly one channel of a TV lineup from a media library, using the tools.

The planner proposed a filter. Treat it as a starting point, not a yes/no question:
1. Preview the proposed filter (preview_filter, detail "compact").
2. If the pool fits the channel's idea, commit it at once; do not keep exploring.
3. If it does not, fix it (add a title constraint, an exclusion or another dimension, or widen a \
window), preview again, and commit when it fits. Pass `exclude` to remove items from the pool (an \
EXCLUDE definition): a kids or family channel keeps its rating ceiling that way.
4. Call give_up only after real alternatives failed and the library truly cannot support the \
channel — never after the first preview.

Rules:
- Use only tag values listed in the context; do not fetch them again. discover_field_values is \
for actor, director, writer and producer only; list_filter_fields only to check an operator.
- The pool must be right. A filter that matches everything is worse than a narrow one, but a pool \
bigger than expected is not a reason to reject it. A few big shows make a great channel.
- The commit re-checks the pool itself and refuses pools that are too small, too short or the \
whole library.
- Call commit_channel or give_up exactly once, then stop.
"""

CONTEXT_HEADING = "SHARED LIBRARY CONTEXT (identical for every channel of this lineup):"


def render_planner_prompt(context_text: str, existing_packages: Sequence[ExistingPackage]) -> str:
    """The planner's user prompt: shared context, existing packages, the sizing instruction."""
    return "\n".join(
        [
            context_text,
            "",
            "EXISTING PACKAGES you may file channels into (set existingKey):",
            render_existing_packages(existing_packages),
            "",
            "Build the full lineup: as many packages and channels as the library's coverage "
            "requires. Give every channel a complete working filter using values from the "
            "vocabulary.",
        ]
    )


def render_channel_brief(channel: PlannedChannel) -> str:
    """The per-channel part of a worker request (after the cache breakpoint)."""
    proposed = json.dumps(
        channel.filter.model_dump(mode="json", by_alias=True),
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=True,
    )
    lines = [
        f"CHANNEL: {channel.name}",
        f"Description: {channel.description}",
        f"Theme: {channel.theme or channel.description}",
        f"Target pool size: about {channel.target_pool_size} items"
        if channel.target_pool_size
        else "Target pool size: not given",
        f"Ordering: {channel.ordering}",
        f"Media types: {', '.join(channel.media_types)}",
    ]
    if channel.exclude is not None:
        # Before the filter, so the brief still ends with the proposed filter's JSON.
        excluded = json.dumps(
            channel.exclude.model_dump(mode="json", by_alias=True),
            ensure_ascii=False,
            separators=(",", ":"),
            sort_keys=True,
        )
        lines.append(
            f"Proposed exclude (an EXCLUDE definition, kept unless you pass one): {excluded}"
        )
    lines += ["", "PROPOSED FILTER (verify it first):", proposed]
    return "\n".join(lines)
