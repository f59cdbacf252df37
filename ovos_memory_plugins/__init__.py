"""ovos-memory-plugins: long-term memory for OpenVoiceOS personas.

The public API: :class:`BaseRetrievalMemory` (write a backend with two hooks),
:class:`MemoryHit` and the fusion functions, config validation, and the exceptions.
Backends are loaded by ovos-persona through the ``opm.agents.memory`` entry points.

Importing the package (or ``ovos_memory_plugins.common``, ``.config``, ``.errors``) does not
import ovos-plugin-manager: :class:`BaseRetrievalMemory` is imported on first use (PEP 562), so
the command's ``--help`` and pure helpers start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.config import MemoryConfig, parse_config, validate_config
from ovos_memory_plugins.errors import (
    BackendError,
    ConfigError,
    CorruptFileError,
    IncompleteForgetError,
    LLMError,
    OvosMemoryPluginError,
    StorageError,
)
from ovos_memory_plugins.fusion import (
    FUSIONS,
    fuse,
    fuse_interleave,
    fuse_merge,
    fuse_priority,
    fuse_rrf,
    fuse_weighted,
)

if TYPE_CHECKING:
    from ovos_memory_plugins.base import BaseRetrievalMemory

__all__ = [
    "FUSIONS",
    "BackendError",
    "BaseRetrievalMemory",
    "ConfigError",
    "CorruptFileError",
    "IncompleteForgetError",
    "LLMError",
    "MemoryConfig",
    "MemoryHit",
    "OvosMemoryPluginError",
    "StorageError",
    "fuse",
    "fuse_interleave",
    "fuse_merge",
    "fuse_priority",
    "fuse_rrf",
    "fuse_weighted",
    "parse_config",
    "validate_config",
]


def __getattr__(name: str) -> Any:
    """Import :class:`BaseRetrievalMemory` (and with it ovos-plugin-manager) on first use."""
    if name == "BaseRetrievalMemory":
        from ovos_memory_plugins.base import BaseRetrievalMemory

        return BaseRetrievalMemory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
