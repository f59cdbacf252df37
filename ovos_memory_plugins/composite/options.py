"""The composite's config: its own keys (:class:`CompositeOptions`) and the parsed member
blocks (:class:`MemberSpec`, :func:`parse_members`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ovos_memory_plugins.config import option
from ovos_memory_plugins.fusion import Fusion

__all__ = [
    "ASSIST_TIMEOUT",
    "PARTS_FILE",
    "PLACEMENT_KEYS",
    "CompositeOptions",
    "Fusion",
    "MemberSpec",
    "parse_members",
]


#: Seconds an LLM assist may take when the ``llm`` block sets no ``timeout`` (it runs per turn).
ASSIST_TIMEOUT = 5.0
#: The SQLite file, under the composite's folder, of a composite made of parts (one storage).
PARTS_FILE = "composite.db"
#: Member config keys that place a member's data somewhere of its own: such a member stays a
#: whole memory (and so do the others: a composite is parts of one memory, or members).
PLACEMENT_KEYS = frozenset({"root", "db_path", "database"})
_MEMBER_KEYS = ("module", "config", "weight", "name", "recall", "semantic")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass
class CompositeOptions:
    """The composite's own keys (besides the shared ones)."""

    members: list[Any] = option(
        default_factory=list,
        doc='The member memories, in order: `[{"module": "<entry-point name>", "config": {...}, '
        '"weight": 1.0, "name": "<folder and label>", "recall": null, "semantic": null}, ...]`. '
        "`name` defaults to the module name without `ovos-memory-plugin-`; `recall` says whether "
        "the member's search hits are fused (default: what the member declares, `composite_recall`; "
        "sticky notes say no, their search finds what their block shows anyway); `semantic` "
        "overrides what the member declares (`semantic`) for `expand_query: auto`. An entry that is "
        "not an object is skipped alone.",
    )
    fusion: Fusion = option(
        "rrf",
        doc="How retriever hits are fused (one vocabulary with a hybrid's `fusion`, "
        "`ovos_memory_plugins.fusion`): `rrf` (Reciprocal "
        "Rank Fusion, weighted), `weighted` (min-max normalised scores, weighted), `calibrated` "
        "(`weighted`, each member's weight times how far its best hit stands out), `score` (half "
        "rank, half score relative to the member's best), `merge` (raw scores; same-scale members "
        "only), `priority` (earlier members first), `interleave` (round robin).",
    )
    rrf_k: float = option(60.0, doc="The k of Reciprocal Rank Fusion: score = weight / (k + rank).", minimum=0)
    primary: str | None = option(
        None,
        doc="The member (name or module) whose history window the prompt uses. Default: the "
        "first member that keeps history.",
    )
    member_timeout_ms: int = option(
        2000, doc="How long a turn waits for members; a later member is skipped for that turn.", minimum=1
    )
    write_timeout_ms: int = option(
        2000,
        doc="How long `update_history` waits for members to record a turn; a slower member "
        "finishes in the background, in order, and is not waited for again until it caught up.",
        minimum=1,
    )
    expand_query: bool | Literal["auto"] = option(
        "auto",
        doc="Ask the `llm` for synonyms and translations added to the recall query. `auto`: only "
        "when an `llm` is set and no retriever member does semantic search.",
    )
    summarize_recall: bool = option(
        False, doc="Replace the recalled memories with a short summary written by the `llm`."
    )
    llm: dict[str, Any] | None = option(
        None,
        doc="The language model for `expand_query` and `summarize_recall` (see notes.md: "
        f"`base_url`/`api_key`/`model` or `module`); `timeout` defaults to {ASSIST_TIMEOUT:g} s here.",
    )


@dataclass(frozen=True)
class MemberSpec:
    """One parsed member block."""

    index: int
    name: str
    module: str
    config: dict[str, Any] = field(default_factory=dict)
    weight: float = 1.0
    recall: bool | None = None
    semantic: bool | None = None


def _default_name(module: str) -> str:
    short = module.removeprefix("ovos-memory-plugin-")
    short = re.sub(r"[^A-Za-z0-9._-]+", "-", short).strip("-._") or "member"
    return short[:64]


def parse_members(raw: Sequence[Any]) -> tuple[list[MemberSpec], list[str]]:
    """Parse the ``members`` list leniently: the usable specs and one problem line per fault.

    A block without a usable ``module`` or ``config`` is left out; a bad ``weight``, ``name``
    or ``semantic`` falls back to its default; duplicate names get ``-2``, ``-3``...
    """
    specs: list[MemberSpec] = []
    problems: list[str] = []
    taken: set[str] = set()
    for i, block in enumerate(raw):
        where = f"members[{i}]"
        if not isinstance(block, Mapping):
            problems.append(f"key '{where}': {block!r} is not accepted; expected an object with a 'module'")
            continue
        module = block.get("module")
        if not isinstance(module, str) or not module.strip():
            problems.append(f"key '{where}.module': {module!r} is not accepted; expected an entry-point name")
            continue
        where = f"members[{i}] ({module})"
        for unknown in sorted(set(block) - set(_MEMBER_KEYS), key=str):
            problems.append(f"unknown key '{where}.{unknown}'; accepted keys: {', '.join(_MEMBER_KEYS)}")
        config = block.get("config", {})
        if config is None:
            config = {}
        if not isinstance(config, Mapping):
            problems.append(f"key '{where}.config': {config!r} is not accepted; expected an object")
            continue
        weight = block.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            problems.append(f"key '{where}.weight': {weight!r} is not accepted; expected a number >= 0")
            weight = 1.0
        flags: dict[str, bool | None] = {}
        for key in ("recall", "semantic"):
            value = block.get(key)
            if value is not None and not isinstance(value, bool):
                problems.append(f"key '{where}.{key}': {value!r} is not accepted; expected true, false or null")
                value = None
            flags[key] = value
        name = block.get("name")
        if name is not None and not (isinstance(name, str) and _NAME_RE.match(name)):
            problems.append(
                f"key '{where}.name': {name!r} is not accepted; expected letters, digits, '.', '_' "
                "and '-', starting with a letter or digit (it names a folder)"
            )
            name = None
        if name is not None and name in taken:
            problems.append(f"key '{where}.name': {name!r} is used by an earlier member; names must be unique")
            name = None
        if name is None:
            base = _default_name(module)
            name, n = base, 2
            while name in taken:
                name, n = f"{base}-{n}", n + 1
        taken.add(name)
        specs.append(
            MemberSpec(i, name, module.strip(), dict(config), float(weight), flags["recall"], flags["semantic"])
        )
    return specs, problems
