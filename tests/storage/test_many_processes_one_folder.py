"""Many processes, one new folder: 4 processes × 5 rounds per backend, started together on a
barrier (``multiprocessing``, spawn), each opening the same folder that did not exist a moment
before, as a persona, the ``ovos-memory`` command and the editor do at boot.

Each process writes through the host's path (the turn, then the record), ``store`` and, where the
backend keeps notes, ``remember``. Held when: no process crashes, none logs an error, every
storage the memory reports (``stats()``, members' and archives' included) is on disk, not in RAM,
and afterwards a new instance recalls every write of every process.
"""

from __future__ import annotations

import logging
import multiprocessing
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trust_helpers import Backend, backend_params, every_note

PROCESSES = 4
ROUNDS = 5

_barrier: Any = None


def _init(barrier: Any) -> None:
    global _barrier
    _barrier = barrier
    import trust_helpers  # noqa: F401  # import the package before the first round starts


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def in_ram_flags(stats: Any) -> list[bool]:
    """Every ``in_ram`` value anywhere in a (nested) ``stats()`` answer; a reported storage
    problem (``problem``, ``notes_store_problem``, ``storage_problem``...) counts as True."""
    out: list[bool] = []
    if isinstance(stats, dict):
        for key, value in stats.items():
            if key == "in_ram":
                out.append(bool(value))
            elif key.endswith("problem"):
                if value:
                    out.append(True)
            else:
                out += in_ram_flags(value)
    elif isinstance(stats, list):
        for value in stats:
            out += in_ram_flags(value)
    return out


def _worker(args: tuple[Backend, str, int, int]) -> dict[str, Any]:
    """Open the folder (all four at once), write three ways, close; report what happened."""
    backend, root, worker, round_ = args
    from ovos_memory_plugins.testing import exchange

    errors = _Errors()
    logging.getLogger().addHandler(errors)
    out: dict[str, Any] = {"worker": worker, "error": "", "in_ram": [], "logged": errors.lines}
    try:
        _barrier.wait(timeout=60)
        mem = backend.open(root)
        try:
            out["in_ram"] = in_ram_flags(mem.stats())
            word = f"walrus{worker}x{round_}"
            ask = f"remember that the {word} key hangs by the door"
            mem.build_conversation_context(ask, f"w{worker}")
            mem.update_history(exchange(ask, f"the {word} key, noted"), f"w{worker}")
            mem.store(f"the {word} umbrella is blue", f"w{worker}")
            if backend.notes:
                mem.remember(f"the {word} bicycle is green", session_id=f"w{worker}")
        finally:
            mem.close()
    except Exception:
        out["error"] = traceback.format_exc()
    finally:
        logging.getLogger().removeHandler(errors)
    return out


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    with ctx.Pool(PROCESSES, initializer=_init, initargs=(barrier,)) as p:
        yield p


def recalled(backend: Backend, mem: Any, word: str) -> list[str]:
    """What of ``word``'s three writes a new instance finds (empty list: all of them)."""
    missing = []
    if backend.archives:
        texts = [h.content for h in mem.search(f"{word} umbrella", top_k=10)]
        if not any(f"{word} umbrella" in t for t in texts):
            missing.append("store")
        texts = [h.content for h in mem.search(f"{word} key door", top_k=10)]
        if not any(f"{word} key" in t for t in texts):
            missing.append("exchange")
    if backend.notes:
        notes = [n.text for n in every_note(mem)]
        if not any(f"{word} bicycle" in n for n in notes):
            missing.append("remember")
        if backend.sticky_asks and not any(f"{word} key" in n for n in notes):
            missing.append("sticky ask")
    return missing


@pytest.mark.parametrize("backend", backend_params())
def test_four_processes_five_rounds_opening_one_new_folder(tmp_path: Path, pool: Any, backend: Backend) -> None:
    for round_ in range(ROUNDS):
        root = tmp_path / f"new-{round_}"
        assert not root.exists()
        results = pool.map(_worker, [(backend, str(root), w, round_) for w in range(PROCESSES)], chunksize=1)
        for r in results:
            assert r["error"] == "", f"round {round_}, process {r['worker']} crashed:\n{r['error']}"
            assert r["in_ram"] and not any(r["in_ram"]), f"round {round_}, process {r['worker']} fell back to RAM"
            assert r["logged"] == [], f"round {round_}, process {r['worker']} logged errors: {r['logged']}"
        with backend.open(root) as mem:
            assert not any(in_ram_flags(mem.stats()))
            for w in range(PROCESSES):
                lost = recalled(backend, mem, f"walrus{w}x{round_}")
                assert lost == [], f"round {round_}: process {w}'s writes lost: {lost}"
