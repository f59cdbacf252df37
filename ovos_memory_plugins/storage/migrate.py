"""Move a memory between engines: a folder's SQLite file to PostgreSQL and back, losslessly.

:func:`copy_storage` copies everything one memory keeps through the storage seam
(:mod:`ovos_memory_plugins.storage.seam`): its documents (ids, sessions, text, metadata and
creation times, oldest first, so keys keep their order and dialogue turns keep their context),
the keyword index (rebuilt on the target from the same tokens), the vectors of every embedder
space (copied, never re-embedded), the history of every session with its exchange-id chain,
the curated notes (active and retired, with their dates and sessions, in order), the sticky
notes (with their dates, sessions, languages, metadata, retirement and last-ask records) and
the rolling summary of every session. It refuses a target that already holds documents, and
checks the counts at the end.

:func:`migrate_memory` does it for a loaded memory plugin (``memory.storage`` is the source):
``to`` is a ``postgresql://`` URL (the memory's ``namespace`` keys it there) or a folder (the
memory's database file is created in it). Notes a memory keeps outside its database
(``MEMORY.md`` of the notes' ``"store": "file"``, and the previous bodies kept for ``undo``)
go too: into the database's notes tables (the notes memory opened on the folder with
``"store": "file"`` moves them back into its ``MEMORY.md`` on open). ``ovos-memory migrate --to ...`` calls it;
``python -m ovos_memory_plugins.storage.migrate FROM TO`` works on locations directly.

Progress is reported through a callback ``progress(stage, done, total)``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.protocols import Note
from ovos_memory_plugins.storage.notes_rewrites import copy_rewrites
from ovos_memory_plugins.storage.notes_store import (
    FileNotesStore,
    NotesStore,
    Rewrites,
    move_notes,
)
from ovos_memory_plugins.storage.records import Document, KeywordSettings, StoredDocument
from ovos_memory_plugins.storage.registry import is_url, open_storage
from ovos_memory_plugins.storage.seam import Storage
from ovos_memory_plugins.storage.sticky_store import copy_sticky

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]

__all__ = [
    "MigrationReport",
    "NotesInFiles",
    "Progress",
    "copy_notes",
    "copy_storage",
    "copy_summaries",
    "discard_storage",
    "main",
    "merge_storage",
    "migrate_memory",
]

LOG = logging.getLogger(__name__)

#: ``progress(stage, done, total)``: stage is ``"documents"``, ``"vectors:<space>"`` or ``"history"``.
Progress = Callable[[str, int, int], None]

#: Documents (and vectors) copied per transaction.
BATCH = 500


@dataclass
class MigrationReport:
    """What :func:`copy_storage` copied."""

    documents: int = 0
    vectors: dict[str, int] = field(default_factory=dict)
    sessions: int = 0
    history_messages: int = 0
    notes: int = 0
    sticky_notes: int = 0
    summaries: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the command's ``--json``)."""
        return {
            "documents": self.documents,
            "vectors": dict(self.vectors),
            "sessions": self.sessions,
            "history_messages": self.history_messages,
            "notes": self.notes,
            "sticky_notes": self.sticky_notes,
            "summaries": self.summaries,
            "seconds": round(self.seconds, 3),
        }

    def describe(self) -> str:
        """What moved, in words (the commands' text output): every count of :meth:`as_dict`."""
        return (
            f"{self.documents} document(s), {sum(self.vectors.values())} vector(s),"
            f" {self.history_messages} history message(s) of {self.sessions} session(s),"
            f" {self.notes} note(s), {self.sticky_notes} sticky note(s)"
            f" and {self.summaries} rolling summar{'y' if self.summaries == 1 else 'ies'}"
        )


