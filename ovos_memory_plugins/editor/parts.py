"""What the editor can show of a memory, found through the public protocols only.

* **archive**: every memory built on :class:`~ovos_memory_plugins.base.BaseRetrievalMemory`,
  and the composite (``search``, ``delete``, ``put_document``, ``forget_session``, ``forget_all``, ``sessions``,
  ``messages``, ``stats``); its documents are listed where it is a
  :class:`~ovos_memory_plugins.protocols.DocumentLister`.
* **notes**: a :class:`~ovos_memory_plugins.protocols.NotesKeeper` (curated notes, sticky notes,
  or a composite with either): list, remember, update, forget, retire, restore.
* **notes as text**: a :class:`NotesText` (the curated notes' ``MEMORY.md``): read the whole
  text with its version, replace it only if it is still that version.
* **dream**: a :class:`Dreamer` whose ``stats()`` reports a language model (``"llm"``).

Nothing here reads a memory's private attributes or guesses a capability from a name.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.protocols import DocumentLister, NotesKeeper
from ovos_memory_plugins.storage.sqlite import Database

LOG = logging.getLogger(__name__)

__all__ = ["Dreamer", "NotesText", "Parts", "databases_of", "find_parts", "scrub", "version_of"]


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

    def dream(self) -> Any:
        """Consolidate the notes now; the result says what happened."""
        ...

    def stats(self) -> dict[str, Any]:
        """Figures; ``"llm"`` is present when a language model is configured."""
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
        dream = False
        if isinstance(notes, Dreamer):
            try:
                dream = "llm" in notes.stats()
            except Exception as exc:
                LOG.warning("memory editor: cannot read the notes' figures (%s); dreaming not offered", exc)
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


def databases_of(memory: Any) -> list[Database]:
    """The SQLite files a memory keeps data in: the :class:`Database` objects it holds.

    Looks at the values of the memory's attributes (and of memories it holds) for ``Database``
    objects or objects holding one as ``db``; it reads no attribute by name. In-RAM databases
    are left out.
    """
    found: list[Database] = []
    seen: set[int] = set()

    def visit(obj: Any, depth: int) -> None:
        if id(obj) in seen or depth > 3:
            return
        seen.add(id(obj))
        for value in list(vars(obj).values()) if hasattr(obj, "__dict__") else []:
            db = value if isinstance(value, Database) else getattr(value, "db", None)
            if isinstance(db, Database) and db.path != ":memory:" and all(db is not f for f in found):
                found.append(db)
            if isinstance(value, BaseRetrievalMemory):
                visit(value, depth + 1)
            elif isinstance(value, (list, tuple, dict)):
                for item in value.values() if isinstance(value, dict) else value:
                    inner = getattr(item, "instance", item)
                    if isinstance(inner, BaseRetrievalMemory):
                        visit(inner, depth + 1)

    visit(memory, 0)
    return found


def scrub(memory: Any) -> list[str]:
    """Make deleted rows unrecoverable from the memory's SQLite files; return the files done.

    A plain ``DELETE`` only marks pages free (and, in WAL mode, the old pages stay in the main
    file until a checkpoint), so the text can still be read from the file. ``VACUUM`` rewrites
    the file without the free pages and ``wal_checkpoint(TRUNCATE)`` empties the WAL. A file
    that is busy (another process holds a long read) is skipped and logged; the next purge
    retries it.
    """
    done: list[str] = []
    for db in databases_of(memory):
        try:
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            done.append(db.path)
        except Exception as exc:  # a purge that cannot compact must not fail the delete itself
            LOG.warning("memory editor: deleted, but could not compact %s yet (%s)", db.path, exc)
    return done
