"""The storage layer: one file per memory, forget that leaves nothing, namespaces apart, many
processes, files of earlier releases, bad ids, RAM fall-back that is never silent."""

from __future__ import annotations

import json
import logging
import multiprocessing
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.config import validate_config
from ovos_memory_plugins.embedders import HashingEmbedder
from ovos_memory_plugins.errors import BackendError, ConfigError
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.engine import ForgetReport
from ovos_memory_plugins.storage.sqlite.database import Database
from ovos_memory_plugins.storage.sqlite.engine import open_database, open_sqlite
from ovos_memory_plugins.testing import exchange
from ovos_memory_plugins.vector import VectorMemory

CANARY = "Zorblax7731Quux"


def _sqlite_vec_loads() -> bool:
    db, ext = open_database(":memory:", True)
    db.close()
    return ext is not None


def _vector(root: Path, **config: Any) -> VectorMemory:
    return VectorMemory({"root": str(root), **config}, embedder=HashingEmbedder(64))


def _leftovers(root: Path, needle: str = CANARY) -> list[str]:
    """Every file under ``root`` holding ``needle`` (any case, UTF-8 or UTF-16)."""
    forms = {needle.encode(), needle.lower().encode(), needle.upper().encode()}
    forms |= {f.decode().encode("utf-16-le") for f in list(forms)}
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if any(form in data for form in forms):
                found.append(str(path.relative_to(root)))
    return found


class _NoFTS5(LexicalMemory):
    use_fts5 = False


BACKENDS = [
    pytest.param(lambda root: LexicalMemory({"root": str(root)}), id="lexical"),
    pytest.param(lambda root: _NoFTS5({"root": str(root)}), id="lexical-no-fts5"),
    pytest.param(lambda root: _vector(root, hybrid=True), id="vector-numpy"),
    pytest.param(
        lambda root: _vector(root, hybrid=True, vector_search="sqlite-vec"),
        id="vector-sqlite-vec",
        marks=pytest.mark.skipif(not _sqlite_vec_loads(), reason="no sqlite3 module here can load extensions"),
    ),
]


def _fill(mem: BaseRetrievalMemory) -> str:
    """Store the canary three ways (a document, a recorded exchange, and next to other text);
    return the id of the document."""
    doc = mem.store(f"my bank PIN is {CANARY}", "ava")
    mem.update_history(exchange(f"remember the code {CANARY}", f"noted: {CANARY}"), "ava")
    mem.store("the weather is nice in Lisbon", "bob")
    mem.update_history(exchange("what is the capital of Portugal", "Lisbon"), "bob")
    assert mem.search(CANARY, top_k=5), "the canary must be findable before it is forgotten"
    return doc


@pytest.mark.parametrize("make", BACKENDS)
@pytest.mark.parametrize("verb", ["delete", "forget_session", "forget_all"])
def test_a_forgotten_canary_is_in_no_byte_under_root(tmp_path: Path, make: Any, verb: str) -> None:
    root = tmp_path / "m"
    with make(root) as mem:
        doc = _fill(mem)
        if verb == "delete":
            exchange_ids = [h.source for h in mem.search(CANARY, top_k=10) if h.source != doc]
            report = mem.delete([doc, *exchange_ids])
            assert report == 2
        elif verb == "forget_session":
            report = mem.forget_session("ava")
            assert report == 2
        else:
            report = mem.forget_all()
            assert report == 4
        assert isinstance(report, ForgetReport) and report.tiers["documents"] >= 2
        assert report.tiers["history_messages"] >= 2
        assert mem.search(CANARY, top_k=5) == []
        assert all(CANARY not in m.content for m in mem.get_history("ava"))
        if verb != "forget_all":
            assert mem.search("Lisbon", top_k=5), "the other session's memories stay"
        assert _leftovers(root) == []
    assert _leftovers(root) == []


