"""The `ai_lineup` job in process: offline and anthropic (real SDK against the stub) providers."""

from __future__ import annotations

import json
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.definitions import defs
from airwave_dagster.domain.ai.context import CATALOG_HEADER, VOCABULARY_HEADER
from airwave_dagster.domain.ai.lineup_checks import above_ceiling, audience_of, rating_counts
from airwave_dagster.emulators.plex import start_emulator
from ops.ai_lineup.asset_checks import LINEUP_CHECK_SPECS
from resources import tables as t
from resources.plex import PlexResource
from resources.stores.ai import AiStore
from resources.stores.approvals import ApprovalStore
from resources.stores.rows import keyed
from tests.fakes.scripted_model import ScriptedModel, genre_channel, small_plan
from tests.support.ai import insert_items, lineup_config

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration]

ALL_PHASES = {
    "analyze", "context", "plan", "numbering", "approval", "packages", "build", "report"
}  # fmt: skip


def _run(
    instance: dg.DagsterInstance, run_config: dict[str, Any], *, snapshot: bool = True
) -> dg.ExecuteInProcessResult:
    if snapshot:
        # The `synced` fixture wrote the snapshot rows; record them as the asset's state.
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="plex_library"))
    return defs.resolve_job_def("ai_lineup").execute_in_process(
        run_config=run_config, instance=instance, raise_on_error=False
    )


def _failure(result: dg.ExecuteInProcessResult) -> tuple[str, str]:
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures, "expected a step failure"
    data = failures[0].step_failure_data
    text = data.user_failure_data.description if data.user_failure_data else data.error.message
    return failures[0].step_key, text or ""


def _report(ai: AiStore, run_id: str) -> dict[str, Any]:
    rows = [r for r in ai.traces(run_id) if r["phase"] == "report"]
    assert len(rows) == 1
    return rows[0]["output"]


def _rows(store, table: sa.Table, *where: Any) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        return [keyed(r, table) for r in conn.execute(sa.select(table).where(*where))]


def stores_claimed(store, channel_id: str) -> bool:
    return bool(_rows(store, t.channel_claim, t.channel_claim.c.channel_id == channel_id))


def _ai_channels(store) -> list[dict[str, Any]]:
    return _rows(store, t.channel, t.channel.c.ai_generated.is_(True))


@pytest.fixture
def ai(store) -> AiStore:
    return AiStore(store.engine)


