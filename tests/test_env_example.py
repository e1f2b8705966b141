"""`.env.example` documents every setting `airwave_dagster/settings.py` reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import AliasChoices

from airwave_dagster import settings

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=", re.MULTILINE)


def _variables() -> set[str]:
    names = set()
    for name, field in settings.Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
        else:
            names.add(str(alias or name))
    return names


def test_every_setting_is_in_env_example() -> None:
    documented = set(ASSIGNMENT.findall((ROOT / ".env.example").read_text()))
    missing = (_variables() | {settings.ENV_FILE_ENV}) - documented
    assert not missing, f".env.example lacks {sorted(missing)}"


def test_env_example_names_nothing_settings_does_not_read() -> None:
    documented = set(ASSIGNMENT.findall((ROOT / ".env.example").read_text()))
    assert documented <= _variables() | {settings.ENV_FILE_ENV}


def test_the_example_values_are_valid_settings() -> None:
    # Uncommented, the examples must load: a documented value that fails would mislead.
    text = (ROOT / ".env.example").read_text()
    values = dict(re.findall(r"^#\s*([A-Z][A-Z0-9_]*)=(.*)$", text, re.MULTILINE))
    values.pop(settings.ENV_FILE_ENV)
    loaded = settings.Settings.model_validate(values)
    assert loaded.claim_stale_seconds == 60
    assert loaded.plex_url == "http://192.168.1.10:32400"


def test_only_the_documented_names_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # Bare field names are ordinary variables (HOME is always set); they must never be settings.
    for name in settings.Settings.model_fields:
        monkeypatch.setenv(name.upper(), "/somewhere/else")
    for name in _variables():
        monkeypatch.delenv(name, raising=False)
    loaded = settings.Settings.load()
    assert loaded.home is None
    assert loaded.resolved_home() == settings.CHECKOUT_ROOT / ".airwave"
