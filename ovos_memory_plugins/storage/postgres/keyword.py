"""The PostgreSQL engine's keyword index (:class:`PgKeywordIndex`): a ``tsvector`` built from OUR
tokens (:func:`ovos_memory_plugins.storage.keyword.document_terms`: CJK bigrams, folding, stemming;
queries through :func:`~ovos_memory_plugins.storage.keyword.query_counts`, so stop words are the
same), written as a literal so PostgreSQL never re-parses them, GIN-indexed, and ranked with the
formula of SQLite FTS5's ``bm25()`` (column weights included: body A, head B, context C) over the
namespace's own document count and frequencies (``memory_keyword_df``, kept exact by every write
in its transaction, so a search reads them instead of counting postings). On large namespaces it
prunes query terms and ranks the best candidates again on every term exactly as the SQLite index
does (:meth:`PgKeywordIndex.search_terms`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.storage.keyword import (
    BM25_B,
    BM25_K1,
    MAX_TERM_REPEAT,
    PRUNE_MIN_DOCUMENTS,
    PRUNE_POSTINGS,
    RESCORE_CANDIDATES,
    RESCORE_K1,
    bm25_scores,
    document_terms,
    query_counts,
)
from ovos_memory_plugins.storage.postgres.database import STATS_TTL, load_metadata, namespace_lexeme
from ovos_memory_plugins.storage.records import Document, KeywordSettings, StoredDocument
from ovos_memory_plugins.storage.tables import pg_lexeme as _lexeme
from ovos_memory_plugins.storage.tables import tsquery_literal

if TYPE_CHECKING:
    import psycopg

    from ovos_memory_plugins.storage.postgres.database import PgDatabase

__all__ = ["PgKeywordIndex"]

LOG = logging.getLogger(__name__)

# The BM25 constants, the cap on a repeated query term, the size from which terms are pruned,
# the posting budget and the number of candidates ranked again are the SQLite keyword index's
# own (BM25_K1, BM25_B, MAX_TERM_REPEAT, PRUNE_MIN_DOCUMENTS, PRUNE_POSTINGS, RESCORE_CANDIDATES,
# imported above), so both engines return the same documents in the same order at every size.
# The budget was 1,000 here: measured among 93,681 documents (benchmarks/postgres_bench.py,
# docs/benchmarks.md), LoCoMo R@10 41.3 against SQLite's 57.4, and identical to it with 3,000,
# for about 2 ms more server CPU per search per 1,000 postings.


@dataclass(frozen=True)
class _Ranking:
    """What one search ranks with: the weighted query terms (``counts``), their document
    frequencies, the namespace's size and mean length, how many results, the session and the
    window asked, and whether the postings table serves it."""

    counts: Counter[str]
    df: dict[str, int]
    n: int
    avgdl: float
    k: int
    session_id: str | None
    window: tuple[float, float] | None
    postings: bool
    #: Only documents keyed at least this (0: all): the newest postings of a term found too often.
    newest: int = 0


class PgKeywordIndex:
    """Keyword recall over ``memory_keywords`` (see :class:`~ovos_memory_plugins.storage.engine.Index`).

    Per document: ``tf``, each term's count in the body, the head (date, speaker) and, for a
    dialogue turn, the context (the body terms of the session's previous document), packed in
    one number per term, ``{"term": body | head << 8 | context << 16}`` (8 bits each);
    ``terms``, the same terms as a ``tsvector`` built with ``array_to_tsvector`` (no parsing, no
    stemming, no stop words: ours are already applied),
    GIN-indexed, which finds the documents holding any query term; ``length``, the token count.

    Ranking is FTS5's ``bm25(fts, 1.0, head_weight, context_weight)`` written out in SQL: a
    term's frequency in a document is ``body + head_weight * head + context_weight * context``,
    the length is all its tokens, IDF uses the namespace's document count and frequencies.

    From :data:`~ovos_memory_plugins.storage.keyword.PRUNE_MIN_DOCUMENTS` documents on, as in the
    SQLite index: query terms in more than half the documents are left out and the rest are
    searched rarest first until their documents add up to
    :data:`~ovos_memory_plugins.storage.keyword.PRUNE_POSTINGS` (a rarest term kept alone and
    found in more is searched in its newest that many documents, outside a session or a window:
    :meth:`_newest_postings`); when a term
    was left out, the best :data:`~ovos_memory_plugins.storage.keyword.RESCORE_CANDIDATES` that
    the kept terms find are ranked again on every query term by
    :func:`~ovos_memory_plugins.storage.keyword.bm25_scores` (one statement finds them and reads
    their counts of every query term, their lengths and their documents), so both engines
    return the same documents in the same order with the same scores.

    Document frequencies live in ``memory_keyword_df`` (namespace, term, df): every write here
    (add, replace, remove, a turn losing its context, ``remove_all``) changes the rows of its
    terms in the same transaction, in term order (concurrent writers wait, never deadlock), and
    deletes rows that reach 0; a search reads its terms' rows with one indexed lookup
    (:meth:`frequencies`). Keyword rows must be deleted through this class: a cascade from
    ``memory_documents`` alone would leave the counts behind.

    Postings (``memory_keyword_postings``) are kept by every write while the settings'
    ``keyword_postings`` is on (the default). Off, no write touches them (each deletes the
    namespace's row of ``memory_keyword_postings_built``, if another process wrote it since),
    the namespace's are deleted at open, with that row, and searches take the GIN path. On, a
    namespace without that row (turned off before) has its postings rebuilt from its keyword
    rows at open (:meth:`_sync_postings`), and a search reads the postings only while the row is
    there (read in the statement of its frequencies), so a process that finds them taken away by
    another ranks on the GIN path, with the same results.
    """

    #: Its ``search`` takes ``window=``: a ``(since, until)`` range of the documents' ``created``.
    filters_time: ClassVar[bool] = True

    def __init__(
        self, db: PgDatabase, namespace: str, settings: KeywordSettings | None = None, *, postings: bool = True
    ) -> None:
        self.db = db
        self.namespace = namespace
        self.settings = settings or KeywordSettings()
        #: Writes keep the namespace's postings (the settings' ``keyword_postings``).
        self.maintain = bool(self.settings.keyword_postings)
        self._lexeme = namespace_lexeme(namespace)
        #: (refreshed at, document count, total tokens) of the namespace
        self._stats: tuple[float, int, int] | None = None
        #: Score from ``memory_keyword_postings`` (an index-only scan of the query terms' ranges)
        #: while they are complete; False: from the candidates' keyword rows found through the GIN
        #: index, the path before migration 0006, which ranks alike (kept as the reference the
        #: tests hold it to, and the path with ``keyword_postings`` off).
        self.postings = self._sync_postings() and postings

    def _sync_postings(self) -> bool:
        """Bring the namespace's postings in line with ``keyword_postings`` at open; whether a
        search may read them.

        Off: delete the namespace's postings and its row of ``memory_keyword_postings_built``
        (nothing when there are none). On, with that row: nothing (one indexed read). On,
        without it: rebuild the postings from the keyword rows in one transaction, under a
        ``SHARE`` lock on ``memory_keywords`` (writers of every namespace wait, as for migration
        0006: about 0.3 s per 1,000 documents), then write the row. Openers of one namespace take
        turns on an advisory lock, and one that waited finds the row and builds nothing. A
        rebuild that fails (a lock not granted within ``lock_timeout``) is logged; searches then
        take the GIN path and the next open tries again."""
        key = ("ovos_memory_postings", self.namespace)
        if not self.maintain:
            with self.db.transaction() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", key)
                if conn.execute(
                    "DELETE FROM memory_keyword_postings_built WHERE namespace = %s", (self.namespace,)
                ).rowcount:
                    conn.execute("DELETE FROM memory_keyword_postings WHERE namespace = %s", (self.namespace,))
            return False
        if self._postings_built():
            return True
        try:
            with self.db.atomic() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", key)
                if self._postings_built():  # another opener built them while this one waited
                    return True
                conn.execute("SET LOCAL statement_timeout = 0")  # one pass over the namespace's rows
                conn.execute("LOCK TABLE memory_keywords IN SHARE MODE")
                conn.execute("DELETE FROM memory_keyword_postings WHERE namespace = %s", (self.namespace,))
                conn.execute(_POSTINGS_REBUILD, {"ns": self.namespace})
                conn.execute(
                    "INSERT INTO memory_keyword_postings_built (namespace, built) VALUES (%s, %s)"
                    " ON CONFLICT (namespace) DO UPDATE SET built = excluded.built",
                    (self.namespace, time.time()),
                )
        except Exception as exc:
            LOG.warning(
                "PostgreSQL: could not build the keyword postings of namespace %r (%s); searches rank"
                " without them until the next open",
                self.namespace,
                exc,
            )
            return False
        return True

    def _postings_built(self) -> bool:
        """Whether the namespace's postings are complete (its row of ``memory_keyword_postings_built``)."""
        return bool(
            self.db.scalar("SELECT 1 FROM memory_keyword_postings_built WHERE namespace = %s", (self.namespace,))
        )

    @property
    def name(self) -> str:
        """``"keyword"``."""
        return "keyword"

    # -- writing -----------------------------------------------------------------------------

    def prepare(self, docs: Sequence[Document]) -> dict[str, tuple[dict[str, int], int, bool]]:
        """Tokenize before the transaction: ``doc_id -> (term counts, token count, is a turn)``."""
        out = {}
        for doc in docs:
            body, head, turn = document_terms(doc.text)
            counts: dict[str, list[int]] = {}
            length = 0
            for column, terms in enumerate((body.split(), head.split())):
                for term in terms:
                    counts.setdefault(term, [0, 0])[column] += 1
                    length += 1
            out[doc.doc_id] = ({t: _pack(a, b, 0) for t, (a, b) in counts.items()}, length, turn)
        return out

    def add(self, docs: Sequence[StoredDocument], prepared: Any = None) -> None:
        """Store the terms of new or changed documents (inside the write transaction).

        A turn takes the body terms of the session's previous indexed document as its context,
        merged in the same statement.
        """
        todo = [d for d in docs if d.changed]
        if not todo:
            return
        terms: dict[str, tuple[dict[str, int], int, bool]] = dict(prepared or {})
        missing = [d for d in todo if d.doc_id not in terms]
        if missing:
            terms.update(self.prepare([Document(d.doc_id, d.text, d.session_id, d.metadata) for d in missing]))
        context_on = self.settings.context_weight > 0
        rows = []
        tokens = 0
        for doc in todo:
            tf, length, turn = terms[doc.doc_id]
            tokens += length
            rows.append(
                {
                    "id": doc.key,
                    "ns": self.namespace,
                    "session": doc.session_id,
                    "tf": json.dumps(tf, ensure_ascii=False),
                    "length": length,
                    "turn": bool(turn and context_on),
                    "nslex": self._lexeme,
                }
            )
        with self.db.transaction() as conn, conn.cursor() as cur:
            if len(rows) == 1:  # one statement writes the row, its postings and its terms' frequencies
                one = _KEYWORD_ADD_ONE if self.maintain else _KEYWORD_ADD_ONE_BARE
                emptied = [r[0] for r in cur.execute(one, rows[0]).fetchall()]
                if emptied:
                    _drop_emptied(conn, self.namespace, emptied)
            else:  # the rows' terms as they were, the rows, then one sorted update for them all
                keys = [d.key for d in todo]
                delta: Counter[str] = Counter()
                for term, count in cur.execute(_KEYWORD_TERMS, (keys,)).fetchall():
                    delta[term] -= int(count)
                if self.maintain:
                    # the keyword rows' lock before the postings', as every other write takes them
                    # (a rebuild at open holds SHARE on memory_keywords, then deletes postings)
                    cur.execute("LOCK TABLE memory_keywords IN ROW EXCLUSIVE MODE")
                    cur.execute(_POSTINGS_DELETE, {"ns": self.namespace, "keys": keys})
                else:
                    cur.execute("DELETE FROM memory_keyword_postings_built WHERE namespace = %s", (self.namespace,))
                cur.executemany(_KEYWORD_ADD, rows)
                if self.maintain:
                    cur.execute(_POSTINGS_INSERT, {"ns": self.namespace, "keys": keys})
                _apply_frequencies(conn, self.namespace, delta, added=keys)
        if self._stats is not None:  # keep the figures current without a count
            at, n, total = self._stats
            self._stats = (at, n + len(rows), total + tokens)

    def remove(self, docs: Sequence[StoredDocument]) -> int:
        """Take documents out of the index and their words out of other turns' context, and
        their terms out of the namespace's document frequencies (one transaction)."""
        keys = [d.key for d in docs]
        if not keys:
            return 0
        delta: Counter[str] = Counter()
        n = 0
        delete, drop_context = (
            (_KEYWORD_DELETE, _KEYWORD_DROP_CONTEXT)
            if self.maintain
            else (_KEYWORD_DELETE_BARE, _KEYWORD_DROP_CONTEXT_BARE)
        )
        with self.db.transaction() as conn:
            for term, change in conn.execute(delete, {"ns": self.namespace, "keys": keys}).fetchall():
                if term is None:  # the row count
                    n = int(change)
                else:
                    delta[term] -= int(change)
            for term, change in conn.execute(
                drop_context, {"ns": self.namespace, "keys": keys, "nslex": self._lexeme}
            ).fetchall():
                delta[term] += int(change)
            _apply_frequencies(conn, self.namespace, delta)
        self._stats = None
        return n

    def remove_all(self) -> int:
        """Empty the namespace's index and its document frequencies; return how many rows went."""
        with self.db.transaction() as conn:
            n = conn.execute("DELETE FROM memory_keywords WHERE namespace = %s", (self.namespace,)).rowcount
            # with the key off too: nothing to delete, unless a process with it on wrote some
            conn.execute("DELETE FROM memory_keyword_postings WHERE namespace = %s", (self.namespace,))
            if not self.maintain:
                conn.execute("DELETE FROM memory_keyword_postings_built WHERE namespace = %s", (self.namespace,))
            conn.execute(DF_DELETE_NAMESPACE, (self.namespace, self.namespace))
        self._stats = None
        return int(n)

    def frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """How many of the namespace's indexed documents hold each term (0: none), read from
        ``memory_keyword_df``, which every write keeps exact in its own transaction."""
        return self._frequencies(terms)[0]

    def _frequencies(self, terms: Iterable[str], built: bool = False) -> tuple[dict[str, int], bool]:
        """:meth:`frequencies`, and, with ``built``, whether the namespace's postings are complete
        (its row of ``memory_keyword_postings_built``, a NULL term in the same statement)."""
        wanted = list(dict.fromkeys(terms))
        if not wanted:
            return {}, False
        sql = "SELECT term, df FROM memory_keyword_df WHERE namespace = %s AND term = ANY(%s)"
        params: tuple[Any, ...] = (self.namespace, wanted)
        if built:
            sql += " UNION ALL SELECT NULL, 1 FROM memory_keyword_postings_built WHERE namespace = %s"
            params = (*params, self.namespace)
        found: dict[str, int] = {}
        complete = False
        for term, df in self.db.query(sql, params):
            if term is None:
                complete = True
            else:
                found[str(term)] = max(int(df), 0)
        return {t: found.get(t, 0) for t in wanted}, complete

    # -- searching ---------------------------------------------------------------------------

    def _namespace_stats(self, refresh: bool = False) -> tuple[int, float]:
        """``(document count, average length)`` of the namespace: counted at most every
        ``STATS_TTL`` seconds (or when ``refresh``), this process's own writes added in between."""
        now = time.monotonic()
        if refresh or self._stats is None or now - self._stats[0] > STATS_TTL:
            row = self.db.query(
                "SELECT count(*), coalesce(sum(length), 0) FROM memory_keywords WHERE namespace = %s",
                (self.namespace,),
            )[0]
            self._stats = (now, int(row[0]), int(row[1]))
        n, tokens = self._stats[1], self._stats[2]
        return n, (tokens / n if n else 0.0)

    def search(
        self, query: str, k: int, session_id: str | None = None, *, window: tuple[float, float] | None = None
    ) -> list[MemoryHit]:
        """The best ``k`` documents for ``query`` (only ``session_id``'s when given), best first;
        with ``window`` (``(since, until)``, seconds since the epoch), only documents made in it."""
        return self.search_terms(query_counts(query, self.settings), k, session_id, window)

    def search_terms(
        self, counts: Counter[str], k: int, session_id: str | None = None, window: tuple[float, float] | None = None
    ) -> list[MemoryHit]:
        """Rank by weighted query terms (BM25 as FTS5 computes it; on a large namespace, pruned
        and then rescored as the class docstring says); ``window``: only documents whose
        ``created`` is in ``[since, until)`` (the namespace's statistics stay the whole namespace's,
        as in the SQLite index).

        Every term's document frequency is read from ``memory_keyword_df`` (one indexed lookup
        per term, kept exact by every write), so the first search of a fresh process costs what
        any other does, and every search weighs its terms by their current counts.
        """
        if not counts or k <= 0:
            return []
        n, avgdl = self._namespace_stats()
        if n == 0:  # empty when last counted: other processes may have written since
            n, avgdl = self._namespace_stats(refresh=True)
            if n == 0:
                return []
        df, complete = self._frequencies(counts, built=self.postings)
        postings = self.postings and complete  # not when another process took them away since
        if any(f > n for f in df.values()):  # the namespace grew by other processes' writes since
            n, avgdl = self._namespace_stats(refresh=True)
            df = {t: min(f, n) for t, f in df.items()}
        terms = [t for t in counts if df.get(t, 0) > 0]
        if not terms:
            return []
        ranking = _Ranking(counts, df, n, avgdl, k, session_id, window, postings)
        if n < PRUNE_MIN_DOCUMENTS:
            return self._ranked(self._rank(ranking, terms))
        kept = _prune(terms, df, n)
        if len(kept) == 1 and df[kept[0]] > PRUNE_POSTINGS and session_id is None and window is None:
            ranking = replace(ranking, newest=self._newest_postings(kept[0], postings))
        if len(kept) < len(terms):  # terms were left out: every term ranks again
            return self._rescored(ranking, kept, terms)
        return self._ranked(self._rank(ranking, kept))

    def _newest_postings(self, term: str, postings: bool) -> int:
        """The lowest key among the newest ``PRUNE_POSTINGS`` documents holding ``term`` (the
        rarest query term, kept alone and found in more), as the SQLite index bounds it: the
        search's cost stays bounded on any size (docs/lexical.md). From the postings' primary key
        read backwards, or the GIN index's matches."""
        params: dict[str, Any] = {"skip": PRUNE_POSTINGS - 1}
        if postings:
            sql = (
                "SELECT id FROM memory_keyword_postings WHERE namespace = %(ns)s AND term = %(term)s"
                " ORDER BY id DESC OFFSET %(skip)s LIMIT 1"
            )
            params |= {"ns": self.namespace, "term": term}
        else:
            sql = (
                "SELECT k.id FROM memory_keywords k WHERE k.terms @@ %(query)s::tsquery"
                " ORDER BY k.id DESC OFFSET %(skip)s LIMIT 1"
            )
            params["query"] = self._tsquery([term])
        return int(self.db.scalar(sql, params) or 0)

    def _tsquery(self, terms: Sequence[str]) -> str:
        """The ``tsquery`` text matching the namespace's keyword rows that hold any of ``terms``:
        the namespace's lexeme AND the terms (see :meth:`_rank`'s statement for why)."""
        return f"{_lexeme(self._lexeme)} & ({tsquery_literal(terms)})"

    def _rank(self, ranking: _Ranking, terms: list[str], read_counts: Sequence[str] = ()) -> list[tuple[Any, ...]]:
        """The best ``ranking.k`` documents by BM25 over ``terms``, best first, as rows ``(doc_id,
        session_id, content, metadata, score)``; with ``read_counts``, each row goes on with the
        document's token count and the packed counts (``tf``) of those terms, read in the same
        statement (what :func:`~ovos_memory_plugins.storage.keyword.bm25_scores` needs); with
        ``ranking.postings``, scored from ``memory_keyword_postings`` (:meth:`_rank_postings`)."""
        counts, df, n, session_id, window = ranking.counts, ranking.df, ranking.n, ranking.session_id, ranking.window
        weights = []
        for t in terms:
            idf = math.log((n - df[t] + 0.5) / (df[t] + 0.5))
            weights.append(min(counts[t], MAX_TERM_REPEAT) * (idf if idf > 0 else 1e-6))
        params: dict[str, Any] = {
            "ns": self.namespace,
            "session": session_id,
            "query": self._tsquery(terms),
            **self._bm25_params(ranking.avgdl, ranking.k, n),
        }
        # one expression per query term over the candidate's counts (no join, no grouping):
        # j<i> its packed counts, f<i> its weighted frequency
        counts_of, freqs, parts = [], [], []
        for i, (term, weight) in enumerate(zip(terms, weights, strict=True)):
            params[f"t{i}"], params[f"w{i}"] = term, weight
            counts_of.append(f"(k.tf -> %(t{i})s)::int AS j{i}")
            freqs.append(
                f"coalesce((j.j{i} & 255) + %(wb)s * ((j.j{i} >> 8) & 255) + %(wc)s * (j.j{i} >> 16), 0) AS f{i}"
            )
            parts.append(f"%(w{i})s * f.f{i} * %(k1p)s / (f.f{i} + n.norm)")
        carried, read = "", ""
        if read_counts:  # the few winners' counts of every term, looked up after the LIMIT
            carried = ", k.length, k.tf"
            for i, term in enumerate(read_counts):
                params[f"r{i}"] = term
            read = ", s.length, " + ", ".join(f"(s.tf -> %(r{i})s)::int" for i in range(len(read_counts)))
        params["newest"] = ranking.newest
        if ranking.postings:
            return self._rank_postings(terms, params, counts_of, freqs, parts, read_counts, session_id, window)
        session_filter = " AND k.session_id = %(session)s" if session_id is not None else ""
        if ranking.newest:
            session_filter += " AND k.id >= %(newest)s"
        if window is not None:  # the candidate's document (its primary key) made in the window
            params["since"], params["until"] = float(window[0]), float(window[1])
            session_filter += (
                " AND EXISTS (SELECT 1 FROM memory_documents w WHERE w.id = k.id"
                " AND w.created >= %(since)s AND w.created < %(until)s)"
            )
        return self.db.query(
            "SELECT d.doc_id, d.session_id, d.content, d.metadata, s.score" + read + " FROM ("
            " SELECT k.id, " + " + ".join(parts) + " AS score" + carried + " FROM memory_keywords k"
            " CROSS JOIN LATERAL (SELECT %(k1)s * (1 - %(b)s + %(b)s * k.length / %(avgdl)s) AS norm) AS n"
            # OFFSET 0: evaluated once per row, not inlined into every use (PostgreSQL would
            # repeat each jsonb lookup six times per term: half the statement's time)
            " CROSS JOIN LATERAL (SELECT " + ", ".join(counts_of) + " OFFSET 0) AS j"
            " CROSS JOIN LATERAL (SELECT " + ", ".join(freqs) + " OFFSET 0) AS f"
            # the namespace's lexeme in the tsquery keeps the GIN lookup to the namespace, and
            # leaves the planner no other index to pick, even in a cached generic plan (a filter
            # on the namespace column here once made it scan a large namespace's whole btree
            # range); the join below checks the column, so a hash collision could never leak
            " WHERE k.terms @@ %(query)s::tsquery" + session_filter + " ORDER BY score DESC, k.id LIMIT %(k)s) AS s"
            " JOIN memory_documents d ON d.id = s.id AND d.namespace = %(ns)s ORDER BY s.score DESC, s.id",
            params,
        )

    def _rank_postings(
        self,
        terms: list[str],
        params: dict[str, Any],
        counts_of: list[str],
        freqs: list[str],
        parts: list[str],
        read_counts: Sequence[str],
        session_id: str | None,
        window: tuple[float, float] | None,
    ) -> list[tuple[Any, ...]]:
        """:meth:`_rank` from ``memory_keyword_postings``: the query terms' postings (an
        index-only scan of the covering primary key), one row per candidate with its counts of
        each term (``j<i>``, NULL where it lacks the term) and its length, then the very
        expressions of the GIN path in the same term order, so every score is the same number.
        A session or a window is checked per candidate by its key (the keyword rows' index on
        ``(namespace, session_id, id)``; the documents' primary key)."""
        params["terms"] = terms
        pivot = ", ".join(f"max(p.tf) FILTER (WHERE p.term = %(t{i})s) AS j{i}" for i in range(len(counts_of)))
        where = ""
        if session_id is not None:
            where += (
                " AND EXISTS (SELECT 1 FROM memory_keywords m WHERE m.namespace = %(ns)s"
                " AND m.session_id = %(session)s AND m.id = j.id)"
            )
        if window is not None:
            params["since"], params["until"] = float(window[0]), float(window[1])
            where += (
                " AND EXISTS (SELECT 1 FROM memory_documents w WHERE w.id = j.id"
                " AND w.created >= %(since)s AND w.created < %(until)s)"
            )
        read, joined = "", ""
        if read_counts:  # the few winners' counts of every term, from their keyword rows
            for i, term in enumerate(read_counts):
                params[f"r{i}"] = term
            read = ", r.length, " + ", ".join(f"(r.tf -> %(r{i})s)::int" for i in range(len(read_counts)))
            joined = " JOIN memory_keywords r ON r.id = s.id"
        return self.db.query(
            "SELECT d.doc_id, d.session_id, d.content, d.metadata, s.score" + read + " FROM ("
            " SELECT j.id, " + " + ".join(parts) + " AS score FROM ("
            "  SELECT p.id, max(p.length) AS length, " + pivot + " FROM memory_keyword_postings p"
            "  WHERE p.namespace = %(ns)s AND p.term = ANY(%(terms)s::text[]) AND p.id >= %(newest)s"
            "  GROUP BY p.id) AS j"
            " CROSS JOIN LATERAL (SELECT %(k1)s * (1 - %(b)s + %(b)s * j.length / %(avgdl)s) AS norm) AS n"
            " CROSS JOIN LATERAL (SELECT " + ", ".join(freqs) + " OFFSET 0) AS f"
            " WHERE true" + where + " ORDER BY score DESC, j.id LIMIT %(k)s) AS s"
            " JOIN memory_documents d ON d.id = s.id AND d.namespace = %(ns)s"
            + joined
            + " ORDER BY s.score DESC, s.id",
            params,
        )

    @staticmethod
    def _ranked(rows: list[tuple[Any, ...]]) -> list[MemoryHit]:
        return [_hit(r[0], r[1], r[2], r[3], float(r[4])) for r in rows]

    def _rescored(self, ranking: _Ranking, kept: list[str], terms: list[str]) -> list[MemoryHit]:
        """The best :data:`~ovos_memory_plugins.storage.keyword.RESCORE_CANDIDATES` matches of
        the kept terms, ranked again on every query term (``terms``) by
        :func:`~ovos_memory_plugins.storage.keyword.bm25_scores`, as the SQLite index ranks
        them; found, with their counts and documents, in one statement."""
        found = self._rank(replace(ranking, k=max(ranking.k, RESCORE_CANDIDATES)), kept, read_counts=terms)
        if not found:
            return []
        every = Counter({t: ranking.counts[t] for t in terms})
        columns = [_columns(terms, r[6:], int(r[5])) for r in found]
        scores = bm25_scores(
            every, columns, ranking.df, ranking.n, ranking.avgdl, self.settings.column_weights, k1=RESCORE_K1
        )
        best = sorted(range(len(found)), key=lambda i: (-scores[i], -float(found[i][4])))[: ranking.k]
        return [_hit(found[i][0], found[i][1], found[i][2], found[i][3], scores[i]) for i in best]

    def _bm25_params(self, avgdl: float, k: int, n: int) -> dict[str, Any]:
        """The ranking statements' BM25 constants and field weights, and the result count; a
        namespace of ``n`` >= PRUNE_MIN_DOCUMENTS documents ranks with ``k1`` = RESCORE_K1, as
        the SQLite index does (docs/lexical.md)."""
        s = self.settings
        k1 = RESCORE_K1 if n >= PRUNE_MIN_DOCUMENTS else BM25_K1
        return {
            "k1": k1,
            "k1p": k1 + 1,
            "b": BM25_B,
            "avgdl": max(avgdl, 1e-9),
            "wb": float(s.head_weight),
            "wc": float(s.context_weight),
            "k": int(k),
        }

    def count(self) -> int:
        """How many documents the keyword index holds for the namespace."""
        return int(self.db.scalar("SELECT count(*) FROM memory_keywords WHERE namespace = %s", (self.namespace,)) or 0)

    def stats(self) -> dict[str, Any]:
        """``keyword_rows`` and how ranking is done."""
        return {"keyword_rows": self.count(), "ranking": "bm25 over tsvector (PostgreSQL)"}

    def close(self) -> None:
        """Nothing pending: every add is indexed in its own transaction."""


#: One document's keyword row; a turn merges the body counts of the session's previous document
#: in as its context, in the same statement.
_KEYWORD_ADD = (
    "INSERT INTO memory_keywords (id, namespace, session_id, tf, terms, length, ctx_id)"
    " SELECT %(id)s, %(ns)s, %(session)s, m.tf,"
    "  array_to_tsvector(ARRAY(SELECT jsonb_object_keys(m.tf)) || %(nslex)s::text),"
    "  %(length)s + coalesce(p.body, 0), p.id"
    " FROM (SELECT 1) AS one"
    " LEFT JOIN LATERAL (SELECT k.id, k.tf, (SELECT sum(e.value::int & 255) FROM jsonb_each(k.tf) AS e) AS body"
    "  FROM memory_keywords k WHERE %(turn)s AND k.namespace = %(ns)s AND k.session_id = %(session)s"
    "  AND k.id < %(id)s ORDER BY k.id DESC LIMIT 1) AS p ON true"
    " CROSS JOIN LATERAL (SELECT coalesce(jsonb_object_agg(x.t, x.v), '{}'::jsonb) AS tf FROM ("
    "  SELECT u.t, sum(u.v) AS v FROM ("
    "   SELECT e.key AS t, e.value::int AS v FROM jsonb_each(%(tf)s::jsonb) AS e"
    "   UNION ALL SELECT e.key, (e.value::int & 255) << 16 FROM jsonb_each(coalesce(p.tf, '{}'::jsonb)) AS e"
    "    WHERE e.value::int & 255 > 0) AS u GROUP BY u.t) AS x) AS m"
    " ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, tf = excluded.tf, terms = excluded.terms,"
    " length = excluded.length, ctx_id = excluded.ctx_id"
)

#: One document's row, and how it changes the namespace's document frequencies (``delta``: +1 for
#: each term its row gained, -1 for each it lost), the row as it was read in the same snapshot (the
#: document's own row in ``memory_documents``, locked by the put before it, keeps other writers
#: of that document out until the commit).
_KEYWORD_WRITE_ROW = (
    "WITH old AS (SELECT tf FROM memory_keywords WHERE id = %(id)s),"
    " ins AS (" + _KEYWORD_ADD + " RETURNING tf, length),"
    " delta AS (SELECT x.t, sum(x.d)::int AS d FROM ("
    "  SELECT jsonb_object_keys(ins.tf) AS t, 1 AS d FROM ins"
    "  UNION ALL SELECT jsonb_object_keys(old.tf), -1 FROM old) AS x GROUP BY x.t HAVING sum(x.d) <> 0)"
)

#: The postings of :data:`_KEYWORD_WRITE_ROW`'s document, three disjoint sets (no row is touched
#: twice by the statement): the terms it lost go, those it kept take the new counts and length,
#: the new ones are inserted (a plain insert: a new document, the usual write, has only these).
_POSTINGS_WRITE = (
    " plost AS (DELETE FROM memory_keyword_postings p USING delta"
    "  WHERE delta.d < 0 AND p.namespace = %(ns)s AND p.term = delta.t AND p.id = %(id)s),"
    " pkept AS (UPDATE memory_keyword_postings p SET tf = e.value::int, length = ins.length"
    "  FROM old, ins CROSS JOIN LATERAL jsonb_each(ins.tf) AS e"
    "  WHERE old.tf ? e.key AND p.namespace = %(ns)s AND p.term = e.key AND p.id = %(id)s),"
    " pnew AS (INSERT INTO memory_keyword_postings (id, tf, length, namespace, term)"
    "  SELECT %(id)s, e.value::int, ins.length, %(ns)s, e.key FROM ins CROSS JOIN LATERAL jsonb_each(ins.tf) AS e"
    "  WHERE NOT EXISTS (SELECT 1 FROM old WHERE old.tf ? e.key))"
)

#: A write that leaves the postings alone takes its namespace's mark of complete postings away.
_UNBUILT = " unbuilt AS (DELETE FROM memory_keyword_postings_built WHERE namespace = %(ns)s)"

#: The row, its change to the frequencies and its postings.
_KEYWORD_WRITE = _KEYWORD_WRITE_ROW + "," + _POSTINGS_WRITE

#: Add to the namespace's document frequencies, in term order (every writer locks the rows it
#: changes in the same order: concurrent writers wait for each other, never deadlock); returns
#: the terms whose frequency fell to 0 or below (their rows are deleted next).
_DF_UPSERT = (
    " up AS (INSERT INTO memory_keyword_df AS f (namespace, term, df)"
    "  SELECT %(ns)s, c.t, c.d FROM {changes} AS c ORDER BY c.t"
    "  ON CONFLICT (namespace, term) DO UPDATE SET df = f.df + excluded.df RETURNING f.term, f.df)"
    " SELECT term FROM up WHERE df <= 0"
)

#: One document: its row, its postings and its terms' frequencies in one statement.
_KEYWORD_ADD_ONE = _KEYWORD_WRITE + "," + _DF_UPSERT.format(changes="delta")

#: The same without the postings (``keyword_postings`` off): the namespace's postings are no
#: longer complete, so its row of ``memory_keyword_postings_built`` goes (one probe of its key;
#: a process with the key on then ranks on the GIN path and rebuilds them at its next open).
_KEYWORD_ADD_ONE_BARE = _KEYWORD_WRITE_ROW + "," + _UNBUILT + "," + _DF_UPSERT.format(changes="delta")

#: How many of the given keyword rows hold each term (a batch's rows before it replaces them).
_KEYWORD_TERMS = (
    "SELECT t.term, count(*) FROM memory_keywords k CROSS JOIN LATERAL jsonb_object_keys(k.tf) AS t(term)"
    " WHERE k.id = ANY(%s) GROUP BY t.term"
)

#: Apply changes to the frequencies: +1 for each term of the keyword rows ``added`` (their keys,
#: as they are now), plus ``changes`` for ``terms`` (two arrays), summed per term.
_DF_APPLY = (
    "WITH changes AS (SELECT x.t, sum(x.d)::int AS d FROM ("
    "  SELECT t.term AS t, 1 AS d FROM memory_keywords k CROSS JOIN LATERAL jsonb_object_keys(k.tf) AS t(term)"
    "  WHERE k.id = ANY(%(added)s)"
    "  UNION ALL SELECT c.t, c.d FROM unnest(%(terms)s::text[], %(changes)s::int[]) AS c(t, d)) AS x"
    " GROUP BY x.t HAVING sum(x.d) <> 0)," + _DF_UPSERT.format(changes="changes")
)

#: Delete the postings of keyword rows (their keys), before the rows are written again (a batch).
_POSTINGS_DELETE = (
    "DELETE FROM memory_keyword_postings p USING (SELECT k.id, jsonb_object_keys(k.tf) AS t FROM memory_keywords k"
    " WHERE k.id = ANY(%(keys)s)) AS o WHERE p.namespace = %(ns)s AND p.term = o.t AND p.id = o.id"
)

#: Write the postings of keyword rows (their keys) as the rows are now (a batch, after its rows).
_POSTINGS_INSERT = (
    "INSERT INTO memory_keyword_postings (id, tf, length, namespace, term)"
    " SELECT k.id, e.value::int, k.length, %(ns)s, e.key"
    " FROM memory_keywords k CROSS JOIN LATERAL jsonb_each(k.tf) AS e WHERE k.id = ANY(%(keys)s) ORDER BY e.key, k.id"
)

#: A namespace's postings from its keyword rows (a rebuild at open), in key order (a compact key).
_POSTINGS_REBUILD = (
    "INSERT INTO memory_keyword_postings (id, tf, length, namespace, term)"
    " SELECT k.id, e.value::int, k.length, k.namespace, e.key FROM memory_keywords k"
    " CROSS JOIN LATERAL jsonb_each(k.tf) AS e WHERE k.namespace = %(ns)s ORDER BY e.key, k.id"
)

#: Delete documents' keyword rows (and, with ``{postings}``, their postings); returns ``(NULL,
#: rows deleted)`` and, per term, how many of the deleted rows held it.
_DELETE_TEMPLATE = (
    "WITH gone AS (DELETE FROM memory_keywords WHERE namespace = %(ns)s AND id = ANY(%(keys)s) RETURNING id, tf)"
    "{postings}"
    " SELECT NULL::text, count(*) FROM gone"
    " UNION ALL SELECT t.term, count(*) FROM gone CROSS JOIN LATERAL jsonb_object_keys(gone.tf) AS t(term)"
    " GROUP BY t.term"
)
_POSTINGS_GONE = (
    " pgone AS (DELETE FROM memory_keyword_postings p USING gone CROSS JOIN LATERAL jsonb_object_keys(gone.tf) AS o(t)"
    "  WHERE p.namespace = %(ns)s AND p.term = o.t AND p.id = gone.id)"
)
_KEYWORD_DELETE = _DELETE_TEMPLATE.format(postings="," + _POSTINGS_GONE)
#: With ``keyword_postings`` off a forget still deletes the documents' postings (probes of the
#: key that find nothing, unless a process with the key on wrote some: no word of a forgotten
#: document stays behind) and takes the namespace's mark of complete postings away.
_KEYWORD_DELETE_BARE = _DELETE_TEMPLATE.format(postings="," + _POSTINGS_GONE + "," + _UNBUILT)

#: Turns whose context document went: their context counts go, and terms only it held (and, with
#: ``{postings}``, their postings: the terms they lost go, the others take the new counts and
#: length); returns ``(term, change)`` for the frequencies, as :data:`_KEYWORD_WRITE` does.
_DROP_CONTEXT_TEMPLATE = (
    "WITH up AS (UPDATE memory_keywords k SET tf = m.tf,"
    " terms = array_to_tsvector(ARRAY(SELECT jsonb_object_keys(m.tf)) || %(nslex)s::text),"
    " length = m.length, ctx_id = NULL"
    " FROM (SELECT h.id, h.tf AS old,"
    "  coalesce(jsonb_object_agg(e.key, e.value::int & 65535) FILTER (WHERE e.value::int & 65535 > 0),"
    "   '{{}}'::jsonb) AS tf,"
    "  coalesce(sum((e.value::int & 255) + ((e.value::int >> 8) & 255)), 0) AS length"
    "  FROM memory_keywords h LEFT JOIN LATERAL jsonb_each(h.tf) AS e ON true"
    "  WHERE h.namespace = %(ns)s AND h.ctx_id = ANY(%(keys)s) GROUP BY h.id) AS m"
    " WHERE k.id = m.id RETURNING k.id, k.length, m.old, k.tf AS new)"
    "{postings}"
    " SELECT x.t, sum(x.d)::int FROM ("
    "  SELECT jsonb_object_keys(up.new) AS t, 1 AS d FROM up"
    "  UNION ALL SELECT jsonb_object_keys(up.old), -1 FROM up) AS x GROUP BY x.t HAVING sum(x.d) <> 0"
)
_POSTINGS_LOST = (
    " plost AS (DELETE FROM memory_keyword_postings p USING up CROSS JOIN LATERAL jsonb_object_keys(up.old) AS o(t)"
    "  WHERE NOT up.new ? o.t AND p.namespace = %(ns)s AND p.term = o.t AND p.id = up.id)"
)
_KEYWORD_DROP_CONTEXT = _DROP_CONTEXT_TEMPLATE.format(
    postings="," + _POSTINGS_LOST + ","
    " pnew AS (INSERT INTO memory_keyword_postings AS p (id, tf, length, namespace, term)"
    "  SELECT up.id, e.value::int, up.length, %(ns)s, e.key FROM up CROSS JOIN LATERAL jsonb_each(up.new) AS e"
    "  ON CONFLICT (namespace, term, id) DO UPDATE SET tf = excluded.tf, length = excluded.length)"
)
#: With ``keyword_postings`` off: the forgotten context's words leave the turns' postings too
#: (probes that find nothing, as in :data:`_KEYWORD_DELETE_BARE`); nothing is written.
_KEYWORD_DROP_CONTEXT_BARE = _DROP_CONTEXT_TEMPLATE.format(postings="," + _POSTINGS_LOST)


#: Delete a namespace's frequencies, locking the rows in term order first, as every writer does
#: (a plain DELETE would lock them in the table's order and could deadlock with a writer).
DF_DELETE_NAMESPACE = (
    "DELETE FROM memory_keyword_df f USING (SELECT term FROM memory_keyword_df WHERE namespace = %s"
    " ORDER BY term FOR UPDATE) AS o WHERE f.namespace = %s AND f.term = o.term"
)


def _apply_frequencies(
    conn: psycopg.Connection[Any], namespace: str, delta: Counter[str], added: Sequence[int] = ()
) -> None:
    """Add ``delta`` and the terms of the keyword rows ``added`` to the namespace's document
    frequencies (in term order, one statement) and delete the rows that fell to 0."""
    changed = [(t, d) for t, d in delta.items() if d]
    if not changed and not added:
        return
    params = {
        "ns": namespace,
        "added": list(added),
        "terms": [t for t, _ in changed],
        "changes": [d for _, d in changed],
    }
    emptied = [r[0] for r in conn.execute(_DF_APPLY, params).fetchall()]
    if emptied:
        _drop_emptied(conn, namespace, emptied)


def _drop_emptied(conn: psycopg.Connection[Any], namespace: str, terms: list[str]) -> None:
    """Delete frequency rows at 0: a forgotten document's words leave nothing behind."""
    conn.execute(
        "DELETE FROM memory_keyword_df WHERE namespace = %s AND term = ANY(%s) AND df <= 0", (namespace, terms)
    )


def _pack(body: int, head: int, context: int) -> int:
    """A term's counts in one number (what ``tf`` stores): 8 bits each, body lowest."""
    return min(body, 255) | min(head, 255) << 8 | min(context, 255) << 16


#: Stands for a document's tokens that are no query term in the columns handed to ``bm25_scores``
#: (they count toward its length only); no token is a control character.
_OTHER = "\x00"


def _columns(terms: Sequence[str], packed: Sequence[int | None], length: int) -> tuple[str, str, str]:
    """A document's body, head and context columns as ``bm25_scores`` reads them (terms joined
    by spaces), from the packed counts of the query's terms and its token count: each query
    term as often as it occurs, and a stand-in for each other token (BM25 reads nothing else
    of them than how many there are)."""
    cols: tuple[list[str], list[str], list[str]] = ([], [], [])
    tokens = 0
    for term, value in zip(terms, packed, strict=True):
        if not value:
            continue
        for column, shift in enumerate((0, 8, 16)):
            times = (value >> shift) & 255
            if times:
                cols[column].extend([term] * times)
                tokens += times
    cols[0].extend([_OTHER] * max(length - tokens, 0))
    return " ".join(cols[0]), " ".join(cols[1]), " ".join(cols[2])


def _hit(doc_id: str, session_id: str, content: str, metadata: Any, score: float) -> MemoryHit:
    meta = load_metadata(metadata)
    meta.setdefault("session_id", session_id)
    return MemoryHit(content=content, source=doc_id, score=score, metadata=meta)


def _prune(terms: list[str], df: dict[str, int], n: int) -> list[str]:
    """Rarest terms first until their documents add up to ``PRUNE_POSTINGS`` (at least one kept);
    terms in more than half of the documents are left out (BM25 gives them no weight anyway)."""
    kept: list[str] = []
    postings = 0
    for term in sorted(terms, key=lambda t: df[t]):
        freq = df[term]
        if kept and (freq > n // 2 or postings + freq > PRUNE_POSTINGS):
            break
        kept.append(term)
        postings += freq
    return kept