def test_offline_provider_builds_twenty_verified_channels(
    store, ai, plex_client, library_snapshot, dagster_instance
) -> None:
    # Only the rows an import's schedules write exist, and no snapshot was ever recorded: the
    # run must sync the whole library rather than profile those few items.
    libraries, items = library_snapshot
    source_id = store.sync_source(plex_client.base_url, libraries)
    insert_items(store, source_id, items[:150])
    dagster_instance.wipe_assets([dg.AssetKey("plex_library")])

    result = _run(dagster_instance, lineup_config(provider="offline", limit=20), snapshot=False)

    assert result.success
    assert store.counts()["snapshot_items"] == len(items)
    synced = [
        e
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION
        and e.asset_key == dg.AssetKey("plex_library")
    ]
    assert len(synced) == 1
    report = _report(ai, result.run_id)
    assert report["provider"] == "offline"
    assert report["channels_planned"] > 20  # the limit caps builds, never the plan
    # The limit caps what is attempted; the lineup checks may still skip a channel that repeats
    # one already kept (on this library a network that airs one genre), and must say so.
    assert len(report["built"]) + len(report["skipped"]) == 20
    assert len(report["built"]) >= 18
    assert all("repeats channel" in s["reason"] for s in report["skipped"]), report["skipped"]
    assert report["spend"] == []
    phases = {r["phase"] for r in ai.traces(result.run_id)}
    assert phases == ALL_PHASES
    library = {kind: len(plex_client.resolve({"mediaTypes": [kind]})) for kind in ("movie", "show")}
    channels = _ai_channels(store)
    assert len(channels) == len(report["built"])
    young = []
    for channel in channels:
        assert channel["enabled"] and not stores_claimed(store, channel["id"])
        definitions = sorted(
            _rows(store, t.channel_definition, t.channel_definition.c.channel_id == channel["id"]),
            key=lambda d: d["sort_index"],
        )
        # A kids or family channel keeps its rating ceiling as an EXCLUDE definition.
        audience = audience_of(channel["name"], channel["description"] or "")
        modes = [d["mode"] for d in definitions]
        assert modes == (["INCLUDE", "EXCLUDE"] if audience else ["INCLUDE"]), channel["name"]
        envelope = definitions[0]["plex_filter"]
        assert envelope["filter"] is not None
        # Re-resolve independently: the commit's verification must hold for the stored
        # definitions (the EXCLUDE one removing what it matches).
        pool = plex_client.resolve_pool(
            [(d["mode"], d["plex_filter"], None) for d in definitions], sort="titleSort"
        )
        if audience is not None:
            young.append(channel["name"])
            ratings = rating_counts(item.content_rating for item in pool)
            assert not above_ceiling(ratings, audience), (channel["name"], ratings)
            included = rating_counts(item.content_rating for item in plex_client.resolve(envelope))
            assert above_ceiling(included, audience), "the exclusion should remove something"
        hours = sum(item.duration_ms for item in pool) / 3_600_000
        whole = sum(library[kind] for kind in envelope["mediaTypes"])
        assert 3 <= len(pool) < whole, channel["name"]
        assert hours >= 10.0, channel["name"]
        slots = _rows(store, t.schedule_item, t.schedule_item.c.channel_id == channel["id"])
        assert slots, f"{channel['name']} has no schedule"
    assert young == ["Family Movies"]
    assert report["quality"]["audience_violations"] == 0
    builds = [r for r in ai.traces(result.run_id) if r["phase"] == "build"]
    context_sha = {r["context_sha256"] for r in ai.traces(result.run_id) if r["phase"] == "context"}
    assert {r["context_sha256"] for r in builds} == context_sha
    assert all(
        step["matched"] >= 0
        for r in builds
        for step in r["trace"]
        if step["kind"] == "result" and step.get("matched") is not None
    )
    materialized = dagster_instance.get_latest_materialization_event(dg.AssetKey("ai_lineup"))
    assert materialized is not None and materialized.run_id == result.run_id
    # The report step judged the same measures it reported, as the asset's checks.
    checks = {
        e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    }
    assert set(checks) == {spec.name for spec in LINEUP_CHECK_SPECS}
    assert all(c.asset_key == dg.AssetKey("ai_lineup") for c in checks.values())
    ceiling = checks["audience_ceiling"]
    assert ceiling.passed and ceiling.blocking
    assert ceiling.severity == dg.AssetCheckSeverity.ERROR
    quality = report["quality"]
    assert checks["no_strict_subsets"].passed == (quality["strict_subset_pairs"] == 0)
    assert checks["genres_covered"].passed == (quality["genres_without_channel"] == [])
    assert checks["channels_verified"].passed == (quality["channels_sized"] == quality["channels"])
    recorded = dagster_instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("ai_lineup"), name) for name in checks]
    )
    assert {key.name: r.run_id for key, r in recorded.items()} == dict.fromkeys(
        checks, result.run_id
    )


def test_a_previous_lineup_is_only_replaced_when_confirmed(
    synced, store, ai, dagster_instance
) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            t.channel_package.insert().values(
                id="manual-pkg", key="mine", name="Mine", sort_index=1
            )
        )
        conn.execute(
            t.channel.insert().values(
                id="manual-ch",
                number=7,
                name="My channel",
                media_source_id=synced,
                package_id="manual-pkg",
            )
        )
    first = _run(dagster_instance, lineup_config(provider="offline", limit=2))
    assert first.success
    before = sorted(c["id"] for c in _ai_channels(store))
    assert len(before) == 2
    counts = store.counts()

    # The offline planner plans the same lineup again, which removes nothing: the default policy
    # would let it through, so ask for approval explicitly.
    refused = _run(
        dagster_instance, lineup_config(provider="offline", limit=2, approval="required")
    )

    step, message = _failure(refused)
    assert step == "approve_lineup"  # the gate, before any write (tests/ops/test_approval_gate.py)
    assert "AWAITING APPROVAL" in message and f"airwave approve {refused.run_id}" in message
    assert sorted(c["id"] for c in _ai_channels(store)) == before
    assert store.counts() == counts

    replaced = _run(dagster_instance, lineup_config(provider="offline", limit=2, confirm_wipe=True))

    assert replaced.success
    after = sorted(c["id"] for c in _ai_channels(store))
    assert len(after) == 2 and not set(after) & set(before)
    manual = _rows(store, t.channel, t.channel.c.id == "manual-ch")
    assert manual[0]["package_id"] == "manual-pkg" and manual[0]["number"] == 7
    packages = [r for r in ai.traces(replaced.run_id) if r["phase"] == "packages"]
    # Both channels are kept (same names) and rebuilt: parked by the wipe, not deleted, and
    # deleted by the report once their rebuild committed (tests/ops/test_approval_gate.py).
    assert packages[0]["output"]["wiped"]["channels"] == 0
    assert packages[0]["output"]["parked"] == 2
    with store.engine.connect() as conn:
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(t.ai_parked_channel)).scalar() == 0
        )


