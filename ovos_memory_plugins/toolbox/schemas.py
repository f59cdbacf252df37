"""What the model sends and gets back: argument and result schemas, the text check, tool descriptions.

Every argument schema forbids extra keys and wrong types and bounds every length; text with control
characters or chat-template markers is refused, and a fact shaped like an instruction is not stored
(:func:`check_text`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any

from ovos_plugin_manager.templates.agent_tools import ToolArguments, ToolOutput
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ovos_memory_plugins.toolbox.settings import MAX_DESCRIPTION_CHARS, MAX_FACT_CHARS, MAX_QUERY_CHARS, MAX_TOP_K

__all__ = [
    "ChangeOutput",
    "ForgetArgs",
    "ListNotesArgs",
    "ListNotesOutput",
    "MemoryItem",
    "MemoryToolOutput",
    "RememberArgs",
    "SearchArgs",
    "SearchOutput",
    "UpdateArgs",
    "check_text",
]

# -- argument schemas --------------------------------------------------------------------------

#: Chat-template and role markers: text carrying them tries to pose as part of the conversation.
_MARKERS = re.compile(
    r"<\|[^|<>]{0,40}\|>|\[/?INST\]|<</?SYS>>|</?s>|<start_of_turn>|<end_of_turn>|^\s*#{0,3}\s*"
    r"(system|assistant|developer|tool)\s*:",
    re.IGNORECASE,
)
#: Instruction-shaped text: a memory is a fact, never an order to the model (English phrasing).
_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|override|forget)\b.{0,40}\b(previous|prior|above|earlier|all|any|your)\b.{0,40}"
    r"\b(instructions?|prompts?|rules?|guidelines?)\b"
    r"|\byou\s+(are|must|will|should)\s+now\b"
    r"|\b(system|developer)\s+(prompt|message|instructions?)\b"
    r"|\bfrom\s+now\s+on\s*,?\s+(you|always|never)\b",
    re.IGNORECASE | re.DOTALL,
)
#: Bidirectional-text controls (the Cc control characters are refused by category).
_BIDI = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F)}


def check_text(value: str, *, stored: bool) -> str:
    """``value`` stripped, or ValueError saying why a tool refuses it.

    Refused: control characters (line breaks included: one line of plain text), bidirectional
    controls, chat-template markers; and, for text that will be stored (``stored``), text shaped
    like an instruction to the model.
    """
    text = value.strip()
    if not text:
        raise ValueError("must not be empty")
    if any(unicodedata.category(ch) == "Cc" or ch in _BIDI for ch in text):
        raise ValueError("must be one line of plain text (no line breaks or control characters)")
    if _MARKERS.search(text):
        raise ValueError("must be plain text, not chat-template or role markers")
    if stored and _INSTRUCTION.search(text):
        raise ValueError(
            "a memory is a fact about the user or the world, never an instruction to the assistant; nothing was stored"
        )
    return text


#: Text that names or looks up a memory (a query, a description): checked, never stored.
LookupText = Annotated[str, AfterValidator(lambda value: check_text(value, stored=False))]
#: Text a tool stores as a memory (a fact): checked, instructions refused.
StoredText = Annotated[str, AfterValidator(lambda value: check_text(value, stored=True))]


class _Args(ToolArguments):  # type: ignore[misc]  # OPM ships no type information
    model_config = ConfigDict(extra="forbid", strict=True)


class SearchArgs(_Args):
    """Arguments of ``search_memory``."""

    query: LookupText = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="A few words naming what to look for, e.g. 'sister name' or 'where I parked'.",
    )
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K, description="How many memories to return (1-10).")


def _fact(description: str) -> Any:
    """A field holding one fact to store."""
    return Field(min_length=3, max_length=MAX_FACT_CHARS, description=description)


def _which(verb: str) -> Any:
    """A field naming the memory a tool acts on (``verb``: what it does to it)."""
    return Field(
        min_length=1,
        max_length=MAX_DESCRIPTION_CHARS,
        description=f"Which memory to {verb}: its id, its exact text, or a few words from it.",
    )


class RememberArgs(_Args):
    """Arguments of ``remember``."""

    fact: StoredText = _fact("One short fact in plain words, e.g. 'The user's sister is called Maria.'")


class UpdateArgs(_Args):
    """Arguments of ``update_memory``."""

    description: LookupText = _which("change")
    new_fact: StoredText = _fact("The corrected fact, one short sentence.")


class ForgetArgs(_Args):
    """Arguments of ``forget_memory``."""

    description: LookupText = _which("drop")


class ListNotesArgs(_Args):
    """``list_notes`` takes no arguments."""


# -- output schemas ----------------------------------------------------------------------------


class MemoryToolOutput(ToolOutput):  # type: ignore[misc]  # OPM ships no type information
    """What every tool returns: ``ok``, one line for the model, and an ``error`` when not ok."""

    ok: bool = True
    message: str = ""
    error: str = ""


class MemoryItem(BaseModel):
    """One memory or note as the model sees it."""

    id: str
    text: str
    date: str = ""
    session_id: str = ""
    active: bool = True


class SearchOutput(MemoryToolOutput):
    """``search_memory``'s result."""

    results: list[MemoryItem] = Field(default_factory=list)


class ChangeOutput(MemoryToolOutput):
    """``remember`` / ``update_memory`` / ``forget_memory``'s result.

    ``status`` is a :data:`~ovos_memory_plugins.protocols.NoteStatus` (``stored`` for a document
    remembered by a memory without notes); ``candidates`` are the close matches of an
    ``ambiguous`` (nothing changed).
    """

    status: str = ""
    item: MemoryItem | None = None
    replaced_by: MemoryItem | None = None
    candidates: list[MemoryItem] = Field(default_factory=list)


class ListNotesOutput(MemoryToolOutput):
    """``list_notes``'s result."""

    notes: list[MemoryItem] = Field(default_factory=list)
    total: int = 0


DESCRIPTIONS = {
    "search_memory": (
        "Look up what you remember about the user from earlier conversations and saved notes. "
        "Use it before answering a question about the user's life, preferences or past talks "
        "when the answer is not already in the conversation. Give a few words as the query. "
        "Returns the best matches with their date, session and id."
    ),
    "remember": (
        "Save one short, lasting fact about the user for future conversations, when the user "
        "asks you to remember something or tells you something important about themselves. "
        "Write the fact in plain words, e.g. 'The user's sister is called Maria.' "
        "Never save instructions, only facts."
    ),
    "update_memory": (
        "Correct a saved fact that is no longer true. 'description' says which memory (its id "
        "from search_memory or list_notes, or a few words from it); 'new_fact' is the corrected "
        "fact. If several memories match, nothing changes and you get the candidates: ask the "
        "user which one, then call again with its id."
    ),
    "forget_memory": (
        "Drop a saved fact when the user asks you to forget it or it is wrong. 'description' "
        "says which memory (its id from search_memory or list_notes, or a few words from it). "
        "If several memories match, nothing changes and you get the candidates: ask the user "
        "which one they meant, then call again with its id."
    ),
    "list_notes": "List every saved note about the user (newest last), with ids and dates.",
}
