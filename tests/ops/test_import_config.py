"""`import_lineup`'s run config as Dagster checks it at launch: one lineup source, and the preset.

Everything here goes through `dg.validate_run_config` on the bound job, the same schema the
Launchpad and GraphQL's `launchRun` check before a run is created.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

import airwave_dagster
from airwave_dagster import settings
from airwave_dagster.cli.lineup_files import _import_run_config
from airwave_dagster.data import DEMO_LINEUP
from airwave_dagster.definitions import defs, production_resources
from airwave_dagster.domain.lineup_file import parse_lineup
from resources.lineup_files import LineupFilesResource


@pytest.fixture
def import_job(monkeypatch: pytest.MonkeyPatch) -> dg.JobDefinition:
    # Validation also processes the resources' config, which reads these variables; their values
    # play no part in what is checked here.
    for name, placeholder in (
        (settings.DATABASE_URL_ENV, "postgresql://nobody@127.0.0.1:9/none"),
        (settings.PLEX_URL_ENV, "http://127.0.0.1:9"),
    ):
        if not os.environ.get(name):
            monkeypatch.setenv(name, placeholder)
    return defs.resolve_job_def("import_lineup")


def _op(config: dict[str, Any]) -> dict[str, Any]:
    return {"ops": {"plan_import_lineup": {"config": config}}}


def _refusal(job: dg.JobDefinition, run_config: dict[str, Any]) -> str:
    with pytest.raises(dg.DagsterInvalidConfigError) as refused:
        dg.validate_run_config(job, run_config)
    return " ".join(error.message for error in refused.value.errors)


def test_a_config_without_a_lineup_is_refused_at_launch(import_job: dg.JobDefinition) -> None:
    assert 'Missing required config entry "lineup"' in _refusal(import_job, _op({}))
    assert 'Missing required config entry "lineup"' in _refusal(
        import_job, _op({"dry_run": True, "selected_numbers": [101]})
    )
    assert "Must specify a field" in _refusal(import_job, _op({"lineup": {}}))


def test_a_config_with_both_a_path_and_content_is_refused_at_launch(
    import_job: dg.JobDefinition,
) -> None:
    both = {"lineup": {"file": {"path": "a.json"}, "inline": {"content": "{}"}}}

    message = _refusal(import_job, _op(both))

    assert "You can only specify a single field" in message
    assert "['file', 'inline']" in message


def test_the_keys_of_the_old_shape_are_refused_not_ignored(import_job: dg.JobDefinition) -> None:
    message = _refusal(import_job, _op({"lineup_path": "a.json"}))
    assert "lineup_path" in message


def test_exactly_one_source_is_accepted(import_job: dg.JobDefinition) -> None:
    by_path = dg.validate_run_config(import_job, _op({"lineup": {"file": {"path": "a.json"}}}))
    inline = dg.validate_run_config(import_job, _op({"lineup": {"inline": {"content": "{}"}}}))

    assert by_path["ops"]["plan_import_lineup"]["config"]["lineup"] == {"file": {"path": "a.json"}}
    assert inline["ops"]["plan_import_lineup"]["config"]["lineup"] == {
        "inline": {"content": "{}", "name": "<inline lineup>"}
    }


def test_the_default_config_is_a_dry_run_of_the_bundled_example(
    import_job: dg.JobDefinition,
) -> None:
    resolved = dg.validate_run_config(import_job, {})

    config = resolved["ops"]["plan_import_lineup"]["config"]
    assert config["dry_run"] is True
    path = Path(config["lineup"]["file"]["path"])
    # Absolute and inside the package, so no working directory or home changes what it names.
    assert path == DEMO_LINEUP
    assert path.is_absolute() and path.is_file()
    assert path.is_relative_to(Path(airwave_dagster.__file__).resolve().parent)
    assert parse_lineup(path.read_bytes(), source=path.name).channels


def test_a_run_that_configures_the_op_inherits_nothing_from_the_default(
    import_job: dg.JobDefinition,
) -> None:
    # The CLI's run config, exactly as `airwave import` sends it.
    run_config = _import_run_config("{}", "friday.json", dry_run=False, select=[7])

    config = dg.validate_run_config(import_job, run_config)["ops"]["plan_import_lineup"]["config"]

    assert config == {
        "lineup": {"inline": {"content": "{}", "name": "friday.json"}},
        "dry_run": False,
        "selected_numbers": [7],
    }
    by_path = dg.validate_run_config(import_job, _op({"lineup": {"file": {"path": "b.json"}}}))
    assert by_path["ops"]["plan_import_lineup"]["config"]["dry_run"] is False


def test_relative_paths_resolve_against_the_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(settings.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.setenv(settings.ENV_FILE_ENV, "/nonexistent/.env")

    bound = production_resources(settings.Settings.load())["lineup_files"]

    assert isinstance(bound, LineupFilesResource)
    home = (tmp_path / "home").resolve()
    assert bound.resolve("lineups/friday.json") == home / "lineups" / "friday.json"
    assert bound.resolve("/srv/friday.json") == Path("/srv/friday.json")
