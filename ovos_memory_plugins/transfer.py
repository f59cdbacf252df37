"""Export and import a memory's documents as JSON Lines, and ingest transcripts and text files.

One exported line per document::

    {"id": "x-3f…", "text": "Q: …\\nA: …", "session_id": "kitchen", "metadata": {"kind": "exchange"}}

Importing a file into an empty root reproduces the same documents with the same ids, so the
same searches return the same results. Export needs the backend to list its documents: a
method ``iter_documents()`` yielding ``(doc_id, text, session_id, metadata)`` tuples, dicts
with those keys, or objects with those attributes. Backends without it make export fail with
a :class:`~ovos_memory_plugins.errors.BackendError` that says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import IO, Any

from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.errors import BackendError, OvosMemoryPluginError

__all__ = [
    "DOCUMENT_LISTINGS",
    "ExportedDocument",
    "ImportReport",
    "TranscriptError",
    "export_jsonl",
    "import_jsonl",
    "ingest_paths",
    "is_curated_notes",
    "iter_documents",
    "read_transcript",
    "split_paragraphs",
]

#: Names of listing methods the export looks for, first found wins. ``notes`` is the sticky
#: backend's list of notes (objects with ``id``, ``text``, ``session_id``, ``metadata``).
LISTING_METHODS = ("iter_documents", "documents", "list_documents", "all_documents", "notes")
#: The listing methods of document archives (``notes`` lists notes, not documents).
DOCUMENT_LISTINGS = LISTING_METHODS[:-1]

#: File suffixes ``ingest`` reads from a folder.
TEXT_SUFFIXES = (".txt", ".md", ".jsonl", ".json")


class TranscriptError(OvosMemoryPluginError, ValueError):
    """A transcript or export file could not be parsed; the message names the file and line."""


@dataclass
class ExportedDocument:
    """One document as exported: its id, text, session and metadata."""

    id: str
    text: str
    session_id: str = "default"
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The document as one JSON line (no trailing newline)."""
        data = {"id": self.id, "text": self.text, "session_id": self.session_id, "metadata": self.metadata}
        return json.dumps(data, ensure_ascii=False, sort_keys=False, default=str)


def _coerce(item: Any) -> ExportedDocument:
    if isinstance(item, ExportedDocument):
        return item
    if isinstance(item, dict):
        doc_id = item.get("id", item.get("doc_id"))
        text = item.get("text", item.get("content"))
        session = item.get("session_id", "default")
        metadata = item.get("metadata") or {}
    elif isinstance(item, (tuple, list)) and len(item) == 4:
        doc_id, text, session, metadata = item
    else:
        doc_id = getattr(item, "id", getattr(item, "doc_id", None))
        text = getattr(item, "text", getattr(item, "content", None))
        session = getattr(item, "session_id", "default")
        metadata = getattr(item, "metadata", None) or {}
    if not isinstance(doc_id, str) or not isinstance(text, str):
        raise BackendError(f"the backend listed a document without a string id and text: {item!r}")
    return ExportedDocument(str(doc_id), text, str(session or "default"), dict(metadata))


def _listing(memory: Any, names: Sequence[str] = LISTING_METHODS) -> Callable[[], Iterable[Any]] | None:
    for name in names:
        method = getattr(memory, name, None)
        if callable(method):
            return method  # type: ignore[no-any-return]
    return None


def is_curated_notes(memory: Any) -> bool:
    """Whether ``memory`` keeps curated notes (``notes_body``/``replace_notes``, the notes backend)."""
    return all(callable(getattr(memory, name, None)) for name in ("notes", "notes_body", "replace_notes"))


def _curated_notes(memory: Any) -> Iterator[ExportedDocument]:
    """The notes backend's notes (active, then retired) as id-less ``kind: note`` lines."""
    for note in memory.notes():
        yield ExportedDocument("", note.text, "default", {"kind": "note", "date": getattr(note, "date", "")})
    retired = getattr(memory, "retired_notes", None)
    for note in retired() if callable(retired) else []:
        meta = {"kind": "note", "date": getattr(note, "date", ""), "retired_on": getattr(note, "retired_on", None)}
        yield ExportedDocument("", note.text, "default", meta)


