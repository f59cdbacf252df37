"""ovos-memory-plugins: long-term memory for OpenVoiceOS personas.

The public API: :class:`BaseRetrievalMemory` (write a backend with two hooks),
:class:`MemoryHit` and the fusion functions, config validation, and the exceptions.
Backends are loaded by ovos-persona through the ``opm.agents.memory`` entry points.
"""

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.common import (
    MemoryHit,
    fuse,
    fuse_interleave,
    fuse_merge,
    fuse_priority,
    fuse_rrf,
    fuse_weighted,
)
from ovos_memory_plugins.config import MemoryConfig, parse_config, validate_config
from ovos_memory_plugins.errors import (
    BackendError,
    ConfigError,
    CorruptFileError,
    LLMError,
    OvosMemoryPluginError,
    StorageError,
)

__all__ = [
    "BackendError",
    "BaseRetrievalMemory",
    "ConfigError",
    "CorruptFileError",
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
