"""The commands that read and correct what a memory holds: search, remember, forget, notes,
dream, serve, stats."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ovos_memory_plugins.cli.check import is_installed
from ovos_memory_plugins.cli.opening import location_of, notes_keeper_of, open_memory, read_persona
from ovos_memory_plugins.cli.output import CommandError, Output, UsageError
from ovos_memory_plugins.dates import stamp
from ovos_memory_plugins.protocols import Compactable


def _hit_data(hit: Any) -> dict[str, Any]:
    meta = dict(hit.metadata)
    return {
        "id": hit.source,
        "kind": meta.get("kind", "document"),
        "score": hit.score,
        "session_id": meta.get("session_id"),
        "content": hit.content,
        "when": stamp(meta),
        "metadata": meta,
    }


def _indent(text: str, prefix: str = "   ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _note_hits(notes: Any, query: str, session_id: str | None, top_k: int) -> list[Any]:
    """The notes matching ``query`` as hits: the share of the query's words each note holds."""
    from ovos_memory_plugins.common import MemoryHit
    from ovos_memory_plugins.text import query_terms, tokenize

    wanted = set(query_terms(query, unigrams=True)) or set(tokenize(query, unigrams=True))
    if not wanted:
        return []
    hits = []
    for note in notes.list_notes(include_retired=True, session_id=session_id):
        have = set(tokenize(note.text, unigrams=True))
        share = len(wanted & have) / len(wanted)
        if share > 0:
            meta = {"kind": "note", "session_id": note.session_id or None, "date": note.date}
            if note.retired_on:
                meta["retired_on"] = note.retired_on
            hits.append(MemoryHit(content=note.text, source=note.id, score=round(share, 4), metadata=meta))
    hits.sort(key=lambda h: -h.score)
    return hits[:top_k]


def cmd_search(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output, read_only=True) as memory:
        where = location_of(memory)
        hits = list(memory.search(args.query, session_id=args.session, top_k=args.top_k))
        notes = notes_keeper_of(memory)
        if notes is not None:
            seen = {h.source for h in hits} | {" ".join(h.content.split()) for h in hits}
            for hit in _note_hits(notes, args.query, args.session, args.top_k):
                if hit.source not in seen and " ".join(hit.content.split()) not in seen:
                    hits.append(hit)
    data = [_hit_data(h) for h in hits]

    def human() -> str:
        if not hits:
            return f"no memories match {args.query!r} in {where}"
        lines = [f"{len(hits)} match(es) in {where}:"]
        for i, hit in enumerate(hits, start=1):
            kind = hit.metadata.get("kind")
            label = " note" if kind == "note" else ""
            retired = f" (no longer true since {hit.metadata['retired_on']})" if hit.metadata.get("retired_on") else ""
            session = f" session {hit.metadata['session_id']}" if hit.metadata.get("session_id") else ""
            when = stamp(hit.metadata)
            dated = f"  {when}" if when else ""
            lines.append(f"{i}.{label} {hit.source}  score {hit.score:.4g}{dated}{session}{retired}")
            lines.append(_indent(hit.content))
        return "\n".join(lines)

    output.emit(data, human)
    return 0


