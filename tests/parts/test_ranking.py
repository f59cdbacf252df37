"""BM25Ranker: checked against an independent rank-bm25 run."""

from __future__ import annotations

import pytest
from rank_bm25 import BM25Okapi

from ovos_memory_plugins.ranking import BM25Ranker
from ovos_memory_plugins.text import query_terms, tokenize

CORPUS = [
    "my cat Bartholomew is orange and sleeps all day",
    "the boiler code is 4471",
    "we went hiking in the Alps last summer",
    "the dog barks at the orange cat next door",
    "Bartholomew the cat likes tuna",
    "I repaired the red bicycle yesterday",
    "the garage door code is 9911",
    "our summer holiday was in Portugal",
]


def test_okapi_scores_equal_a_plain_rank_bm25_run() -> None:
    query = "orange cat Bartholomew"
    reference = BM25Okapi([tokenize(t) for t in CORPUS], k1=1.5, b=0.75)
    expected = reference.get_scores(query_terms(query))
    ranker = BM25Ranker(CORPUS, k1=1.5, b=0.75, idf="okapi")
    assert ranker.scores(query) == pytest.approx(list(expected))


def test_lucene_idf_ranks_like_rank_bm25_where_idf_is_positive() -> None:
    query = "garage code"
    reference = BM25Okapi([tokenize(t) for t in CORPUS])
    ref_scores = reference.get_scores(query_terms(query))
    ref_order = sorted((i for i, s in enumerate(ref_scores) if s > 0), key=lambda i: -ref_scores[i])
    assert [i for i, _ in BM25Ranker(CORPUS).rank(query, 5)] == ref_order == [6, 1]


def test_rank_returns_only_matching_documents_best_first() -> None:
    hits = BM25Ranker(CORPUS).rank("what is the name of my cat", 10)
    assert [i for i, _ in hits][:1] in ([0], [4])
    assert {i for i, _ in hits} == {0, 3, 4}
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_tiny_corpus_scores_stay_positive() -> None:
    # rank-bm25's Okapi idf is negative here (the term is in every document)
    hits = BM25Ranker(["the cat", "a cat"]).rank("cat", 5)
    assert [i for i, _ in hits] == [0, 1] and all(s > 0 for _, s in hits)
    assert BM25Ranker(["only one note about tea"]).rank("tea", 3)[0][1] > 0


def test_edge_cases() -> None:
    assert BM25Ranker([]).rank("anything", 3) == []
    assert BM25Ranker(["", "   "]).rank("anything", 3) == []
    assert BM25Ranker(CORPUS).rank("tell me a joke", 3) == []
    assert BM25Ranker(CORPUS).rank("cat", 0) == []
    assert len(BM25Ranker(CORPUS).rank("cat", 1)) == 1


def test_chinese_two_character_words() -> None:
    corpus = ["我喜欢红色自行车", "今天天气很好", "他买了一辆新汽车"]
    assert BM25Ranker(corpus).rank("自行车在哪里", 3)[0][0] == 0


def test_tokenized_must_match_corpus() -> None:
    with pytest.raises(ValueError):
        BM25Ranker(["a", "b"], tokenized=[["a"]])
