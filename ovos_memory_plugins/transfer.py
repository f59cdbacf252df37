"""Export and import a memory's documents and notes as JSON Lines; ingest transcripts and text files.

One exported line per document or note::

    {"id": "x-3f…", "text": "Q: …\\nA: …", "session_id": "kitchen", "metadata": {"kind": "exchange"}}
    {"id": "n-9a…", "text": "Ingrid's birthday is 14 March.", "session_id": "kitchen",
     "metadata": {"kind": "note", "date": "2026-03", "retired_on": null}}

Front-ends reach memories through public protocols only
(:mod:`ovos_memory_plugins.protocols`): documents are listed through
:class:`~ovos_memory_plugins.protocols.DocumentLister` (``iter_documents()``), notes through
:class:`~ovos_memory_plugins.protocols.NotesKeeper` (``list_notes``, ``remember``, ``retire``).
Importing a file into an empty root reproduces the same documents with the same ids, so the same
searches return the same results. Every line is parsed and checked before the first write.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import pairwise
from pathlib import Path
from typing import IO, Any

from ovos_memory_plugins.errors import BackendError, OvosMemoryPluginError
from ovos_memory_plugins.protocols import DocumentLister, NotesKeeper
from ovos_memory_plugins.text import cut_long

__all__ = [
    "ExportedDocument",
    "ImportReport",
    "IngestReport",
    "TranscriptError",
    "TranscriptMessage",
    "collect_files",
    "export_jsonl",
    "import_jsonl",
    "ingest_paths",
    "iter_documents",
    "read_export",
    "read_transcript",
    "split_paragraphs",
    "where_kept",
]

#: File suffixes ``ingest`` reads from a folder.
TEXT_SUFFIXES = (".txt", ".md", ".jsonl", ".json")


def where_kept(memory: Any) -> str:
    """Where ``memory`` keeps its data, for messages: its database server (a URL without its
    password) when its ``stats()`` names an engine other than SQLite, else its folder, else
    ``"RAM"``."""
    stats = getattr(memory, "stats", None)
    try:
        storage = stats().get("storage") if callable(stats) else None
    except Exception:  # a figure for a message: the folder will do
        storage = None
    if isinstance(storage, dict) and storage.get("engine") not in (None, "sqlite") and storage.get("location"):
        return str(storage["location"])
    root = getattr(memory, "root", None)
    return str(root) if root is not None else "RAM"


class TranscriptError(OvosMemoryPluginError, ValueError):
    """A transcript or export file could not be parsed; the message names the file and line."""


@dataclass
class ExportedDocument:
    """One document (or note) as exported: its id, text, session and metadata."""

    id: str
    text: str
    session_id: str = "default"
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The document as one JSON line (no trailing newline)."""
        data = {"id": self.id, "text": self.text, "session_id": self.session_id, "metadata": self.metadata}
        return json.dumps(data, ensure_ascii=False, sort_keys=False, default=str)


def _coerce(item: Any) -> ExportedDocument:
    """A listed document (``{"id", "text", "session_id", "metadata"}``) as an :class:`ExportedDocument`."""
    if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(item.get("text"), str):
        raise BackendError(f"the memory listed a document that is not {{'id': str, 'text': str, ...}}: {item!r}")
    return ExportedDocument(
        item["id"], item["text"], str(item.get("session_id") or "default"), dict(item.get("metadata") or {})
    )


def _note_line(note: Any) -> ExportedDocument:
    meta: dict[str, Any] = {**dict(note.metadata or {}), "kind": "note", "date": note.date}
    if note.retired_on:
        meta["retired_on"] = note.retired_on
    return ExportedDocument(note.id, note.text, note.session_id or "default", meta)


def iter_documents(memory: Any) -> Iterator[ExportedDocument]:
    """Every document and note of ``memory``; raises :class:`BackendError` when it can list neither.

    Documents come from :class:`DocumentLister`, notes (active and retired) from
    :class:`NotesKeeper`; a note that is also listed as a document (the same id) comes once,
    as a note.
    """
    lists = isinstance(memory, DocumentLister)
    notes = memory if isinstance(memory, NotesKeeper) else None
    if not lists and notes is None:
        raise BackendError(
            f"{type(memory).__name__} can list neither its documents (iter_documents) nor its notes"
            " (list_notes), so it cannot be exported"
        )
    note_lines = [_note_line(n) for n in notes.list_notes(include_retired=True)] if notes is not None else []
    note_ids = {n.id for n in note_lines}
    if lists:
        for item in memory.iter_documents():
            doc = _coerce(item)
            if doc.id not in note_ids:
                yield doc
    yield from note_lines


