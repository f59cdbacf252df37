"""The editor and the command against a memory kept in PostgreSQL (a real throwaway server).

The editor is started on a persona whose memory block has ``"database": "postgresql://..."``;
every delete is checked in the database itself, with a connection of the test's own.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
pytest.importorskip("fastapi", reason="the editor extra (fastapi, uvicorn) is not installed")
pytest.importorskip("uvicorn", reason="the editor extra (fastapi, uvicorn) is not installed")

import psycopg
from test_editor_http import request

from ovos_memory_plugins.cli import main as cli
from ovos_memory_plugins.editor import EditorServer, load_memory
from ovos_memory_plugins.testing import exchange

_ns = itertools.count()


def rows_holding(url: str, namespace: str, word: str) -> dict[str, int]:
    """How many rows of each memory table of ``namespace`` hold ``word`` (read by the test itself)."""
    like = f"%{word}%"
    with psycopg.connect(url, autocommit=True) as conn:
        return {
            "documents": conn.execute(
                "SELECT count(*) FROM memory_documents WHERE namespace = %s AND content LIKE %s", (namespace, like)
            ).fetchone()[0],
            "keywords": conn.execute(
                "SELECT count(*) FROM memory_keywords WHERE namespace = %s AND tf::text LIKE %s", (namespace, like)
            ).fetchone()[0],
            "history": conn.execute(
                "SELECT count(*) FROM memory_history WHERE namespace = %s AND content LIKE %s", (namespace, like)
            ).fetchone()[0],
            "keyword_df": conn.execute(  # lower case: a word's term is folded
                "SELECT count(*) FROM memory_keyword_df WHERE namespace = %s AND term LIKE lower(%s)", (namespace, like)
            ).fetchone()[0],
        }


def namespaces_holding(url: str, word: str) -> dict[str, int]:
    """The namespaces whose documents hold ``word``, with how many."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT namespace, count(*) FROM memory_documents WHERE content LIKE %s GROUP BY namespace",
            (f"%{word}%",),
        ).fetchall()
    return {str(ns): int(n) for ns, n in rows}


NONE = {"documents": 0, "keywords": 0, "history": 0, "keyword_df": 0}


def persona(url: str, namespace: str, root: Path, module: str = "ovos-memory-plugin-lexical", **block: Any) -> dict:
    return {
        "name": "Ada",
        "memory_module": module,
        module: {"database": url, "namespace": namespace, "root": str(root), **block},
    }


def test_the_editor_lists_searches_and_deletes_rows_in_postgresql(tmp_path: Path, postgres_url: str) -> None:
    ns = f"editor-pg-{next(_ns)}"
    root = tmp_path / "root"
    memory = load_memory(persona(postgres_url, ns, root))
    try:
        assert memory.stats()["storage"]["engine"] == "postgresql"
        memory.update_history(exchange("my bike lock code is quokkaseven", "noted"), "garage")
        memory.update_history(exchange("the spare key is with wombatnine", "ok"), "garage")
        memory.update_history(exchange("my sister lives in Porto near platypusone", "lovely"), "bedroom")
        location = memory.stats()["storage"]["location"]
        password = postgres_url.split(":")[2].split("@")[0]
        assert location.startswith("postgresql://") and password not in location
        with EditorServer(memory, title="Ada") as server:
            status, answer = request(server, "GET", "/api/info")
            assert status == 200 and answer["where"] == location and password not in json.dumps(answer)
            status, answer = request(server, "GET", "/api/sessions")
            assert status == 200 and answer["sessions"] == ["bedroom", "garage"]
            status, answer = request(server, "GET", "/api/sessions/garage")
            assert status == 200
            assert [m["content"] for m in answer["messages"] if m["role"] == "user"] == [
                "my bike lock code is quokkaseven",
                "the spare key is with wombatnine",
            ]
            assert len(answer["documents"]) == 2
            status, answer = request(server, "GET", "/api/search?q=" + quote("bike lock code"))
            assert status == 200 and "quokkaseven" in answer["hits"][0]["content"]
            doc_id = answer["hits"][0]["source"]
            # its keyword row, and the next exchange's (which carries it as context)
            assert rows_holding(postgres_url, ns, "quokkaseven") == {
                "documents": 1,
                "keywords": 2,
                "history": 1,
                "keyword_df": 1,
            }

            # one document: its row, its keyword row and the history messages it came from go
            status, answer = request(server, "DELETE", f"/api/documents/{doc_id}")
            assert status == 200 and answer["deleted"] == 1 and "quokkaseven" in answer["document"]["text"]
            assert answer["compacted"] == [location] and password not in json.dumps(answer)
            assert rows_holding(postgres_url, ns, "quokkaseven") == NONE
            status, answer = request(server, "GET", "/api/search?q=" + quote("bike lock code"))
            assert status == 200 and answer["hits"] == []

            # undo puts it back; a session's forget takes everything of that session
            status, _ = request(
                server,
                "POST",
                "/api/documents",
                {"id": doc_id, "text": "bike code quokkaseven", "session_id": "garage"},
            )
            assert status == 200 and rows_holding(postgres_url, ns, "quokkaseven")["documents"] == 1
            status, answer = request(server, "DELETE", "/api/sessions/garage?confirm=garage")
            assert status == 200 and answer["deleted"] == 2
            for word in ("quokkaseven", "wombatnine"):
                assert rows_holding(postgres_url, ns, word) == NONE
            assert rows_holding(postgres_url, ns, "platypusone")["documents"] == 1  # the other session stays

            status, answer = request(server, "GET", "/api/export")
            assert status == 200 and answer["namespace"] == ns and list(answer["sessions"]) == ["bedroom"]

            status, answer = request(server, "POST", "/api/forget-all", {"confirm": "everything"})
            assert status == 200 and answer["deleted"] == 1
            assert rows_holding(postgres_url, ns, "platypusone") == NONE
    finally:
        memory.close()
    assert not root.exists() or not any(root.rglob("*"))  # nothing was written under root


