"""benchmarks/rerank_replay.py: its recording and replay agree with the real memory's prompt, and
a scorer re-ranks what the rules choose from (a deterministic scorer; the models are measured,
not tested, here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ovos_memory_plugins.lexical import LexicalMemory

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, f"{name}_under_test", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # it imports its siblings persona_path.py and recall.py
    return _load("rerank_replay", monkeypatch)


def _unit(pp: ModuleType) -> Any:
    unit = pp.Unit("u")
    unit.sessions = [
        (
            "s1",
            [
                pp.Exchange("Ana's party is on Saturday, Ana loves parties.", "Have fun at Ana's party.", {"party"}),
                pp.Exchange("My sister Ana turns 40 on the 12th of May.", "I'll remember that.", {"birthday"}),
                pp.Exchange("I am allergic to peanuts.", "Noted, no peanuts.", {"peanuts"}),
            ],
        ),
        ("s2", [pp.Exchange("Ana asked about the party dress code.", "Smart casual.", {"dress"})]),
    ]
    unit.asks = [
        pp.Ask("When is Ana's party?", {"party"}, "single"),
        pp.Ask("When does Ana turn 40?", {"birthday"}, "single"),
    ]
    return unit


def test_the_replayed_shipped_rule_gives_the_real_prompts_figures(replay: ModuleType, tmp_path: Path) -> None:
    pp = replay.pp
    unit = _unit(pp)
    rows = replay.record_unit(LexicalMemory, {"retrieval": {"min_relative_score": 0.0}}, unit)
    assert [r["q"] for r in rows] == ["When is Ana's party?", "When does Ana turn 40?"]
    first = rows[0]["cands"][0]
    assert first["tags"] == {"party"} and first["key"] == (0, 0) and "ana" in first["own"]
    real = pp.evaluate(LexicalMemory, {}, iter([unit]), None).row()  # the host's path, defaults
    hit, precision, irrelevant = replay.prompt_figures(rows, replay.shipped)
    assert (hit, precision) == (real["hit"], real["precision"])
    assert irrelevant == pytest.approx(real["irr/q"])


def _overlap_scorer(replay: ModuleType, favourite: str) -> Any:
    """Scores 1.0 for a text holding ``favourite``, else 0.0: re-ranks whatever the keywords say."""

    def vectors(texts: list[str]) -> Any:
        return np.array([[1.0 if favourite in t else 0.0] for t in texts])

    return replay.Scorer(vectors, vectors, lambda q, docs: np.array([float(d[0]) for d in docs]))


def test_a_scorer_reorders_the_candidates_the_rules_choose_from(replay: ModuleType) -> None:
    rows = replay.record_unit(LexicalMemory, {"retrieval": {"min_relative_score": 0.0}}, _unit(replay.pp))
    party = [rows[0]]
    replay.score_all({"set": party}, _overlap_scorer(replay, "dress code"))
    keyword_best = replay.rule(party[0], k=10, fuse=1.0)
    assert [c["tags"] for c in keyword_best] == [{"party"}]  # the keyword score alone: the party exchange
    reranked = replay.rule(party[0], k=10)
    assert [c["tags"] for c in reranked] == [{"dress"}]  # the scorer's favourite comes first
    assert replay.prompt_figures(party, lambda r: replay.rule(r, k=10)) == (0.0, 0.0, 1.0)
    assert replay.h_at(party, 10, 1, rerank=False) == 100.0 and replay.h_at(party, 10, 1, rerank=True) == 0.0
    # fused half and half, the keyword best (1.0 + 0) and the favourite (its keyword share + 1.0) both pass 0.5
    fused = replay.rule(party[0], k=10, fuse=0.5, ratio=0.5)
    assert {frozenset(c["tags"]) for c in fused} >= {frozenset({"party"}), frozenset({"dress"})}


def test_the_own_term_filter_applies_before_reranking(replay: ModuleType) -> None:
    rows = replay.record_unit(LexicalMemory, {"retrieval": {"min_relative_score": 0.0}}, _unit(replay.pp))
    row = rows[1]  # "When does Ana turn 40?"
    replay.score_all({"set": [row]}, _overlap_scorer(replay, "peanuts"))
    chosen = replay.rule(row, k=10, ratio=0.0)
    assert all(c["own"] & row["qt"] for c in chosen)  # the peanut exchange shares no query term: never chosen
    assert {"peanuts"} not in [c["tags"] for c in chosen]
