"""A contract suite for storage engines: what every engine behind the seam must do.

Subclass :class:`EngineContract` as ``Test<Engine>Contract`` in a pytest module and implement
:meth:`EngineContract.open` (a fresh, empty storage for one memory; ``where`` is a fresh
folder the engine may use). ``tests/storage/test_storage_contract.py`` runs it on every engine of
the package (SQLite and PostgreSQL, the ``engine`` fixture); a third-party engine runs the same tests::

    class TestPostgresContract(EngineContract):
        def open(self, where):
            return open_storage(self.url, namespace=where.name)

Each test opens its own storage and closes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ovos_memory_plugins.storage.records import Document, KeywordSettings, Note, note_id
from ovos_memory_plugins.storage.seam import Storage

__all__ = ["EngineContract"]


def _unit(seed: int, dim: int = 8) -> Any:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


class EngineContract:
    """The tests every storage engine passes (see the module docstring)."""

    def open(self, where: Path) -> Storage:
        """A fresh, empty storage for one memory."""
        raise NotImplementedError("define open(where) in your EngineContract subclass")

    @contextlib.contextmanager
    def _storage(self, tmp_path: Path) -> Iterator[Storage]:
        storage = self.open(tmp_path)
        try:
            yield storage
        finally:
            storage.close()

    def _put(self, storage: Storage, *docs: Document, indexes: Any = ()) -> list[Any]:
        prepared = [index.prepare(list(docs)) for index in indexes]
        with storage.atomic():
            stored = storage.documents.put(list(docs))
            for index, work in zip(indexes, prepared, strict=True):
                index.add(stored, work)
        return stored

    # -- documents ---------------------------------------------------------------------------

    def test_documents_upsert_by_id_and_keep_their_key(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            [a] = self._put(st, Document("a", "the red bike", "s1", {"n": 1}))
            assert a.new and a.changed
            [again] = self._put(st, Document("a", "the red bike", "s1", {"n": 2}))
            assert again.key == a.key and not again.new and not again.changed
            [moved] = self._put(st, Document("a", "the blue bike", "s1", {"n": 3}))
            assert moved.key == a.key and moved.changed
            self._put(st, Document("b", "a cat", "s2"), Document("c", "a dog", "s1"))
            got = st.documents.get(["a", "zzz"])
            assert set(got) == {"a"} and got["a"].text == "the blue bike" and got["a"].metadata == {"n": 3}
            assert st.documents.ids("s1") == ["a", "c"] and st.documents.ids() == ["a", "b", "c"]
            assert [d.doc_id for d in st.documents.iter(batch=2)] == ["a", "b", "c"]
            assert st.documents.count() == 3 and st.documents.count("s2") == 1
            assert st.documents.sessions() == ["s1", "s2"]
            assert set(st.documents.by_keys([a.key])) == {a.key}
            self._put(st, Document("d", "a dog", "s1"), Document("e", "a dog", "s2"))
            assert st.documents.ids_with_text("s1", "a dog") == ["c", "d"]  # copies under other ids
            assert st.documents.ids_with_text("s2", "a dog") == ["e"] and st.documents.ids_with_text("s1", "a") == []

    def test_documents_remove(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            self._put(st, Document("a", "x", "s"), Document("b", "y", "s"))
            with st.atomic():
                assert st.documents.remove(["a", "nope"]) == 1
            assert st.documents.ids() == ["b"]
            with st.atomic():
                assert st.documents.remove_all() == 1
            assert st.documents.count() == 0

    def test_a_failed_transaction_writes_nothing(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            with contextlib.suppress(RuntimeError), st.atomic():
                st.documents.put([Document("a", "x", "s")])
                raise RuntimeError("boom")
            assert st.documents.count() == 0

    # -- keyword index -----------------------------------------------------------------------

    def test_keyword_index_finds_filters_and_forgets(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            kw = st.keyword_index(KeywordSettings())
            stored = self._put(
                st,
                Document("a", "my sister Ingrid lives in Tromsø", "s1"),
                Document("b", "the wifi password is on the fridge", "s2"),
                Document("c", "我的自行车是红色的", "s1"),
                indexes=[kw],
            )
            assert [h.source for h in kw.search("where does Ingrid live", 5)] == ["a"]
            assert kw.search("Ingrid", 5, session_id="s2") == []
            assert [h.source for h in kw.search("自行车", 5)] == ["c"]
            assert kw.search("wifi", 5)[0].metadata["session_id"] == "s2"
            assert kw.search("a the is", 5) == []  # stop words alone match nothing
            self._put(st, Document("a", "my brother Olav lives in Bergen", "s1"), indexes=[kw])
            assert kw.search("Ingrid", 5) == [] and [h.source for h in kw.search("Olav", 5)] == ["a"]
            with st.atomic():
                assert kw.remove([d for d in stored if d.doc_id == "b"]) == 1
                st.documents.remove(["b"])
            assert kw.search("wifi password", 5) == []
            with st.atomic():
                kw.remove_all()
                st.documents.remove_all()
            assert kw.search("Olav", 5) == []
            kw.close()

    def test_keyword_index_keeps_to_a_window_of_time(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            kw = st.keyword_index(KeywordSettings())
            assert getattr(kw, "filters_time", False)
            days = {"a": 1_000_000.0, "b": 1_086_400.0, "c": 1_172_800.0}
            self._put(
                st,
                *[Document(d, f"the tulips in the garden, note {d}", "s1", {"time": t}) for d, t in days.items()],
                Document("x", "the tulips of another session", "s2", {"time": days["b"]}),
                indexes=[kw],
            )
            search: Any = kw.search
            day_b = (days["b"], days["b"] + 86_400)
            assert [h.source for h in search("tulips garden", 5, window=day_b)] == ["b", "x"]
            assert [h.source for h in search("tulips", 5, "s1", window=day_b)] == ["b"]
            assert {h.source for h in search("tulips", 5, window=(days["a"], days["c"]))} == {"a", "b", "x"}
            assert search("tulips", 5, window=(0.0, days["a"])) == []  # until excluded, nothing before
            assert len(kw.search("tulips", 5)) == 4  # no window: every document
            kw.close()

    # -- vector store ------------------------------------------------------------------------

    def test_vector_store_keeps_to_a_window_of_time(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            vs = st.vector_store()
            assert getattr(vs, "filters_time", False)
            self._put(st, *[Document(f"d{i}", f"text {i}", f"s{i % 2}", {"time": 1000.0 * i}) for i in range(20)])
            vectors = {f"d{i}": _unit(i) for i in range(20)}
            with st.atomic():
                vs.put_vectors("sp", list(vectors.items()))
            q = vectors["d3"]
            search: Any = vs.search
            inside = [d for d in vectors if 5000.0 <= 1000.0 * int(d[1:]) < 12000.0]
            expected = sorted(inside, key=lambda d: (-float(vectors[d] @ q), d))
            assert [d for d, _ in search("sp", q, 4, window=(5000.0, 12000.0))] == expected[:4]
            assert [d for d, _ in search("sp", q, 20, window=(5000.0, 12000.0))] == expected  # d12 excluded
            odd = [d for d in expected if int(d[1:]) % 2 == 1]
            assert [d for d, _ in search("sp", q, 5, "s1", window=(5000.0, 12000.0))] == odd
            assert search("sp", q, 5, window=(50_000.0, 60_000.0)) == []
            assert len(vs.search("sp", q, 30)) == 20  # no window: every vector
            self._put(st, Document("late", "text late", "s0", {"time": 55_000.0}))  # after a search
            with st.atomic():
                vs.put_vectors("sp", [("late", _unit(99))])
            assert [d for d, _ in search("sp", q, 5, window=(50_000.0, 60_000.0))] == ["late"]

    def test_vector_store_is_exact_per_space_and_session(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            vs = st.vector_store()
            stored = self._put(st, *[Document(f"d{i}", f"text {i}", f"s{i % 2}") for i in range(20)])
            vectors = {f"d{i}": _unit(i) for i in range(20)}
            with st.atomic():
                assert vs.put_vectors("sp", list(vectors.items())) == 20
            assert vs.dimension("sp") == 8 and vs.spaces() == {"sp": 20}
            q = vectors["d3"]
            expected = sorted(vectors, key=lambda d: (-float(vectors[d] @ q), d))
            assert [d for d, _ in vs.search("sp", q, 5)] == expected[:5]
            s1 = [d for d in expected if int(d[1:]) % 2 == 1]
            assert [d for d, _ in vs.search("sp", q, 3, "s1")] == s1[:3]
            assert vs.search("other", q, 3) == []
            assert vs.missing_count("sp") == 0 and vs.missing_count("other") == 20
            with st.atomic():
                assert vs.remove([d.key for d in stored if d.doc_id == "d3"]) == 1
            assert "d3" not in [d for d, _ in vs.search("sp", q, 5)]
            assert vs.missing("sp", 5) == [("d3", "text 3")]
            assert vs.drop_space("sp") == 19 and vs.spaces() == {}

    # -- history -----------------------------------------------------------------------------

    def test_history_keeps_the_newest_and_forgets_exchanges(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            h = st.history
            with st.atomic():
                h.append(
                    "s",
                    [("user", "q1"), ("assistant", "a1")],
                    keep=10,
                    last_exchange_id="x1",
                    exchange_ids=["x1", "x1"],
                )
                h.append(
                    "s", [("user", "q2"), ("assistant", "a2")], keep=3, last_exchange_id="x2", exchange_ids=["x2", "x2"]
                )
            assert [(m.role, m.content) for m in h.recent("s", 10)] == [
                ("assistant", "a1"),
                ("user", "q2"),
                ("assistant", "a2"),
            ]
            assert h.last_exchange_id("s") == "x2" and h.sessions() == ["s"] and h.message_count() == 3
            [doc] = self._put(st, Document("x2", "Q: q2\nA: a2", "s"))
            with st.atomic():
                assert h.remove_exchanges([doc]) == 2
            assert [m.content for m in h.recent("s", 10)] == ["a1"]
            with st.atomic():
                assert h.clear_session("s") == 1
            assert h.sessions() == [] and h.last_exchange_id("s") == ""

    def test_history_moves_the_chain_when_the_window_is_smaller_than_the_call(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            h = st.history
            with st.atomic():
                h.append("s", [("user", "q1"), ("assistant", "a1")], keep=1, last_exchange_id="x1")
            assert h.last_exchange_id("s") == "x1"
            assert [m.content for m in h.recent("s", 10)] == ["a1"]
            with st.atomic():
                h.append("s", [("user", "q2"), ("assistant", "a2"), ("user", "q3")], keep=2, last_exchange_id="x2")
            assert h.last_exchange_id("s") == "x2"
            assert [m.content for m in h.recent("s", 10)] == ["a2", "q3"]

    def test_history_messages_say_when_they_were_recorded(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            with st.atomic():
                st.history.append("s", [("user", "q1"), ("assistant", "a1")], keep=10, created=1_000_000.0)
                st.history.append("s", [("user", "q2")], keep=10, created=1_086_400.5)
            assert [(m.content, m.created) for m in st.history.recent("s", 10)] == [
                ("q1", 1_000_000.0),
                ("a1", 1_000_000.0),
                ("q2", 1_086_400.5),
            ]

    # -- the tables the storage hands out ------------------------------------------------------

    def test_documents_take_a_copied_creation_time(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            self._put(st, Document("a", "x", "s"), Document("b", "y", "s"))
            with st.atomic():
                st.documents.set_created([("a", 1234.5)])
            got = st.documents.get(["a", "b"])
            assert got["a"].created == 1234.5 and got["b"].created != 1234.5

    def test_vectors_are_read_back_oldest_first_in_batches(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            vs = st.vector_store()
            self._put(st, *[Document(f"d{i}", f"text {i}", "s") for i in range(5)])
            vectors = {f"d{i}": _unit(i) for i in range(5)}
            with st.atomic():
                vs.put_vectors("sp", list(vectors.items()))
            batches = list(vs.iter_vectors("sp", 2))
            assert [len(b) for b in batches] == [2, 2, 1]
            assert [d for b in batches for d, _ in b] == list(vectors)
            assert all(np.allclose(v, vectors[d]) for b in batches for d, v in b)
            assert list(vs.iter_vectors("other", 2)) == []

    def test_the_storage_hands_out_the_notes_sticky_and_summary_tables(self, tmp_path: Path) -> None:
        with self._storage(tmp_path) as st:
            notes = st.notes()
            notes.save([Note(note_id("my bike is red"), "my bike is red", "2026-01", "s")])
            assert [(n.text, n.session_id) for n in st.notes().load()] == [("my bike is red", "s")]
            assert st.holds("notes")
            sticky = st.sticky()
            sticky.put("k1", "the wifi password is on the fridge", "s", now=10.0)
            assert [r.text for r in st.sticky().notes()] == ["the wifi password is on the fridge"]
            assert st.holds("sticky")
            st.summaries().put("s", "- the user rides a red bike", 2)
            assert st.summaries().get("s") == ("- the user rides a red bike", 2) and st.holds("summaries")
            kept = st.rewrites(tmp_path)
            kept.keep("- [2026-01] my bike is red\n", "edit", 20.0, 5)
            assert [body for _, body in st.rewrites(tmp_path).bodies()] == ["- [2026-01] my bike is red\n"]
            notes.close()
            sticky.close()