def iter_documents(memory: Any) -> Iterator[ExportedDocument]:
    """Every document of ``memory``; raises :class:`BackendError` when it cannot list them.

    Document archives list through ``iter_documents()`` (or another name of
    ``DOCUMENT_LISTINGS``); the notes backend exports its notes (active and retired) as id-less
    lines with ``{"kind": "note", "date": ...}``, then its archive's documents; the sticky
    backend its ``notes()``.
    """
    listing = _listing(memory, DOCUMENT_LISTINGS)
    if is_curated_notes(memory):  # its notes, then its archive's documents (if it keeps one)
        yield from _curated_notes(memory)
        for item in listing() if listing is not None else []:
            yield _coerce(item)
        return
    listing = listing or _listing(memory)
    if listing is None:
        raise BackendError(
            f"{type(memory).__name__} cannot list its documents (it has none of the methods "
            f"{', '.join(LISTING_METHODS)}), so it cannot be exported"
        )
    items = listing()
    if isinstance(items, (str, bytes, dict)):
        raise BackendError(
            f"{type(memory).__name__}.{getattr(listing, '__name__', 'listing')}() does not list documents"
        )
    for item in items:
        yield _coerce(item)


def export_jsonl(memory: Any, out: IO[str]) -> int:
    """Write every document of ``memory`` to ``out`` as JSON Lines; return how many."""
    n = 0
    for doc in iter_documents(memory):
        out.write(doc.to_json() + "\n")
        n += 1
    return n


