"""The ``ovos-memory`` command, run in-process through ``main(argv)`` on real files.

Two kinds of backend: a tiny third-party plugin registered for the test through a real
``*.dist-info`` entry point (it proves the command needs nothing but the public base and, for
export, a listing method), and every backend of this package that imports (the round trip and
the demo run on those).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import our_memory_plugins

from ovos_memory_plugins.cli import main

PLUGIN = "ovos-memory-test-jsonfile"

PLUGIN_SOURCE = '''
"""A third-party style backend for tests: documents in one JSON file under root."""
import json
import re
from pathlib import Path

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.common import MemoryHit


class JsonFileMemory(BaseRetrievalMemory):
    persistent = True

    def __init__(self, config=None):
        super().__init__(config)
        self.path = self.root / "docs.json"
        self.docs = json.loads(self.path.read_text()) if self.path.exists() else {}

    def _save(self):
        self.root.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.docs))

    def _store_document(self, doc_id, text, session_id, metadata):
        self.docs[doc_id] = text
        self._save()

    def _query_backend(self, query, top_k):
        words = {w for w in re.findall(r"\\w+", query.lower()) if len(w) > 2}
        hits = []
        for doc_id, text in self.docs.items():
            score = float(len(words & set(re.findall(r"\\w+", text.lower()))))
            if score:
                hits.append(MemoryHit(content=text, source=doc_id, score=score))
        hits.sort(key=lambda h: (-h.score, h.source))
        return hits[:top_k]

    def _delete_documents(self, doc_ids):
        n = sum(self.docs.pop(d, None) is not None for d in doc_ids)
        self._save()
        return n

    def iter_documents(self):
        known = self.storage.documents.get(self.docs)
        for doc_id, text in self.docs.items():
            doc = known.get(doc_id)
            session, meta = (doc.session_id, doc.metadata) if doc else ("default", {})
            yield {"id": doc_id, "text": text, "session_id": session, "metadata": meta}
'''


@pytest.fixture(autouse=True)
def test_plugin(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the JSON-file plugin under ``opm.agents.memory`` for this test."""
    site = tmp_path_factory.mktemp("site")
    (site / "jsonfile_memory_for_tests.py").write_text(textwrap.dedent(PLUGIN_SOURCE))
    info = site / "jsonfile_memory_for_tests-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jsonfile-memory-for-tests\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(
        f"[opm.agents.memory]\n{PLUGIN} = jsonfile_memory_for_tests:JsonFileMemory\n"
        "[opm.agents.chat]\novos-memory-test-echo = jsonfile_memory_for_tests:JsonFileMemory\n"  # a name only
    )
    monkeypatch.syspath_prepend(str(site))
    # the command run as a subprocess (its real entry point) finds the plugin too
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    sys.modules.pop("jsonfile_memory_for_tests", None)


