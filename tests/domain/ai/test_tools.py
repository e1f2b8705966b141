"""Tests for the worker tools: definitions, dispatch, verification and the session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airwave_dagster.domain.ai.tools import (
    MAX_MODEL_CALLS,
    TOOL_DEFINITIONS,
    FilterPreview,
    PoolRules,
    ToolSession,
    filter_field_infos,
    run_tool,
    summarise_pool,
    tool_definitions_api,
    verify_pool,
)
from airwave_dagster.domain.filters import Condition, FilterEnvelope
from airwave_dagster.domain.library import MediaItem
from tests.domain.ai.conftest import LocalToolbox


def movie(key: str, title: str, minutes: int, **extra: Any) -> MediaItem:
    return MediaItem(
        rating_key=key, type="movie", title=title, duration_ms=minutes * 60_000, **extra
    )


def episode(key: str, show: str, minutes: int, **extra: Any) -> MediaItem:
    return MediaItem(
        rating_key=key,
        type="episode",
        title=f"{show} {key}",
        duration_ms=minutes * 60_000,
        show_title=show,
        show_rating_key=f"show-{show}",
        **extra,
    )


ITEMS = (
    [movie(f"m{i}", f"Western {i}", 120, genres=("Western",), year=1960 + i) for i in range(6)]
    + [movie(f"d{i}", f"Drama {i}", 100, genres=("Drama",), year=2000 + i) for i in range(3)]
    + [episode(f"e{i}", "Ranch Life", 45, genres=("Western",)) for i in range(8)]
)

WESTERN = {"type": "condition", "field": "genre", "op": "is", "value": "Western"}
DRAMA = {"type": "condition", "field": "genre", "op": "is", "value": "Drama"}


def content(result: Any) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(result.content)
    return payload


def test_tool_definitions_are_fixed_data_in_a_fixed_order() -> None:
    names = [tool.name for tool in TOOL_DEFINITIONS]
    assert names == [
        "list_filter_fields",
        "discover_field_values",
        "search_titles",
        "preview_filter",
        "commit_channel",
        "give_up",
    ]
    api = tool_definitions_api()
    assert api == tool_definitions_api()
    assert json.dumps(api, sort_keys=True) == json.dumps(tool_definitions_api(), sort_keys=True)
    assert all(set(tool) == {"name", "description", "input_schema"} for tool in api)
    preview = api[3]["input_schema"]
    assert preview["required"] == ["mediaTypes", "filter"]
    assert "$defs" in preview and preview["properties"]["filter"] == {"$ref": "#/$defs/node"}
    api[0]["description"] = "changed"
    assert tool_definitions_api()[0]["description"] != "changed"


def test_list_filter_fields_returns_all_38_fields() -> None:
    result = run_tool(LocalToolbox(ITEMS), "list_filter_fields", {})
    fields = content(result)["fields"]
    assert len(fields) == 38 == len(filter_field_infos())
    duration = next(f for f in fields if f["field"] == "duration")
    assert duration["operators"] == ["is", "gte", "lte"]
    assert duration["applies_to"] == ["movie"]


def test_preview_reports_the_complete_pool_with_runtime_hours() -> None:
    result = run_tool(
        LocalToolbox(ITEMS), "preview_filter", {"mediaTypes": ["movie", "show"], "filter": WESTERN}
    )
    assert not result.is_error
    body = content(result)
    assert body["totalItems"] == 14 == result.matched
    assert (body["movieCount"], body["episodeCount"], body["showCount"]) == (6, 8, 1)
    assert body["totalRuntimeHours"] == 18.0  # 6 x 2 h + 8 x 0.75 h
    assert body["topShows"] == [{"title": "Ranch Life", "episodes": 8, "hours": 6.0}]
    assert "Western 0 (1960)" in body["sampleTitles"]
    assert "libraryItems" not in body and "library_items" not in body


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"mediaTypes": ["movie"]}, "'filter' is required"),
        ({"mediaTypes": ["cartoon"], "filter": WESTERN}, "unknown media type 'cartoon'"),
        (
            {"mediaTypes": ["movie"], "filter": {**WESTERN, "field": "genres"}},
            "unknown field 'genres'",
        ),
        ({"mediaTypes": ["movie"], "filter": WESTERN, "detail": "verbose"}, "detail must be"),
    ],
)
def test_bad_tool_input_comes_back_as_an_error_result(
    payload: dict[str, Any], fragment: str
) -> None:
    toolbox = LocalToolbox(ITEMS)
    result = run_tool(toolbox, "preview_filter", payload)
    assert result.is_error
    assert fragment in content(result)["error"]
    assert toolbox.previews == 0


def test_unknown_tools_are_errors_with_a_suggestion() -> None:
    result = run_tool(LocalToolbox(ITEMS), "preview_filters", {})
    assert result.is_error and "did you mean 'preview_filter'" in content(result)["error"]
    odd = run_tool(LocalToolbox(ITEMS), "give_up", ["reason"])  # type: ignore[arg-type]
    assert odd.is_error and "must be a JSON object" in content(odd)["error"]


def test_search_titles_previews_a_title_search() -> None:
    toolbox = LocalToolbox(ITEMS)
    result = run_tool(toolbox, "search_titles", {"query": "ranch"})
    assert result.matched == 8
    assert result.envelope is not None
    assert result.envelope.filter == Condition(field="title", op="contains", value="ranch")


def test_discover_field_values_sorts_tag_values_and_explains_other_kinds() -> None:
    toolbox = LocalToolbox(ITEMS, tag_values={"actor": ["zoe", "Adam", "adam", "Zoe"]})
    result = run_tool(toolbox, "discover_field_values", {"field": "actor"})
    assert content(result)["values"] == ["Adam", "adam", "Zoe", "zoe"]
    year = run_tool(toolbox, "discover_field_values", {"field": "year"})
    assert content(year)["values"] == [] and "int field" in content(year)["note"]
    missing = run_tool(toolbox, "discover_field_values", {"field": "writer"})
    assert missing.is_error and "no values recorded" in content(missing)["error"]


def test_commit_re_resolves_the_pool_and_ignores_the_claimed_size() -> None:
    toolbox = LocalToolbox(ITEMS)
    result = run_tool(
        toolbox,
        "commit_channel",
        {"mediaTypes": ["movie"], "filter": DRAMA, "poolSize": 500},
    )
    assert result.is_error and result.terminal is None
    assert "only 5.0 h of programming" in content(result)["error"]
    assert result.matched == 3
    assert toolbox.commits == []
    assert toolbox.previews == 1


def test_commit_refuses_tiny_pools_and_the_whole_library() -> None:
    tiny = run_tool(
        LocalToolbox(ITEMS),
        "commit_channel",
        {"mediaTypes": ["movie"], "filter": {**DRAMA, "value": "Nothing"}},
        rules=PoolRules(min_items=3, min_runtime_hours=0),
    )
    assert "only 0 items matched; a channel needs at least 3" in content(tiny)["error"]
    whole = run_tool(
        LocalToolbox(ITEMS),
        "commit_channel",
        {
            "mediaTypes": ["movie"],
            "filter": {"type": "condition", "field": "duration", "op": "gte", "value": "1"},
        },
    )
    assert "matches all 9 items" in content(whole)["error"]


def test_commit_refuses_filters_that_only_exclude() -> None:
    toolbox = LocalToolbox(ITEMS)
    result = run_tool(
        toolbox,
        "commit_channel",
        {
            "mediaTypes": ["movie"],
            "filter": {"type": "condition", "field": "title", "op": "notContains", "value": "0"},
        },
    )
    assert result.is_error and "only excludes things" in content(result)["error"]
    assert toolbox.previews == 0 and toolbox.commits == []


def test_commit_without_a_filter_uses_the_planned_one() -> None:
    toolbox = LocalToolbox(ITEMS)
    planned = FilterEnvelope(
        media_types=["movie", "show"], filter=Condition.model_validate(WESTERN)
    )
    result = run_tool(
        toolbox, "commit_channel", {"mediaTypes": ["movie", "show"]}, default_envelope=planned
    )
    assert result.terminal == "committed"
    assert content(result)["ok"] is True and content(result)["totalItems"] == 14
    assert toolbox.commits == [planned]
    no_default = run_tool(LocalToolbox(ITEMS), "commit_channel", {"mediaTypes": ["movie"]})
    assert no_default.is_error and "whole library" in content(no_default)["error"]


def test_give_up_releases_the_claim() -> None:
    toolbox = LocalToolbox(ITEMS)
    result = run_tool(toolbox, "give_up", {"reason": " too thin "})
    assert result.terminal == "gave_up" and result.reason == "too thin"
    assert toolbox.gave_up == ["too thin"]
    empty = run_tool(toolbox, "give_up", {"reason": ""})
    assert empty.is_error


def test_verify_pool_lists_every_reason() -> None:
    preview = FilterPreview(total_items=2, total_runtime_hours=1.5, library_items=2)
    assert verify_pool(preview) == [
        "only 2 items matched; a channel needs at least 3",
        "only 1.5 h of programming; a channel needs at least 10 h",
        "the filter matches all 2 items of the searched libraries; "
        "a channel must be narrower than the whole library",
    ]
    fine = FilterPreview(total_items=30, total_runtime_hours=12, library_items=100)
    assert verify_pool(fine) == []
    assert verify_pool(fine, min_runtime_hours=20) != []


def test_summarise_pool_is_deterministic_and_order_free() -> None:
    forward = summarise_pool(ITEMS)
    backward = summarise_pool(list(reversed(ITEMS)))
    assert forward == backward
    compact = summarise_pool(ITEMS, detail="compact")
    assert len(compact.sample_titles) <= len(forward.sample_titles)


def test_the_session_commits_once_and_traces_real_counts() -> None:
    toolbox = LocalToolbox(ITEMS)
    session = ToolSession(toolbox)
    session.says("Let me check.")
    first = session.call("preview_filter", {"mediaTypes": ["movie", "show"], "filter": WESTERN})
    assert not first.is_error
    done = session.call("commit_channel", {"mediaTypes": ["movie", "show"], "filter": WESTERN})
    assert done.terminal == "committed"
    again = session.call("give_up", {"reason": "changed my mind"})
    assert again.is_error and "already committed" in content(again)["error"]
    assert toolbox.gave_up == []
    outcome = session.finish(model_calls=3)
    assert outcome.status == "created"
    assert outcome.channel_id == "ch-1001" and outcome.number == 1001
    assert outcome.pool is not None and outcome.pool.total_items == 14
    assert outcome.tool_calls == 3 and outcome.model_calls == 3
    kinds = [(step.kind, step.tool, step.matched) for step in outcome.trace]
    assert kinds[:3] == [
        ("says", None, None),
        ("call", "preview_filter", None),
        ("result", "preview_filter", 14),
    ]
    assert all(len(step.sample or "") <= 1000 for step in outcome.trace)


def test_a_refused_commit_without_anything_else_ends_skipped() -> None:
    session = ToolSession(LocalToolbox(ITEMS))
    session.call("commit_channel", {"mediaTypes": ["movie"], "filter": DRAMA})
    outcome = session.finish(model_calls=2)
    assert outcome.status == "skipped"
    assert outcome.reason is not None and outcome.reason.startswith("commit refused: only 5.0 h")


def test_a_session_that_never_commits_fails_and_names_the_call_cap() -> None:
    session = ToolSession(LocalToolbox(ITEMS))
    session.call("preview_filter", {"mediaTypes": ["movie"], "filter": DRAMA})
    assert session.finish(model_calls=2).reason == "agent finished without committing a channel"
    capped = session.finish(model_calls=MAX_MODEL_CALLS)
    assert capped.status == "failed"
    assert f"after {MAX_MODEL_CALLS} model calls" in (capped.reason or "")
    errored = session.finish(model_calls=1, error="APIStatusError: overloaded")
    assert errored.status == "failed" and errored.reason == "APIStatusError: overloaded"


def test_a_give_up_ends_skipped_with_its_reason() -> None:
    session = ToolSession(LocalToolbox(ITEMS))
    session.call("give_up", {"reason": "no westerns from the 1990s"})
    outcome = session.finish()
    assert (outcome.status, outcome.reason) == ("skipped", "no westerns from the 1990s")