def export_jsonl(memory: Any, out: IO[str]) -> int:
    """Write every document and note of ``memory`` to ``out`` as JSON Lines; return how many."""
    n = 0
    for doc in iter_documents(memory):
        out.write(doc.to_json() + "\n")
        n += 1
    return n


def _json_lines(lines: Iterable[str], name: str) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed value)`` of each non-blank JSON line; :class:`TranscriptError`
    naming the line when one is not JSON."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise TranscriptError(f"{name}:{number}: not JSON ({exc.msg})") from exc


def read_export(lines: Iterable[str], name: str = "<input>") -> Iterator[ExportedDocument]:
    """Parse exported JSON Lines (blank lines skipped); raises :class:`TranscriptError` naming the line."""
    for number, data in _json_lines(lines, name):
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise TranscriptError(f"{name}:{number}: expected an object with a string 'text'")
        if not data["text"].strip():
            raise TranscriptError(f"{name}:{number}: 'text' is empty")
        if not isinstance(data.get("id", ""), (str, type(None))):
            raise TranscriptError(f"{name}:{number}: 'id' must be a string when given")
        if not isinstance(data.get("session_id", ""), (str, type(None))):
            raise TranscriptError(f"{name}:{number}: 'session_id' must be a string when given")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise TranscriptError(f"{name}:{number}: 'metadata' must be an object")
        yield ExportedDocument(data.get("id") or "", data["text"], str(data.get("session_id") or "default"), metadata)


@dataclass
class ImportReport:
    """What :func:`import_jsonl` did: lines stored (``notes`` of them as notes) and lines it could not store."""

    imported: int = 0
    notes: int = 0
    skipped: int = 0
    reasons: list[str] = field(default_factory=list)


def import_jsonl(
    memory: Any,
    lines: Iterable[str] | Iterable[ExportedDocument],
    name: str = "<input>",
    *,
    progress: Callable[[int], Any] | None = None,
) -> ImportReport:
    """Store every exported line: documents under their own ids, notes as notes.

    Every line is parsed and checked first (a bad line raises :class:`TranscriptError` and
    nothing is written). A line without an ``id`` gets the id ``store`` would give it. The
    documents are written in one batch where the memory offers ``put_documents`` (one
    transaction: all of them or none), else one by one. Into a :class:`NotesKeeper`,
    ``kind: note`` lines are remembered (with their date and session; retired ones retired
    again); into any other memory they are stored as documents. ``progress(n)`` is called as
    lines are stored.
    """
    from ovos_memory_plugins.base import BaseRetrievalMemory
    from ovos_memory_plugins.text import clean_text

    items = list(lines)
    docs = [d for d in items if isinstance(d, ExportedDocument)]
    if len(docs) != len(items):
        docs = list(read_export((str(x) for x in items), name))
    notes = memory if isinstance(memory, NotesKeeper) else None
    note_lines = [d for d in docs if notes is not None and d.metadata.get("kind") == "note"]
    documents = [d for d in docs if not (notes is not None and d.metadata.get("kind") == "note")]
    report = ImportReport()
    batch = getattr(memory, "put_documents", None)
    if callable(batch) and documents:
        rows = []
        for doc in documents:
            text = clean_text(doc.text)
            # the exported id is kept, so exchange ids (chained, not content-derived) survive
            doc_id = doc.id or BaseRetrievalMemory.document_id(doc.session_id, text)
            rows.append((doc_id, text, doc.session_id, dict(doc.metadata)))
        batch(rows)
        report.imported += len(rows)
        if progress is not None:
            progress(len(rows))
    else:
        for doc in documents:
            if doc.id:
                memory.put_document(doc.id, doc.text, doc.session_id, dict(doc.metadata))
            else:
                memory.store(doc.text, doc.session_id, dict(doc.metadata))
            report.imported += 1
            if progress is not None:
                progress(1)
    for doc in note_lines:
        if notes is None:  # note lines are only set apart for a NotesKeeper
            break
        date = doc.metadata.get("date") or None
        change = notes.remember(" ".join(doc.text.split()), session_id=doc.session_id, date=date)
        if change.status not in ("added", "duplicate"):
            report.skipped += 1
            report.reasons.append(f"note {doc.text[:60]!r}: {change.message or change.status}")
        else:
            if doc.metadata.get("retired_on") and change.note is not None and change.status == "added":
                notes.retire(change.note.id)
            report.notes += 1
            report.imported += 1
        if progress is not None:
            progress(1)
    return report


