"""The conformance kit over every ``opm.agents.memory`` entry point this distribution registers.

Each plugin is loaded through its entry point (as ovos-persona loads it) and runs the whole kit
with no skipped test: its profile comes from what the class declares (``archives_exchanges``,
``persistent``), the config below only picks offline parts (the hashing embedder) and the
composite's members. A new entry point without a config here runs with ``{}``.
"""

from __future__ import annotations

from importlib.metadata import distribution
from typing import Any

from conftest import our_memory_plugins

from ovos_memory_plugins.testing import MemoryContract

#: Offline configs; everything else is each plugin's default.
CONFIGS: dict[str, dict[str, Any]] = {
    "ovos-memory-plugin-vector": {"embedder": "hash"},
    "ovos-memory-plugin-notes": {},
    "ovos-memory-plugin-composite": {
        "members": [
            {"module": "ovos-memory-plugin-lexical"},
            {"module": "ovos-memory-plugin-vector", "config": {"embedder": "hash"}},
            {"module": "ovos-memory-plugin-sticky"},
        ]
    },
}

#: Documents survive a restart for every plugin of ours (the composite through its members).
SURVIVES_RESTART = {"ovos-memory-plugin-composite": True}


def _entry_point_classes() -> dict[str, type[Any]]:
    names = set(our_memory_plugins())
    return {
        ep.name: ep.load()
        for ep in distribution("ovos-memory-plugins").entry_points
        if ep.group == "opm.agents.memory" and ep.name in names
    }


def _contract_for(name: str, cls: type[Any]) -> type[MemoryContract]:
    config = CONFIGS.get(name, {})

    def make_memory(self: MemoryContract, extra: dict[str, Any]) -> Any:
        return cls({**config, **extra})

    title = "".join(part.title() for part in name.replace("ovos-memory-plugin-", "").split("-"))
    return type(
        f"TestEntryPoint{title}",
        (MemoryContract,),
        {
            "__doc__": f"The kit over the entry point {name!r} ({cls.__module__}.{cls.__qualname__}).",
            "__module__": __name__,
            "survives_restart": SURVIVES_RESTART.get(name, bool(getattr(cls, "persistent", False))),
            "make_memory": make_memory,
        },
    )


for _name, _cls in sorted(_entry_point_classes().items()):
    _contract = _contract_for(_name, _cls)
    globals()[_contract.__name__] = _contract


def test_every_entry_point_has_a_contract_here() -> None:
    classes = [n for n, v in globals().items() if n.startswith("TestEntryPoint") and isinstance(v, type)]
    assert len(classes) == len(our_memory_plugins()) >= 5