OURS = our_memory_plugins()
#: config some backends need to run offline (a hashing embedder, a member list)
OFFLINE: dict[str, dict[str, Any]] = {
    "ovos-memory-plugin-vector": {"embedder": "hash"},
    "ovos-memory-plugin-composite": {"members": [{"module": "ovos-memory-plugin-lexical"}]},
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def target(root: Path, module: str = PLUGIN) -> list[str]:
    return ["--module", module, "--root", str(root), "--config", json.dumps(OFFLINE.get(module, {}))]


# -- check ---------------------------------------------------------------------------------------


def write_persona(path: Path, block: dict[str, Any], module: str = PLUGIN) -> Path:
    persona = {"name": "Ada", "handlers": ["ovos-memory-test-echo"], "memory_module": module, module: block}
    path.write_text(json.dumps(persona))
    return path


def test_check_accepts_a_valid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    persona = write_persona(tmp_path / "ada.json", {"namespace": "ada", "retrieval": {"max_num_results": 3}})
    code, out, _ = run(capsys, "check", str(persona))
    assert code == 0 and "is valid" in out


def test_check_names_a_misspelt_key_and_the_accepted_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    persona = write_persona(tmp_path / "ada.json", {"max_histroy": 4, "retrieval": {"max_num_result": 2}})
    code, out, _ = run(capsys, "check", str(persona))
    assert code == 1
    assert "unknown key 'max_histroy' (did you mean 'max_history'?)" in out
    assert "accepted keys:" in out and "inject_mode" in out and "namespace" in out
    assert "unknown key 'retrieval.max_num_result' (did you mean 'max_num_results'?)" in out

    code, out, _ = run(capsys, "--json", "check", str(persona))
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and len(data["problems"]) == 2


def test_check_names_a_bad_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    persona = write_persona(tmp_path / "ada.json", {"inject_mode": "telepathy"})
    code, out, _ = run(capsys, "check", str(persona), "--json")
    problems = json.loads(out)["problems"]
    assert code == 1 and "'telepathy'" in problems[0] and "'developer'" in problems[0]


def test_check_reports_unreadable_personas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"memory_module": ')
    code, _, err = run(capsys, "check", str(bad))
    assert code == 1 and "not valid JSON" in err
    none = tmp_path / "none.json"
    none.write_text('{"name": "x"}')
    code, _, err = run(capsys, "check", str(none))
    assert code == 1 and "names no memory_module" in err
    missing = write_persona(tmp_path / "m.json", {}, module="ovos-memory-plugin-nonexistent")
    code, _, err = run(capsys, "check", str(missing))
    assert code == 1 and "no memory plugin named 'ovos-memory-plugin-nonexistent'" in err


# -- the everyday verbs --------------------------------------------------------------------------


def test_remember_search_forget_stats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = target(tmp_path / "m")
    code, out, _ = run(
        capsys, "--json", "remember", *t, "--session", "s1", "--meta", "n=3", "the piano tuner is Mr Okafor"
    )
    assert code == 0
    doc = json.loads(out)["id"]
    run(capsys, "remember", *t, "--session", "s2", "the piano lid squeaks")

    code, out, _ = run(capsys, "search", *t, "piano tuner")
    assert code == 0 and doc in out and "Mr Okafor" in out
    code, out, _ = run(capsys, "search", *t, "piano", "--json", "--session", "s2")
    hits = json.loads(out)
    assert [h["content"] for h in hits] == ["the piano lid squeaks"]

    code, out, _ = run(capsys, "--json", "stats", *t)
    assert code == 0 and json.loads(out)["documents"] == 2

    code, out, _ = run(capsys, "forget", *t, doc)
    assert code == 0 and "1 document(s) deleted" in out
    code, out, _ = run(capsys, "forget", *t, doc)
    assert code == 1 and "found none of" in out
    code, _, err = run(capsys, "forget", *t, "--all")
    assert code == 2 and "--yes" in err
    code, out, _ = run(capsys, "--json", "forget", *t, "--session", "s2")
    assert code == 0 and json.loads(out)["deleted"] == 1
    code, out, _ = run(capsys, "search", *t, "piano")
    assert "no memories match" in out


def test_persona_file_selects_the_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    persona = write_persona(tmp_path / "ada.json", {"root": str(tmp_path / "ada-memory")})
    assert run(capsys, "remember", "--persona", str(persona), "the boiler code is 1234")[0] == 0
    assert (tmp_path / "ada-memory" / "docs.json").exists()
    code, out, _ = run(capsys, "--json", "search", "--persona", str(persona), "boiler code")
    assert code == 0 and json.loads(out)[0]["content"] == "the boiler code is 1234"


def test_verbs_a_backend_lacks_fail_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = target(tmp_path / "m")
    run(capsys, "remember", *t, "something")
    code, _, err = run(capsys, "dream", *t)
    assert code == 1 and "JsonFileMemory cannot dream" in err
    code, _, err = run(capsys, "notes", *t)
    assert code == 1 and "keeps no notes" in err
    code, _, err = run(capsys, "forget", *t, "--match", "x")
    assert code == 1 and "keeps no notes" in err


# -- export / import / ingest --------------------------------------------------------------------


def _fill(root: Path, capsys: pytest.CaptureFixture[str], module: str) -> None:
    from ovos_memory_plugins.cli import plugin_class
    from ovos_memory_plugins.testing import exchange

    config = {**OFFLINE.get(module, {}), "root": str(root)}
    with plugin_class(module)(config=config) as mem:
        mem.update_history(exchange("my sister Ingrid lives in Tromsø", "Tromsø, noted"), "kitchen")
        mem.update_history(exchange("her birthday is the 14th of March", "14 March, noted"), "kitchen")
        mem.store("the spare key is under the blue flowerpot", "hallway", {"ref": "k1", "tags": ["key"]})
        mem.store("中文没有空格的句子我喜欢红色自行车", "hallway")


QUERIES = ["Ingrid Tromsø", "birthday March", "spare key flowerpot", "红色自行车", "sister"]


def _searches(capsys: pytest.CaptureFixture[str], t: list[str]) -> list[Any]:
    out = []
    for q in QUERIES:
        code, text, _ = run(capsys, "--json", "search", *t, q)
        assert code == 0
        out.append([(h["id"], h["content"], h["metadata"].get("ref")) for h in json.loads(text)])
    return out


@pytest.mark.parametrize("module", [PLUGIN, *[m for m in OURS if m != "ovos-memory-plugin-notes"]])
def test_export_then_import_into_an_empty_root_gives_the_same_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], module: str
) -> None:
    _fill(tmp_path / "a", capsys, module)
    a, b = target(tmp_path / "a", module), target(tmp_path / "b", module)
    dump = tmp_path / "dump.jsonl"
    code, out, _err = run(capsys, "export", *a, str(dump))
    lines = [json.loads(x) for x in dump.read_text(encoding="utf-8").splitlines()]
    assert code == 0 and f"exported {len(lines)} document(s)" in out
    assert {d["session_id"] for d in lines} >= {"hallway"}
    key = next(d for d in lines if "flowerpot" in d["text"])
    assert key["metadata"]["ref"] == "k1" and key["metadata"]["tags"] == ["key"]

    code, out, _ = run(capsys, "import", *b, str(dump))
    assert code == 0 and f"imported {len(lines)} of {len(lines)} line(s)" in out
    if module == "ovos-memory-plugin-sticky":
        # sticky notes come back through NotesKeeper.remember: the same notes, sessions and
        # dates, found by the same searches; the ids are the notes' own (from the text)
        def texts_of(found: list[Any]) -> list[list[str]]:
            return [[content for _id, content, _ref in hits] for hits in found]

        assert texts_of(_searches(capsys, b)) == texts_of(_searches(capsys, a))
        return
    assert _searches(capsys, b) == _searches(capsys, a)
    code, out, _ = run(capsys, "export", *b)
    again = [json.loads(x) for x in out.splitlines()]
    assert sorted(again, key=lambda d: d["id"]) == sorted(lines, key=lambda d: d["id"])


