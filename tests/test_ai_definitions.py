"""How `ai_lineup` is bound: executor, config documentation, asset lineage, resource defaults."""

from __future__ import annotations

import dagster as dg

from airwave_dagster.definitions import defs
from ops.ai_lineup.checkpoints import AiLineupConfig
from ops.ai_lineup.job import BUILD_CONCURRENCY
from resources.llm import LlmResource


def test_ai_lineup_fans_out_on_the_multiprocess_executor_six_at_a_time() -> None:
    job = defs.resolve_job_def("ai_lineup")

    assert job.executor_def.name == "fan_out"
    assert BUILD_CONCURRENCY == 6
    assert job.tags["airwave/report_op"] == "report_lineup"


def test_every_run_config_field_is_described() -> None:
    for name, field in AiLineupConfig.model_fields.items():
        assert field.description, name
    for name, field in LlmResource.model_fields.items():
        assert field.description, name


def test_the_catalog_shows_plex_library_then_profile_then_ai_lineup() -> None:
    graph = defs.resolve_asset_graph()

    profile = graph.get(dg.AssetKey("library_profile"))
    lineup = graph.get(dg.AssetKey("ai_lineup"))

    assert dg.AssetKey("plex_library") in profile.parent_keys
    assert dg.AssetKey("library_profile") in lineup.parent_keys


def test_the_llm_resource_holds_a_variable_name_never_a_key(monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    resource = LlmResource()

    assert resource.api_key_env_var == "ANTHROPIC_API_KEY"
    assert not resource.has_key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret")
    assert resource.has_key()
    assert "sk-test-secret" not in repr(resource) + resource.missing_key_message()
