"""benchmarks/recall.py: the protocol on tiny hand-made data sets, and the skip without data."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "recall.py"


@pytest.fixture
def recall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("recall_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "recall_under_test", module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "DATA", tmp_path / "bench")
    return module


def test_skips_clearly_without_data(recall: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert recall.main(["lexical"]) == 0
    assert "SKIPPED" in capsys.readouterr().out


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_locomo_protocol(recall: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    conv = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:00 pm on 2 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a tortoise called Gregor"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely!", "blip_caption": "a tortoise on grass"},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "We went sailing on the lake"},
            ],
        },
        "qa": [
            {"question": "What is the tortoise called?", "evidence": ["D1:1"], "category": 4},
            {"question": "Where did they go sailing?", "evidence": ["D1:3; D9:9"], "category": 1},
            {"question": "Unanswerable", "evidence": ["D7:7"], "category": 2},
        ],
    }
    _write(recall.DATA / "locomo" / "locomo_dev.json", [conv])
    unit = next(recall.locomo_units())
    assert unit.documents[1] == (
        "D1:2",
        "[1:00 pm on 2 May, 2023] Bo: Lovely! (shared an image: a tortoise on grass)",
        "session_1",
    )
    assert [q.relevant for q in unit.questions] == [{"D1:1"}, {"D1:3"}]  # unknown ids dropped
    assert recall.main(["lexical", "--sets", "locomo"]) == 0
    out = capsys.readouterr().out
    assert "single-hop" in out and "multi-hop" in out
    overall = next(line for line in out.splitlines() if line.startswith("overall"))
    assert overall.split()[2:] == ["100.0", "100.0"]


def test_madial_and_longmemeval_protocol(recall: ModuleType) -> None:
    folder = recall.DATA / "madial"
    folder.mkdir(parents=True)
    zh = [
        {"1": {"time": "2023-01-01", "scene": "活动类", "emotion": "开心", "event": "放风筝", "user-id": 1, "id": "1"}}
    ]
    en = [{"1": {"time": "2023-01-01", "scene": "Activity", "emotion": "Happy", "event": "flew a kite"}}]
    for lang, rows in (("zh", zh), ("en", en)):
        (folder / f"madial_{lang}_memory.jsonl").write_text("\n".join(json.dumps(r) for r in rows), "utf-8")
    dialogue = {
        "dialogue": ["<BOD>\n", "<Bart>: kite\n", "<Assistant>: yes\n"],
        "test-turn": [2],
        "relevant-id": [1],
        "user-id": 1,
    }
    (folder / "madial_en_dialogue_dev.jsonl").write_text(json.dumps(dialogue), "utf-8")
    unit = next(recall.madial_units("en"))
    assert unit.documents == [("1", "[2023-01-01] Activity Happy flew a kite", "user-1")]
    assert unit.questions[0].query == "<BOD>\n<Bart>: kite\n"
    lme = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "what did I buy?",
        "haystack_session_ids": ["s1"],
        "haystack_dates": ["2023/04/23 (Sun) 18:14"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "hi"},
                {"role": "user", "content": "I bought a red kettle", "has_answer": True},
            ]
        ],
    }
    _write(recall.DATA / "longmemeval" / "longmemeval_s_dev.json", [lme, {**lme, "question_id": "q2_abs"}])
    units = list(recall.longmemeval_units())
    assert len(units) == 1  # _abs questions skipped
    assert units[0].documents[1] == ("s1_3", "[2023/04/23 (Sun) 18:14] I bought a red kettle", "s1")
    assert units[0].questions[0].relevant == {"s1_3"}
