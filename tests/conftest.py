"""Shared fixtures: every test gets its own XDG data home, so nothing touches the real one."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_data_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    for var in (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "OVOS_MEMORY_LLM_BASE_URL",
        "OVOS_MEMORY_LLM_API_KEY",
        "OVOS_MEMORY_EMBEDDING_BASE_URL",
        "OVOS_MEMORY_EMBEDDING_API_KEY",
    ):
        monkeypatch.delenv(var, raising=False)
    return home