def test_delete_takes_the_exchange_out_of_the_history_window(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path)}) as mem:
        mem.update_history(exchange("my locker code is 4411", "4411, noted"), "s")
        mem.update_history(exchange("the cat is grey", "grey cat, noted"), "s")
        [hit] = mem.search("locker code", top_k=1)
        report = mem.delete([hit.source])
        assert report.tiers["history_messages"] == 2  # type: ignore[attr-defined]
        window = [m.content for m in mem.get_history("s")]
        assert window == ["the cat is grey", "grey cat, noted"]
        assert "4411" not in json.dumps([m.content for m in mem.build_conversation_context("locker", "s")])


def test_the_history_of_an_earlier_release_keeps_its_tags_without_an_index_of_them(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path)}) as mem:
        mem.update_history(exchange("my locker code is 4411", "4411, noted"), "s")
        mem.update_history(exchange("the cat is grey", "grey cat, noted"), "s")
    conn = sqlite3.connect(tmp_path / "lexical.db")
    with conn:  # as 0002 left it: AUTOINCREMENT ids and an index of the exchange ids
        rows = conn.execute("SELECT id, session_id, role, content, created, exchange_id FROM history").fetchall()
        conn.execute("DROP TABLE history")
        conn.execute(
            "CREATE TABLE history (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,"
            " role TEXT NOT NULL, content TEXT NOT NULL, created REAL NOT NULL, exchange_id TEXT)"
        )
        conn.execute("CREATE INDEX history_session ON history (session_id, id)")
        conn.execute("CREATE INDEX history_exchange ON history (exchange_id)")
        conn.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?)", rows)
        conn.execute("DELETE FROM _migrations WHERE store = 'history' AND name = '0003_history_lean'")
    conn.close()
    with LexicalMemory({"root": str(tmp_path)}) as mem:
        assert [m.content for m in mem.get_history("s")] == [r[3] for r in rows]
        mem.update_history(exchange("the bike is blue", "blue bike, noted"), "s")
        [hit] = mem.search("locker code", top_k=1)
        assert mem.delete([hit.source]).tiers["history_messages"] == 2  # type: ignore[attr-defined]
        assert [m.content for m in mem.get_history("s")] == [
            "the cat is grey",
            "grey cat, noted",
            "the bike is blue",
            "blue bike, noted",
        ]
    conn = sqlite3.connect(tmp_path / "lexical.db")
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'history'").fetchone()[0]
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'history'")}
    tags = conn.execute("SELECT count(*) FROM history WHERE exchange_id IS NOT NULL").fetchone()[0]
    conn.close()
    assert "AUTOINCREMENT" not in sql and indexes == {"history", "history_session"} and tags == 4


def test_single_message_hosts_tag_the_question_too(tmp_path: Path) -> None:
    from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

    with LexicalMemory({"root": str(tmp_path)}) as mem:
        mem.update_history([AgentMessage(role=MessageRole.USER, content="my PIN is 9090")], "s")
        mem.update_history([AgentMessage(role=MessageRole.ASSISTANT, content="9090, noted")], "s")
        [hit] = mem.search("PIN", top_k=1)
        mem.delete([hit.source])
        assert mem.messages("s") == []


# -- namespaces --------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [LexicalMemory, VectorMemory])
def test_two_namespaces_under_one_root_stay_apart(tmp_path: Path, make: Any) -> None:
    kwargs = {"embedder": HashingEmbedder(64)} if make is VectorMemory else {}
    with make({"root": str(tmp_path), "namespace": "ava"}, **kwargs) as ava:
        ava.update_history(exchange("my bank PIN is 4711", "noted"), "default")
        with make({"root": str(tmp_path), "namespace": "bob"}, **kwargs) as bob:
            assert bob.search("bank PIN", top_k=5) == []
            assert bob.build_conversation_context("what is my bank PIN", "default")[-1].content.endswith("PIN")
            assert len(bob.build_conversation_context("what is my bank PIN", "default")) == 1
            assert bob.root == tmp_path / "bob" and ava.root == tmp_path / "ava"
        assert ava.search("bank PIN", top_k=5)


