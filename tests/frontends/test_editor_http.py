"""The memory editor over plain HTTP: a real uvicorn server on 127.0.0.1, stdlib http.client.

Covers the guards (Host, Origin, cross-site fetches, the token, loopback-only binding) and the
archive API over the package's stub storage.
"""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the editor extra (fastapi, uvicorn) is not installed")
pytest.importorskip("uvicorn", reason="the editor extra (fastapi, uvicorn) is not installed")

from ovos_memory_plugins.editor import EditorServer
from ovos_memory_plugins.editor.security import allowed_hosts_for, check_bind_host
from ovos_memory_plugins.testing import InMemoryMemory, exchange


def request(
    server: EditorServer,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = "auto",
    headers: dict[str, str] | None = None,
    timeout: float = 10,
) -> tuple[int, Any]:
    """One HTTP request to the server; returns (status, parsed JSON or raw text)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        sent = {"Host": f"127.0.0.1:{server.port}"}
        if token == "auto":
            token = server.token
        if token is not None:
            sent["X-Editor-Token"] = token
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
            sent["Content-Length"] = str(len(payload))
        sent.update(headers or {})
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in sent.items():
            conn.putheader(k, v)
        conn.endheaders(payload)
        response = conn.getresponse()
        raw = response.read().decode()
        try:
            return response.status, json.loads(raw)
        except json.JSONDecodeError:
            return response.status, raw
    finally:
        conn.close()


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[InMemoryMemory]:
    with InMemoryMemory({"root": str(tmp_path / "m")}) as mem:
        mem.update_history(exchange("my bike is a red Gazelle", "a red Gazelle, noted"), "kitchen")
        mem.update_history(exchange("the wifi password is hunter2", "got it"), "kitchen")
        mem.update_history(exchange("my sister lives in Porto", "Porto is lovely"), "bedroom")
        yield mem


@pytest.fixture
def server(memory: InMemoryMemory) -> Iterator[EditorServer]:
    with EditorServer(memory) as srv:
        yield srv


def test_binds_loopback_and_refuses_other_interfaces() -> None:
    check_bind_host("127.0.0.1")
    check_bind_host("::1")
    check_bind_host("localhost")
    for host in ("0.0.0.0", "192.168.1.20", "::"):
        with pytest.raises(ValueError, match="allow_remote"):
            check_bind_host(host)
    check_bind_host("0.0.0.0", allow_remote=True)
    with pytest.raises(ValueError, match="allow_remote"):
        EditorServer(InMemoryMemory(), host="0.0.0.0")


def test_allowed_hosts() -> None:
    assert allowed_hosts_for("127.0.0.1", 8080) == {"127.0.0.1:8080", "localhost:8080", "[::1]:8080"}
    assert "box.lan:8080" in allowed_hosts_for("0.0.0.0", 8080, ["box.lan"])


def test_url_carries_the_token_in_the_fragment(server: EditorServer) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}/#token={server.token}"
    assert len(server.token) >= 40


def test_page_and_openapi_are_served(server: EditorServer) -> None:
    status, page = request(server, "GET", "/", token=None)
    assert status == 200 and "<title>Memory editor</title>" in page
    status, js = request(server, "GET", "/static/editor.js", token=None)
    assert status == 200 and "textContent" in js and "innerHTML" not in js
    status, spec = request(server, "GET", "/api/openapi.json", token=None)
    assert status == 200 and spec["openapi"].startswith("3.")
    assert {"/api/notes", "/api/search", "/api/export", "/api/forget-all"} <= set(spec["paths"])
    assert {"get", "put"} <= set(spec["paths"]["/api/notes"])
    status, _ = request(server, "GET", "/static/..%2Fapp.py", token=None)
    assert status == 404


def test_foreign_host_is_refused(server: EditorServer) -> None:
    for host in (f"evil.example:{server.port}", "evil.example", "127.0.0.1", f"127.0.0.1:{server.port + 1}"):
        status, body = request(server, "GET", "/api/info", headers={"Host": host})
        assert status == 403, host
        assert "Host" in body["detail"]
    status, page = request(server, "GET", "/", token=None, headers={"Host": "rebound.example"})
    assert status == 403 and "Memory editor" not in str(page)
    status, _ = request(server, "GET", "/api/info", headers={"Host": f"localhost:{server.port}"})
    assert status == 200


def test_foreign_origin_is_refused(server: EditorServer, memory: InMemoryMemory) -> None:
    before = memory.stats()["documents"]
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{server.port + 1}", "https://127.0.0.1"):
        status, body = request(server, "POST", "/api/forget-all", {"confirm": "everything"}, headers={"Origin": origin})
        assert status == 403, origin
        assert "Origin" in body["detail"]
    status, _ = request(server, "GET", "/api/info", headers={"Sec-Fetch-Site": "cross-site"})
    assert status == 403
    assert memory.stats()["documents"] == before
    status, _ = request(server, "GET", "/api/info", headers={"Origin": f"http://127.0.0.1:{server.port}"})
    assert status == 200


def test_token_is_required_on_every_api_call(server: EditorServer, memory: InMemoryMemory) -> None:
    for method, path, body in [
        ("GET", "/api/info", None),
        ("GET", "/api/search?q=bike", None),
        ("GET", "/api/export", None),
        ("POST", "/api/forget-all", {"confirm": "everything"}),
    ]:
        assert request(server, method, path, body, token=None)[0] == 401
        assert request(server, method, path, body, token="wrong")[0] == 401
    assert memory.stats()["documents"] == 3


def test_security_headers(server: EditorServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/")
        response = conn.getresponse()
        response.read()
        csp = response.getheader("content-security-policy") or ""
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert response.getheader("x-content-type-options") == "nosniff"
    finally:
        conn.close()


def test_archive_search_view_delete_export(server: EditorServer, memory: InMemoryMemory) -> None:
    status, info = request(server, "GET", "/api/info")
    assert status == 200 and info["capabilities"]["archive"] and not info["capabilities"]["notes"]
    status, found = request(server, "GET", "/api/search?q=Gazelle+bike")
    assert status == 200
    hit = found["hits"][0]
    assert "red Gazelle" in hit["content"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", hit["when"]), "each memory shows when it was made"
    status, sessions = request(server, "GET", "/api/sessions")
    assert sessions["sessions"] == ["bedroom", "kitchen"]
    status, convo = request(server, "GET", "/api/sessions/kitchen")
    assert [m["role"] for m in convo["messages"]] == ["user", "assistant", "user", "assistant"]
    assert convo["messages"][0]["content"] == "my bike is a red Gazelle"

    status, gone = request(server, "DELETE", f"/api/documents/{hit['source']}")
    assert status == 200 and gone["deleted"] == 1
    assert memory.search("Gazelle bike") == []
    status, body = request(server, "DELETE", f"/api/documents/{hit['source']}")
    assert status == 404 and body["detail"] == "That memory is gone already (deleted meanwhile?)."
    # undo: the page sends the document back
    doc = {"id": hit["source"], "text": hit["content"], "session_id": "kitchen", "metadata": hit["metadata"]}
    assert request(server, "POST", "/api/documents", doc)[0] == 200
    assert memory.search("Gazelle bike")[0].source == hit["source"]

    status, exported = request(server, "GET", "/api/export")
    assert status == 200 and set(exported["sessions"]) == {"bedroom", "kitchen"}

    status, body = request(server, "DELETE", "/api/sessions/bedroom")
    assert status == 400 and body["detail"].startswith("Confirm first")
    assert memory.search("sister Porto"), "an unconfirmed session delete deletes nothing"
    status, gone = request(server, "DELETE", "/api/sessions/bedroom?confirm=bedroom")
    assert status == 200 and gone["deleted"] == 1
    assert memory.search("sister Porto") == [] and memory.get_history("bedroom") == []

    status, body = request(server, "POST", "/api/forget-all", {"confirm": "yes"})
    assert status == 400 and "type the word everything" in body["detail"]
    status, gone = request(server, "POST", "/api/forget-all", {"confirm": "everything"})
    assert status == 200 and gone["deleted"] == 2
    assert memory.search("wifi password") == [] and memory.stats()["history_messages"] == 0


def test_notes_routes_answer_404_without_notes(server: EditorServer) -> None:
    status, body = request(server, "GET", "/api/notes")
    assert status == 404 and body["detail"] == "This memory keeps no notes."
    status, body = request(server, "POST", "/api/documents", {"id": "d-1", "text": ""})
    assert status == 422 and body["detail"] == "The text is empty: type something first."


def test_cli_serve_prints_the_url_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import urllib.request

    root = tmp_path / "sticky"
    persona = tmp_path / "ada.json"
    block = {"root": str(root)}
    persona.write_text(
        json.dumps({"name": "Ada", "memory_module": "ovos-memory-plugin-sticky", "ovos-memory-plugin-sticky": block})
    )
    script = Path(sys.executable).with_name("ovos-memory")
    proc = subprocess.Popen(
        [str(script), "serve", "--persona", str(persona)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"memory editor for Ada ({root}): http://127.0.0.1:" in line, line + proc.stderr.read()
        url = line.split("): ", 1)[1].split()[0]
        base, token = url.split("/#token=")
        req = urllib.request.Request(base + "/api/info", headers={"X-Editor-Token": token})
        with urllib.request.urlopen(req, timeout=10) as response:
            info = json.load(response)
        assert info["title"] == "Ada" and info["root"] == str(root) and info["backend"] == "StickyMemory"
        with urllib.request.urlopen(base + "/favicon.ico", timeout=10) as response:
            assert response.headers["content-type"] == "image/svg+xml" and b"<svg" in response.read()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_cli_serve_refuses_a_public_address(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ovos_memory_plugins.cli import main

    assert main(["serve", "--module", "sticky", "--root", str(tmp_path / "s"), "--host", "0.0.0.0"]) == 2
    assert "allow_remote" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def files_holding(root: Path, word: str) -> list[str]:
    """The files under ``root`` whose bytes contain ``word``."""
    return sorted(p.name for p in root.rglob("*") if p.is_file() and word.encode() in p.read_bytes())


def test_purge_really_removes_the_text_from_the_files(tmp_path: Path) -> None:
    from ovos_memory_plugins.lexical import LexicalMemory

    root = tmp_path / "lexical"
    with LexicalMemory({"root": str(root)}) as memory, EditorServer(memory) as server:
        memory.update_history(exchange("my bike lock code is quokkaseven", "noted"), "garage")
        memory.update_history(exchange("my sister lives in Porto with wombatnine", "lovely"), "bedroom")
        memory.update_history(exchange("the attic key is under platypusone", "ok"), "attic")
        assert files_holding(root, "quokkaseven")

        hit = memory.search("bike lock code")[0]
        status, answer = request(server, "DELETE", f"/api/documents/{hit.source}")
        assert status == 200 and answer["compacted"]
        # the document is gone from every file; the session's history (kept) still holds the words
        assert memory.search("bike lock code") == []

        status, _ = request(server, "DELETE", "/api/sessions/garage?confirm=garage")
        assert status == 200
        assert files_holding(root, "quokkaseven") == []

        status, _ = request(server, "DELETE", "/api/sessions/bedroom?confirm=bedroom")
        assert status == 200
        assert files_holding(root, "wombatnine") == []
        assert files_holding(root, "platypusone")

        status, _ = request(server, "POST", "/api/forget-all", {"confirm": "everything"})
        assert status == 200
        assert files_holding(root, "platypusone") == []


def test_sticky_delete_and_edit_leave_no_trace_in_the_file(tmp_path: Path) -> None:
    from ovos_memory_plugins.sticky import StickyMemory

    root = tmp_path / "sticky"
    with StickyMemory({"root": str(root)}) as memory, EditorServer(memory) as server:
        secret = memory.remember("my bank pin is echidnafour").note
        other = memory.remember("my locker is numbatfive").note
        assert secret is not None and other is not None
        assert files_holding(root, "echidnafour")
        status, state = request(server, "DELETE", f"/api/notes/items?id={secret.id}")
        assert status == 200 and state["deleted"]["text"] == "my bank pin is echidnafour"
        assert files_holding(root, "echidnafour") == []

        version = state["version"]
        status, _ = request(server, "PUT", "/api/notes/items", {"id": other.id, "text": "x", "version": "stale"})
        assert status == 409
        edit = {"id": other.id, "text": "my locker is 12", "version": version}
        status, state = request(server, "PUT", "/api/notes/items", edit)
        assert status == 200 and [n["text"] for n in state["items"] if n["status"] == "active"] == ["my locker is 12"]
        # an edit keeps the old text as a retired note (NotesKeeper.update); deleting it leaves no trace
        old = next(n for n in state["items"] if n["status"] == "retired")
        assert old["text"] == "my locker is numbatfive"
        status, state = request(server, "DELETE", f"/api/notes/items?id={old['id']}")
        assert status == 200 and files_holding(root, "numbatfive") == []
        status, body = request(server, "DELETE", f"/api/notes/items?id={old['id']}")
        assert status == 404 and body["detail"].startswith("That note is gone")


def test_composite_shows_every_member(tmp_path: Path) -> None:
    import time

    from ovos_memory_plugins.composite import CompositeMemory

    cfg = {
        "root": str(tmp_path / "composite"),
        "members": [
            {"module": "ovos-memory-plugin-lexical"},
            {"module": "ovos-memory-plugin-notes", "config": {"archive": None, "auto_curate": False}},
            {"module": "ovos-memory-plugin-sticky"},
        ],
    }
    with CompositeMemory(cfg) as memory, EditorServer(memory) as server:
        memory.update_history(exchange("my bike is a red Gazelle", "a red Gazelle, noted"), "kitchen")
        deadline = time.monotonic() + 10
        while not memory.search("Gazelle bike") and time.monotonic() < deadline:
            time.sleep(0.02)
        caps = request(server, "GET", "/api/info")[1]["capabilities"]
        assert caps["archive"] and caps["notes"], caps
        found = request(server, "GET", "/api/search?q=Gazelle+bike")[1]
        assert any("red Gazelle" in h["content"] for h in found["hits"])
        assert "kitchen" in request(server, "GET", "/api/sessions")[1]["sessions"]

        assert request(server, "POST", "/api/notes/items", {"text": "User's daughter is called Mia"})[0] == 200
        system = "\n".join(m.content for m in memory.build_conversation_context("hello", "kitchen")[:-1])
        assert "daughter is called Mia" in system


class ListingMemory(InMemoryMemory):
    """The stub storage plus the document listing export and the editor read."""

    def iter_documents(self) -> Iterator[dict[str, Any]]:
        for doc_id, (text, sid, meta) in self.docs.items():
            yield {"id": doc_id, "text": text, "session_id": sid, "metadata": meta}


def test_conversation_lists_documents_where_the_backend_can(tmp_path: Path) -> None:
    with ListingMemory({"root": str(tmp_path / "m")}) as memory, EditorServer(memory) as server:
        memory.update_history(exchange("my bike is a red Gazelle", "noted"), "kitchen")
        memory.update_history(exchange("my sister lives in Porto", "lovely"), "bedroom")
        status, convo = request(server, "GET", "/api/sessions/kitchen")
        assert status == 200
        assert [d["text"] for d in convo["documents"]] == ["Q: my bike is a red Gazelle\nA: noted"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", convo["documents"][0]["when"])
        status, exported = request(server, "GET", "/api/export")
        assert sorted(d["session_id"] for d in exported["documents"]) == ["bedroom", "kitchen"]
        status, gone = request(server, "DELETE", f"/api/documents/{convo['documents'][0]['id']}")
        assert status == 200 and gone["document"] == convo["documents"][0], "the page gets what it needs to undo"
        assert request(server, "GET", "/api/sessions/kitchen")[1]["documents"] == []
        assert request(server, "POST", "/api/documents", gone["document"])[0] == 200
        assert request(server, "GET", "/api/sessions/kitchen")[1]["documents"] == convo["documents"]


def test_purge_on_a_composite_reaches_every_member_file(tmp_path: Path) -> None:
    import time

    from ovos_memory_plugins.composite import CompositeMemory

    root = tmp_path / "composite"
    members = [{"module": "ovos-memory-plugin-lexical"}, {"module": "ovos-memory-plugin-sticky"}]
    with CompositeMemory({"root": str(root), "members": members}) as memory, EditorServer(memory) as server:
        memory.build_conversation_context("remember that my safe code is dingofive", "garage")
        memory.update_history(exchange("remember that my safe code is dingofive", "noted"), "garage")
        deadline = time.monotonic() + 10
        while not memory.search("safe code dingofive") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert files_holding(root, "dingofive")
        status, _ = request(server, "DELETE", "/api/sessions/garage?confirm=garage")
        assert status == 200
        assert files_holding(root, "dingofive") == []
