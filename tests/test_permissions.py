"""The permissions file at load: every job declared, every permission holdable, errors named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from airwave_dagster import permissions
from airwave_dagster.definitions import (
    build_definitions,
    defs,
    production_resources,
    require_permissions,
)
from airwave_dagster.domain.permissions import DEFAULT_POLICY, PermissionsError
from airwave_dagster.settings import PERMISSIONS_ENV
from tests.support.permissions import write_policy

ROOT = Path(__file__).resolve().parent.parent


@dg.op
def _noop() -> None:
    """Nothing: the job exists only to have a name."""


@dg.job
def undeclared_job() -> None:
    _noop()


def test_every_job_of_the_location_declares_its_permissions() -> None:
    names = {job.name for job in defs.get_repository_def().get_all_jobs()}
    assert names == set(permissions.JOB_PERMISSIONS)
    gated = {name for name, jobs in permissions.JOB_PERMISSIONS.items() if jobs.approve}
    assert gated == {"ai_lineup", "rollback_lineup"}


def test_a_job_without_a_declaration_fails_the_load_naming_it() -> None:
    repository = dg.Definitions(jobs=[undeclared_job]).get_repository_def()
    with pytest.raises(PermissionsError) as caught:
        require_permissions(repository.get_all_jobs())
    assert "job 'undeclared_job' declares no permissions" in str(caught.value)
    assert "code location 'airwave'" in str(caught.value)


def test_a_file_where_no_role_holds_a_permission_fails_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_policy(
        tmp_path,
        roles={"launcher": ["runs:*", "approvals:resolve:*"]},  # nobody may toggle automation
        principals={"bob": ["launcher"]},
    )
    monkeypatch.setenv(PERMISSIONS_ENV, str(path))
    with pytest.raises(PermissionsError) as caught:
        build_definitions(production_resources())
    message = str(caught.value)
    assert str(path) in message
    assert "permission 'automation:toggle' is declared but no role in roles grants it" in message


def test_a_role_naming_a_job_nobody_declares_fails_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_policy(
        tmp_path,
        roles={"admin": ["*"], "launcher": ["runs:start:import_lineups"]},
        principals={"alice": ["admin"], "bob": ["launcher"]},
    )
    monkeypatch.setenv(PERMISSIONS_ENV, str(path))
    with pytest.raises(PermissionsError) as caught:
        build_definitions(production_resources())
    assert "roles.launcher[0]: 'runs:start:import_lineups' matches no permission" in str(
        caught.value
    )


def test_a_broken_or_missing_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "absent.yaml"
    monkeypatch.setenv(PERMISSIONS_ENV, str(missing))
    with pytest.raises(PermissionsError, match=r"(?s)absent\.yaml.*cannot read the file"):
        permissions.load_policy()
    broken = tmp_path / "broken.yaml"
    broken.write_text("roles: [unclosed\n")
    monkeypatch.setenv(PERMISSIONS_ENV, str(broken))
    with pytest.raises(PermissionsError, match=r"(?s)broken\.yaml.*line \d+: not YAML"):
        permissions.load_policy()


def test_no_file_is_the_default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PERMISSIONS_ENV, raising=False)
    assert permissions.load_policy() is DEFAULT_POLICY


def test_an_edited_file_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_policy(tmp_path, roles={"admin": ["*"]}, principals={"alice": ["admin"]})
    monkeypatch.setenv(PERMISSIONS_ENV, str(path))
    assert permissions.load_policy().allows("alice", "automation:toggle")
    write_policy(tmp_path, roles={"admin": ["*"], "none": []}, principals={"alice": ["none"]})
    os.utime(path, ns=(1, 1))  # a different mtime even within the clock's resolution
    assert not permissions.load_policy().allows("alice", "automation:toggle")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_dg_check_defs_fails_with_an_unholdable_permission(tmp_path: Path) -> None:
    path = write_policy(tmp_path, roles={"launcher": ["runs:*"]}, principals={"bob": ["launcher"]})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRWAVE_", "DAGSTER_"))}
    env |= {
        "HOME": str(tmp_path),
        "VIRTUAL_ENV": str(Path(sys.executable).parent.parent),
        PERMISSIONS_ENV: str(path),
    }
    checked = subprocess.run(
        [str(Path(sys.executable).parent / "dg"), "check", "defs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert checked.returncode != 0
    output = checked.stdout + checked.stderr
    assert "approvals:resolve:ai_lineup" in output
    assert str(path) in output
