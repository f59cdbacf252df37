"""Document frequencies kept on write (``memory_keyword_df``) against a real throwaway server.

Every write of the keyword index (a turn, a batch, a replaced document, a forget that also
takes a turn's words out of the next turn's context, a namespace wipe) updates the namespace's
frequencies in its own transaction; these tests compare the table with a fresh count of the
keyword rows after each kind of write, from one process and from two writing at once, and
check that a forgotten session's words leave no row behind.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

import psycopg

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.postgres import database as pg
from ovos_memory_plugins.storage.postgres import keyword as pg_keyword
from ovos_memory_plugins.vector import VectorMemory

_ns = itertools.count()

WORDS = [
    "lantern",
    "harbor",
    "violet",
    "copper",
    "meadow",
    "falcon",
    "ember",
    "glacier",
    "saffron",
    "quarry",
    "tundra",
    "willow",
]


def fresh_counts(url: str, namespace: str) -> dict[str, int]:
    """Each term's document frequency counted now from the keyword rows (what the table must say)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT t.term, count(*) FROM memory_keywords k CROSS JOIN LATERAL jsonb_object_keys(k.tf) AS t(term)"
            " WHERE k.namespace = %s GROUP BY t.term",
            (namespace,),
        ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def kept(url: str, namespace: str) -> dict[str, int]:
    """The namespace's rows of ``memory_keyword_df``."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT term, df FROM memory_keyword_df WHERE namespace = %s", (namespace,)).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def gin_count(url: str, namespace: str, term: str) -> int:
    """A term's frequency counted the way searches counted it before the table (the GIN index)."""
    query = f"{pg.tsquery_literal([pg.namespace_lexeme(namespace)])} & {pg.tsquery_literal([term])}"
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM memory_keywords WHERE terms @@ %s::tsquery", (query,)).fetchone()
    return int(row[0]) if row else 0


def memory(url: str, namespace: str, tmp_path: Path, **extra: Any) -> LexicalMemory:
    return LexicalMemory({"database": url, "namespace": namespace, "root": str(tmp_path), **extra})


def turn(mem: LexicalMemory | VectorMemory, session: str, user: str, answer: str) -> None:
    mem.update_history([{"role": "user", "content": user}, {"role": "assistant", "content": answer}], session)


def sentence(i: int, extra: str = "") -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 5)) + extra


def assert_exact(url: str, namespace: str) -> dict[str, int]:
    counts = fresh_counts(url, namespace)
    assert kept(url, namespace) == counts
    assert all(n > 0 for n in counts.values())
    return counts


def test_frequencies_follow_every_kind_of_write(postgres_url: str, tmp_path: Path) -> None:
    ns = f"df-{next(_ns)}"
    with memory(postgres_url, ns, tmp_path, max_history=4) as mem:
        for i in range(12):  # turns: each takes the previous one's words as its context
            turn(mem, f"s{i % 2}", sentence(i, f" turnword{i}"), sentence(i + 1))
        counts = assert_exact(postgres_url, ns)
        assert counts["turnword3"] >= 1
        for term in ("lantern", "turnword3", "copper"):  # the table says what counting the postings says
            assert kept(postgres_url, ns).get(term, 0) == gin_count(postgres_url, ns, term)
        ids = [mem.store(sentence(i, " storedword"), "docs") for i in range(5)]
        assert_exact(postgres_url, ns)
        # a batch, replacing two documents with other text and adding three
        mem.put_documents(
            [(ids[0], "glacier glacier replaced", "docs", None), (ids[1], "entirely other words", "docs", None)]
            + [(f"batch-{i}", sentence(i, " batchword"), "docs", None) for i in range(3)]
        )
        assert_exact(postgres_url, ns)
        assert kept(postgres_url, ns)["storedword"] == 3
        mem.put_document("batch-0", "only the batch zero text now", "docs")  # one replaced alone
        assert_exact(postgres_url, ns)
        # a turn in the middle of a session: its words leave the next turn's context too
        middle = mem.storage.documents.ids("s0")[2]
        assert mem.delete([middle]) == 1
        assert_exact(postgres_url, ns)
        assert mem.forget_session("s1") >= 1
        after = assert_exact(postgres_url, ns)
        assert not any(t.startswith("turnword") and int(t[8:]) % 2 == 1 for t in after)
        assert mem.search("lantern harbor")  # still searchable, weighed by the kept counts
        mem.forget_all()
    assert kept(postgres_url, ns) == {} == fresh_counts(postgres_url, ns)