def test_import_is_all_or_nothing_and_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text('{"text": "no id is fine"}\n{"id": "d-1", "text": "fine too"}\n{"id": "d-2", "txt": "no text"}\n')
    t = target(tmp_path / "m")
    code, out, err = run(capsys, "import", *t, str(dump))
    assert code == 1 and "dump.jsonl:3" in err and "nothing was imported" in err and out == ""
    assert not (tmp_path / "m").exists(), "a bad line stops the import before the memory is even opened"
    dump.write_text('{"text": "no id is fine"}\n{"id": "d-1", "text": "fine too"}\n')
    code, out, _ = run(capsys, "import", *t, str(dump))
    assert code == 0 and "imported 2 of 2 line(s)" in out


def test_ingest_a_folder_twice_stores_it_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "texts"
    (folder / "sub").mkdir(parents=True)
    (folder / "chat.txt").write_text(
        "User: my dentist is Dr Farouk\nAssistant: Dr Farouk, noted.\n"
        "User: and the appointment\nis on Tuesday\nAssistant: Tuesday it is.\n"
    )
    (folder / "log.jsonl").write_text(
        json.dumps({"role": "user", "content": "I parked on level 3"})
        + "\n"
        + json.dumps({"role": "assistant", "content": "level 3"})
        + "\n"
    )
    (folder / "sub" / "recipes.md").write_text("Lentil soup: cumin and lemon.\n\nPancakes: buttermilk.\n")
    (folder / "ignored.bin").write_bytes(b"\x00\x01")
    t = target(tmp_path / "m")
    code, out, _ = run(capsys, "ingest", *t, str(folder))
    assert code == 0
    assert "file(s) into" in out and "3 exchange(s), 2 text chunk(s); 5 new" in out
    code, out, _ = run(capsys, "ingest", *t, str(folder))
    assert code == 0 and "3 exchange(s), 2 text chunk(s); 0 new" in out, "ingesting again stores nothing new"
    code, out, _ = run(capsys, "--json", "export", *t)
    assert len(out.splitlines()) == 5
    code, out, _ = run(capsys, "--json", "search", *t, "appointment Tuesday")
    assert json.loads(out)[0]["content"] == "Q: and the appointment\nis on Tuesday\nA: Tuesday it is."
    code, out, _ = run(capsys, "--json", "search", *t, "lentil soup")
    assert json.loads(out)[0]["metadata"]["kind"] == "ingest"
    code, _, err = run(capsys, "ingest", *t, str(tmp_path / "nope"))
    assert code == 1 and "no such file" in err


# -- demo ----------------------------------------------------------------------------------------