def test_namespace_with_db_path_gets_its_own_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with LexicalMemory({"db_path": str(path), "namespace": "ava"}) as ava:
        ava.store("ava's secret is 1234", "s")
        assert ava.stats()["db_path"] == str(tmp_path / "ava" / "shared.db")
    with LexicalMemory({"db_path": str(path), "namespace": "bob"}) as bob:
        assert bob.search("secret", top_k=3) == []


def test_a_shared_root_of_earlier_releases_is_copied_once_per_namespace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # an earlier release kept every namespace under this root in <root>/lexical.db
    with LexicalMemory({"root": str(tmp_path)}) as old:
        old.update_history(exchange("the spare key is under the frog", "frog, noted"), "default")
    caplog.set_level(logging.WARNING)
    with LexicalMemory({"root": str(tmp_path), "namespace": "ava"}) as ava:
        assert ava.search("spare key", top_k=3), "nothing is lost"
        assert [m.content for m in ava.get_history("default")] == ["the spare key is under the frog", "frog, noted"]
        ava.store("ava only: the boat is blue", "s")
    assert len([r for r in caplog.records if "shared by every namespace" in r.getMessage()]) == 1
    caplog.clear()
    with LexicalMemory({"root": str(tmp_path), "namespace": "ava"}) as ava:
        assert ava.search("boat", top_k=3)  # its own copy, not copied again
    with LexicalMemory({"root": str(tmp_path)}) as shared:
        assert shared.search("boat", top_k=3) == []  # the shared file is left as it was
        assert shared.search("spare key", top_k=3)
    assert not [r for r in caplog.records if "shared by every namespace" in r.getMessage()]


# -- many processes ----------------------------------------------------------------------------


def _warm_up(_: int) -> None:
    time.sleep(0.5)  # every worker has started (and imported the package) before a round begins


def _open_and_write(args: tuple[str, str, int, int]) -> tuple[int, bool, int]:
    kind, root, worker, rounds = args
    found = 0
    ram = False
    for r in range(rounds):
        config = {"root": root}
        mem: BaseRetrievalMemory
        if kind == "vector":
            mem = VectorMemory({**config, "hybrid": True, "background_reembed": False}, embedder=HashingEmbedder(64))
        else:
            mem = LexicalMemory(config)
        try:
            ram = ram or bool(mem.stats()["storage"]["in_ram"])
            word = f"walrus{worker}x{r}"
            mem.update_history(exchange(f"note about {word}", "ok"), f"w{worker}")
            found += bool(mem.search(word, top_k=3))
        finally:
            mem.close()
    return found, ram, worker


@pytest.mark.parametrize("kind", ["lexical", "vector"])
def test_four_processes_opening_one_new_folder(tmp_path: Path, kind: str) -> None:
    rounds = 5
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.map(_warm_up, range(4))
        rounds_results = []
        for attempt in range(rounds):
            root = tmp_path / f"new-{attempt}"
            rounds_results.append((root, pool.map(_open_and_write, [(kind, str(root), w, 1) for w in range(4)])))
    for root, results in rounds_results:
        assert all(found == 1 for found, _, _ in results), results
        assert not any(ram for _, ram, _ in results), "a process fell back to RAM"
        mem: BaseRetrievalMemory
        if kind == "vector":
            mem = VectorMemory({"root": str(root), "hybrid": True}, embedder=HashingEmbedder(64))
        else:
            mem = LexicalMemory({"root": str(root)})
        with mem:
            for w in range(4):
                assert mem.search(f"walrus{w}x0", top_k=3), f"process {w}'s write is lost"


