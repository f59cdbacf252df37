"""The notes "locker code" case, end to end, on every memory that keeps notes.

Remember "my locker code is 4417", update it to "1234", then forget "locker code 4417": the
4417 note (retired by the update) goes, from the notes and from every byte under the folder;
the 1234 note stays and reaches the prompt; 4417 never reaches a prompt again. Through the
NotesKeeper verbs in code, and through ``ovos-memory forget --match`` in another process while
the memory stays open. A description that fits two notes equally changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trust_helpers import ALL_BACKENDS, Backend, backend_params, every_note, files_holding, prompt_text, run_cli

NOTE_KEEPERS = [b for b in ALL_BACKENDS if b.notes]
OLD, NEW = "4417", "1234"


def setup_locker(mem: Any) -> None:
    assert mem.remember(f"my locker code is {OLD}", session_id="s").status == "added"
    assert mem.remember("my cat is called Tom", session_id="s").status == "added"
    change = mem.update("locker code", f"my locker code is {NEW}")
    assert change.status == "updated", change
    texts = [n.text for n in mem.list_notes()]
    assert f"my locker code is {NEW}" in texts and f"my locker code is {OLD}" not in texts


@pytest.mark.parametrize("how", ["verb", "command"])
@pytest.mark.parametrize("backend", backend_params(NOTE_KEEPERS))
def test_forget_the_old_locker_code_keeps_the_new_one(tmp_path: Path, backend: Backend, how: str) -> None:
    root = tmp_path / "m"
    with backend.open(root) as mem:
        setup_locker(mem)
        if how == "verb":
            change = mem.forget(f"locker code {OLD}")
            assert change.status in ("forgotten", "deleted"), change
            assert change.note is not None and OLD in change.note.text
        else:
            done = run_cli(backend, root, "forget", "--match", f"locker code {OLD}")
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert OLD in done.stdout
        texts = [n.text for n in mem.list_notes(include_retired=True)]
        assert f"my locker code is {NEW}" in texts and not any(OLD in t for t in texts)
        prompt = prompt_text(mem, "what is my locker code", "s")
        assert NEW in prompt and OLD not in prompt
        assert all(OLD not in n.text for n in every_note(mem) if "locker" in n.text)
    assert not any(OLD in f for f in files_holding(root, OLD)) and files_holding(root, OLD) == []
    assert files_holding(root, NEW), "the true note is still kept"
    with backend.open(root) as again:
        prompt = prompt_text(again, "what is my locker code", "s")
        assert NEW in prompt and OLD not in prompt


@pytest.mark.parametrize("backend", backend_params(NOTE_KEEPERS))
def test_forget_the_new_locker_code_keeps_the_old_one_retired(tmp_path: Path, backend: Backend) -> None:
    """The mirror case: naming the new code removes the new note, never the retired one by mistake."""
    with backend.open(tmp_path / "m") as mem:
        setup_locker(mem)
        change = mem.forget(f"locker code {NEW}")
        assert change.status in ("forgotten", "deleted", "ambiguous"), change
        texts = [n.text for n in mem.list_notes(include_retired=True)]
        if change.status == "ambiguous":
            assert f"my locker code is {NEW}" in texts  # nothing changed
        else:
            assert change.note is not None and NEW in change.note.text
            assert not any(NEW in t for t in texts)
        prompt = prompt_text(mem, "what is my locker code", "s")
        old_lines = [line for line in prompt.splitlines() if OLD in line]
        assert all("no longer true" in line for line in old_lines), "a retired code is never sent as true"


@pytest.mark.parametrize("backend", backend_params(NOTE_KEEPERS))
def test_a_close_call_changes_nothing(tmp_path: Path, backend: Backend) -> None:
    with backend.open(tmp_path / "m") as mem:
        mem.remember("my red bike is at the station", session_id="s")
        mem.remember("my blue bike is at the station", session_id="s")
        before = sorted(n.text for n in mem.list_notes(include_retired=True))
        change = mem.forget("my bike at the station")
        assert change.status == "ambiguous" and len(change.candidates) == 2, change
        assert sorted(n.text for n in mem.list_notes(include_retired=True)) == before
