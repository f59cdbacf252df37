"""What the editor can show of a memory: its archive, its notes, its sticky notes.

The editor talks to memories through their public methods only, found by duck typing, so it
works with any backend of this package, a composite of them, or a third-party backend built on
:class:`~ovos_memory_plugins.base.BaseRetrievalMemory`:

* **archive**: ``search``/``delete``/``forget_session``/``forget_all``/``stats`` (every backend);
  document listing through ``iter_documents()`` (or the other names export looks for);
* **notes**: ``notes_body()`` and ``replace_notes(text)`` (both notes stores), plus
  ``remember``/``update``/``forget`` and, on the SQLite store, ``retire``/``restore``;
* **sticky**: ``remember``/``forget``/``notes`` without ``notes_body``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.storage.sqlite import Database

LOG = logging.getLogger(__name__)

#: Methods that list archived documents (``transfer.iter_documents`` reads them). ``notes`` is
#: left out: a notes list is not an archive of documents.
DOCUMENT_LISTINGS = ("iter_documents", "documents", "list_documents", "all_documents")

__all__ = ["DOCUMENT_LISTINGS", "Parts", "databases_of", "find_parts", "members_of", "scrub", "version_of"]


def version_of(text: str) -> str:
    """The version the page sends back with an edit: a digest of the text it loaded."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _has(obj: Any, *names: str) -> bool:
    return all(callable(getattr(obj, name, None)) for name in names)


def members_of(memory: Any) -> Iterator[Any]:
    """The memory and, for a composite, its members (depth first)."""
    yield memory
    members = getattr(memory, "members", None)
    if isinstance(members, dict):
        members = list(members.values())
    if isinstance(members, (list, tuple)):
        for member in members:
            member = getattr(member, "memory", member)
            yield from members_of(member)


@dataclass
class Parts:
    """The pieces of one memory the editor works on (None where the memory has none)."""

    memory: Any
    archive: Any | None
    notes: Any | None
    sticky: Any | None

    def capabilities(self) -> dict[str, bool]:
        """Which views and verbs the page may offer."""
        notes, sticky, archive = self.notes, self.sticky, self.archive
        return {
            "archive": archive is not None,
            "archive_delete": archive is not None and _can_delete(archive),
            "archive_list": archive is not None and any(_has(archive, name) for name in DOCUMENT_LISTINGS),
            "notes": notes is not None,
            "notes_items": notes is not None and _has(notes, "notes"),
            "notes_remember": notes is not None and _has(notes, "remember"),
            "notes_update": notes is not None and _has(notes, "update"),
            "notes_forget": notes is not None and _has(notes, "forget"),
            "notes_retire": notes is not None and _can_retire(notes),
            "notes_restore": notes is not None and _has(notes, "restore"),
            "dream": notes is not None and _has(notes, "dream"),
            "sticky": sticky is not None,
        }


def _can_retire(notes: Any) -> bool:
    """A ``retire`` verb, or (until the notes backend has one) a store that can retire."""
    return _has(notes, "retire") or _has(getattr(notes, "_notes_store", None), "retire")


def _can_delete(memory: Any) -> bool:
    can = getattr(memory, "_can", None)
    return bool(can("_delete_documents")) if callable(can) else _has(memory, "delete")


def find_parts(memory: Any) -> Parts:
    """Find the archive, notes and sticky parts of ``memory`` (or of a composite's members).

    The archive is the memory itself (a composite fans searches and deletes out to its
    members; the notes backend to its archive), unless it is a sticky-notes memory, whose
    search only covers its notes.
    """
    notes = sticky = None
    for part in members_of(memory):
        if notes is None and _has(part, "notes_body", "replace_notes"):
            notes = part
        elif sticky is None and _has(part, "remember", "forget", "notes") and not _has(part, "notes_body"):
            sticky = part
    archive = memory if _has(memory, "search", "stats") and memory is not sticky else None
    return Parts(memory=memory, archive=archive, notes=notes, sticky=sticky)


def databases_of(memory: Any) -> list[Database]:
    """The SQLite files a memory (its members, its archive) keeps data in.

    Found by looking at the memory's attributes: a :class:`Database`, or an object holding one
    as ``db`` (the history store, a notes or sticky store); other memories held as attributes
    (the notes backend's archive) are searched too. In-RAM databases are left out.
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

    for part in members_of(memory):
        visit(part, 0)
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
