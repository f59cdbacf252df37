"""`storage.migrate`: a memory moves SQLite -> PostgreSQL -> SQLite with identical search results."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

import numpy as np

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.engine import Document, KeywordSettings, Storage
from ovos_memory_plugins.storage.migrate import copy_storage, main
from ovos_memory_plugins.storage.registry import open_storage

_ns = itertools.count()

TEXTS = [
    ("[8 May 2023] Caroline: I went to a support group yesterday", "s1"),
    ("[8 May 2023] Melanie: That sounds brave, how was it?", "s1"),
    ("[8 May 2023] Caroline: Powerful, I felt accepted", "s1"),
    ("Q: what colour is my bike?\nA: Your bike is red.", "s2"),
    ("Q: 我喜欢红色自行车吗？\nA: 是的，你喜欢。", "s2"),
    ("[9 May 2023] Melanie: We painted a sunrise at the lake", "s3"),
]
QUERIES = ["support group", "bike colour", "自行车", "sunrise lake painting", "how was it"]


def fill(storage: Storage) -> None:
    index = storage.keyword_index(KeywordSettings())
    docs = [Document(f"d{i}", text, session, {"i": i}) for i, (text, session) in enumerate(TEXTS)]
    with storage.atomic():
        index.add(storage.documents.put(docs), index.prepare(docs))
    rng = np.random.default_rng(3)
    vectors = storage.vector_store()
    unit = [v / np.linalg.norm(v) for v in rng.normal(size=(len(docs), 8)).astype(np.float32)]
    vectors.put_vectors("hash-8", [(d.doc_id, v) for d, v in zip(docs, unit, strict=True)])
    storage.history.append("s2", [("user", "what colour is my bike?"), ("assistant", "Your bike is red.")], 24, "x-1")


def snapshot(storage: Storage) -> dict[str, object]:
    index = storage.keyword_index(KeywordSettings())
    vectors = storage.vector_store()
    q = np.linspace(-1, 1, 8).astype(np.float32)
    q /= np.linalg.norm(q)
    return {
        "docs": [(d.doc_id, d.session_id, d.text, d.metadata, round(d.created, 3)) for d in storage.documents.iter()],
        "search": {query: [(h.source, round(h.score, 6)) for h in index.search(query, 5)] for query in QUERIES},
        "scoped": [h.source for h in index.search("bike", 5, session_id="s2")],
        "vectors": [(d, round(s, 5)) for d, s in vectors.search("hash-8", q, 6)],
        "history": [(m.role, m.content) for m in storage.history.recent("s2", 10)],
        "last": storage.history.last_exchange_id("s2"),
    }


def test_round_trip_sqlite_postgres_sqlite(tmp_path: Path, postgres_url: str) -> None:
    first = open_storage(tmp_path / "a" / "memory.db")
    fill(first)
    before = snapshot(first)
    namespace = f"migrated-{next(_ns)}"
    pg = open_storage(postgres_url, namespace=namespace)
    seen: list[tuple[str, int, int]] = []
    report = copy_storage(first, pg, progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert report.documents == len(TEXTS) and report.vectors == {"hash-8": len(TEXTS)}
    assert report.history_messages == 2 and report.sessions == 1
    assert ("documents", len(TEXTS), len(TEXTS)) in seen and ("history", 1, 1) in seen
    assert snapshot(pg) == before
    with pytest.raises(StorageError, match="already holds"):
        copy_storage(first, pg)
    back = open_storage(tmp_path / "b" / "memory.db")
    copy_storage(pg, back)
    assert snapshot(back) == before
    for storage in (first, pg, back):
        storage.close()


def test_module_command(tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = open_storage(tmp_path / "memory.db")
    fill(source)
    source.close()
    namespace = f"cmd-{next(_ns)}"
    assert main([str(tmp_path / "memory.db"), postgres_url, "--namespace", namespace]) == 0
    out = capsys.readouterr()
    assert f"copied {len(TEXTS)} document(s), {len(TEXTS)} vector(s), 2 history message(s)" in out.out
    assert "documents: 6/6" in out.err
    assert main([str(tmp_path / "memory.db"), postgres_url, "--namespace", namespace]) == 1
    assert "already holds" in capsys.readouterr().err


def test_ovos_memory_migrate_there_and_back(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ovos_memory_plugins.cli import main as cli
    from ovos_memory_plugins.lexical import LexicalMemory

    namespace = f"cli-{next(_ns)}"
    before = LexicalMemory({"root": str(tmp_path / "a"), "namespace": namespace})
    for text, session in TEXTS:
        before.store(text, session)
    before.update_history([{"role": "user", "content": "bike?"}, {"role": "assistant", "content": "red"}], "s2")
    expected = {q: [(h.source, round(h.score, 6)) for h in before.search(q)] for q in QUERIES}
    before.close()
    assert cli(["migrate", "--root", str(tmp_path / "a"), "--namespace", namespace, "--to", postgres_url]) == 0
    out = capsys.readouterr().out
    assert f"copied {len(TEXTS) + 1} document(s)" in out and "***" in out
    on_pg = LexicalMemory({"database": postgres_url, "namespace": namespace})
    assert {q: [(h.source, round(h.score, 6)) for h in on_pg.search(q)] for q in QUERIES} == expected
    assert [m.content for m in on_pg.messages("s2")] == ["bike?", "red"]
    on_pg.close()
    config = json.dumps({"database": postgres_url})
    back = ["migrate", "--config", config, "--namespace", namespace, "--to", str(tmp_path / "b"), "--json"]
    assert cli(back) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == len(TEXTS) + 1
    again = LexicalMemory({"root": str(tmp_path / "b"), "namespace": namespace})
    assert {q: [(h.source, round(h.score, 6)) for h in again.search(q)] for q in QUERIES} == expected
    again.close()


# -- notes and sticky notes ----------------------------------------------------------------------


def _migrate(capsys: pytest.CaptureFixture[str], module: str, config: dict[str, Any], to: str) -> dict[str, Any]:
    """``ovos-memory migrate`` of a plugin's memory; its ``--json`` report."""
    from ovos_memory_plugins.cli import main as cli

    assert cli(["migrate", "--module", module, "--config", json.dumps(config), "--to", to, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def _notes_state(mem: Any) -> dict[str, object]:
    return {
        "active": [(n.id, n.text, n.date, n.session_id) for n in mem.list_notes()],
        "retired": [(n.text, n.date, n.session_id, n.retired_on) for n in mem.retired_notes()],
    }


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_notes_go_to_postgres_and_back_losslessly(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    from ovos_memory_plugins.notes import NotesMemory

    namespace = f"notes-{store}-{next(_ns)}"
    first = {"root": str(tmp_path / "a"), "namespace": namespace, "store": store}
    with NotesMemory(first) as mem:
        mem.remember("User lives in Lisbon", session_id="kitchen", date="2024-11")
        mem.remember("User's cat is called Bartholomew", session_id="porch", date="2025-03")
        mem.remember("User drives a blue car", session_id="kitchen", date="2023-01")
        mem.retire("blue car")
        mem.replace_notes(mem.notes_body() + "- [2025-06] User plays the cello\n")  # one undo step
        mem.update_history([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}], "s")
        before = _notes_state(mem)
        assert len(before["retired"]) == 1 and len(before["active"]) == 3  # type: ignore[arg-type]
    assert _migrate(capsys, "ovos-memory-plugin-notes", first, postgres_url)["notes"] == 4
    on_pg = {"database": postgres_url, "namespace": namespace, "store": store, "root": str(tmp_path / "unused")}
    with NotesMemory(on_pg) as mem:
        assert _notes_state(mem) == before
        assert len(mem.history()) == 1  # the undo history came along
    assert not (tmp_path / "unused").exists()
    assert _migrate(capsys, "ovos-memory-plugin-notes", on_pg, str(tmp_path / "b"))["notes"] == 4
    with NotesMemory({"root": str(tmp_path / "b"), "namespace": namespace, "store": store}) as mem:
        assert _notes_state(mem) == before
        assert len(mem.history()) == 1 and mem.undo()
        assert "User plays the cello" not in [n.text for n in mem.list_notes()]
    memory_md = tmp_path / "b" / namespace / "MEMORY.md"
    assert ("Lisbon" in memory_md.read_text()) if store == "file" else not memory_md.exists()


def test_sticky_notes_go_to_postgres_and_back_losslessly(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ovos_memory_plugins.sticky import StickyMemory

    namespace = f"sticky-{next(_ns)}"
    first = {"root": str(tmp_path / "a"), "namespace": namespace}

    def state(mem: StickyMemory) -> object:
        rows = mem.store_db.notes(include_retired=True)
        notes = [(r.id, r.text, r.session_id, r.created, r.updated, r.lang, r.metadata, r.retired_on) for r in rows]
        return notes, mem.store_db.asks()

    with StickyMemory(first) as mem:
        mem.build_conversation_context("Remember that my bike is red.", "kitchen")
        mem.remember("the gate code is 4471", "porch", metadata={"source": "editor"})
        mem.retire("gate code")
        before = state(mem)
    assert _migrate(capsys, "ovos-memory-plugin-sticky", first, postgres_url)["sticky_notes"] == 2
    on_pg = {"database": postgres_url, "namespace": namespace}
    with StickyMemory(on_pg) as mem:
        assert state(mem) == before
    assert _migrate(capsys, "ovos-memory-plugin-sticky", on_pg, str(tmp_path / "b"))["sticky_notes"] == 2
    with StickyMemory({"root": str(tmp_path / "b"), "namespace": namespace}) as mem:
        assert state(mem) == before
        assert len(mem.list_notes()) == 1  # the retired one stays retired


# -- a composite of parts ------------------------------------------------------------------------


COMPOSITE = "ovos-memory-plugin-composite"
PARTS: list[dict[str, Any]] = [
    {"module": "ovos-memory-plugin-lexical"},
    {"module": "ovos-memory-plugin-vector", "config": {"embedder": "hash", "background_reembed": False}},
    {"module": "ovos-memory-plugin-sticky"},
]


def _composite_state(mem: Any) -> dict[str, object]:
    return {
        "documents": sorted((d["id"], d["session_id"], d["text"]) for d in mem.iter_documents()),
        "search": {
            q: [(h.source, round(h.score, 6)) for h in mem.search(q, session_id="s2")]
            for q in ("bike colour", "support group")
        },
        "history": [(m.role, m.content) for m in mem.messages("s2")],
        "notes": [(n.text, n.session_id) for n in mem.list_notes()],
    }


def test_a_composite_of_parts_migrates_to_postgres_and_back(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ovos-memory migrate` of a composite whose members are parts of one storage (its
    `composite.db`): to PostgreSQL and from there into a folder, nothing lost (it raised
    `AttributeError: database_file`)."""
    from ovos_memory_plugins.composite import CompositeMemory

    namespace = f"composite-{next(_ns)}"
    first = {"root": str(tmp_path / "a"), "namespace": namespace, "members": PARTS}
    with CompositeMemory(first) as mem:
        for text, session in TEXTS:
            mem.store(text, session)
        mem.update_history(
            [{"role": "user", "content": "what colour is my bike?"}, {"role": "assistant", "content": "Red."}], "s2"
        )
        mem.remember("my bike is red", session_id="s2")
        before = _composite_state(mem)
    assert before["notes"] and before["history"] and len(before["documents"]) == len(TEXTS) + 1  # type: ignore[arg-type]
    assert _migrate(capsys, COMPOSITE, first, postgres_url)["documents"] == len(TEXTS) + 1
    on_pg = {"database": postgres_url, "namespace": namespace, "members": PARTS}
    with CompositeMemory(on_pg) as mem:
        assert _composite_state(mem) == before
    assert _migrate(capsys, COMPOSITE, on_pg, str(tmp_path / "b"))["documents"] == len(TEXTS) + 1
    assert (tmp_path / "b" / namespace / "composite.db").is_file()
    with CompositeMemory({"root": str(tmp_path / "b"), "namespace": namespace, "members": PARTS}) as mem:
        assert _composite_state(mem) == before


def test_a_composite_of_parts_migrates_into_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SQLite to SQLite: the copy is the `composite.db` the same composite opens under the new root."""
    from ovos_memory_plugins.composite import CompositeMemory

    first = {"root": str(tmp_path / "a"), "members": PARTS}
    with CompositeMemory(first) as mem:
        for text, session in TEXTS:
            mem.store(text, session)
        mem.remember("my bike is red", session_id="s2")
        before = _composite_state(mem)
    assert _migrate(capsys, COMPOSITE, first, str(tmp_path / "b"))["documents"] == len(TEXTS)
    assert sorted(p.name for p in (tmp_path / "b").iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "composite.db"
    ]
    with CompositeMemory({"root": str(tmp_path / "b"), "members": PARTS}) as mem:
        assert _composite_state(mem) == before


def test_a_composite_part_keeps_its_keyword_settings_through_migrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A keyword part configured with ``context_weight: 0`` stores no context terms: the copy is
    indexed with the part's settings, not the defaults, so it ranks as the original does."""
    from ovos_memory_plugins.composite import CompositeMemory

    members = [{"module": "ovos-memory-plugin-lexical", "config": {"context_weight": 0}}]
    first = {"root": str(tmp_path / "a"), "members": members}
    turns = [
        ("what colour is my bike?", "Red, with a white bell."),
        ("and the helmet?", "The helmet is blue."),
        ("where do I park it?", "By the bakery on Rua Augusta."),
    ]
    with CompositeMemory(first) as mem:
        for user, assistant in turns:
            mem.update_history([{"role": "user", "content": user}, {"role": "assistant", "content": assistant}], "s")
        [part] = mem.members.values()  # its own scores (the composite's are ranks fused)
        before = {q: [(h.source, round(h.score, 6)) for h in part.search(q)] for q in ("bike", "helmet blue", "park")}
    assert all(before.values())
    assert _migrate(capsys, COMPOSITE, first, str(tmp_path / "b"))["documents"] == len(turns)
    with CompositeMemory({"root": str(tmp_path / "b"), "members": members}) as mem:
        [part] = mem.members.values()
        after = {q: [(h.source, round(h.score, 6)) for h in part.search(q)] for q in before}
    assert after == before


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_a_composite_with_a_notes_part_carries_its_notes_to_postgres_and_back(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    """A keyword + curated-notes composite of parts: the notes (in its `MEMORY.md`, or in its
    `composite.db`), the retired ones and the undo history reach PostgreSQL and come back into
    a folder (the `MEMORY.md` ones were left behind)."""
    from ovos_memory_plugins.composite import CompositeMemory

    members = [
        {"module": "ovos-memory-plugin-lexical"},
        {"module": "ovos-memory-plugin-notes", "config": {"store": store}},
    ]
    namespace = f"composite-notes-{store}-{next(_ns)}"
    first = {"root": str(tmp_path / "a"), "namespace": namespace, "members": members}
    with CompositeMemory(first) as mem:
        mem.remember("User lives in Lisbon", session_id="kitchen")
        mem.remember("User drives a blue car", session_id="kitchen")
        mem.retire("blue car")
        mem.replace_notes(mem.notes_body() + "- [2025-06] User plays the cello\n")  # one undo step
        before = _notes_state(mem)
        assert len(before["active"]) == 2 and len(before["retired"]) == 1  # type: ignore[arg-type]
    _migrate(capsys, COMPOSITE, first, postgres_url)
    on_pg = {"database": postgres_url, "namespace": namespace, "members": members, "root": str(tmp_path / "unused")}
    with CompositeMemory(on_pg) as mem:
        assert _notes_state(mem) == before
        assert len(mem.history()) == 1  # the undo history came along
    _migrate(capsys, COMPOSITE, on_pg, str(tmp_path / "b"))
    with CompositeMemory({**first, "root": str(tmp_path / "b")}) as mem:
        assert _notes_state(mem) == before
        assert len(mem.history()) == 1 and mem.undo()
    memory_md = tmp_path / "b" / namespace / "MEMORY.md"
    assert ("Lisbon" in memory_md.read_text()) if store == "file" else not memory_md.exists()


def test_a_composite_of_whole_members_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Members placed on their own (here by `root`) are whole memories: no one storage to copy."""
    from ovos_memory_plugins.cli import main as cli

    members = [{"module": "ovos-memory-plugin-lexical", "config": {"root": str(tmp_path / "own")}}]
    config = json.dumps({"root": str(tmp_path / "a"), "members": members})
    assert cli(["migrate", "--module", COMPOSITE, "--config", config, "--to", str(tmp_path / "b"), "--json"]) == 1
    assert "keeps no storage of its own" in json.loads(capsys.readouterr().err)["error"]
    assert not (tmp_path / "b").exists()
