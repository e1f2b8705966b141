"""The edited-config rule: which changes a resume may carry, judged over plain values.

The end-to-end cases (a real failed run resumed with a lower bound, or refused) are in
tests/integration/test_reconfig_resume.py.
"""

from __future__ import annotations

import pytest
from dagster._core.snap import JobSnap

from airwave_dagster.durability import reconfig
from ops.lineup_import.job import import_lineup

PLAN = "plan_import_lineup"
PARENT = {
    "ops": {PLAN: {"config": {"lineup": {"file": {"path": "a.json"}}, "dry_run": False}}},
}
SETTLED = ["plan_import_lineup", "create_packages", "build_channel[ch_101]"]
"""Steps a resume replays: the plan, the packages and one finished build."""


def test_a_partial_config_merges_key_by_key_and_replaces_leaves() -> None:
    merged = reconfig.merge(PARENT, {"execution": {"config": {"max_concurrent": 1}}})

    assert merged["ops"] == PARENT["ops"]
    assert merged["execution"] == {"config": {"max_concurrent": 1}}
    swapped = reconfig.merge(PARENT, {"ops": {PLAN: {"config": {"dry_run": True}}}})
    assert swapped["ops"][PLAN]["config"] == {
        "lineup": {"file": {"path": "a.json"}},
        "dry_run": True,
    }


def test_changed_paths_name_every_leaf_that_differs_and_nothing_repeated() -> None:
    after = reconfig.merge(
        PARENT,
        {
            "ops": {PLAN: {"config": {"dry_run": False, "selected_numbers": [101]}}},
            "execution": {"config": {"max_concurrent": 2}},
        },
    )

    assert reconfig.changed_paths(PARENT, after) == [
        "execution.config.max_concurrent",
        f"ops.{PLAN}.config.selected_numbers",
    ]
    assert reconfig.changed_paths(PARENT, PARENT) == []


@pytest.mark.parametrize(
    ("path", "reader"),
    [
        ("execution.config.max_concurrent", None),
        ("loggers.console.config.log_level", None),
        (f"ops.{PLAN}.config.dry_run", PLAN),
        ("ops.outer.ops.inner.config.x", "outer.inner"),
        ("ops.outer.config", "outer"),
        ("resources.plex.config.base_url", reconfig.EVERY_OP),
    ],
)
def test_who_reads_a_path(path: str, reader: str | None) -> None:
    assert reconfig.readers(path) == reader


def test_the_executor_bound_may_change_after_ops_completed() -> None:
    assert reconfig.refusals(["execution.config.max_concurrent"], SETTLED) == {}


def test_a_completed_ops_config_is_refused_naming_the_op() -> None:
    refused = reconfig.refusals([f"ops.{PLAN}.config.dry_run"], SETTLED)

    assert refused == {f"ops.{PLAN}.config.dry_run": [PLAN]}


def test_the_config_of_an_op_that_will_run_again_may_change() -> None:
    # The plan failed: nothing of it is replayed, so the resume plans with the new value.
    assert reconfig.refusals([f"ops.{PLAN}.config.dry_run"], []) == {}


def test_one_finished_mapped_step_settles_its_op() -> None:
    # Builds done with the old value and builds run with the new one would disagree.
    refused = reconfig.refusals(["ops.build_channel.config.x"], ["build_channel[ch_101]"])

    assert refused == {"ops.build_channel.config.x": ["build_channel"]}


def test_an_ai_budget_is_refused_once_the_analysis_that_froze_it_completed() -> None:
    # analyze_library resolves the whole config into its stored settings and opens the ledger
    # with the budget; later steps read those, never the run config.
    path = "ops.analyze_library.config.budget_usd"
    settled = ["analyze_library", "plan_lineup", "build_ai_channel[ch_1001]"]

    assert reconfig.refusals([path], settled) == {path: ["analyze_library"]}
    assert reconfig.refusals([path], []) == {}, "a failed analysis reads the new budget"


def test_resources_are_read_by_every_completed_op() -> None:
    refused = reconfig.refusals(["resources.plex.config.base_url"], SETTLED)

    assert refused == {"resources.plex.config.base_url": ["build_channel", "create_packages", PLAN]}


def test_the_refusal_names_the_path_the_op_and_what_to_do() -> None:
    after = reconfig.merge(PARENT, {"ops": {PLAN: {"config": {"dry_run": True}}}})

    with pytest.raises(reconfig.ConfigChangeRefused) as refused:
        reconfig.check_change("r1", PARENT, after, SETTLED)

    message = str(refused.value)
    assert f"ops.{PLAN}.config.dry_run: already used by {PLAN}" in message
    assert "run r1" in message and "Start a new run" in message


def test_an_allowed_change_returns_its_paths() -> None:
    after = reconfig.merge(PARENT, {"execution": {"config": {"max_concurrent": 1}}})

    assert reconfig.check_change("r1", PARENT, after, SETTLED) == [
        "execution.config.max_concurrent"
    ]


def test_the_merged_config_is_validated_in_dagsters_words() -> None:
    snapshot = JobSnap.from_job_def(import_lineup)
    root = snapshot.mode_def_snaps[0].root_config_key
    good = reconfig.merge(PARENT, {"execution": {"config": {"max_concurrent": 1}}})
    reconfig.validate(snapshot.config_schema_snapshot, root, good)

    bad = reconfig.merge(PARENT, {"execution": {"config": {"max_concurrent": "one"}}})
    with pytest.raises(reconfig.InvalidRunConfig, match="max_concurrent"):
        reconfig.validate(snapshot.config_schema_snapshot, root, bad)
    typo = reconfig.merge(PARENT, {"ops": {PLAN: {"config": {"dry_rnu": True}}}})
    with pytest.raises(reconfig.InvalidRunConfig, match="dry_rnu"):
        reconfig.validate(snapshot.config_schema_snapshot, root, typo)


def test_the_tag_keeps_the_paths_and_fits() -> None:
    assert reconfig.changed_tag(["a.b", "c"]) == "a.b,c"
    assert len(reconfig.changed_tag(["x" * 3000, "y" * 3000])) == 4000
