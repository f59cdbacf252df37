"""A composite of parts: keyword, vector and sticky members over ONE storage.

A composite whose members are all of this package (keyword, vector, sticky notes) opens one
storage (``<root>/composite.db``, or its namespace of a PostgreSQL database) and builds them as
parts of one memory: one database, one history, each exchange archived once under one id and
indexed by every index; a forget is one transaction with one report, and a failure reaches the
caller with nothing forgotten. The per-member folders of earlier releases are adopted once. A
third-party member (the seed example of docs/writing-a-backend.md, verbatim) stays an opaque
member, fused at the hit level.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_seed_example import SubstringMemory  # docs/writing-a-backend.md's example, verbatim

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.composite import PARTS_FILE, CompositeMemory
from ovos_memory_plugins.errors import IncompleteForgetError
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.sticky import StickyMemory
from ovos_memory_plugins.testing import exchange
from ovos_memory_plugins.vector import VectorMemory

VECTOR = {"embedder": "hash", "hybrid": False, "background_reembed": False}
MEMBERS: list[dict[str, Any]] = [
    {"module": "ovos-memory-plugin-lexical"},
    {"module": "ovos-memory-plugin-vector", "config": VECTOR},
    {"module": "ovos-memory-plugin-sticky"},
]
SESSION = "kitchen"
_runs = itertools.count()


def composite(config: dict[str, Any], members: list[dict[str, Any]] | None = None) -> CompositeMemory:
    return CompositeMemory({**config, "members": members if members is not None else MEMBERS})


def database_files(root: Path) -> list[str]:
    """Every SQLite database file under ``root`` (WAL and shared-memory files left out)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.db") if p.is_file())


def vector_count(mem: CompositeMemory) -> int:
    assert mem.storage is not None
    return sum(mem.storage.vector_store().spaces().values())


# -- one database, one history --------------------------------------------------------------------


def test_keyword_vector_and_sticky_keep_one_database_and_one_history(composite_where: dict[str, Any]) -> None:
    root = Path(composite_where["root"])
    with composite(composite_where) as mem:
        storage = mem.storage
        assert storage is not None, "every member is a part: one storage"
        assert all(member.storage is storage for member in mem.members.values())
        mem.build_conversation_context("remember that my bike is red", SESSION)  # a sticky note
        for i in range(5):
            mem.update_history(exchange(f"my Zorbak{i} locker holds the spare keys", f"noted, Zorbak{i}"), SESSION)
        assert storage.documents.count() == 5, "each exchange archived once"
        assert storage.history.message_count() == 10, "one history: each message once"
        assert vector_count(mem) == 5, "the vector part indexes the same documents"
        listed = [d["id"] for d in mem.iter_documents()]
        assert len(listed) == len(set(listed)) == 5
        for name in ("lexical", "vector"):
            hits = mem.members[name].search("Zorbak3 locker", session_id=SESSION)
            assert hits and "Zorbak3" in hits[0].content, name
        assert [n.text for n in mem.list_notes()] == ["my bike is red"]
        assert [m.content for m in mem.get_history(SESSION)][-1] == "noted, Zorbak4"
        assert mem.stats()["storage"]["parts"] == ["lexical", "vector", "sticky"]
    if "database" not in composite_where:
        assert database_files(root) == [PARTS_FILE], "one database file, no member folders"
    with composite(composite_where) as again:  # restart: everything is there, once
        assert again.storage is not None and again.storage.documents.count() == 5
        assert again.search("Zorbak2")[0].content.startswith("Q: my Zorbak2 locker")
        assert [n.text for n in again.list_notes()] == ["my bike is red"]


# -- four writer processes ----------------------------------------------------------------------------

PROCESSES = 4
TURNS = 8
_barrier: Any = None


def _init(barrier: Any) -> None:
    global _barrier
    _barrier = barrier


def _writer(args: tuple[dict[str, Any], int]) -> str:
    config, worker = args
    try:
        mem = composite(config)
        try:
            _barrier.wait(timeout=60)
            for turn in range(TURNS):
                ask = f"my Quillwortw{worker}q{turn} locker holds the spare keys"
                mem.build_conversation_context(ask, SESSION)
                mem.update_history(exchange(ask, f"noted: the w{worker}q{turn} locker"), SESSION)
        finally:
            mem.close()
    except Exception:
        return traceback.format_exc()
    return ""


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(PROCESSES, initializer=_init, initargs=(ctx.Barrier(PROCESSES),)) as p:
        yield p


