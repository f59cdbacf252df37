"""``ovos-memory-plugin-composite``: several memories as one (see :mod:`.memory`).

The package re-exports the names ``ovos_memory_plugins.composite`` held as one module: the
config side lives in :mod:`.options`, the memory in :mod:`.memory`, composed of its parts
(:mod:`.members`, :mod:`.calls`, :mod:`.notes`, :mod:`.recall`, :mod:`.documents`, over
:mod:`.state`). Patch names where the code reads them, e.g. ``memory._load_member_class``.
"""

from __future__ import annotations

from ovos_memory_plugins.composite.memory import *  # noqa: F403
from ovos_memory_plugins.composite.memory import __all__ as _memory_names
from ovos_memory_plugins.composite.options import *  # noqa: F403
from ovos_memory_plugins.composite.options import __all__ as _options_names

#: The names of the one module ``composite.py``: the options' and the memory's (not its
#: member record, ``memory.Member``, which was ``_Member`` there).
__all__ = sorted({*_options_names, *_memory_names} - {"Member"})