# -- ingest -------------------------------------------------------------------------------------

_DATE = r"\[?(?P<date>\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)\]?\s*"
_SPEAKER = re.compile(rf"^\s*(?:{_DATE})?(?P<who>user|human|me|q|assistant|ai|bot|a)\s*:\s?(?P<text>.*)$", re.I)
_USER_LABELS = {"user", "human", "me", "q"}
_TIME_KEYS = ("time", "timestamp", "date", "created_at")


@dataclass(frozen=True)
class TranscriptMessage:
    """One turn of a transcript: ``role`` (``user``/``assistant``), its text, and when (epoch seconds) if known."""

    role: str
    content: str
    time: float | None = None


def parse_time(value: Any) -> float | None:
    """Seconds since 1970 from an ISO 8601 text (naive: UTC) or a number; None when it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value / 1000 if value > 1e11 else value)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def read_transcript(text: str, name: str = "<input>") -> list[TranscriptMessage] | None:
    """The messages of a transcript, or None when ``text`` is not one.

    Two forms: JSON Lines of ``{"role": "user"|"assistant", "content": ..., "time": ...}``
    objects (``time``/``timestamp``/``date``/``created_at``: ISO 8601 or epoch seconds,
    optional), or plain text whose turns start with ``User:``/``Assistant:`` (also ``Q:``/``A:``,
    ``Human:``/``AI:``, ``Me:``/``Bot:``), optionally after a date (``[2024-03-14 09:30] User: ...``);
    a turn runs until the next label.
    """
    lines = text.splitlines()
    stripped = [ln for ln in lines if ln.strip()]
    if stripped and all(ln.lstrip().startswith("{") for ln in stripped):
        out = []
        for number, data in _json_lines(lines, name):
            role = str(data.get("role", "")).lower() if isinstance(data, dict) else ""
            content = data.get("content") if isinstance(data, dict) else None
            if role not in ("user", "assistant") or not isinstance(content, str):
                raise TranscriptError(f"{name}:{number}: expected {{'role': 'user'|'assistant', 'content': text}}")
            when = next((parse_time(data[k]) for k in _TIME_KEYS if k in data), None)
            out.append(TranscriptMessage(role, content, when))
        return out
    if not stripped or not _SPEAKER.match(stripped[0]):
        return None
    messages: list[TranscriptMessage] = []
    for line in lines:
        match = _SPEAKER.match(line)
        if match:
            role = "user" if match.group("who").lower() in _USER_LABELS else "assistant"
            messages.append(TranscriptMessage(role, match.group("text").strip(), parse_time(match.group("date"))))
        elif messages and line.strip():
            last = messages[-1]
            messages[-1] = TranscriptMessage(last.role, (last.content + "\n" + line.strip()).strip(), last.time)
    return messages


def split_paragraphs(text: str, max_chars: int = 2000) -> list[str]:
    """Blank-line separated paragraphs; a paragraph longer than ``max_chars`` is cut on lines."""
    return [part for para in re.split(r"\n\s*\n", text) for part in cut_long(para, max_chars, at="\n")]


def collect_files(paths: Iterable[Path]) -> list[Path]:
    """The files to ingest: each file as given, each folder's text files recursively, sorted."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return files


@dataclass
class IngestReport:
    """What :func:`ingest_paths` did; ``new`` counts exchanges and chunks that were not there before
    (None when the memory cannot list its documents, so it cannot tell)."""

    files: int = 0
    exchanges: int = 0
    documents: int = 0
    new: int | None = 0