def test_migrations_run_once_under_one_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    a, b = Database(path), Database(path)
    calls: list[str] = []
    from ovos_memory_plugins.storage.sqlite.database import Migration

    def step(conn: sqlite3.Connection) -> None:
        calls.append("x")
        conn.execute("CREATE TABLE t (x)")

    assert a.migrate("s", [Migration("0001", step)]) == ["0001"]
    assert b.migrate("s", [Migration("0001", step)]) == []
    assert calls == ["x"]
    assert a.scalar("PRAGMA secure_delete") == 1 and b.scalar("PRAGMA secure_delete") == 1
    a.close()
    b.close()


def test_the_numpy_cache_sees_rows_another_connection_added(tmp_path: Path) -> None:
    with _vector(tmp_path) as first:
        first.store("the lighthouse is red", "s")
        assert first.search("lighthouse", top_k=1)  # the RAM matrix is loaded
        with _vector(tmp_path) as other:  # another connection: the CLI, the editor, a second process
            other.store("the windmill is blue", "s")
        assert [h.content for h in first.search("windmill blue", top_k=1)] == ["the windmill is blue"]


# -- RAM fall-back, bad input ------------------------------------------------------------------


def test_a_ram_fallback_is_reported_and_logged_every_turn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "lexical.db").write_bytes(b"not a database" * 200)
    with LexicalMemory({"root": str(tmp_path)}) as mem:
        storage = mem.stats()["storage"]
        assert storage["in_ram"] is True and "lexical.db" in storage["problem"]
        caplog.set_level(logging.ERROR)
        caplog.clear()
        for _ in range(3):
            mem.update_history(exchange("hello", "hi"), "s")
        assert len([r for r in caplog.records if "RAM only" in r.getMessage()]) == 3


def test_an_unusable_database_url_is_reported_not_raised(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path), "database": "postgresql://nobody@127.0.0.1:1/none"}) as mem:
        mem.store("kept in RAM for now", "s")
        storage = mem.stats()["storage"]
        assert storage["in_ram"] is True and "127.0.0.1:1/none" in storage["problem"]
        assert "nobody" not in storage["problem"]  # no user name or password in logs and figures


def test_a_nul_byte_in_a_path_is_a_config_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for config in ({"root": "/tmp/a\x00b"}, {"db_path": "/tmp/a\x00b.db"}):
        with LexicalMemory(config) as mem:
            assert any("NUL" in p for p in mem.config_problems)
            mem.store("still works", "s")
            assert not mem.stats()["storage"]["in_ram"]
        with pytest.raises(ConfigError, match="NUL"):
            validate_config(config, LexicalMemory)


def test_a_lone_surrogate_session_keeps_its_turns(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path)}) as mem:
        session = "kitchen-\ud800"
        mem.update_history(exchange("the oven timer is 20 minutes", "20 minutes"), session)
        assert len(mem.get_history(session)) == 2
        assert mem.search("oven timer", session_id=session, top_k=3)
        assert mem.forget_session(session) == 1


def test_absurdly_long_ids_are_refused(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path)}) as mem:
        huge = "x" * 10_000_000
        with pytest.raises(ValueError, match="at most"):
            mem.store("text", huge)
        with pytest.raises(ValueError, match="at most"):
            mem.put_document(huge, "text")
        started = time.monotonic()
        with pytest.raises(ValueError, match="at most"):
            mem.delete([huge])
        assert time.monotonic() - started < 1
        mem.update_history(exchange("a", "b"), huge)  # never raises; logged
        assert mem.stats()["documents"] == 0


# -- batches -----------------------------------------------------------------------------------


