"""The settings class reads only the documented variable names, never bare field names."""

from __future__ import annotations

import pytest

from airwave_dagster import settings


def test_only_the_documented_names_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # Bare field names are ordinary variables (HOME is always set); they must never be settings.
    for name, field in settings.Settings.model_fields.items():
        monkeypatch.setenv(name.upper(), "/somewhere/else")
        alias = field.validation_alias
        if isinstance(alias, str):
            monkeypatch.delenv(alias, raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.setenv(settings.ENV_FILE_ENV, "/nonexistent/.env")

    loaded = settings.Settings.load()

    assert loaded.home is None
    assert loaded.resolved_home() == settings.CHECKOUT_ROOT / ".airwave"


def test_a_wrong_value_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.CLAIM_STALE_ENV, "soon")
    monkeypatch.setenv(settings.ENV_FILE_ENV, "/nonexistent/.env")

    with pytest.raises(settings.SettingsError, match=settings.CLAIM_STALE_ENV):
        settings.Settings.load()