def _limited_plan() -> dict[str, Any]:
    """Three packages; `limit=2` builds the first channel of the first two only.

    "Serious Films" (second package) repeats "Drama Movies", which comes before it in plan order
    but is the *second* channel of its package, so a limit of 2 never builds it.
    """
    drama = genre_channel("Drama", name="Drama Movies", mediaTypes=["movie"])
    serious = genre_channel("Drama", key="serious", name="Serious Films", mediaTypes=["movie"])
    serious["filter"]["children"].append(
        {"type": "condition", "field": "duration", "op": "gte", "value": "60"}
    )
    package = {"description": "", "icon": "lucide:Tv", "accent": "blue"}
    return {
        "packages": [
            {
                **package,
                "key": "moods",
                "name": "Moods",
                "channels": [genre_channel("Comedy"), drama],
            },
            {**package, "key": "serious", "name": "Serious", "channels": [serious]},
            {**package, "key": "scares", "name": "Scares", "channels": [genre_channel("Horror")]},
        ]
    }


def test_a_limit_diffs_and_checks_only_the_channels_it_builds(
    synced, store, ai, stub, dagster_instance
) -> None:
    stub.responder = ScriptedModel(_limited_plan())
    config = {"provider": "anthropic", "limit": 2}

    stopped = _run(dagster_instance, lineup_config(stub, approval="required", **config))

    step, _ = _failure(stopped)
    assert step == "approve_lineup"
    interrupt = ApprovalStore(store.engine).find(stopped.run_id)
    assert interrupt is not None
    diff = interrupt.payload["diff"]
    # The approval shows what will be built, not the whole plan.
    assert [e["name"] for e in diff["created"]] == ["Comedy TV", "Serious Films"]
    assert diff["created_packages"] == ["Moods", "Serious"]
    assert interrupt.payload["estimate"]["channels"] == 2

    stub.responder = ScriptedModel(_limited_plan())
    built = _run(dagster_instance, lineup_config(stub, confirm_wipe=True, **config))

    assert built.success
    report = _report(ai, built.run_id)
    assert report["channels_planned"] == 4
    # "Drama Movies" is never built, so "Serious Films" cannot repeat it.
    assert report["skipped"] == []
    assert sorted(c["name"] for c in report["built"]) == ["Comedy TV", "Serious Films"]


def _worker_bodies(stub) -> list[dict[str, Any]]:
    return [r.body for r in stub.messages_requests() if r.body and "tool_choice" not in r.body]


def _canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _stub_usage(stub) -> dict[str, int]:
    return stub.stats()["usage"]


