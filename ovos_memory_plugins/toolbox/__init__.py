"""``ovos-memory-toolbox``: tools a model can call on the persona's own memory (an OPM ToolBox).

Automatic recall decides on its own what the model sees each turn. This tool box lets the model
act on the same memory: look something up when it needs it, write down what matters, correct or
drop what is wrong. It is an OPM ``ToolBox`` (entry-point group ``opm.agents.toolbox``) and works
through its three doors: :meth:`MemoryToolBox.call_tool`, the messagebus
(``ovos.persona.tools.discover`` / ``ovos.persona.tools.call``), and the ``tools=`` argument of a
tool-aware chat engine such as ``ovos-chat-openai-plugin`` (:func:`run_tool_loop` drives the
round trips).

Configured like a memory, so it opens the very files the persona's memory uses (same ``root``,
same ``namespace``; SQLite in WAL mode, so a tool's write and the next turn's recall see each
other at once)::

    {"memory_module": "ovos-memory-plugin-sticky",
     "ovos-memory-plugin-sticky": {"namespace": "ada"},
     "read_only": false, "timeout": 5}

or ``{"persona": "/path/to/ada.json"}`` (its ``memory_module`` and that block). In the same
process as the persona, pass the persona's memory object itself: ``MemoryToolBox(memory=mem)``.

The tools, each offered only when the memory can serve it (declared protocols, never class
names):

=================  ================================================  ==========================
tool               does                                              offered when the memory is
=================  ================================================  ==========================
``search_memory``  the best matches for a query, with date, session  a ``Retriever`` or a
                   (matching notes first)                            ``NotesKeeper``
``remember``       a note (or, without notes, a stored document)     a ``NotesKeeper`` (or a
                                                                     :class:`DocumentStore`)
``update_memory``  replace the note (document) a description names   ``NotesKeeper`` (or store +
                                                                     ``DocumentLister`` +
                                                                     :class:`DocumentDeleter`)
``forget_memory``  drop it; "which one did you mean?" when unclear   same as ``update_memory``
``list_notes``     every note                                        a ``NotesKeeper``
=================  ================================================  ==========================

``read_only: true`` offers only ``search_memory`` and ``list_notes``.

Safety: arguments are data. Every schema forbids extra keys and wrong types and bounds every
length; text with control characters or chat-template markers is refused, and a fact shaped like
an instruction to the model is not stored. Every call runs under a deadline (``timeout``): a slow
memory gives the model a tool error, never a hang. Every failure comes back as a tool result
(``ok: false`` and an ``error`` the model can read); :meth:`~MemoryToolBox.call_tool` never
raises. ``forget_memory`` removes the memory for good, from every tier (a notes memory deletes
the note, its retired copies and backups; a composite every member's copy); it is logged at INFO
by id, never by text. A fact that stopped being true is changed with ``update_memory`` (the old
note is retired). With ``scope: session`` every tool acts only on the calling session's memories:
search, listing, and the memory ``update_memory``/``forget_memory`` pick, and the candidates an
ambiguous description lists.
"""

from ovos_memory_plugins.toolbox.box import DocumentDeleter, DocumentStore, MemoryToolBox
from ovos_memory_plugins.toolbox.loop import run_tool_loop
from ovos_memory_plugins.toolbox.schemas import *  # noqa: F403  (its __all__: the schemas and check_text)
from ovos_memory_plugins.toolbox.schemas import __all__ as _schema_names
from ovos_memory_plugins.toolbox.settings import TOOLBOX_ID, ToolboxSettings, parse_toolbox_config

__all__ = [
    "TOOLBOX_ID",
    "DocumentDeleter",
    "DocumentStore",
    "MemoryToolBox",
    "ToolboxSettings",
    "parse_toolbox_config",
    "run_tool_loop",
    *_schema_names,
]
