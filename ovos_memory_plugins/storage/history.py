"""Kept for one release: the old path of :mod:`ovos_memory_plugins.storage.sqlite.history`.

The engines moved into folders (storage/sqlite/, storage/postgres/); import from the new
module, this one only re-exports its names (its ``__all__``, and its ``MIGRATIONS``).
"""

from ovos_memory_plugins.storage.sqlite.history import *  # noqa: F403
from ovos_memory_plugins.storage.sqlite.history import MIGRATIONS as MIGRATIONS
from ovos_memory_plugins.storage.sqlite.history import __all__ as _moved

__all__ = ["MIGRATIONS", *_moved]
