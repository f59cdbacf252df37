"""Shared fixtures: every test gets its own XDG data home, so nothing touches the real one."""

from __future__ import annotations

from importlib.metadata import distribution
from pathlib import Path

import pytest
from pg_server import postgres_server, postgres_url, watch_for_crash  # noqa: F401  # the throwaway PostgreSQL fixtures


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


def our_memory_plugins() -> list[str]:
    """The ``opm.agents.memory`` entry points of this distribution, sorted. Each is loaded, so a
    backend that fails to import fails the test module that asks, instead of being skipped."""
    names = []
    for ep in distribution("ovos-memory-plugins").entry_points:
        if ep.group == "opm.agents.memory":
            ep.load()
            names.append(ep.name)
    return sorted(names)