def _batches(items: Iterator[StoredDocument], size: int) -> Iterator[list[StoredDocument]]:
    batch: list[StoredDocument] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def copy_storage(
    source: Storage,
    target: Storage,
    *,
    keyword: KeywordSettings | None = None,
    progress: Progress | None = None,
    batch: int = BATCH,
) -> MigrationReport:
    """Copy one memory's documents, keyword index, vectors and history from ``source`` to ``target``.

    Args:
        keyword: the keyword settings the target indexes with (default: the defaults).
        progress: called as ``progress(stage, done, total)`` after every batch.

    Raises:
        StorageError: the target already holds documents, a write failed, or the counts
            differ at the end.
    """
    started = time.monotonic()
    report = MigrationReport()
    report_progress = progress or (lambda stage, done, total: None)
    existing = target.documents.count()
    if existing:
        raise StorageError(f"the target {target.db.location} already holds {existing} document(s) of this memory")
    total = source.documents.count()
    index = target.keyword_index(keyword or KeywordSettings())
    try:
        for docs in _batches(source.documents.iter(batch), batch):
            plain = [Document(d.doc_id, d.text, d.session_id, d.metadata) for d in docs]
            prepared = index.prepare(plain)
            with target.atomic():
                stored = target.documents.put(plain)
                index.add(stored, prepared)
                target.documents.set_created([(d.doc_id, d.created) for d in docs])  # put stamps now
            report.documents += len(docs)
            report_progress("documents", report.documents, total)
    finally:
        index.close()

    source_vectors = source.vector_store()
    target_vectors = target.vector_store()
    for space, count in sorted(source_vectors.spaces().items()):
        done = 0
        for items in source_vectors.iter_vectors(space, batch):
            done += target_vectors.put_vectors(space, items)
            report_progress(f"vectors:{space}", done, count)
        report.vectors[space] = done

    sessions = source.history.sessions()
    for i, session in enumerate(sessions, 1):
        messages = source.history.recent(session, 1 << 30)
        last = source.history.last_exchange_id(session) or None
        target.history.append(session, [(m.role, m.content) for m in messages], len(messages), last)
        report.history_messages += len(messages)
        report_progress("history", i, len(sessions))
    report.sessions = len(sessions)

    report.notes, report.sticky_notes = copy_notes(source, target)
    if report.notes or report.sticky_notes:
        report_progress("notes", report.notes + report.sticky_notes, report.notes + report.sticky_notes)
    report.summaries = copy_summaries(source, target)

    copied = target.documents.count()
    if copied != total:
        raise StorageError(f"copied {copied} document(s), but the source holds {total}")
    for space, count in target_vectors.spaces().items():
        if report.vectors.get(space) != count:
            raise StorageError(f"space {space!r}: {count} vector(s) on the target, {report.vectors.get(space)} copied")
    report.seconds = time.monotonic() - started
    return report


def merge_storage(source: Storage, target: Storage, *, batch: int = BATCH) -> MigrationReport:
    """Move what ``source`` keeps into ``target``, which may hold some of it already (a
    composite's parts adopting the per-member memories of earlier releases, one by one).

    * documents are merged by id (ids come from content, so the copies of one exchange in
      several members are one document; one already on the target keeps its stored version),
      with their creation times, and given to every index registered on the target
      (``target.indexes``: the keyword index indexes them now);
    * vectors of every embedder space are copied, never re-embedded, when the target has a
      vector index (a space whose dimension differs is left out, logged: its documents are
      embedded again by the vector part, as after an embedder change);
    * the history of a session comes over only when the target has none for it (the members of
      a composite each kept a copy of one conversation), with each message's time;
    * sticky notes and curated notes (:func:`copy_notes`: a note already there is kept), the
      curated notes' undo history where both keep it in the database (PostgreSQL; on SQLite
      it is files, which the notes part takes in: ``adopt_notes_folder``) and the rolling
      summary of a session the target has none for.

    Raises :class:`StorageError` when a document or a sticky note did not arrive; nothing is
    taken out of ``source`` (see :func:`discard_storage`).
    """
    report = MigrationReport()
    started = time.monotonic()
    indexes = list(target.indexes)
    for docs in _batches(source.documents.iter(batch), batch):
        have = target.documents.get(d.doc_id for d in docs)
        new = [d for d in docs if d.doc_id not in have]
        if not new:
            continue
        plain = [Document(d.doc_id, d.text, d.session_id, d.metadata) for d in new]
        with target.atomic():
            stored = target.documents.put(plain)
            target.documents.set_created([(d.doc_id, d.created) for d in new])
            for index in indexes:
                index.add(stored, None)  # nothing prepared: a vector index gets the copied vectors below
        report.documents += len(new)
    if any("vector" in index.name.split(" | ") for index in indexes):
        source_vectors, target_vectors = source.vector_store(), target.vector_store()
        for space in sorted(source_vectors.spaces()):
            done = 0
            try:
                for items in source_vectors.iter_vectors(space, batch):
                    with target.atomic():
                        done += target_vectors.put_vectors(space, items)
            except StorageError as exc:
                LOG.warning("storage: vectors of %s not copied (%s); they are embedded again", space, exc)
            report.vectors[space] = done
    for session in source.history.sessions():
        if target.history.recent(session, 1):
            continue
        messages = source.history.recent(session, 1 << 30)
        last = source.history.last_exchange_id(session) or None
        with target.atomic():
            for i, m in enumerate(messages):
                final = last if i == len(messages) - 1 else None
                target.history.append(session, [(m.role, m.content)], 1 << 30, final, created=m.created)
        report.sessions += 1
        report.history_messages += len(messages)
    report.notes, report.sticky_notes = copy_notes(source, target)
    if not source.local and not target.local:  # the notes' undo history is rows there (else files)
        copy_rewrites(source.rewrites(Path()), target.rewrites(Path()))
    if source.holds("summaries"):
        rows = source.summaries().items()
        if rows:
            dst = target.summaries()
            with target.atomic():
                for session_id, summary, folded in rows:
                    if not dst.get(session_id)[0]:
                        dst.put(session_id, summary, folded)
                        report.summaries += 1
    ids = source.documents.ids()
    arrived = target.documents.get(ids)
    missing = [i for i in ids if i not in arrived]
    if missing:
        raise StorageError(f"{len(missing)} document(s) of {source.db.location} did not reach {target.db.location}")
    report.seconds = time.monotonic() - started
    return report


