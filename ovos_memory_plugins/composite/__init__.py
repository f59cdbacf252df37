"""``ovos-memory-plugin-composite``: several memories as one (see :mod:`.memory`).

The package re-exports the names ``ovos_memory_plugins.composite`` held as one module: the
config side lives in :mod:`.options`, the memory in :mod:`.memory`, composed of its parts
(:mod:`.members`, :mod:`.calls`, :mod:`.notes`, :mod:`.recall`, :mod:`.documents`, over
:mod:`.state`). Patch names where the code reads them, e.g. ``memory._load_member_class``.
"""

from __future__ import annotations

from ovos_memory_plugins.composite.memory import (
    CLOSE_WAIT_S,
    EXPAND_PROMPT,
    FORGET_TIMEOUT_S,
    MAX_PENDING_WRITES,
    NOTES_EXTRAS,
    NOTES_VERBS,
    SUMMARY_PROMPT,
    CompositeMemory,
    is_part,
    member_namespace,
)
from ovos_memory_plugins.composite.options import (
    ASSIST_TIMEOUT,
    PARTS_FILE,
    PLACEMENT_KEYS,
    CompositeOptions,
    Fusion,
    MemberSpec,
    parse_members,
)

__all__ = [
    "ASSIST_TIMEOUT",
    "CLOSE_WAIT_S",
    "EXPAND_PROMPT",
    "FORGET_TIMEOUT_S",
    "MAX_PENDING_WRITES",
    "NOTES_EXTRAS",
    "NOTES_VERBS",
    "PARTS_FILE",
    "PLACEMENT_KEYS",
    "SUMMARY_PROMPT",
    "CompositeMemory",
    "CompositeOptions",
    "Fusion",
    "MemberSpec",
    "is_part",
    "member_namespace",
    "parse_members",
]
