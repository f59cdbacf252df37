"""``ovos-memory-plugin-notes``: a small block of durable facts about the user, always in the prompt.

The notes are a list of one-line facts, each dated by the month it was learned
(``- [2026-11] User's cat is called Bartholomew``), kept in ``<root>/MEMORY.md`` (editable by
hand) or in a table of the memory's own database (``"store": "sqlite"``: no cap, retired facts
kept and searchable; always so on PostgreSQL). Every turn they go into the system part of the
prompt, under ``max_context_chars`` characters with a meter; past ``max_notes_in_context`` notes
only those relevant to the utterance (BM25) plus the ``newest_in_context`` newest travel (the
selection sticky notes use too: :mod:`ovos_memory_plugins.notebook`).

The notes change in three ways:

* **Verbs in code**, no model needed: the
  :class:`~ovos_memory_plugins.protocols.NotesKeeper` verbs :meth:`NotesMemory.remember`,
  :meth:`~NotesMemory.forget`, :meth:`~NotesMemory.update`, :meth:`~NotesMemory.retire` and
  :meth:`~NotesMemory.restore` (a note's exact id, or a loose description such as "that thing
  about the bakery"; retired notes included; when two notes are too close to call, the
  candidates come back and nothing changes), and :meth:`~NotesMemory.notes_body` /
  :meth:`~NotesMemory.notes_version` / :meth:`~NotesMemory.replace_notes` for editors.
* **Forgetting for real**: ``forget`` removes a note (active and retired copies) from the
  notes, ``MEMORY.md.bak`` and the undo history; ``forget_session`` removes the notes learned in
  that session; ``forget_all`` empties the notes, the retired notes, the backups and the undo
  history (on SQLite the full-text index is rebuilt and the WAL truncated).
* **Digest** (``auto_curate``, on when an ``llm`` is configured): when a session goes quiet
  (``curate_after_idle_s``) or every ``curate_every_turns`` exchanges, one model call over the
  transcript since the last digest admits the few durable facts, retires notes the
  conversation disproved, and hands an episode summary to the archive. It runs in a
  background thread (:meth:`~NotesMemory.drain` waits for it) and never delays an answer.
* **Dreaming** (:meth:`~NotesMemory.dream`): one model call rewrites the whole list (merge,
  split, resolve contradictions, drop expired one-offs). A rewrite that adds a word not found
  in the input notes, drops a rule or preference, or cannot be parsed is rejected. Each
  accepted rewrite keeps the previous body in ``MEMORY.md.bak`` and in a short history
  (``<root>/.notes-history/``) that :meth:`~NotesMemory.undo` walks back.

Conversation recall goes to the **archive**: a keyword index over the memory's own database
(``<root>/history.db``: the base's documents table, the keyword index and the history, one
file). Exchanges and episode summaries are stored there under the base's document ids, so
``put_document(id, ...)`` is deletable by that id, and ``delete``/``forget_session``/
``forget_all`` reach every tier. ``"archive": null`` keeps nothing of the conversation on disk
(notes only; documents and history in RAM). An archive kept by an earlier release in
``<root>/archive/`` (a separate keyword plugin) is copied in once, ids kept, and the folder
renamed ``archive.moved`` (``forget_all`` deletes it).

In a composite the notes member is a part of the composite's one storage (``storage=``): the
archive is the composite's keyword index in ``composite.db``, the turns its one history, and
``MEMORY.md`` (with ``RETIRED.md`` and the undo history) sits in the composite's folder beside
``composite.db``; the member's own folder of an earlier release is adopted once
(:meth:`NotesMemory.adopt_folder`). With ``"archive": null`` it stays a whole member.

Persona config::

    {
      "memory_module": "ovos-memory-plugin-notes",
      "ovos-memory-plugin-notes": {
        "namespace": "ada",
        "max_context_chars": 8000,
        "llm": {"base_url": "http://127.0.0.1:8080/v1", "model": "qwen2.5-7b-instruct"},
        "archive": {"module": "ovos-memory-plugin-lexical"}
      }
    }

The package re-exports the names ``ovos_memory_plugins.notes`` held as one module; each concept
has its module (patch names there, where the code reads them): ``options`` (:class:`NotesOptions`
and the limits), ``results`` (what the operations return, :func:`normalize_fact`, the pending
record), ``body`` (the notes as text, the rewrite history), ``digest``, ``dreaming`` (with the
background worker), ``state`` (what the parts share) and ``memory`` (:class:`NotesMemory`).
"""

from __future__ import annotations

from ovos_memory_plugins.notes.body import BodyMixin as BodyMixin
from ovos_memory_plugins.notes.digest import DIGEST_PROMPT as DIGEST_PROMPT
from ovos_memory_plugins.notes.digest import DigestMixin as DigestMixin
from ovos_memory_plugins.notes.dreaming import _RULE as _RULE
from ovos_memory_plugins.notes.dreaming import DREAM_PROMPT as DREAM_PROMPT
from ovos_memory_plugins.notes.dreaming import DreamingMixin as DreamingMixin
from ovos_memory_plugins.notes.memory import LOG as LOG
from ovos_memory_plugins.notes.memory import NotesMemory
from ovos_memory_plugins.notes.memory import _as_seconds as _as_seconds
from ovos_memory_plugins.notes.options import ARCHIVE_MODULE as ARCHIVE_MODULE
from ovos_memory_plugins.notes.options import CLOSE_WAIT_S as CLOSE_WAIT_S
from ovos_memory_plugins.notes.options import DREAM_RETRY_S as DREAM_RETRY_S
from ovos_memory_plugins.notes.options import MAX_NEW_PER_DIGEST as MAX_NEW_PER_DIGEST
from ovos_memory_plugins.notes.options import MAX_PENDING_EXCHANGES as MAX_PENDING_EXCHANGES
from ovos_memory_plugins.notes.options import NOTES_HEADER as NOTES_HEADER
from ovos_memory_plugins.notes.options import NotesOptions
from ovos_memory_plugins.notes.options import _check_archive as _check_archive
from ovos_memory_plugins.notes.options import _check_llm as _check_llm
from ovos_memory_plugins.notes.results import _LEADING_DATE as _LEADING_DATE
from ovos_memory_plugins.notes.results import DIGEST_KEY as DIGEST_KEY
from ovos_memory_plugins.notes.results import DigestResult, DreamResult, StaleNotesError, normalize_fact
from ovos_memory_plugins.notes.results import _Pending as _Pending
from ovos_memory_plugins.protocols import NoteChange

__all__ = [
    "DigestResult",
    "DreamResult",
    "NoteChange",
    "NotesMemory",
    "NotesOptions",
    "StaleNotesError",
    "normalize_fact",
]