def discard_storage(source: Storage) -> None:
    """Take a memory that was merged elsewhere (:func:`merge_storage`) out of its location, so
    no copy stays where no forget reaches: a :attr:`~Storage.local` file is closed and deleted
    (with its WAL); on a database server every row of its namespace is deleted (curated notes
    and their undo history too), in one transaction, and the storage closed."""
    if source.local:
        path = source.db.location
        source.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path + suffix)
        return
    try:
        # postings off: opening it never rebuilds the postings it is about to delete
        keyword = source.keyword_index(KeywordSettings(keyword_postings=False))
        try:
            with source.atomic():
                keyword.remove_all()
                source.vector_store().remove_all()
                source.documents.remove_all()
                source.history.clear_all()
                if source.holds("sticky"):
                    source.sticky().delete_all()
                if source.holds("notes"):
                    source.notes().remove(lambda n: True)
                source.rewrites(Path()).clear()
                if source.holds("summaries"):
                    source.summaries().clear_all()
        finally:
            keyword.close()
        source.db.purge()
    finally:
        source.close()


def copy_notes(source: Storage, target: Storage) -> tuple[int, int]:
    """Copy the curated notes (active and retired, in order, with dates and sessions) and the
    sticky notes (every column, and the last-ask records) of ``source``'s database into
    ``target``'s; return ``(notes, sticky notes)`` copied. Notes already on the target (same
    words; same id for sticky notes) are kept, not doubled.

    Raises:
        StorageError: the target holds fewer notes than were read from the source.
    """
    notes = sticky = 0
    if source.holds("notes"):
        src = source.notes()
        if src.load() or src.retired():
            dst = target.notes()
            notes = move_notes(src, dst)
            missing = {n.text for n in src.load()} - {n.text for n in dst.load()}
            if missing:
                raise StorageError(f"{len(missing)} note(s) did not reach {target.db.location}")
    if source.holds("sticky"):
        src_sticky = source.sticky()
        if src_sticky.count() or src_sticky.asks():
            dst_sticky = target.sticky()
            sticky = copy_sticky(src_sticky, dst_sticky)
            have = {r.id for r in dst_sticky.notes(include_retired=True)}
            if any(r.id not in have for r in src_sticky.notes(include_retired=True)):
                raise StorageError(f"sticky notes did not all reach {target.db.location}")
    return notes, sticky


def copy_summaries(source: Storage, target: Storage) -> int:
    """Copy the rolling summaries of ``source``'s sessions into ``target`` (one transaction, a
    target's summary of the same session replaced); return how many.

    Raises:
        StorageError: the target holds other summaries than were read from the source.
    """
    if not source.holds("summaries"):
        return 0
    src = source.summaries()
    # with how far each reaches (``covered``: the lazy fold's, the history is copied whole)
    rows = [(session_id, *src.state(session_id)) for session_id, _, _ in src.items()]
    # the target gets the summary schema even without rows: the memory opening it later must
    # find what it keeps in place (a read-only command on the copy then writes nothing)
    dst = target.summaries()
    if not rows:
        return 0
    with target.atomic():  # committed like any write (a fold's own commit skips the flush)
        for session_id, summary, folded, covered in rows:
            dst.put(session_id, summary, folded, covered)
    if any(dst.state(session_id) != (summary, folded, covered) for session_id, summary, folded, covered in rows):
        raise StorageError(f"rolling summaries did not all reach {target.db.location}")
    return len(rows)


@runtime_checkable
class NotesInFiles(Protocol):
    """A memory that keeps notes in files under its ``root`` (the notes' ``"store": "file"``):
    :func:`migrate_memory` carries them and their undo history where the same memory keeps
    them at the target (PostgreSQL: the database; a folder: ``MEMORY.md`` there)."""

    def file_notes(self) -> list[Note]:
        """The notes kept in files: the active ones in order, then the retired ones (empty when
        the notes live in the database)."""
        ...

    @property
    def root(self) -> Path:
        """The memory's folder (where the undo history of a file store is kept)."""
        ...


def _copy_rewrites(source: Rewrites, target: Rewrites, depth: int = 1000) -> None:
    """The kept previous bodies, oldest first, so the newest stays the newest
    (:func:`~ovos_memory_plugins.storage.notes_rewrites.copy_rewrites`)."""
    copy_rewrites(source, target, depth)


