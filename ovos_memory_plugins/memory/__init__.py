"""The parts :class:`~ovos_memory_plugins.base.BaseRetrievalMemory` is composed of, one concept
each, as mixin classes over :class:`~ovos_memory_plugins.memory.state.MemoryState` (the
attributes they share, declared once): ``opening`` (storage locations, opening the storage and
the summary), ``documents`` (ids, storing, search, forgetting), ``conversation`` (the history,
recording turns, the rolling summary) and ``recall`` (what a turn injects, the turn's messages).
Import the class from :mod:`ovos_memory_plugins.base`; these modules are its implementation.
"""
