"""``ovos-memory-plugin-lexical``: keyword recall over one SQLite file, in every script.

The zero-config default memory: no service, no model. It is the memory's documents table plus
a keyword index (:mod:`ovos_memory_plugins.storage.keyword`): documents are tokenized in Python
with :func:`ovos_memory_plugins.text.tokenize` (Han/Kana/Hangul/Thai runs as character bigrams,
folded and stemmed words) and the terms go into an SQLite FTS5 index; queries use
:func:`~ovos_memory_plugins.text.query_terms` (no stop words), each term quoted, OR'ed and
ranked with FTS5's bm25. A leading ``[date]`` and ``Speaker:`` label of a document are indexed
in a second, lighter column, so they help without outweighing what was said.

Persona JSON::

    {
      "memory_module": "ovos-memory-plugin-lexical",
      "ovos-memory-plugin-lexical": {
        "namespace": "ada",
        "lang": "en",
        "retrieval": {"max_num_results": 5, "min_relative_score": 0.3}
      }
    }

One file, ``<root>/lexical.db`` (``db_path``), holds the documents, the index and the
conversation history; WAL mode, so the ``ovos-memory`` CLI or another process may read and
write it while the persona runs. When this Python's SQLite has no FTS5, the same API ranks the
stored terms with :class:`~ovos_memory_plugins.ranking.BM25Ranker` (one log line says so).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.config import check_path, option
from ovos_memory_plugins.index import IndexedMemory
from ovos_memory_plugins.storage.keyword import StoredTerms, query_counts, split_head
from ovos_memory_plugins.storage.records import KeywordSettings
from ovos_memory_plugins.storage.seam import Index
from ovos_memory_plugins.text import stop_words, tokenize

__all__ = ["DatabaseFileMemory", "LexicalMemory", "LexicalOptions", "db_path_option", "split_head"]


def _check_lang(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and re.fullmatch(r"[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*", value)):
        return None
    return "a language code such as 'en', 'pt-BR' or 'de', or null"


def db_path_option(holds: str, default_name: str) -> Any:
    """The ``db_path`` key of a backend whose one SQLite file holds ``holds`` and is
    ``<root>/<default_name>`` by default (the keyword and vector backends)."""
    return option(
        None,
        doc=f"The SQLite file ({holds}); `~` is expanded. Default: `<root>/{default_name}`. "
        "With a `namespace` other than `default`: `<its folder>/<namespace>/<its name>`.",
        check=check_path,
    )


class DatabaseFileMemory(IndexedMemory):
    """An indexed memory whose options (its ``options_class``) have a ``db_path`` key
    (:func:`db_path_option`), the keyword and vector backends: its SQLite file is there, and
    ``db_path`` says which file it opened (None: RAM, or a database server)."""

    db_path: Path | None

    @classmethod
    def configured_db_path(cls, options: Any) -> str | None:
        kind = cls.options_class
        return options.db_path if kind is not None and isinstance(options, kind) else None

    def _database_path(self) -> tuple[Path, Path | None] | None:
        where = super()._database_path()
        self.db_path = where[0] if where is not None else None
        return where


@dataclass
class LexicalOptions:
    """The keyword backend's own keys."""

    db_path: str | None = db_path_option("documents, index and history", "lexical.db")
    lang: str | None = option(
        None,
        doc="Language of the stop-word list queries use (en, pt, es, fr, de, it, nl; a region such as "
        "`pt-BR` is fine), and the words a long memory is shortened around in the prompt. English "
        "and the CJK list always apply. null: English.",
        check=_check_lang,
    )
    extra_stopwords: list[str] = option(
        default_factory=list,
        doc="More words that never drive a match (the persona's own name, a wake word, ...).",
    )
    head_weight: float = option(
        1.0,
        doc="Weight of a document's leading `[date]` and `Speaker:` label against its text (1.0).",
        minimum=0,
    )
    context_weight: float = option(
        0.4,
        doc="Weight of the previous turn's words in a dialogue turn (a `Speaker:` line or a recorded "
        "exchange) of the same session: replies such as 'yes, last Tuesday' are found by what they "
        "answer. 0 turns it off. Costs about a fifth of a turn's CPU time on large memories "
        "(docs/benchmarks.md, the host's path).",
        minimum=0,
    )
    last_line_weight: int = option(
        2,
        doc="How many times the terms of a query's last line count (in `history` query mode the "
        "utterance is the last line, so it outweighs the earlier turns).",
        minimum=1,
    )
    max_query_terms: int = option(
        256, doc="At most this many distinct terms of a query are searched (the newest text wins).", minimum=1
    )
    keyword_postings: bool = option(
        True,
        doc="PostgreSQL only (SQLite ignores it): keep the keyword postings table a search scores from. "
        "false: writes skip it (about half the server CPU per write, and some 1 GB less disk at 100,000 "
        "exchanges; the namespace's postings are deleted) and a search costs about three times the "
        "server CPU, with the same results (docs/postgres.md, keyword postings). Turned on again, the "
        "first process rebuilds the namespace's postings at open.",
    )


def keyword_settings(opts: LexicalOptions, use_fts5: bool = True) -> KeywordSettings:
    """The keyword index's settings from the keyword backend's options."""
    return KeywordSettings(
        lang=opts.lang,
        extra_stopwords=tuple(opts.extra_stopwords),
        head_weight=opts.head_weight,
        context_weight=opts.context_weight,
        last_line_weight=opts.last_line_weight,
        max_query_terms=opts.max_query_terms,
        use_fts5=use_fts5,
        keyword_postings=opts.keyword_postings,
    )


class LexicalMemory(DatabaseFileMemory):
    """Keyword memory: the documents table plus a keyword index (config: :class:`LexicalOptions`
    plus the shared keys)."""

    options_class: ClassVar[type[Any] | None] = LexicalOptions
    default_min_relative_score: ClassVar[float | None] = 0.3
    #: A turn injects hits scoring at least 0.4 of the best one (docs/recall.md; search keeps 0.3).
    default_prompt_min_relative: ClassVar[float | None] = 0.4
    database_file: ClassVar[str] = "lexical.db"
    #: Set to False (in a subclass or a test) to use the no-FTS5 path even where FTS5 exists.
    use_fts5: ClassVar[bool] = True

    options: LexicalOptions
    keyword_settings: KeywordSettings

    def _open_indexes(self) -> Index:
        self.keyword_settings = keyword_settings(self.options, self.use_fts5)
        self.keyword = self.storage.keyword_index(self.keyword_settings)
        return self.keyword

    def word_terms(self, text: str, *, query: bool = False) -> frozenset[str] | None:
        """The terms this backend matches in ``text``: a query's (stop words out) or a document's."""
        if query:
            return frozenset(query_counts(text, self.keyword_settings))
        return frozenset(tokenize(text, unigrams=True))

    def hit_terms(self, hits: Sequence[MemoryHit]) -> list[frozenset[str]] | None:
        """Each hit's own stored terms (its text and head, not the turn before), in one read."""
        if not isinstance(self.keyword, StoredTerms):
            return None
        stored = self.keyword.own_terms([h.source for h in hits])
        return [stored.get(h.source) or frozenset(tokenize(h.content, unigrams=True)) for h in hits]

    def _backend_stats(self) -> dict[str, Any]:
        out = super()._backend_stats()
        out["stop_words"] = len(stop_words(self.options.lang))
        return out