def _parse_meta(items: Sequence[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--meta expects KEY=VALUE, got {item!r}")
        try:
            meta[key] = json.loads(value)
        except json.JSONDecodeError:
            meta[key] = value
    return meta


def _plain(value: Any) -> Any:
    """``value`` made JSON-friendly (dataclasses become dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


#: How the command words each :data:`~ovos_memory_plugins.protocols.NoteStatus` that names a note.
_CHANGE_WORDS = {
    "added": "remembered",
    "duplicate": "already remembered",
    "forgotten": "forgot",
    "retired": "retired",
    "restored": "restored",
}


def _change_line(change: Any) -> str:
    """One human line for a :class:`~ovos_memory_plugins.protocols.NoteChange`."""
    words = _CHANGE_WORDS.get(change.status)
    if words and change.note is not None:
        return f"{words}: {change.note.text}"
    if change.status == "updated" and change.replaced_by is not None:
        return f"updated: {change.replaced_by.text}"
    return str(change.message or change.status)


def cmd_remember(args: argparse.Namespace, output: Output) -> int:
    text = " ".join(args.text).strip()
    if not text:
        raise UsageError("remember needs a text")
    meta = _parse_meta(args.meta)
    with open_memory(args, output) as memory:
        notes = None if args.document else notes_keeper_of(memory)
        if notes is not None:
            if meta:
                raise UsageError("--meta goes with --document: notes keep no metadata")
            change = notes.remember(text, session_id=args.session)
            data = {"remembered": bool(change) or change.status == "duplicate", **change.to_dict()}
            output.emit(data, _change_line(change))
            return 0 if change or change.status == "duplicate" else 1
        doc_id = memory.store(text, args.session, meta)
    output.emit({"id": doc_id, "text": text, "session_id": args.session}, f"stored {doc_id}: {text}")
    return 0


def _forget_match(memory: Any, args: argparse.Namespace, output: Output) -> int:
    """``forget --match``: the note the text names (:class:`NotesKeeper` ``forget``)."""
    notes = notes_keeper_of(memory)
    if notes is None:
        raise CommandError(f"{type(memory).__name__} keeps no notes; forget documents by id or --session")
    change = notes.forget(args.match)
    data = change.to_dict()
    if change:
        output.emit(data, _change_line(change))
        return 0
    if change.status == "ambiguous":
        lines = [f"{args.match!r} matches several notes about equally; nothing was deleted. Be more specific:"]
        lines += [f"  - {c.text}  ({c.id})" for c in change.candidates]
        output.emit(data, "\n".join(lines))
        return 1
    output.emit(data, f"no note matches {args.match!r}; nothing was deleted")
    return 1


def _compact_after_forget(memory: Any, output: Output) -> None:
    """After a forget, compact what the memory stores in (as the editor does after a delete):
    ``secure_delete`` zeroes deleted rows, but a copy SQLite moved while balancing its pages can
    stay in free space until the file is rewritten. A compaction that fails or is skipped (a busy
    file) is said, never fatal: the forget itself happened."""
    if not isinstance(memory, Compactable):
        return
    try:
        done = memory.compact()
    except Exception as exc:
        output.note(f"forgotten, but the files could not be compacted now ({exc}); the next compaction does it")
        return
    for where, why in getattr(done, "skipped", {}).items():
        output.note(f"forgotten, but {where} was not compacted now ({why}); the next compaction does it")


def cmd_forget(args: argparse.Namespace, output: Output) -> int:
    if args.match is not None:
        if args.ids or args.all:
            raise UsageError("--match cannot be combined with ids or --all")
        if not args.match.strip():
            raise UsageError("--match needs a text")
        with open_memory(args, output) as memory:
            return _forget_match(memory, args, output)
    chosen = sum(bool(x) for x in (args.ids, args.session, args.all))
    if chosen != 1:
        raise UsageError("say what to forget: document ids, or --session ID, or --all --yes, or --match TEXT")
    if args.all and not args.yes:
        raise UsageError("--all deletes every memory and all history; add --yes to confirm")
    with open_memory(args, output, read_only=True) as memory:
        if args.all:
            n = memory.forget_all()
            what = "every memory and all history"
        elif args.session:
            n = memory.forget_session(args.session)
            what = f"session {args.session!r} (its memories and history)"
        else:
            n = memory.delete(args.ids)
            what = f"{len(args.ids)} id(s)"
        if n:
            _compact_after_forget(memory, output)
    if args.ids and n == 0:
        output.emit({"deleted": 0, "ids": args.ids}, f"found none of {', '.join(args.ids)}; nothing was deleted")
        return 1
    output.emit({"deleted": n}, f"forgot {what}: {n} document(s) deleted")
    if args.ids and n < len(args.ids):
        output.note(f"{len(args.ids) - n} of the {len(args.ids)} id(s) were not found")
        return 1
    return 0


def _notes_listing(notes: Any) -> str:
    lines = []
    for note in notes.list_notes(include_retired=True):
        date = f"[{note.date}] " if note.date else ""
        retired = f"  (no longer true since {note.retired_on})" if note.retired_on else ""
        lines.append(f"- {date}{note.text}{retired}")
    return "\n".join(lines)


EDIT_HEADER = (
    "# One note per line, starting with '- '. Delete a line to forget that note, add a line to\n"
    "# remember a new one, change a line to replace it. Lines starting with '#' are ignored.\n\n"
)


def _edit_in_editor(text: str, name: str) -> str:
    """``text`` after the user edited it in ``$VISUAL``/``$EDITOR`` (else ``vi``)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="ovos-memory-notes-") as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        try:
            status = subprocess.call([*shlex.split(editor), str(path)])
        except OSError as exc:
            raise CommandError(f"cannot run the editor {editor!r}: {exc}") from exc
        if status != 0:
            raise CommandError(f"the editor {editor!r} exited with status {status}; notes unchanged")
        return path.read_text(encoding="utf-8")


def _edit_notes(notes: Any, output: Output) -> int:
    """Edit the active notes as lines: removed lines are forgotten (by id), new lines remembered."""
    active = notes.list_notes()
    by_text: dict[str, list[str]] = {}
    for note in active:
        by_text.setdefault(note.text, []).append(note.id)
    after = _edit_in_editor(EDIT_HEADER + "".join(f"- {text}\n" for text in by_text), "notes.md")
    wanted = [line[2:].strip() for line in after.splitlines() if line.startswith("- ") and line[2:].strip()]
    gone = [doc_id for text, ids in by_text.items() if text not in wanted for doc_id in ids]
    added = [text for text in dict.fromkeys(wanted) if text not in by_text]
    for note_id in gone:
        notes.forget(note_id)
    for text in added:
        notes.remember(text)
    data = {"changed": bool(gone or added), "forgotten": len(gone), "remembered": added}
    output.emit(data, f"notes saved: {len(added)} added, {len(gone)} removed" if gone or added else "notes unchanged")
    return 0


def cmd_notes(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output, read_only=not args.edit) as memory:
        notes = notes_keeper_of(memory)
        if notes is None:
            raise CommandError(f"{type(memory).__name__} keeps no notes (use search, export or serve)")
        if args.edit:
            return _edit_notes(notes, output)
        items = notes.list_notes(include_retired=True)
        where = location_of(memory)
        text = _notes_listing(notes)
    output.note(f"notes in {where}")
    output.emit({"root": where, "notes": [dataclasses.asdict(n) for n in items]}, text or "no notes yet")
    return 0


def cmd_dream(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output, read_only=True) as memory:
        dream = getattr(memory, "dream", None)
        if not callable(dream):
            raise CommandError(f"{type(memory).__name__} cannot dream (only the notes memory consolidates notes)")
        result = dream()
    status = str(getattr(result, "status", None) or ("rewritten" if result else "failed"))
    reason = getattr(result, "reason", "") or ""
    human = {
        "rewritten": "the notes were consolidated",
        "unchanged": "the model found nothing to change",
        "rejected": "the model's rewrite was rejected (unusable, or it lost or invented a fact); notes untouched",
        "failed": "no model answered; notes untouched",
        "skipped": "skipped: no language model is configured (key llm), or there are no notes",
    }.get(status, f"dream: {status}")
    before, after = getattr(result, "before", None), getattr(result, "after", None)
    if before is not None and status == "rewritten":
        human += f" ({before} -> {after} notes)"
    if reason:
        human = f"dream {status}: {reason}"
    output.emit(_plain(result) if not isinstance(result, bool) else {"status": status}, human)
    return 0 if status in ("rewritten", "unchanged") else 1


def cmd_serve(args: argparse.Namespace, output: Output) -> int:
    if not (is_installed("fastapi") and is_installed("uvicorn")):
        raise CommandError("the memory editor needs FastAPI and uvicorn: pip install 'ovos-memory-plugins[editor]'")
    from ovos_memory_plugins.editor import serve
    from ovos_memory_plugins.editor.security import check_bind_host

    try:
        check_bind_host(args.host, args.allow_remote)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc

    def announce(line: str) -> None:
        output.out.write(line + "\n")
        output.out.flush()

    title = args.title
    if title is None and args.persona:
        name = read_persona(args.persona).get("name")
        title = name if isinstance(name, str) and name.strip() else Path(args.persona).stem
    with open_memory(args, output) as memory:
        serve(
            memory,
            args.host,
            args.port,
            allow_remote=args.allow_remote,
            allowed_hosts=args.allowed_host,
            open_browser=args.open,
            announce=announce,
            title=title,
        )
    return 0


def _flatten(data: dict[str, Any], prefix: str = "") -> list[str]:
    lines = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            lines += _flatten(value, f"{prefix}{key}.")
        else:
            lines.append(f"{prefix}{key}: {value}")
    return lines


def cmd_stats(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output, read_only=True) as memory:
        stats = memory.stats()
    output.emit(stats, lambda: "\n".join(_flatten(stats)))
    return 0