def test_searches_match_the_counted_frequencies_on_a_large_namespace(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruning and the second ranking read the kept counts: the same hits as counting them."""
    monkeypatch.setattr(pg_keyword, "PRUNE_MIN_DOCUMENTS", 20)
    monkeypatch.setattr(pg_keyword, "PRUNE_POSTINGS", 10)
    ns = f"df-{next(_ns)}"
    with memory(postgres_url, ns, tmp_path) as mem:
        mem.put_documents([(f"d{i}", sentence(i, f" rare{i % 9}"), f"s{i % 3}", None) for i in range(60)])
        counts = assert_exact(postgres_url, ns)
        index = mem.keyword
        assert index.frequencies(["lantern", "rare4", "nothing"]) == {
            "lantern": counts["lantern"],
            "rare4": counts["rare4"],
            "nothing": 0,
        }
        hits = mem.search("lantern rare4")
        assert hits and all("rare4" in h.content for h in hits[:3])


def test_a_forgotten_session_leaves_no_frequency_row(postgres_url: str, tmp_path: Path) -> None:
    ns = f"df-{next(_ns)}"
    with memory(postgres_url, ns, tmp_path) as mem:
        turn(mem, "keep", "the lantern by the harbor", "noted")
        turn(mem, "secret", "my password is zorblatcanary", "I will remember it")
        turn(mem, "secret", "and the lantern too", "fine")
        # stemmed, in its turn and as the next turn's context
        assert [df for term, df in kept(postgres_url, ns).items() if term.startswith("zorblat")] == [2]
        mem.forget_session("secret")
        with psycopg.connect(postgres_url, autocommit=True) as conn:  # in no namespace's row
            left = conn.execute("SELECT count(*) FROM memory_keyword_df WHERE term LIKE 'zorblat%'").fetchone()
        assert left == (0,)
        assert_exact(postgres_url, ns)
        done = mem.compact()
        assert not done.skipped
        with psycopg.connect(postgres_url, autocommit=True) as conn:  # compact() vacuumed it too
            vacuumed = conn.execute(
                "SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'memory_keyword_df'"
            ).fetchone()
        assert vacuumed == (True,)
        mem.forget_all()
    assert kept(postgres_url, ns) == {}


def test_the_migration_counts_what_older_versions_wrote(postgres_url: str, tmp_path: Path) -> None:
    """A database from before the table: the migration builds it from the keyword rows."""
    ns = f"df-{next(_ns)}"
    with memory(postgres_url, ns, tmp_path) as mem:
        for i in range(8):
            turn(mem, "s", sentence(i, " older"), sentence(i + 2))
        before = [(h.source, h.score) for h in mem.search("lantern copper older")]
        counts = assert_exact(postgres_url, ns)
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as the previous release left it
        conn.execute("DROP TABLE memory_keyword_df")
        conn.execute("DELETE FROM memory_migrations WHERE name = '0004_keyword_document_frequencies'")
    with memory(postgres_url, ns, tmp_path) as mem:  # a process of this version starts
        assert kept(postgres_url, ns) == counts
        assert [(h.source, h.score) for h in mem.search("lantern copper older")] == before
        mem.forget_all()


def test_a_retired_keyword_index_takes_its_frequencies_along(postgres_url: str, tmp_path: Path) -> None:
    """A hybrid memory reopened as vector-only drops its keyword rows, and their frequencies."""
    ns = f"df-{next(_ns)}"
    config = {"database": postgres_url, "namespace": ns, "root": str(tmp_path), "embedder": "hash"}
    with VectorMemory({**config, "hybrid": True}) as mem:
        turn(mem, "s", "the lantern by the harbor", "noted")
        assert kept(postgres_url, ns)
    with VectorMemory(config) as mem:
        assert kept(postgres_url, ns) == {} == fresh_counts(postgres_url, ns)
        mem.forget_all()


WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    from ovos_memory_plugins.lexical import LexicalMemory

    url, ns, who, n, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    words = "lantern harbor violet copper meadow falcon ember glacier saffron quarry tundra willow".split()
    mem = LexicalMemory({"database": url, "namespace": ns, "max_history": 6, "root": os.devnull + "-unused"})
    open(go + "-ready-" + who, "w").close()
    while not os.path.exists(go):  # both start writing at once
        time.sleep(0.005)
    failures = []
    for i in range(n):
        text = " ".join(words[(i * 5 + j + len(who)) % len(words)] for j in range(6)) + f" {who}own{i % 4}"
        try:
            if who == "turns":  # one exchange per transaction, sessions taking turns
                mem.update_history([{"role": "user", "content": text}, {"role": "assistant", "content": "ok " + text}],
                                   f"s{i % 3}")
            else:  # batches over the same words, replacing earlier ones, and forgets
                mem.put_documents([(f"b{(i * 4 + j) % 30}", text + f" n{j}", f"b{j % 2}", None) for j in range(8)])
                if i % 5 == 4:
                    mem.delete([f"b{(i * 3) % 30}", f"b{(i * 7) % 30}"])
        except Exception as exc:  # a deadlock or lock timeout would land here
            failures.append(repr(exc))
    print(json.dumps({"who": who, "failures": failures}))
    mem.close()
    """
)


def test_two_processes_writing_at_once_keep_the_frequencies_exact(postgres_url: str, tmp_path: Path) -> None:
    """A turn writer and a batch writer (with replacements and forgets) on one namespace, over the
    same words: no deadlock, nothing lost, and the table equals a fresh count at the end."""
    ns = f"df-{next(_ns)}"
    go = tmp_path / "go"
    procs = {
        who: subprocess.Popen(
            [sys.executable, "-c", WRITER, postgres_url, ns, who, "40", str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("turns", "batches")
    }
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}-ready-{who}").exists() for who in procs):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs.values())
        time.sleep(0.01)
    go.touch()
    for who, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["failures"] == [], (who, report["failures"])
    counts = assert_exact(postgres_url, ns)
    assert counts["lantern"] > 10 and "turnsown1" in counts and "batchesown1" in counts
    with memory(postgres_url, ns, tmp_path) as mem:
        mem.forget_all()
    assert kept(postgres_url, ns) == {}