def test_a_composite_on_postgresql_in_the_editor(tmp_path: Path, postgres_url: str) -> None:
    ns = f"editor-pg-composite-{next(_ns)}"
    root = tmp_path / "root"
    members = [
        {"module": "ovos-memory-plugin-lexical"},
        {"module": "ovos-memory-plugin-vector", "config": {"embedder": "hash"}},
        {"module": "ovos-memory-plugin-sticky"},
    ]
    memory = load_memory(persona(postgres_url, ns, root, "ovos-memory-plugin-composite", members=members))
    try:
        assert {name: m.stats()["storage"]["engine"] for name, m in memory.members.items()} == {
            "lexical": "postgresql",
            "vector": "postgresql",
            "sticky": "postgresql",
        }
        memory.update_history(exchange("the boiler code is echidnafour", "noted"), "hall")
        with EditorServer(memory) as server:
            status, answer = request(server, "GET", "/api/search?q=" + quote("boiler code"))
            assert status == 200 and answer["hits"]
            # the members are parts of one memory: its rows under the composite's namespace, once
            assert namespaces_holding(postgres_url, "echidnafour") == {ns: 1}
            status, answer = request(server, "DELETE", "/api/sessions/hall?confirm=hall")
            assert status == 200 and answer["deleted"] == 1
            location = memory.members["lexical"].stats()["storage"]["location"]
            assert answer["compacted"][0] == location and answer["compacted"].count(location) == 1
        assert namespaces_holding(postgres_url, "echidnafour") == {}
        assert rows_holding(postgres_url, ns, "echidnafour") == NONE
    finally:
        memory.close()
    # nothing of the parts is kept in files (what a member kept would stay under the root's folder of its own)
    assert {p.relative_to(root).parts[0] for p in root.rglob("*") if p.is_file()} <= {"sticky"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_on_postgresql(tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    ns, other = f"editor-pg-cli-{next(_ns)}", f"editor-pg-import-{next(_ns)}"
    path = tmp_path / "ada.json"
    path.write_text(json.dumps(persona(postgres_url, ns, tmp_path / "a")))
    target = ["--persona", str(path)]

    code, out, _ = run(capsys, "check", str(path))
    assert code == 0 and "is valid" in out
    code, out, _ = run(capsys, "--json", "remember", *target, "--session", "s1", "the piano tuner is Mr Okafor")
    assert code == 0
    doc = json.loads(out)["id"]
    assert run(capsys, "remember", *target, "--session", "s2", "the piano lid squeaks")[0] == 0

    code, out, _ = run(capsys, "--json", "stats", *target)
    stats = json.loads(out)
    assert code == 0 and stats["documents"] == 2 and stats["storage"]["engine"] == "postgresql"
    assert "memory-test-" not in out  # the password never shows

    code, out, _ = run(capsys, "search", *target, "piano tuner")
    assert code == 0 and doc in out

    dump = tmp_path / "dump.jsonl"
    code, out, _ = run(capsys, "export", *target, str(dump))
    assert code == 0 and len(dump.read_text().splitlines()) == 2
    assert "from postgresql://***@127.0.0.1:" in out  # where it is kept, without the password
    code, out, _ = run(capsys, "--json", "import", *target, "--namespace", other, str(dump))
    assert code == 0 and json.loads(out)["imported"] == 2
    assert rows_holding(postgres_url, other, "Okafor")["documents"] == 1

    code, out, _ = run(capsys, "forget", *target, "--session", "s1")
    assert code == 0 and "1 document(s) deleted" in out
    assert rows_holding(postgres_url, ns, "Okafor") == NONE
    assert rows_holding(postgres_url, other, "Okafor")["documents"] == 1
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").rglob("*"))
