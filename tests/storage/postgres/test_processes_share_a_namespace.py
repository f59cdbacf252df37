"""Two persona processes on one PostgreSQL memory: nothing lost, each sees the other's writes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_memory_plugins.lexical import LexicalMemory

N = 25

WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    from ovos_memory_plugins.lexical import LexicalMemory

    url, ns, who, n, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    mem = LexicalMemory({"database": url, "namespace": ns, "max_history": 200, "root": os.devnull + "-unused"})
    open(go + "-ready-" + who, "w").close()
    while not os.path.exists(go):  # both start writing at once
        time.sleep(0.005)
    for i in range(n):
        code = f"zq{who}{i}"
        mem.update_history(
            [{"role": "user", "content": f"remember code {code} for {who}"}, {"role": "assistant", "content": "ok"}],
            f"{who}-own",
        )
        mem.update_history(
            [{"role": "user", "content": f"shared note {code}"}, {"role": "assistant", "content": f"noted {code}"}],
            "shared",
        )
    other = "b" if who == "a" else "a"
    open(go + "-done-" + who, "w").close()
    while not os.path.exists(go + "-done-" + other):
        time.sleep(0.005)
    # the other process's writes, seen on this one's next turns
    seen = sum(any(f"zq{other}{i}" in m.content for m in mem.build_conversation_context(f"code zq{other}{i}?", "q"))
               for i in range(n))
    print(json.dumps({"who": who, "seen_other": seen, "stats": mem.stats()["history_messages"]}))
    """
)


def test_two_processes_share_one_memory(tmp_path: Path, postgres_url: str) -> None:
    ns = "two-processes"
    here = LexicalMemory({"database": postgres_url, "namespace": ns, "max_history": 200, "root": str(tmp_path)})
    assert here.search("zqa0") == []  # caches warm before the others write
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, postgres_url, ns, who, str(N), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("a", "b")
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"go-ready-{who}").exists() for who in "ab") and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["seen_other"] == N for r in results), results  # each recalls all of the other's writes

    # nothing lost: every exchange of both is a document, every message is in the history
    assert here.stats()["documents"] == 4 * N
    for who in ("a", "b"):
        own = here.messages(f"{who}-own")
        assert [m.content for m in own if m.role.value == "user"] == [
            f"remember code zq{who}{i} for {who}" for i in range(N)
        ]
    shared = [m.content for m in here.messages("shared") if m.role.value == "user"]
    assert sorted(shared) == sorted(f"shared note zq{who}{i}" for who in "ab" for i in range(N))
    # this process, opened before they wrote, recalls their writes on its next turn
    for who in ("a", "b"):
        context = here.build_conversation_context(f"what was code zq{who}{N - 1}?", "elsewhere")
        assert any(f"zq{who}{N - 1}" in m.content for m in context[:-1]), context
    # forget in one process is gone for everyone
    assert here.forget_session("a-own") == N
    assert here.search("zqa3", session_id="a-own") == []
    here.close()