def test_demo_on_any_backend(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--json", "demo", "--module", PLUGIN)
    assert code == 0
    data = json.loads(out)
    assert not Path(data["root"]).exists(), "the temporary root is removed"
    after = data["after_restart"][0]["messages"]
    assert after[-1] == {"role": "user", "content": "When is my sister's birthday?"}
    assert any("14th of March" in m["content"] for m in after[:-1])


def test_the_readme_demo_runs_offline_in_seconds(tmp_path: Path) -> None:
    """``ovos-memory demo`` as the README runs it: the console script, default backend."""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path)}
    script = Path(sys.executable).with_name("ovos-memory")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "ovos_memory_plugins.cli"]
    done = subprocess.run([*cmd, "demo"], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert "restart" in done.stdout and "14th of March" in done.stdout.split("restart", 1)[1]
    seconds = float(done.stdout.rsplit("done in ", 1)[1].split(" s", 1)[0])
    assert seconds < 10


# -- notes verbs (sticky and notes backends) -----------------------------------------------------


def test_sticky_remember_notes_forget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = target(tmp_path / "m", "ovos-memory-plugin-sticky")
    assert run(capsys, "remember", *t, "my bike is the red one")[0] == 0
    assert run(capsys, "remember", *t, "the bike lock code is 5521")[0] == 0
    assert run(capsys, "remember", *t, "my sister's bike is blue")[0] == 0
    code, out, err = run(capsys, "notes", *t)
    assert code == 0 and "my bike is the red one" in out and "the bike lock code is 5521" in out
    assert f"notes in {tmp_path / 'm'}" in err
    code, out, _ = run(capsys, "--json", "notes", *t)
    assert "the bike lock code is 5521" in [n["text"] for n in json.loads(out)["notes"]]
    code, out, _ = run(capsys, "--json", "search", *t, "lock code")
    assert json.loads(out)[0]["content"] == "the bike lock code is 5521"

    code, out, _ = run(capsys, "forget", *t, "--match", "the bike lock code")
    assert code == 0 and "5521" in out
    code, out, _ = run(capsys, "forget", *t, "--match", "bike")
    assert code == 1 and "matches several notes" in out and "my bike is the red one" in out
    code, out, _ = run(capsys, "forget", *t, "--match", "zebra crossing")
    assert code == 1 and "no note matches" in out
    code, out, _ = run(capsys, "notes", *t)
    assert "5521" not in out and "red one" in out and "blue" in out


def test_sticky_notes_edit_in_the_editor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    t = target(tmp_path / "m", "ovos-memory-plugin-sticky")
    run(capsys, "remember", *t, "my bike is the red one")
    run(capsys, "remember", *t, "the bike lock code is 5521")
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "text = p.read_text().replace('- the bike lock code is 5521\\n', '')\n"
        "p.write_text(text + '- the spare helmet is in the shed\\n')\n"
    )
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    code, out, _ = run(capsys, "notes", "--edit", *t)
    assert code == 0 and "notes saved: 1 added, 1 removed" in out
    code, out, _ = run(capsys, "notes", *t)
    assert "5521" not in out and "my bike is the red one" in out and "the spare helmet is in the shed" in out


def test_notes_remember_edit_forget_dream_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    t = target(tmp_path / "m", "ovos-memory-plugin-notes")
    code, out, _ = run(capsys, "--json", "remember", *t, "my bike is red")
    assert code == 0 and json.loads(out)["status"] == "added"
    code, out, _ = run(capsys, "--json", "remember", *t, "my bike is red")
    assert code == 0 and json.loads(out)["status"] == "duplicate"
    assert run(capsys, "remember", *t, "the boiler service is due in May")[0] == 0
    code, _, err = run(capsys, "remember", *t, "--meta", "a=1", "x")
    assert code == 2 and "--meta goes with --document" in err

    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\np = pathlib.Path(sys.argv[1])\np.write_text(p.read_text().replace('red', 'green'))\n"
    )
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    code, out, _ = run(capsys, "notes", "--edit", *t)
    assert code == 0 and "notes saved: 1 added, 1 removed" in out
    code, out, _ = run(capsys, "notes", *t)
    assert "] my bike is green" in out and "bike is red" not in out

    code, out, _ = run(capsys, "--json", "forget", *t, "--match", "boiler service")
    assert code == 0 and json.loads(out)["note"]["text"] == "the boiler service is due in May"
    code, out, _ = run(capsys, "dream", *t)
    assert code == 1 and "skipped" in out

    assert run(capsys, "remember", *t, "my sister Ingrid lives in Tromsø")[0] == 0
    dump = tmp_path / "notes.jsonl"
    assert run(capsys, "export", *t, str(dump))[0] == 0
    lines = [json.loads(x) for x in dump.read_text(encoding="utf-8").splitlines()]
    notes = [(d["text"], d["metadata"]["kind"]) for d in lines if d["metadata"].get("kind") == "note"]
    assert notes == [("my bike is green", "note"), ("my sister Ingrid lives in Tromsø", "note")]
    other = target(tmp_path / "other", "ovos-memory-plugin-notes")
    code, out, _ = run(capsys, "import", *other, str(dump))
    assert code == 0 and "(2 as notes)" in out

    def listed(args: list[str]) -> list[tuple[str, str]]:
        return [(n["text"], n["date"]) for n in json.loads(run(capsys, "--json", "notes", *args)[1])["notes"]]

    assert listed(other) == listed(t)


# -- the migration recipes of docs/migration.md, run as written ---------------------------------

MIGRATION = Path(__file__).resolve().parents[2] / "docs" / "migration.md"


def _recipe(n: int, path: str, replacement: Path) -> str:
    scripts = re.findall(r"python3 - > \S+ <<'EOF'\n(.*?)\nEOF\n", MIGRATION.read_text(encoding="utf-8"), re.S)
    script = scripts[n]
    assert path in script
    return script.replace(path, str(replacement))