def _carry_file_notes(memory: NotesInFiles, target: Storage, target_root: Path) -> int:
    """Put the notes a memory keeps in files where the same memory keeps them at the target:
    on PostgreSQL its notes table; in a folder, ``MEMORY.md`` and ``RETIRED.md`` under the
    target's folder (the same memory with ``"root": <folder>`` reads them there, and would
    otherwise move rows of the table out into a new ``MEMORY.md`` on its first start); and the
    undo history (files under ``root``, or rows on PostgreSQL) where the target keeps it."""
    notes = memory.file_notes()
    if notes:
        dst: NotesStore = target.notes() if not target.local else FileNotesStore(target_root)
        if isinstance(dst, FileNotesStore):
            target_root.mkdir(parents=True, exist_ok=True)
        with dst.transaction():
            have = dst.load()
            texts = {n.text for n in have}
            dst.save([*have, *(n for n in notes if n.active and n.text not in texts)])
            dst.add_retired([n for n in notes if not n.active])
    source: Any = getattr(memory, "storage", None)
    if isinstance(source, Storage):
        _copy_rewrites(source.rewrites(memory.root), target.rewrites(target_root))
    return len(notes)


def migrate_memory(memory: Any, to: str, *, progress: Progress | None = None) -> MigrationReport:
    """Copy a loaded memory plugin's storage to ``to``: a PostgreSQL URL or a folder.

    The memory's ``namespace`` keys it in PostgreSQL; in a folder, its database file (the
    ``database_file`` its class declares: a composite of parts, its ``composite.db``) is created
    where the same memory configured with ``"root": <folder>`` looks for it. The memory keeps
    working on its own storage; point its config at the new place (``"database": ...`` or
    ``"root": ...``) when the copy is done. A memory with no :class:`Storage` of its own (a
    composite of whole members) raises :class:`StorageError`: migrate each member instead.
    """
    from ovos_memory_plugins.config import resolve_file, resolve_root

    source = getattr(memory, "storage", None)
    if not isinstance(source, Storage):
        raise StorageError(
            f"{type(memory).__name__} keeps no storage of its own to copy (a composite of whole members:"
            " migrate each member with its own config)"
        )
    namespace = memory.settings.namespace
    target_root = Path(to)
    if is_url(to):
        target = open_storage(to, namespace=namespace)
    else:  # where the same memory with "root": <to> keeps its file (<to>/<namespace>/... for a namespace)
        settings = dataclasses.replace(memory.settings, root=str(Path(to).expanduser()), database=None)
        target = open_storage(resolve_file(settings, None, type(memory).database_file)[0])
        target_root = resolve_root(settings)
    try:
        report = copy_storage(source, target, keyword=_keyword_settings(memory), progress=progress)
        if isinstance(memory, NotesInFiles):
            report.notes += _carry_file_notes(memory, target, target_root)
        return report
    finally:
        target.close()


def _keyword_settings(memory: Any) -> KeywordSettings | None:
    """The settings a memory's keyword index stores its terms with (``keyword_settings``, which
    every memory of the base with a keyword index declares); for a composite of parts, its first
    member's that has one (the parts share one index); None: the defaults."""
    own = getattr(memory, "keyword_settings", None)
    if isinstance(own, KeywordSettings):
        return own
    members = getattr(memory, "members", None)
    for member in members.values() if isinstance(members, dict) else ():
        settings = getattr(member, "keyword_settings", None)
        if isinstance(settings, KeywordSettings):
            return settings
    return None


def _print_progress(stage: str, done: int, total: int) -> None:
    sys.stderr.write(f"\r{stage}: {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ovos_memory_plugins.storage.migrate FROM TO [--namespace NS]``."""
    parser = argparse.ArgumentParser(
        prog="python -m ovos_memory_plugins.storage.migrate",
        description="Copy one memory between a SQLite file and a PostgreSQL database (either way).",
    )
    parser.add_argument("source", help="a memory's SQLite file, or a postgresql:// URL")
    parser.add_argument("target", help="a new SQLite file, or a postgresql:// URL")
    parser.add_argument(
        "--namespace", default="default", help="the memory's namespace in PostgreSQL (default 'default')"
    )
    args = parser.parse_args(argv)
    if not is_url(args.source) and not Path(args.source).exists():
        parser.error(f"no such file: {args.source}")
    source = open_storage(args.source, namespace=args.namespace)  # a file's engine ignores the namespace
    try:
        target = open_storage(args.target, namespace=args.namespace)
        try:
            report = copy_storage(source, target, progress=_print_progress)
        finally:
            target.close()
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        source.close()
    print(f"copied {report.describe()} in {report.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
