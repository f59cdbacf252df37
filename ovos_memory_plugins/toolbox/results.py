"""Turning what a memory returns (hits, notes, documents, failures) into what a tool answers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from pydantic import ValidationError

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.protocols import Note
from ovos_memory_plugins.toolbox.schemas import ChangeOutput, MemoryItem

# -- items ----------------------------------------------------------------------------


def day_of(value: Any) -> str:
    """A ``YYYY-MM-DD`` (or ``YYYY-MM``) date from a stored epoch time or date string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        try:
            return datetime.fromtimestamp(float(value), tz=timezone.utc).strftime("%Y-%m-%d")
        except (OverflowError, OSError, ValueError):
            return ""
    if isinstance(value, str) and re.match(r"^\d{4}-\d{2}(-\d{2})?", value):
        return value[:10]
    return ""


def hit_item(hit: MemoryHit) -> MemoryItem:
    meta = hit.metadata or {}
    date = ""
    for key in ("date", "time", "created"):
        date = day_of(meta.get(key))
        if date:
            break
    return MemoryItem(id=str(hit.source), text=hit.content, date=date, session_id=str(meta.get("session_id") or ""))


def note_item(note: Note) -> MemoryItem:
    return MemoryItem(
        id=note.id, text=note.text, date=note.date, session_id=note.session_id, active=note.retired_on is None
    )


def doc_item(doc: Mapping[str, Any]) -> MemoryItem:
    meta = doc.get("metadata") or {}
    date = next((d for d in (day_of(meta.get(k)) for k in ("date", "time", "created")) if d), "")
    return MemoryItem(
        id=str(doc.get("id", "")), text=str(doc.get("text", "")), date=date, session_id=str(doc.get("session_id") or "")
    )


def listing(items: list[MemoryItem]) -> str:
    return "; ".join(f"{i}) [{it.id}] {it.text}" for i, it in enumerate(items, start=1))


def ambiguous(items: list[MemoryItem], tool: str) -> ChangeOutput:
    if len(items) == 1:
        message = (
            f"One memory matches those words loosely; nothing was changed: {listing(items)}. "
            f"If it is the right one, call {tool} again with its id."
        )
    else:
        message = (
            f"Several memories match; nothing was changed. Which one did you mean? {listing(items)}. "
            f"Ask the user, then call {tool} again with the id of the right one."
        )
    return ChangeOutput(ok=False, status="ambiguous", candidates=items, message=message, error="ambiguous description")


def error_text(exc: BaseException) -> str:
    """What the model may read about a failure: a ValueError's words, else only its kind."""
    if isinstance(exc, ValueError) and not isinstance(exc, UnicodeError):
        return str(exc)[:300] or "invalid input"
    return f"the memory failed ({type(exc).__name__}); the operator's log has the details"


def validation_text(exc: ValidationError) -> str:
    """A pydantic error in a few words: the field and what is wrong, never the offending input."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        what = str(err.get("msg", "invalid"))
        if err.get("type") == "extra_forbidden":
            what = "is not an argument of this tool"
        what = what.removeprefix("Value error, ")
        parts.append(f"{where[:60]}: {what[:200]}")
    return "invalid arguments: " + "; ".join(parts)