def _run_recipe(script: str, out: Path) -> None:
    done = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    out.write_text(done.stdout, encoding="utf-8")


def test_the_keyword_migration_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    old = tmp_path / "lexical_memory.db"  # the 1.x schema, with its counter ids
    con = sqlite3.connect(old)
    con.execute("CREATE VIRTUAL TABLE lexical_memory USING fts5(doc_id UNINDEXED, session_id UNINDEXED, content)")
    con.executemany(
        "INSERT INTO lexical_memory (doc_id, session_id, content) VALUES (?, ?, ?)",
        [
            ("kitchen_0", "kitchen", "Q: my sister Ingrid lives in Tromsø\nA: noted"),
            ("hall_0", "hall", "Q: the spare key is under the flowerpot\nA: ok"),
        ],
    )
    con.commit()
    con.close()
    dump = tmp_path / "old-lexical.jsonl"
    _run_recipe(_recipe(0, "~/.local/share/ovos/lexical_memory.db", old), dump)
    t = target(tmp_path / "new", "ovos-memory-plugin-lexical")
    code, out, _ = run(capsys, "import", *t, str(dump))
    assert code == 0 and "imported 2 of 2 line(s)" in out
    code, out, _ = run(capsys, "--json", "search", *t, "where is the spare key")
    hit = json.loads(out)[0]
    assert (
        hit["content"] == "Q: the spare key is under the flowerpot\nA: ok" and hit["metadata"]["session_id"] == "hall"
    )


def test_the_entity_facts_migration_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "entity_memory.json"  # the 1.x format: session -> {"facts": [...]}
    old.write_text(
        json.dumps(
            {"default": {"facts": ["User has a cat called Bartholomew"]}, "kitchen": {"facts": ["User is vegan"]}}
        )
    )
    dump = tmp_path / "facts.jsonl"
    _run_recipe(_recipe(1, "~/.local/share/ovos/entity_memory.json", old), dump)
    t = target(tmp_path / "new", "ovos-memory-plugin-notes")
    assert run(capsys, "import", *t, str(dump))[0] == 0
    code, out, _ = run(capsys, "notes", *t)
    assert code == 0 and "] User has a cat called Bartholomew" in out and "] User is vegan" in out


REACH = {"key": "sk-test", "api_url": "http://127.0.0.1:9/v1"}


def test_check_warns_when_the_chat_engine_would_drop_system_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    persona = {
        "name": "Ada",
        "handlers": ["ovos-chat-openai-plugin"],
        "ovos-chat-openai-plugin": {"model": "m", **REACH},
        "memory_module": PLUGIN,
        PLUGIN: {"system_prompt": "You are Ada."},
    }
    path = tmp_path / "ada.json"
    path.write_text(json.dumps(persona))
    code, out, _ = run(capsys, "check", str(path))
    assert code == 0 and "is valid" in out and "warning: ovos-chat-openai-plugin drops every SYSTEM message" in out

    persona["ovos-chat-openai-plugin"] = {"model": "m", "allow_system_prompts": True, **REACH}
    path.write_text(json.dumps(persona))
    code, out, _ = run(capsys, "--json", "check", str(path))
    assert code == 0 and json.loads(out)["warnings"] == []

    persona["ovos-chat-openai-plugin"] = {"model": "m", **REACH}
    persona[PLUGIN] = {"inject_mode": "developer"}
    path.write_text(json.dumps(persona))
    code, out, _ = run(capsys, "--json", "check", str(path))
    assert code == 0 and json.loads(out)["warnings"] == []


def test_check_warns_about_handlers_that_are_not_installed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_persona(tmp_path / "ada.json", {})
    persona = json.loads(path.read_text())
    persona["handlers"] = ["ovos-memory-test-echo", "ovos-no-such-solver"]
    path.write_text(json.dumps(persona))
    code, out, _ = run(capsys, "check", str(path))
    assert code == 0 and "is valid" in out
    assert "warning: handler 'ovos-no-such-solver' is not installed" in out and "ovos-memory-test-echo" not in out


def test_notes_export_carries_retired_notes_and_import_keeps_them_retired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ovos_memory_plugins.cli import plugin_class

    root = tmp_path / "m"
    with plugin_class("ovos-memory-plugin-notes")(config={"root": str(root)}) as mem:
        mem.remember("my graphics card is a GTX 1070")
        assert mem.update("graphics card", "my graphics card is an RX 7800")
    dump = tmp_path / "notes.jsonl"
    assert run(capsys, "export", *target(root, "ovos-memory-plugin-notes"), str(dump))[0] == 0
    lines = [json.loads(x) for x in dump.read_text(encoding="utf-8").splitlines()]
    notes = {d["text"]: d["metadata"] for d in lines if d["metadata"].get("kind") == "note"}
    assert notes["my graphics card is a GTX 1070"]["retired_on"]
    assert "retired_on" not in notes["my graphics card is an RX 7800"]
    other = target(tmp_path / "other", "ovos-memory-plugin-notes")
    code, out, _ = run(capsys, "import", *other, str(dump))
    assert code == 0 and "(2 as notes)" in out
    code, out, _ = run(capsys, "--json", "notes", *other)
    state = {n["text"]: n["retired_on"] for n in json.loads(out)["notes"]}
    assert state["my graphics card is an RX 7800"] is None and state["my graphics card is a GTX 1070"]