def read_export(lines: Iterable[str], name: str = "<input>") -> Iterator[ExportedDocument]:
    """Parse exported JSON Lines (blank lines skipped); raises :class:`TranscriptError`."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TranscriptError(f"{name}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise TranscriptError(f"{name}:{number}: expected an object with a string 'text'")
        if not isinstance(data.get("id", ""), str):
            raise TranscriptError(f"{name}:{number}: 'id' must be a string when given")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise TranscriptError(f"{name}:{number}: 'metadata' must be an object")
        yield ExportedDocument(data.get("id") or "", data["text"], str(data.get("session_id") or "default"), metadata)


@dataclass
class ImportReport:
    """What ``import_jsonl`` did: documents (and notes) stored, and lines it could not store."""

    imported: int = 0
    skipped: int = 0
    reasons: list[str] = field(default_factory=list)


def import_jsonl(memory: BaseRetrievalMemory, lines: Iterable[str], name: str = "<input>") -> ImportReport:
    """Store every exported document under its own id.

    A line without an ``id`` (hand-made, or converted from another tool) gets the id ``store``
    would give it, derived from its session and text. Into the notes backend, ``kind: note``
    lines become notes (merged with the notes there, with their dates); retired notes are
    skipped and counted, as that backend has no public way to add a retired note.
    """
    report = ImportReport()
    curated = is_curated_notes(memory)
    bullets: list[str] = []
    for doc in read_export(lines, name):
        if not doc.text.strip():
            continue
        if curated and doc.metadata.get("kind") == "note":
            if doc.metadata.get("retired_on"):
                report.skipped += 1
                continue
            date = doc.metadata.get("date") or ""
            text = " ".join(doc.text.split())
            bullets.append(f"- [{date}] {text}" if date else f"- {text}")
        elif doc.id:
            # the exported id is kept, so exchange ids (chained, not content-derived) survive
            memory.put_document(doc.id, doc.text, doc.session_id, dict(doc.metadata))
        else:
            memory.store(doc.text, doc.session_id, dict(doc.metadata))
        report.imported += 1
    if bullets:
        notes: Any = memory  # duck-typed: the notes backend's own verbs
        notes.replace_notes(notes.notes_body().rstrip("\n") + "\n" + "\n".join(bullets) + "\n")
    if report.skipped:
        report.reasons.append(f"{report.skipped} retired note(s) skipped: the notes backend cannot add retired notes")
    return report


# -- ingest -------------------------------------------------------------------------------------

_SPEAKER = re.compile(r"^\s*(user|human|me|q|assistant|ai|bot|a)\s*:\s?(.*)$", re.IGNORECASE)
_USER_LABELS = {"user", "human", "me", "q"}


def read_transcript(text: str, name: str = "<input>") -> list[tuple[str, str]] | None:
    """``(role, content)`` messages of a transcript, or None when ``text`` is not one.

    Two forms: JSON Lines of ``{"role": "user"|"assistant", "content": ...}`` objects, or plain
    text whose turns start with ``User:``/``Assistant:`` (also ``Q:``/``A:``, ``Human:``/``AI:``);
    a turn runs until the next label.
    """
    lines = text.splitlines()
    stripped = [ln for ln in lines if ln.strip()]
    if stripped and all(ln.lstrip().startswith("{") for ln in stripped):
        out = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TranscriptError(f"{name}:{number}: not JSON ({exc.msg})") from exc
            role = str(data.get("role", "")).lower() if isinstance(data, dict) else ""
            content = data.get("content") if isinstance(data, dict) else None
            if role not in ("user", "assistant") or not isinstance(content, str):
                raise TranscriptError(f"{name}:{number}: expected {{'role': 'user'|'assistant', 'content': text}}")
            out.append((role, content))
        return out
    if not stripped or not _SPEAKER.match(stripped[0]):
        return None
    messages: list[tuple[str, str]] = []
    for line in lines:
        match = _SPEAKER.match(line)
        if match:
            role = "user" if match.group(1).lower() in _USER_LABELS else "assistant"
            messages.append((role, match.group(2).strip()))
        elif messages and line.strip():
            role, content = messages[-1]
            messages[-1] = (role, (content + "\n" + line.strip()).strip())
    return messages


def split_paragraphs(text: str, max_chars: int = 2000) -> list[str]:
    """Blank-line separated paragraphs; a paragraph longer than ``max_chars`` is cut on lines."""
    chunks: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        while len(para) > max_chars:
            cut = para.rfind("\n", 0, max_chars)
            cut = cut if cut > 0 else max_chars
            chunks.append(para[:cut].strip())
            para = para[cut:].strip()
        if para:
            chunks.append(para)
    return chunks


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
    """What ``ingest_paths`` did."""

    files: int = 0
    exchanges: int = 0
    documents: int = 0


def ingest_paths(
    memory: BaseRetrievalMemory,
    paths: Iterable[Path],
    session_id: str = "default",
    progress: Callable[[int, int, str], None] | None = None,
) -> IngestReport:
    """Feed transcripts (as conversation turns) and other text (as paragraphs) into ``memory``.

    A transcript goes through ``update_history`` exactly as a live conversation would (its own
    session id: the file name, unless ``session_id`` is given explicitly as non-default). Other
    files are cut into paragraphs stored as documents with ``{"kind": "ingest", "source": path}``.
    ``progress(done, total, name)`` is called after each file.
    """
    files = collect_files(paths)
    report = IngestReport()
    for i, path in enumerate(files, start=1):
        text = path.read_text(encoding="utf-8", errors="replace")
        messages = read_transcript(text, str(path))
        if messages is not None:
            session = session_id if session_id != "default" else path.stem
            report.exchanges += _feed(memory, messages, session)
        else:
            for n, chunk in enumerate(split_paragraphs(text)):
                memory.store(chunk, session_id, {"kind": "ingest", "source": str(path), "chunk": n})
                report.documents += 1
        report.files += 1
        if progress is not None:
            progress(i, len(files), str(path))
    return report


def _feed(memory: BaseRetrievalMemory, messages: list[tuple[str, str]], session_id: str) -> int:
    """Record transcript turns as exchanges (same-speaker turns merged); return how many."""
    merged: list[tuple[str, str]] = []
    for role, content in messages:
        if merged and merged[-1][0] == role:
            merged[-1] = (role, merged[-1][1] + "\n" + content)
        else:
            merged.append((role, content))
    exchanges = 0
    for (role, content), (next_role, answer) in pairwise(merged):
        if role != "user" or next_role != "assistant":
            continue
        pair = [
            AgentMessage(role=MessageRole.USER, content=content),
            AgentMessage(role=MessageRole.ASSISTANT, content=answer),
        ]
        memory._update_history(pair, session_id)
        exchanges += 1
    return exchanges