def ingest_paths(
    memory: Any,
    paths: Iterable[Path],
    session_id: str = "default",
    progress: Callable[[int, int, str], None] | None = None,
) -> IngestReport:
    """Feed transcripts (as conversation exchanges) and other text (as paragraphs) into ``memory``.

    Idempotent: ingesting the same file again stores nothing new. A transcript's exchanges get
    the ids a live conversation of the same turns would get in a fresh session (from the
    session, the content and the position); the first time a session is ingested its turns
    also go through the memory's public ``update_history`` (so its history, and whatever the
    memory derives from conversations, are there too). Every exchange keeps the transcript's
    date (``metadata.time``), or the file's modification time when the transcript has none.
    Other files are cut into paragraphs stored as documents with ``{"kind": "ingest", "source":
    path, "chunk": n}`` (ids from the session and text). ``progress(done, total, name)`` is
    called after each file.
    """
    files = collect_files(paths)
    known = _known_ids(memory)
    report = IngestReport(new=0 if known is not None else None)
    for i, path in enumerate(files, start=1):
        text = path.read_text(encoding="utf-8", errors="replace")
        messages = read_transcript(text, str(path))
        mtime = os.stat(path).st_mtime
        if messages is not None:
            session = session_id if session_id != "default" else path.stem
            for doc_id in _feed(memory, messages, session, source=str(path), default_time=mtime):
                report.exchanges += 1
                if known is not None and report.new is not None:
                    report.new += doc_id not in known
        else:
            for doc_id in _store_chunks(memory, split_paragraphs(text), session_id, str(path)):
                report.documents += 1
                if known is not None and report.new is not None:
                    report.new += doc_id not in known
        report.files += 1
        if progress is not None:
            progress(i, len(files), str(path))
    return report


def _store_chunks(memory: Any, chunks: list[str], session_id: str, source: str) -> list[str]:
    """Store a file's paragraphs; return their ids (those ``store`` gives). One batch (one
    transaction, the vector index embedding in batches) where the memory offers ``put_documents``."""
    batch = getattr(memory, "put_documents", None)
    ident = getattr(memory, "document_id", None)
    if not (callable(batch) and callable(ident)):
        return [
            memory.store(chunk, session_id, {"kind": "ingest", "source": source, "chunk": n})
            for n, chunk in enumerate(chunks)
        ]
    from ovos_memory_plugins.text import clean_text

    rows = []
    for n, chunk in enumerate(chunks):
        text = clean_text(chunk)
        rows.append((str(ident(session_id, text)), text, session_id, {"kind": "ingest", "source": source, "chunk": n}))
    if rows:
        batch(rows)
    return [row[0] for row in rows]


def _known_ids(memory: Any) -> set[str] | None:
    """The ids already stored (None when the memory cannot list them)."""
    if not isinstance(memory, DocumentLister):
        return None
    return {str(d.get("id")) for d in memory.iter_documents() if isinstance(d, dict)}


def _exchanges(messages: list[TranscriptMessage]) -> list[tuple[str, str, float | None]]:
    """``(user, assistant, time)`` of each user turn answered by the assistant (same-speaker turns merged)."""
    merged: list[TranscriptMessage] = []
    for m in messages:
        if merged and merged[-1].role == m.role:
            last = merged[-1]
            merged[-1] = TranscriptMessage(m.role, last.content + "\n" + m.content, last.time or m.time)
        else:
            merged.append(m)
    out = []
    for a, b in pairwise(merged):
        if a.role == "user" and b.role == "assistant":
            out.append((a.content, b.content, a.time if a.time is not None else b.time))
    return out


def _feed(
    memory: Any, messages: list[TranscriptMessage], session_id: str, *, source: str, default_time: float
) -> list[str]:
    """Record a transcript's exchanges; return their ids (the same ids every time)."""
    from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

    from ovos_memory_plugins.base import PREVIOUS_EXCHANGE, BaseRetrievalMemory, exchange_text

    exchanges = _exchanges(messages)
    fresh = not memory.messages(session_id) if callable(getattr(memory, "messages", None)) else False
    ids = []
    rows: list[tuple[str, str, str, dict[str, Any] | None]] = []
    previous = ""
    for user, assistant, when in exchanges:
        doc_id = BaseRetrievalMemory.exchange_id(session_id, user, assistant)
        meta: dict[str, Any] = {"kind": "exchange", "time": when if when is not None else default_time}
        meta["source"] = source
        if previous and previous != doc_id:
            meta[PREVIOUS_EXCHANGE] = previous
        if user.strip() or assistant.strip():
            rows.append((doc_id, exchange_text(user, assistant), session_id, meta))
        ids.append(doc_id)
        previous = doc_id
    batch = getattr(memory, "put_documents", None)
    if callable(batch) and rows:
        # first in one batch (the vector index embeds them together; a memory with a content-hash
        # cache then finds every exchange there when update_history stores it again)
        batch(rows)
    if fresh:
        for user, assistant, _ in exchanges:
            pair = [
                AgentMessage(role=MessageRole.USER, content=user),
                AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
            ]
            memory.update_history(pair, session_id)
    if callable(batch) and rows:
        if fresh:  # the live path may have set its own metadata: the transcript's dates win
            batch(rows)
    else:
        for row in rows:
            memory.put_document(*row)
    return ids
