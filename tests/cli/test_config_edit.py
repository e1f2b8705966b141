"""`--config FILE` of `runs resume` and `runs reexecute`: what is read, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from airwave_dagster.cli import console
from airwave_dagster.cli.runs import config_changes, read_config_edit


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("edit.yaml", "execution:\n  config:\n    max_concurrent: 1\n"),
        ("edit.json", '{"execution": {"config": {"max_concurrent": 1}}}'),
    ],
)
def test_yaml_and_json_are_read_alike(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)

    assert read_config_edit(path) == {"execution": {"config": {"max_concurrent": 1}}}


@pytest.mark.parametrize("text", ["", "- a list\n", "execution: [unclosed\n"])
def test_anything_but_a_mapping_exits_3(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)

    with pytest.raises(SystemExit) as ended:
        read_config_edit(path)

    assert ended.value.code == console.ExitCode.INPUT_REFUSED


def test_no_file_is_no_edit() -> None:
    assert read_config_edit(None) is None


def test_the_changed_paths_come_back_from_the_tag() -> None:
    assert config_changes({"airwave/config_changed": "a.b,c"}) == ["a.b", "c"]
    assert config_changes({}) == []