def test_plugins_not_built_on_the_base_are_refused_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ovos_openai_plugin", reason="uses ovos-openai-plugin's memory plugin as a foreign one")
    foreign = "ovos-openai-rag-memory-plugin"
    code, _, err = run(capsys, "search", "--module", foreign, "--root", str(tmp_path), "anything")
    assert code == 1 and "is not built on ovos_memory_plugins.BaseRetrievalMemory" in err
    path = write_persona(tmp_path / "p.json", {"bogus": 1}, module=foreign)
    code, out, _ = run(capsys, "--json", "check", str(path))
    data = json.loads(out)
    assert code == 0 and data["checked"] is False and data["problems"] == []


# -- the command as people run it: the installed entry point, in a subprocess ------------------

SCRIPT = Path(sys.executable).with_name("ovos-memory")


def cli(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``ovos-memory ARGV`` through the console script pip installed (the real entry point)."""
    assert SCRIPT.exists(), "the ovos-memory console script is not installed in this venv"
    return subprocess.run(
        [str(SCRIPT), *argv], input=stdin, capture_output=True, text=True, timeout=120, check=False, env=os.environ
    )


def one_line(text: str) -> str:
    lines = text.splitlines()
    assert len(lines) == 1, f"expected one line, got {len(lines)}: {text!r}"
    return lines[0]


def test_version_and_help_point_to_docs_reachable_from_a_wheel() -> None:
    from importlib.metadata import version

    from ovos_memory_plugins.cli import DOCS_URL

    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"ovos-memory-plugins {version('ovos-memory-plugins')}"
    assert version("ovos-memory-plugins") == "2.0.0a1"
    done = cli("--help")
    assert done.returncode == 0 and f"{DOCS_URL}/cli.md" in done.stdout and DOCS_URL.startswith("https://")
    done = cli("ingest", "--help")
    assert done.returncode == 0
    assert '"role": "user"|"assistant"' in done.stdout and "User:" in done.stdout and "paragraphs" in done.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["search"],
        ["frobnicate"],
        [],
        ["forget"],
        ["forget", "--all"],
        ["search", "-k", "0", "x"],
        ["search", "-k", "-3", "x"],
        ["search", "-k", "many", "x"],
        ["search", "--module", "lexical", "--persona", "p.json", "x"],
        ["serve", "--port", "70000"],
        ["remember", "--meta", "novalue", "x"],
    ],
    ids=lambda argv: " ".join(argv) or "nothing",
)
def test_usage_errors_are_one_line_and_exit_2(argv: list[str], tmp_path: Path) -> None:
    done = cli(*argv)
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done.stderr).startswith("ovos-memory") and ": error: " in done.stderr
    done = cli("--json", *argv)
    error = json.loads(one_line(done.stderr))
    assert done.returncode == 2 and error["exit"] == 2 and error["error"]
    assert not any(Path(os.environ["XDG_DATA_HOME"]).iterdir()), "bad usage creates nothing"


def test_failures_are_one_line_exit_1_and_json_under_json(tmp_path: Path) -> None:
    done = cli("search", "--module", "nonexistent", "x")
    assert done.returncode == 1 and "no memory plugin named 'nonexistent'" in one_line(done.stderr)
    done = cli("--json", "check", str(tmp_path / "missing.json"))
    error = json.loads(one_line(done.stderr))
    assert done.returncode == 1 and error["command"] == "check" and "cannot read" in error["error"]


def test_read_only_commands_create_nothing_and_name_the_folder(tmp_path: Path) -> None:
    data_home = Path(os.environ["XDG_DATA_HOME"])
    typo = data_home / "ovos" / "memory" / "adaa"
    for argv in (
        ["search", "--namespace", "adaa", "birthday"],
        ["stats", "--namespace", "adaa"],
        ["export", "--namespace", "adaa"],
        ["notes", "--module", "sticky", "--namespace", "adaa"],
        ["forget", "--namespace", "adaa", "x-123"],
    ):
        done = cli(*argv)
        assert done.returncode == 1 and f"no memory in {typo}" in one_line(done.stderr), argv
        assert done.stdout == ""
    assert not (data_home / "ovos").exists(), "a read-only command created files"

    root = tmp_path / "ada"
    assert cli("remember", "--root", str(root), "--document", "the spare key is under the flowerpot").returncode == 0
    done = cli("search", "--root", str(root), "spare key")
    assert done.returncode == 0 and f"1 match(es) in {root}:" in done.stdout
    done = cli("search", "--root", str(root), "zebra")
    assert done.returncode == 0 and f"no memories match 'zebra' in {root}" in done.stdout
    done = cli("export", "--root", str(root))
    assert done.returncode == 0 and f"exported 1 document(s) from {root}" in done.stderr
    assert "warning" not in done.stderr, "reading a memory with its own module creates nothing"
    files = sorted(p.name for p in root.iterdir())
    done = cli("notes", "--module", "sticky", "--root", str(root))  # the wrong module for that folder
    assert done.returncode == 1 and f"no ovos-memory-plugin-sticky memory in {root}" in one_line(done.stderr)
    assert sorted(p.name for p in root.iterdir()) == files, "a read-only command with the wrong module created files"


def test_forget_says_when_it_found_nothing(tmp_path: Path) -> None:
    root = tmp_path / "m"
    done = cli("--json", "remember", "--root", str(root), "--document", "the piano tuner is Mr Okafor")
    doc = json.loads(done.stdout)["id"]
    done = cli("forget", "--root", str(root), "x-does-not-exist")
    assert done.returncode == 1 and "found none of x-does-not-exist; nothing was deleted" in done.stdout
    done = cli("forget", "--root", str(root), doc)
    assert done.returncode == 0 and "1 document(s) deleted" in done.stdout


def test_config_warnings_print_once_on_one_line(tmp_path: Path) -> None:
    persona = write_persona(
        tmp_path / "ada.json", {"root": str(tmp_path / "m"), "max_histroy": 3}, module="ovos-memory-plugin-lexical"
    )
    assert cli("remember", "--persona", str(persona), "--document", "a note").returncode == 0
    done = cli("search", "--persona", str(persona), "note")
    assert done.returncode == 0
    warnings = [line for line in done.stderr.splitlines() if "max_histroy" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: "), done.stderr
    assert "Traceback" not in done.stderr


def test_loading_our_plugin_imports_no_other_plugin_and_prints_no_noise(tmp_path: Path) -> None:
    done = cli("--json", "remember", "--root", str(tmp_path / "m"), "--document", "quiet please")
    assert done.returncode == 0 and done.stderr == ""
    probe = (
        "import sys\n"
        "from importlib.metadata import entry_points\n"
        "from ovos_memory_plugins.cli import main\n"
        f"main(['stats', '--root', {str(tmp_path / 'm')!r}])\n"
        "ours = {'ovos_memory_plugins'}\n"
        "others = {ep.value.split(':')[0].split('.')[0] for ep in entry_points(group='opm.agents.memory')} - ours\n"
        "print(sorted(m for m in others if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("[]"), f"other memory plugins were imported: {done.stdout}"
    assert "Could not find" not in done.stderr and "not installed" not in done.stderr


def test_ingest_twice_stores_once_and_keeps_the_transcript_dates(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text(
        json.dumps({"role": "user", "content": "my dentist is Dr Farouk", "time": "2024-03-14T09:30:00Z"})
        + "\n"
        + json.dumps({"role": "assistant", "content": "Dr Farouk, noted."})
        + "\n"
    )
    notes = tmp_path / "old.txt"
    notes.write_text("[2023-01-02 10:00] User: I parked on level 3\n[2023-01-02 10:01] Assistant: level 3\n")
    root = tmp_path / "m"
    done = cli("ingest", "--root", str(root), str(chat), str(notes))
    assert done.returncode == 0 and "2 exchange(s), 0 text chunk(s); 2 new" in done.stdout
    done = cli("ingest", "--root", str(root), str(chat), str(notes))
    assert done.returncode == 0 and "2 exchange(s), 0 text chunk(s); 0 new" in done.stdout
    docs = [json.loads(line) for line in cli("export", "--root", str(root)).stdout.splitlines()]
    assert len(docs) == 2
    when = {d["session_id"]: d["metadata"]["time"] for d in docs}
    assert when == {"chat": 1710408600.0, "old": 1672653600.0}
    found = cli("search", "--root", str(root), "dentist Farouk")
    assert found.returncode == 0 and "2024-03-1" in found.stdout, found.stdout  # its date (local time zone)


def test_import_counts_and_writes_nothing_on_a_bad_line(tmp_path: Path) -> None:
    good = '{"text": "one"}\n{"text": "two"}\n'
    root = tmp_path / "m"
    done = cli("import", "--root", str(root), "-", stdin=good + '{"text": 3}\n')
    assert done.returncode == 1 and "<stdin>:3" in one_line(done.stderr) and "nothing was imported" in done.stderr
    assert not root.exists()
    done = cli("--json", "import", "--root", str(root), "-", stdin=good)
    assert done.returncode == 0 and json.loads(done.stdout)["imported"] == 2


@pytest.mark.parametrize("module", OURS)
def test_the_demo_of_each_backend_shows_it_working(module: str) -> None:
    done = cli("--json", "demo", "--module", module)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "no members" not in done.stderr
    data = json.loads(done.stdout)
    birthday = data["after_restart"][0]
    added = "\n".join(m["content"] for m in birthday["added"])
    assert "14th of March" in added or "14 March" in added, f"{module} recalled nothing: {birthday['messages']}"
    assert birthday["messages"][-1]["content"] == "When is my sister's birthday?"
    if module.endswith("composite"):
        assert len(data["config"]["members"]) >= 2
    text = cli("demo", "--module", module).stdout
    assert "(+ = added by the memory)" in text and "\n + " in text


def test_check_warns_about_missing_extras_and_chat_engines_that_cannot_reach_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    persona = {
        "name": "Ada",
        "handlers": ["ovos-chat-openai-plugin"],
        "ovos-chat-openai-plugin": {"model": "gpt-4o-mini", "allow_system_prompts": True},
        "memory_module": "ovos-memory-plugin-vector",
        "ovos-memory-plugin-vector": {"embedder": "local"},
    }
    path = tmp_path / "ada.json"
    path.write_text(json.dumps(persona))
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if the [local] extra were not installed
    code, out, _ = run(capsys, "--json", "check", str(path))
    warnings = json.loads(out)["warnings"]
    assert code == 0
    assert any(
        "needs onnxruntime" in w and "(not installed)" in w and "ovos-memory-plugins[local]" in w for w in warnings
    )
    assert any("sets no 'key' and no 'api_url'" in w for w in warnings)

    monkeypatch.delitem(sys.modules, "onnxruntime")
    persona["ovos-chat-openai-plugin"].update({"key": "sk-x", "api_url": "https://api.openai.com/v1"})
    persona["ovos-memory-plugin-vector"] = {"embedder": "hash"}
    path.write_text(json.dumps(persona))
    code, out, _ = run(capsys, "--json", "check", str(path))
    assert code == 0 and json.loads(out)["warnings"] == []


def test_a_vector_persona_without_its_model_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    t = ["--module", "vector", "--root", str(tmp_path / "v")]
    assert run(capsys, "remember", *t, "--document", "the spare key is under the flowerpot")[0] == 0
    for _ in range(2):
        code, _out, err = run(capsys, "search", *t, "spare key")
        assert code == 0 and "Traceback" not in err
        assert all(len(line) < 600 for line in err.splitlines())


def test_a_composite_persona_keeps_notes_as_its_member_does(tmp_path: Path) -> None:
    members = [
        {"module": "ovos-memory-plugin-lexical", "name": "keyword"},
        {"module": "ovos-memory-plugin-sticky", "name": "sticky"},
    ]
    t = ["--module", "composite", "--root", str(tmp_path / "c"), "--config", json.dumps({"members": members})]
    done = cli("--json", "remember", *t, "my bike lock code is 5521")
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "added", done.stderr
    done = cli("notes", *t)
    assert done.returncode == 0 and "my bike lock code is 5521" in done.stdout
    done = cli("--json", "search", *t, "bike lock")
    assert any(h["content"] == "my bike lock code is 5521" for h in json.loads(done.stdout))
    chat = tmp_path / "chat.txt"
    chat.write_text("User: the boiler is serviced in May\nAssistant: May, noted.\n")
    assert "1 new" in cli("ingest", *t, str(chat)).stdout
    assert "0 new" in cli("ingest", *t, str(chat)).stdout
    done = cli("forget", *t, "--match", "bike lock code")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5521" not in cli("notes", *t).stdout


def test_the_command_list_matches_the_parser() -> None:
    import argparse

    from ovos_memory_plugins.cli import COMMANDS, build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(COMMANDS)


def test_import_writes_documents_in_one_batch_where_the_memory_offers_it(tmp_path: Path) -> None:
    from ovos_memory_plugins.testing import InMemoryMemory
    from ovos_memory_plugins.transfer import import_jsonl

    class Batched(InMemoryMemory):
        batches: ClassVar[list[int]] = []

        def put_documents(self, docs: Any) -> int:
            rows = list(docs)
            self.batches.append(len(rows))
            parent = getattr(super(), "put_documents", None)  # the base's own batch, where it has one
            if callable(parent):
                return int(parent(rows))
            for doc_id, text, session_id, metadata in rows:
                self.put_document(doc_id, text, session_id, metadata)
            return len(rows)

    lines = ['{"id": "d-1", "text": "one"}', '{"text": "two", "session_id": "s"}', '{"id": "d-3", "text": "three"}']
    with Batched({"root": str(tmp_path)}) as memory:
        report = import_jsonl(memory, lines)
        assert report.imported == 3 and Batched.batches == [3]
        assert memory.search("two")[0].source == memory.document_id("s", "two")
