"""What the editor can show of a memory, found through the public protocols only.

* **archive**: every memory built on :class:`~ovos_memory_plugins.base.BaseRetrievalMemory`,
  and the composite (``search``, ``delete``, ``put_document``, ``forget_session``, ``forget_all``, ``sessions``,
  ``messages``, ``stats``); its documents are listed where it is a
  :class:`~ovos_memory_plugins.protocols.DocumentLister`.
* **notes**: a :class:`~ovos_memory_plugins.protocols.NotesKeeper` (curated notes, sticky notes,
  or a composite with either): list, remember, update, forget, retire, restore.
* **notes as text**: a :class:`NotesText` (the curated notes' ``MEMORY.md``): read the whole
  text with its version, replace it only if it is still that version.
* **dream**: a :class:`Dreamer` that declares it can (``can_dream``: a language model is configured).
* **compaction** after every delete: a :class:`~ovos_memory_plugins.protocols.Compactable`.

Nothing here reads a memory's private attributes or guesses a capability from a name.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.protocols import Compactable, DocumentLister, NotesKeeper
from ovos_memory_plugins.storage.records import Compacted

LOG = logging.getLogger(__name__)

__all__ = ["Dreamer", "NotesText", "Parts", "compact", "find_parts", "version_of"]


@runtime_checkable
class NotesText(Protocol):
    """Notes that can be read and replaced as one text (the curated notes' ``MEMORY.md``)."""

    def notes_body(self) -> str:
        """The whole notes text."""
        ...

    def notes_version(self) -> str:
        """A token that changes whenever the notes change (by anyone, in any process)."""
        ...

    def replace_notes(self, body: str, *, expected_version: str | None = None) -> Any:
        """Replace the notes with ``body``; refused when they are no longer ``expected_version``."""
        ...


@runtime_checkable
class Dreamer(Protocol):
    """Notes a language model can consolidate (``dream``)."""

    @property
    def can_dream(self) -> bool:
        """Whether :meth:`dream` can work (a language model is configured)."""
        ...

    def dream(self) -> Any:
        """Consolidate the notes now; the result says what happened."""
        ...


def version_of(text: str) -> str:
    """A digest of a text (the version of a notes listing the page sends back with an edit)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


@dataclass
class Parts:
    """The pieces of one memory the editor works on (None where the memory has none)."""

    memory: Any
    archive: Any | None
    notes: Any | None

    def capabilities(self) -> dict[str, bool]:
        """Which views and verbs the page may offer (each only where it can work)."""
        notes, archive = self.notes, self.archive
        dream = isinstance(notes, Dreamer) and bool(notes.can_dream)
        return {
            "archive": archive is not None,
            "archive_delete": archive is not None,
            "archive_list": isinstance(archive, DocumentLister),
            "notes": notes is not None,
            "notes_text": isinstance(notes, NotesText),
            "dream": dream,
        }


def find_parts(memory: Any) -> Parts:
    """The archive, notes and notes-text parts of ``memory``, by the protocols it implements.

    A composite is one memory here: it exposes its members' capabilities itself.
    """
    from ovos_memory_plugins.composite import CompositeMemory

    archive = memory if isinstance(memory, (BaseRetrievalMemory, CompositeMemory)) else None
    notes = memory if isinstance(memory, NotesKeeper) else None
    return Parts(memory=memory, archive=archive, notes=notes)


def compact(memory: Any) -> Compacted:
    """Make deleted rows unrecoverable in everything ``memory`` stores in, after a delete.

    A plain ``DELETE`` leaves a text readable in free pages and in the write-ahead log until
    the file is compacted; the memory does that itself where it declares
    :class:`~ovos_memory_plugins.protocols.Compactable` (every memory of this package, and a
    composite through its members). Returns the locations done (a memory that cannot compact:
    none); a location left for later (a busy file) is in ``skipped``. Never raises: the delete
    itself has happened.
    """
    if not isinstance(memory, Compactable):
        return Compacted()
    try:
        done = memory.compact()
    except Exception as exc:  # a compaction that fails must not fail the delete itself
        LOG.warning("memory editor: deleted, but could not compact (%s)", exc)
        return Compacted(skipped={type(memory).__name__: str(exc)})
    return done if isinstance(done, Compacted) else Compacted(done)