def _ledger_usage(ai: AiStore, run_id: str) -> dict[str, int]:
    rows = ai.spend_rows(run_id)
    return {
        "input_tokens": sum(r["input_tokens"] for r in rows),
        "cache_creation_input_tokens": sum(r["cache_write_tokens"] for r in rows),
        "cache_read_input_tokens": sum(r["cache_read_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
    }


def test_anthropic_builds_share_one_cached_prefix_and_every_token_is_counted(
    synced, store, ai, stub, dagster_instance
) -> None:
    model = ScriptedModel(small_plan())
    stub.responder = model
    # Sonnet 4.6 caches prefixes from 1,024 tokens; Haiku 4.5 (the default worker) only from
    # 4,096, more than this library's context (tests/integration/test_ai_estimate.py).
    config = lineup_config(stub, provider="anthropic", worker_model="claude-sonnet-4-6")

    result = _run(dagster_instance, config)

    assert result.success
    report = _report(ai, result.run_id)
    assert [c["name"] for c in report["built"]] == [
        "Drama TV",
        "Comedy TV",
        "Action TV",
        "Horror TV",
    ]
    workers = _worker_bodies(stub)
    assert len(workers) == 8  # preview + commit per channel
    prefixes = {
        (
            _canonical(b["tools"]),
            _canonical(b["system"]),
            _canonical(b["messages"][0]["content"][0]),
        )
        for b in workers
    }
    assert len(prefixes) == 1, "the cached prefix must be byte-identical for every build"
    first_block = workers[0]["messages"][0]["content"][0]
    assert first_block["cache_control"] == {"type": "ephemeral"}
    context_rows = [r for r in ai.traces(result.run_id) if r["phase"] == "context"]
    import hashlib

    builds = [r for r in ai.traces(result.run_id) if r["phase"] == "build"]
    assert {r["context_sha256"] for r in builds} == {context_rows[0]["context_sha256"]}
    context_text = first_block["text"].split("\n", 1)[1]
    assert hashlib.sha256(context_text.encode()).hexdigest() == context_rows[0]["context_sha256"]
    # Later builds read the prefix from the cache.
    assert sum(r["cache_read_tokens"] for r in builds) > 0
    # Every token the stub billed is in the ledger and the report, planner included.
    assert _ledger_usage(ai, result.run_id) == _stub_usage(stub)
    spend = {s["model"]: s for s in report["spend"]}
    assert set(spend) == {"claude-opus-4-8", "claude-sonnet-4-6"}
    assert spend["claude-opus-4-8"]["usage"]["calls"] == 1
    assert spend["claude-sonnet-4-6"]["usage"]["calls"] == 8
    assert report["total_usd"] > 0
    assert "ANTHROPIC" not in json.dumps(report) and "stub-test-key" not in json.dumps(report)


def test_failed_attempts_are_traced_and_their_tokens_counted(
    synced, store, ai, stub, dagster_instance
) -> None:
    def fail(channel: str, call: int) -> dict[str, Any] | None:
        # Comedy's second call of its first attempt dies: its preview's tokens were spent.
        if channel == "Comedy TV" and call == 1:
            # A retryable overload (the run config turns the SDK's own retries off); one marked
            # `x-should-retry: false` would need the operator instead (tests/resources/test_llm.py).
            return {"kind": "error", "status": 529, "message": "Overloaded"}
        return None

    bad_plan = {"packages": [{"key": "x", "name": "X", "channels": "not a list"}]}
    model = ScriptedModel([bad_plan, small_plan(("Drama", "Comedy"))], fail=fail)
    stub.responder = model

    result = _run(dagster_instance, lineup_config(stub, provider="anthropic"))

    assert result.success
    traces = ai.traces(result.run_id)
    plans = [r for r in traces if r["phase"] == "plan"]
    assert [r["status"] for r in plans] == ["failed", "ok"]
    assert "not a list" in plans[0]["output"]["raw"]
    assert plans[0]["output_tokens"] > 0
    comedy = [r for r in traces if r["phase"] == "build" and r["channel_name"] == "Comedy TV"]
    assert [(r["status"], r["attempt"]) for r in comedy] == [("failed", 1), ("ok", 2)]
    assert "529" in comedy[0]["error"]
    assert comedy[0]["input_tokens"] + comedy[0]["cache_write_tokens"] > 0
    assert _ledger_usage(ai, result.run_id) == _stub_usage(stub)
    report = _report(ai, result.run_id)
    worker_calls = sum(
        s["usage"]["calls"] for s in report["spend"] if s["model"] == "claude-haiku-4-5"
    )
    assert worker_calls == 5  # 2 + 2 for the builds, 1 for the failed attempt's preview
    assert [s["usage"]["calls"] for s in report["spend"] if s["model"] == "claude-opus-4-8"] == [2]


def test_the_budget_stops_builds(synced, store, ai, stub, dagster_instance) -> None:
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Action")))
    # One worker token costs a dollar: the first worker call spends the whole budget.
    config = lineup_config(
        stub,
        provider="anthropic",
        budget_usd=1.0,
        planner_model="claude-opus-4-8",
        worker_model="claude-test-worker",
        prices={
            "claude-opus-4-8": {"input": 0.0, "output": 0.0},
            "claude-test-worker": {"input": 1_000_000.0, "output": 1_000_000.0},
        },
    )

    result = _run(dagster_instance, config)

    assert result.success
    report = _report(ai, result.run_id)
    assert report["built"] == []
    assert [s["reason"] for s in report["skipped"]] == ["budget"] * 3
    assert report["total_usd"] == 0.0 and report["budget_usd"] == 1.0
    # The worst case of a first worker call (4,096 output tokens at $1 each) is over the budget,
    # so no worker call is made at all.
    assert len(_worker_bodies(stub)) == 0
    assert _ai_channels(store) == []
    packages = _rows(store, t.channel_package, t.channel_package.c.ai_generated.is_(True))
    assert packages == []  # emptied by the skips, so removed


def test_a_plan_naming_unknown_fields_and_packages_is_sanitised_and_traced(
    synced, store, ai, stub, dagster_instance
) -> None:
    plan = small_plan(("Drama", "Comedy"))
    plan["packages"][0]["existingKey"] = "no-such-package"
    plan["packages"][1]["channels"].append(
        genre_channel(
            "Mood",
            filter={"type": "condition", "field": "moood", "op": "is", "value": "happy"},
        )
    )
    stub.responder = ScriptedModel(plan)

    result = _run(dagster_instance, lineup_config(stub, provider="anthropic"))

    assert result.success
    plan_row = next(r for r in ai.traces(result.run_id) if r["phase"] == "plan")
    actions = {(c["action"], c.get("channel_key")) for c in plan_row["output"]["changes"]}
    assert ("ignored-existing-key", None) in actions
    assert ("removed-condition", "mood") in actions and ("dropped-channel", "mood") in actions
    report = _report(ai, result.run_id)
    assert [d["channel_key"] for d in report["dropped"]] == ["mood"]
    assert len(report["built"]) == 2
    assert "Mood TV" not in {c["name"] for c in _ai_channels(store)}


def test_a_planner_that_never_fits_the_schema_fails_the_plan_step(
    synced, store, ai, stub, dagster_instance
) -> None:
    stub.responder = ScriptedModel([{"packages": []}])

    result = _run(dagster_instance, lineup_config(stub, provider="anthropic", planner_attempts=2))

    step, message = _failure(result)
    assert step == "plan_lineup"
    assert "2 time(s)" in message and "ai_lineup_trace" in message
    plans = [r for r in ai.traces(result.run_id) if r["phase"] == "plan"]
    assert [r["status"] for r in plans] == ["failed", "failed"]
    assert all(r["output"]["raw"] == '{"packages": []}' for r in plans)
    assert _rows(store, t.channel_package, t.channel_package.c.ai_generated.is_(True)) == []
    assert _ledger_usage(ai, result.run_id) == _stub_usage(stub)


def test_provider_anthropic_without_a_key_is_refused_before_anything(
    synced, store, ai, stub, dagster_instance
) -> None:
    config = lineup_config(stub, provider="anthropic")
    config["resources"]["llm"]["config"]["api_key_env_var"] = "AIRWAVE_TEST_UNSET_KEY"

    result = _run(dagster_instance, config)

    step, message = _failure(result)
    assert step == "analyze_library"
    assert "AIRWAVE_TEST_UNSET_KEY" in message and "offline" in message
    assert stub.requests == []
    rows = ai.traces(result.run_id)
    assert [(r["phase"], r["status"]) for r in rows] == [("analyze", "failed")]
    assert "AIRWAVE_TEST_UNSET_KEY" in rows[0]["error"]
    assert ai.ledger(result.run_id).calls == 0


def test_plex_failing_while_the_context_is_built_fails_the_step(
    synced, store, ai, plex_emulator, dagster_instance
) -> None:
    plex_emulator.configure(fail_all=True)
    try:
        result = _run(dagster_instance, lineup_config(provider="offline"))
    finally:
        plex_emulator.configure(fail_all=False)

    step, message = _failure(result)
    assert step == "build_shared_context"
    assert "vocabulary" in message and "PLEX_URL" in message
    assert plex_emulator.token not in message
    rows = [(r["phase"], r["status"]) for r in ai.traces(result.run_id)]
    assert rows == [("analyze", "ok"), ("context", "failed")]
    assert _ai_channels(store) == []


def test_the_shared_context_offers_only_the_fields_the_server_has(store, dagster_instance) -> None:
    """A server without an optional filter field (issue 22: older releases, libraries without
    media analysis; the emulator's `missing_fields`) is never offered to the models, and the
    fields no real server has on episodes (`episode.director`, `episode.dovi`) are scoped to
    movies. The empty preview naming a missing field stays the agent's fallback."""
    with start_emulator(items=200, seed=3, missing_fields=("hdr",)) as emulator:
        result = defs.resolve_job_def("ai_lineup").execute_in_process(
            run_config=lineup_config(provider="offline"),
            instance=dagster_instance,
            resources={"plex": PlexResource(base_url=emulator.url, token=emulator.token)},
            op_selection=["analyze_library", "build_shared_context"],
            raise_on_error=False,
        )

    assert result.success
    shared = result.output_for_node("build_shared_context")
    catalog = shared.context.text.split(CATALOG_HEADER, 1)[1].split(VOCABULARY_HEADER, 1)[0]
    lines = {line.split(" ")[1]: line for line in catalog.strip().splitlines()}
    assert "hdr" not in lines and "- hdr " not in shared.context.text
    assert "[movie only]" in lines["director"] and "[movie only]" in lines["dovi"]
    assert "genre" in lines and "network" in lines
    assert shared.offered is not None
    assert all("hdr" not in library.fields for library in shared.offered.libraries.values())