def test_store_many_and_put_documents_write_in_one_transaction(tmp_path: Path) -> None:
    calls: list[int] = []

    class Counting(HashingEmbedder):
        def embed(self, texts: list[str]) -> list[list[float]]:
            calls.append(len(texts))
            return super().embed(texts)

    with VectorMemory({"root": str(tmp_path), "hybrid": True}, embedder=Counting(64)) as mem:
        ids = mem.store_many([f"fact number {i} about owls" for i in range(50)], "s")
        assert len(set(ids)) == 50 and calls == [50]
        n = mem.put_documents([(f"imp-{i}", f"imported {i} about herons", "t", {"i": i}) for i in range(10)])
        assert n == 10 and mem.stats()["documents"] == 60
        assert mem.search("imported 3 herons", top_k=1)[0].source == "imp-3"
        with pytest.raises(ValueError):
            mem.put_documents([("ok", "fine", "t", None), ("", "bad id", "t", None)])
        assert mem.stats()["documents"] == 60  # nothing of the bad batch was written


# -- a minimal third-party backend -------------------------------------------------------------


class MinimalBackend(BaseRetrievalMemory):
    """Only the two required hooks and delete: the base's catalogue must enumerate for forget."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.docs: dict[str, str] = {}

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        self.docs[doc_id] = text

    def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
        words = set(query.lower().split())
        hits = [MemoryHit(t, d, float(len(words & set(t.lower().split())))) for d, t in self.docs.items()]
        return sorted([h for h in hits if h.score], key=lambda h: -h.score)[:top_k]

    def _delete_documents(self, doc_ids: Sequence[str]) -> int:
        return sum(self.docs.pop(d, None) is not None for d in doc_ids)


def test_a_minimal_backend_really_forgets(tmp_path: Path) -> None:
    with MinimalBackend({"root": str(tmp_path)}) as mem:
        mem.update_history(exchange(f"the code is {CANARY}", "noted"), "ava")
        mem.store(f"also {CANARY}", "ava")
        mem.store("lisbon is sunny", "bob")
        assert mem.forget_session("ava") == 2
        assert mem.search(CANARY.lower(), top_k=5) == [] and set(mem.docs.values()) == {"lisbon is sunny"}
        assert _leftovers(tmp_path) == []
        assert mem.forget_all() == 1 and mem.docs == {}


def test_a_backend_that_cannot_delete_says_so(tmp_path: Path) -> None:
    class NoDelete(BaseRetrievalMemory):
        def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
            pass

        def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
            return []

    with NoDelete({"root": str(tmp_path)}) as mem:
        mem.store("something", "s")
        with pytest.raises(BackendError, match="cannot delete"):
            mem.forget_session("s")
        with pytest.raises(BackendError, match="cannot delete"):
            mem.forget_all()


# -- files of earlier releases -----------------------------------------------------------------

_OLD_HISTORY = [
    "CREATE TABLE _migrations (store TEXT NOT NULL, name TEXT NOT NULL, applied_at REAL NOT NULL,"
    " PRIMARY KEY (store, name))",
    "CREATE TABLE history (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,"
    " content TEXT NOT NULL, created REAL NOT NULL)",
    "CREATE INDEX history_session ON history (session_id, id)",
    "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, last_exchange_id TEXT NOT NULL)",
    "CREATE TABLE documents (doc_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, metadata TEXT NOT NULL,"
    " created REAL NOT NULL)",
    "CREATE INDEX documents_session ON documents (session_id)",
    "INSERT INTO _migrations VALUES ('history', '0001_history_sessions_documents', 0)",
    "INSERT INTO history (session_id, role, content, created) VALUES ('s', 'user', 'where is the passport', 1),"
    " ('s', 'assistant', 'in the blue drawer', 2)",
    "INSERT INTO sessions VALUES ('s', 'x-old')",
]


def _old_file(path: Path, statements: Sequence[str], rows: Sequence[tuple[str, Sequence[Any]]] = ()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    for sql in statements:
        conn.execute(sql)
    for sql, params in rows:
        conn.execute(sql, params)
    conn.commit()
    conn.close()


def _old_lexical(path: Path, docs: Sequence[tuple[str, str, str]], history: bool = True) -> None:
    from ovos_memory_plugins.storage.keyword import document_terms

    statements = [
        *(_OLD_HISTORY if history else _OLD_HISTORY[:7]),
        "CREATE TABLE lexical_docs (rowid INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, session_id TEXT NOT NULL,"
        " content TEXT NOT NULL, metadata TEXT NOT NULL, created REAL NOT NULL, body_terms TEXT NOT NULL,"
        " head_terms TEXT NOT NULL, ctx_terms TEXT NOT NULL, ctx_rowid INTEGER)",
        "CREATE TABLE lexical_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO lexical_meta VALUES ('tokenizer', '1')",
        "INSERT INTO _migrations VALUES ('lexical', '0001_documents', 0)",
        "CREATE VIRTUAL TABLE lexical_fts USING fts5(body_terms, head_terms, ctx_terms, content='lexical_docs',"
        " content_rowid='rowid', tokenize='ascii')",
    ]
    rows = []
    for doc_id, session, text in docs:
        body, head, _ = document_terms(text)
        rows.append(
            (
                "INSERT INTO lexical_docs (doc_id, session_id, content, metadata, created, body_terms, head_terms,"
                " ctx_terms) VALUES (?, ?, ?, '{\"v\": 1}', 1, ?, ?, '')",
                (doc_id, session, text, body, head),
            )
        )
    _old_file(path, statements, [*rows, ("INSERT INTO lexical_fts (lexical_fts) VALUES ('rebuild')", ())])


def test_an_earlier_lexical_file_opens_with_every_memory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _old_lexical(
        tmp_path / "lexical.db",
        [
            ("d-1", "s", "the passport is in the blue drawer"),
            ("x-old", "s", "Q: where is the passport\nA: in the blue drawer"),
        ],
    )
    caplog.set_level(logging.INFO)
    with LexicalMemory({"root": str(tmp_path)}) as mem:
        hits = mem.search("passport drawer", top_k=5)
        assert {h.source for h in hits} == {"d-1", "x-old"} and hits[0].metadata["v"] == 1
        assert [m.content for m in mem.get_history("s")] == ["where is the passport", "in the blue drawer"]
        assert mem.stats()["documents"] == 2
        assert [d["id"] for d in mem.iter_documents()] == ["d-1", "x-old"]
        mem.update_history(exchange("and the visa", "with the passport"), "s")
        assert len(mem.search("passport", top_k=5)) == 3
    assert len([r for r in caplog.records if "moved 2 document(s)" in r.getMessage()]) == 1
    conn = sqlite3.connect(tmp_path / "lexical.db")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert "lexical_docs" not in tables and "lexical_fts" not in tables
    with LexicalMemory({"root": str(tmp_path)}) as mem:  # opening again changes nothing
        assert mem.stats()["documents"] == 3


def test_an_earlier_hybrid_vector_folder_moves_into_one_file(tmp_path: Path) -> None:
    # vector.db: documents and vectors in the vector backend's tables; keyword/lexical.db: the
    # hybrid's second memory; history.db: history kept next to them
    import numpy as np

    emb = HashingEmbedder(64)
    texts = {"d-a": "my sister Ingrid lives in Tromsø", "d-b": "the wifi password is on the fridge"}
    vectors = {d: np.asarray(emb.embed([t])[0], dtype=np.float32) for d, t in texts.items()}
    _old_file(
        tmp_path / "vector.db",
        [
            *_OLD_HISTORY[:7],
            "CREATE TABLE vec_documents (doc_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, text TEXT NOT NULL,"
            " metadata TEXT NOT NULL, created REAL NOT NULL)",
            "CREATE TABLE vec_spaces (embedder_id TEXT PRIMARY KEY, dimension INTEGER NOT NULL, created REAL)",
            "CREATE TABLE vec_vectors (embedder_id TEXT NOT NULL, doc_id TEXT NOT NULL, vector BLOB NOT NULL,"
            " UNIQUE (embedder_id, doc_id))",
            f"INSERT INTO vec_spaces VALUES ('{emb.id}', 64, 0)",
        ],
        [
            *[
                ("INSERT INTO vec_documents VALUES (?, 's', ?, '{}', ?)", (d, t, i))
                for i, (d, t) in enumerate(texts.items())
            ],
            *[("INSERT INTO vec_vectors VALUES (?, ?, ?)", (emb.id, d, v.tobytes())) for d, v in vectors.items()],
        ],
    )
    _old_lexical(
        tmp_path / "keyword" / "lexical.db",
        [("d-a", "s", texts["d-a"]), ("d-only-kw", "s", "the boat is called Sea Biscuit")],
        history=False,  # the old keyword arm only ever received documents
    )
    _old_file(tmp_path / "history.db", _OLD_HISTORY)
    with VectorMemory({"root": str(tmp_path), "hybrid": True, "background_reembed": False}, embedder=emb) as mem:
        assert mem.stats()["documents"] == 3  # nothing lost, the keyword-only document included
        assert mem.stats()["vector_spaces"] == {emb.id: 2} and mem.vectors.pending() == 1
        assert mem.search("Ingrid Tromsø", top_k=1)[0].source == "d-a"
        assert mem.search("Sea Biscuit boat", top_k=1)[0].source == "d-only-kw"
        assert [m.content for m in mem.get_history("s")] == ["where is the passport", "in the blue drawer"]
    assert not (tmp_path / "keyword").exists() and not (tmp_path / "history.db").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("vector.db")) == []


def test_one_file_holds_documents_indexes_and_history(tmp_path: Path) -> None:
    with _vector(tmp_path, hybrid=True) as mem:
        mem.update_history(exchange("hello there", "hi"), "s")
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["vector.db"] or all(f.startswith("vector.db") for f in files)
    storage = open_sqlite(tmp_path / "vector.db")
    try:
        tables = {r[0] for r in storage.db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"documents", "keyword_terms", "vectors", "history"} <= tables
    finally:
        storage.close()


def test_turning_hybrid_off_drops_the_keyword_rows(tmp_path: Path) -> None:
    with _vector(tmp_path, hybrid=True) as mem:
        mem.store(f"the secret is {CANARY}", "s")
    with _vector(tmp_path) as mem:
        assert mem.stats().get("keyword_rows") is None
        mem.forget_all()
    assert _leftovers(tmp_path) == []


def test_a_history_db_of_another_backend_is_left_alone(tmp_path: Path) -> None:
    _old_file(tmp_path / "history.db", _OLD_HISTORY)
    (tmp_path / "sticky.db").write_bytes(b"")  # a sticky memory shares this folder: history.db is its
    with _vector(tmp_path) as mem:
        assert mem.get_history("s") == []
    assert (tmp_path / "history.db").exists()


def test_sqlite_documents_are_created_at_their_time_and_read_by_window(tmp_path: Path) -> None:
    from ovos_memory_plugins.storage import open_storage
    from ovos_memory_plugins.storage.engine import Document

    storage = open_storage(tmp_path / "m.db")
    try:
        storage.documents.put(
            [
                Document("old", "an old exchange", "s", {"time": 1000.0}),
                Document("mid", "a middle exchange", "s", {"time": 2000.0}),
                Document("mid2", "another middle one", "other", {"time": 2500.0}),
                Document("now", "undated: now", "s", {}),
            ]
        )
        got = storage.documents.get(["old", "mid"])
        assert got["old"].created == 1000.0 and got["mid"].created == 2000.0
        assert [d.doc_id for d in storage.documents.made_between(1500.0, 3000.0, 10)] == ["mid2", "mid"]
        assert [d.doc_id for d in storage.documents.made_between(1500.0, 3000.0, 10, "s")] == ["mid"]
    finally:
        storage.close()