def test_every_exchange_is_kept_once_under_one_id_with_four_writers(composite_where: dict[str, Any], pool: Any) -> None:
    errors = pool.map(_writer, [(composite_where, w) for w in range(PROCESSES)], chunksize=1)
    assert errors == [""] * PROCESSES, "\n".join(errors)
    with composite(composite_where) as mem:
        assert mem.storage is not None
        docs = list(mem.iter_documents())
        assert len(docs) == len({d["id"] for d in docs}) == PROCESSES * TURNS, "every exchange once"
        for d in docs:
            user, assistant = d["text"].removeprefix("Q: ").split("\nA: ")
            assert d["id"] == BaseRetrievalMemory.exchange_id(SESSION, user, assistant), "one id, from content"
        assert mem.storage.history.message_count() == 2 * PROCESSES * TURNS, "one history, each message once"
        assert vector_count(mem) == PROCESSES * TURNS
        gone = [d["id"] for d in docs if "Quillwortw0q" in d["text"]]
        assert mem.delete(gone) == TURNS
        assert mem.storage.documents.count() == (PROCESSES - 1) * TURNS
        assert vector_count(mem) == (PROCESSES - 1) * TURNS
        assert not any("w0q" in m.content for m in mem.messages(SESSION))


# -- forgetting: one transaction, one report, failures reach the caller ----------------------------


