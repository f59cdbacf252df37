"""Kept for one release: the old path of :mod:`ovos_memory_plugins.storage.postgres.notes`.

The engines moved into folders (storage/sqlite/, storage/postgres/); import from the new
module, this one only re-exports its names (its ``__all__``).
"""

from ovos_memory_plugins.storage.postgres.notes import *  # noqa: F403
from ovos_memory_plugins.storage.postgres.notes import __all__ as __all__
