"""The code location loads, names what the issues bind, and keeps the dependency rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg

import resources
from airwave_dagster.definitions import defs

ROOT = Path(__file__).resolve().parent.parent


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)


def test_binding_job_names() -> None:
    assert {job.name for job in defs.resolve_all_job_defs()} >= {"import_lineup"}


def test_import_lineup_runs_on_the_multiprocess_executor() -> None:
    # The bound of four concurrent builds is proven by measurement in
    # tests/integration/test_import_lineup.py; here, only that the job is not in-process.
    assert defs.resolve_job_def("import_lineup").executor_def.name == "fan_out"


def test_top_level_packages_are_this_repository() -> None:
    # `resources` is a generic top-level name; make sure no other distribution shadows it.
    assert Path(resources.__file__).resolve().is_relative_to(ROOT)


def test_import_linter_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The domain is pure KEPT" in result.stdout