def test_forget_is_one_transaction_and_a_failing_part_reaches_the_caller(
    composite_where: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with composite(composite_where) as mem:
        storage = mem.storage
        assert storage is not None
        mem.update_history(exchange("my Quibbix locker holds the keys", "noted"), SESSION)
        mem.build_conversation_context("remember that the Quibbix code is 4411", SESSION)
        doc_id = next(d["id"] for d in mem.iter_documents() if "Quibbix" in d["text"])

        def refuse(*_args: Any, **_kwargs: Any) -> int:
            raise RuntimeError("disk on fire")

        sticky = mem.members["sticky"]
        for verb in ("delete", "forget_session", "forget_all"):
            monkeypatch.setattr(sticky, verb, refuse)
        for call in (lambda: mem.delete([doc_id]), lambda: mem.forget_session(SESSION), mem.forget_all):
            with pytest.raises(IncompleteForgetError) as failed:
                call()
            assert list(failed.value.failures) == ["member 'sticky'"] and failed.value.done == 0
            assert "disk on fire" in str(failed.value) and "nothing was forgotten" in str(failed.value)
            # rolled back: the parts that ran before the failing one forgot nothing either
            assert storage.documents.count() == 1 and vector_count(mem) == 1
            assert storage.history.message_count() >= 2
            assert mem.members["lexical"].search("Quibbix locker"), "the keyword index still has it"
        monkeypatch.undo()

        report = mem.delete([doc_id])
        assert report == 1
        assert report.tiers["documents"] == 1 and report.tiers["vectors"] == 1
        assert report.tiers["keyword_rows"] >= 1 and report.tiers["history_messages"] == 2
        assert storage.documents.count() == 0 and vector_count(mem) == 0
        assert [n.text for n in mem.list_notes()] == ["the Quibbix code is 4411"], "the note is another tier"

        mem.update_history(exchange("my Quibbix bike is red", "noted"), SESSION)
        everything = mem.forget_all()
        assert everything == 2 and everything.tiers["documents"] == 1 and everything.tiers["backend"] == 1
        assert storage.documents.count() == 0 and mem.list_notes() == []
        assert storage.history.message_count() == 0


# -- adopting the per-member memories of earlier releases ------------------------------------------


def test_earlier_per_member_folders_are_adopted_once(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    # what an earlier release kept: each member a whole memory in <root>/<member>/<namespace>/
    old = {"namespace": "ada", "max_history": 1000}
    lexical = LexicalMemory({**old, "root": str(root / "lexical")})
    vector = VectorMemory({**old, "root": str(root / "vector"), **VECTOR})
    sticky = StickyMemory({**old, "root": str(root / "sticky")})
    for i in range(3):
        for member in (lexical, vector, sticky):
            member.update_history(exchange(f"my Wumbat{i} lives in the shed", f"noted {i}"), SESSION)
    lexical.store("the Wumbat spare key is under the frog", SESSION)  # only the keyword member had it
    sticky.remember("my bike is red", session_id=SESSION)
    for member in (lexical, vector, sticky):
        member.close()
    before = database_files(root)
    assert len(before) == 3

    config = {"root": str(root), "namespace": "ada", "max_history": 1000, "members": MEMBERS}
    with CompositeMemory(config) as mem:
        storage = mem.storage
        assert storage is not None
        assert database_files(root) == [f"ada/{PARTS_FILE}"], "the old files are gone once adopted"
        texts = sorted(d["text"] for d in mem.iter_documents())
        assert len(texts) == 4, "the copies of each exchange merged (same content, same id)"
        assert storage.history.message_count() == 6, "one copy of the conversation"
        assert vector_count(mem) == 3, "the vectors were copied, not re-embedded"
        assert mem.members["vector"].vectors.pending() == 1, "the keyword-only document waits for its vector"
        assert [n.text for n in mem.list_notes()] == ["my bike is red"]
        assert "Wumbat1" in mem.members["lexical"].search("Wumbat1 shed")[0].content
        assert "Wumbat2" in mem.members["vector"].search("my Wumbat2 lives in the shed")[0].content
        assert mem.search("frog key")[0].content == "the Wumbat spare key is under the frog"
    with CompositeMemory(config) as again:  # adopted once: a restart finds nothing more to adopt
        assert again.storage is not None and again.storage.documents.count() == 4
        assert again.storage.history.message_count() == 6


def test_earlier_member_namespaces_on_postgresql_are_adopted(postgres_url: str) -> None:
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    ns = f"adopt{os.getpid()}x{next(_runs)}"
    old = {"database": postgres_url, "max_history": 1000}
    lexical = LexicalMemory({**old, "namespace": f"{ns}.lexical"})
    vector = VectorMemory({**old, "namespace": f"{ns}.vector", **VECTOR})
    for member in (lexical, vector):
        member.update_history(exchange("my Wumbat lives in the shed", "noted"), SESSION)
        member.close()
    config = {"database": postgres_url, "namespace": ns, "max_history": 1000, "members": MEMBERS}
    with CompositeMemory(config) as mem:
        assert mem.storage is not None and mem.storage.documents.count() == 1
        assert mem.storage.history.message_count() == 2 and vector_count(mem) == 1
        assert "Wumbat" in mem.members["lexical"].search("Wumbat shed")[0].content
    with LexicalMemory({**old, "namespace": f"{ns}.lexical"}) as emptied:
        assert emptied.storage.documents.count() == 0 and emptied.sessions() == []


# -- a third-party member stays opaque --------------------------------------------------------------


SEED = "composite-test-seed-example"


@pytest.fixture
def seed_installed(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the seed example (``tests/plugins/test_seed_example.py``, verbatim from
    docs/writing-a-backend.md) as an installed memory plugin."""
    site = tmp_path_factory.mktemp("site")
    info = site / "composite_seed_example-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: composite-seed-example\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(f"[opm.agents.memory]\n{SEED} = test_seed_example:SubstringMemory\n")
    monkeypatch.syspath_prepend(str(site))


def test_a_third_party_member_stays_an_opaque_member_fused_at_the_hit_level(
    tmp_path: Path, seed_installed: None
) -> None:
    members = [{"module": "ovos-memory-plugin-lexical"}, {"module": SEED, "name": "seed"}]
    with CompositeMemory({"root": str(tmp_path / "ada"), "members": members}) as mem:
        assert mem.storage is None, "a third-party member: the members stay whole memories"
        assert isinstance(mem.members["seed"], SubstringMemory)
        mem.update_history(exchange("my favourite colour is teal", "teal, noted"), SESSION)
        assert mem.members["seed"].search("teal"), "the seed member recorded the exchange itself"
        mem.members["seed"].store("the teal kite is in the attic", SESSION)
        mem.members["lexical"].store("the teal boat is in the harbour", SESSION)
        hits = mem.search("teal")
        by_member = {h.content: h.metadata["member"] for h in hits}
        assert by_member["the teal kite is in the attic"] == "seed", "its hits are fused with the others'"
        assert by_member["the teal boat is in the harbour"] == "lexical"
        assert len([h for h in hits if "favourite colour" in h.content]) == 1, "one exchange, one hit"
        prompt = mem.build_conversation_context("teal", "other")
        assert "favourite colour is teal" in "\n".join(m.content for m in prompt[:-1])


# -- the storage= seam ------------------------------------------------------------------------------


def test_parts_built_over_one_storage_share_it_and_leave_it_open(tmp_path: Path) -> None:
    from ovos_memory_plugins.storage.registry import open_storage

    storage = open_storage(tmp_path / "one.db")
    try:
        words = LexicalMemory({"root": str(tmp_path / "w")}, storage=storage)
        meaning = VectorMemory({"root": str(tmp_path / "m"), **VECTOR}, storage=storage)
        assert not words.owns_storage and [index.name for index in storage.indexes] == ["keyword", "vector"]
        words.update_history(exchange("my Plimbo kite is green", "noted"), SESSION)  # one write, both indexes
        assert meaning.search("my Plimbo kite is green")[0].content.startswith("Q: my Plimbo kite")
        assert sum(storage.vector_store().spaces().values()) == 1
        words.close()
        meaning.close()
        assert storage.documents.count() == 1, "the parts leave the storage open: its owner closes it"
    finally:
        storage.close()
    assert database_files(tmp_path) == ["one.db"]


class Opaque(BaseRetrievalMemory):
    """A backend that does not declare ``shares_storage``."""

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        pass

    def _query_backend(self, query: str, top_k: int) -> list[Any]:
        return []


def test_a_class_that_does_not_declare_shares_storage_refuses_one(tmp_path: Path) -> None:
    from ovos_memory_plugins.storage.registry import open_storage

    storage = open_storage(tmp_path / "one.db")
    try:
        with pytest.raises(TypeError, match="shares_storage"):
            Opaque({}, storage=storage)
    finally:
        storage.close()
