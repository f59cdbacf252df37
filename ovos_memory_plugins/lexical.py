"""``ovos-memory-plugin-lexical``: keyword recall over one SQLite file, in every script.

The zero-config default memory: no service, no model. Documents are tokenized in Python with
:func:`ovos_memory_plugins.text.tokenize` (Han/Kana/Hangul/Thai runs as character bigrams,
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

import json
import logging
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.config import option
from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.ranking import BM25Ranker
from ovos_memory_plugins.storage import sqlite as sqlite_layer
from ovos_memory_plugins.storage.sqlite import Database, Migration, quote_fts_phrase
from ovos_memory_plugins.text import query_terms, stop_words, tokenize

LOG = logging.getLogger(__name__)

__all__ = ["LexicalMemory", "LexicalOptions", "split_head"]

#: Bumped whenever tokenization changes; stored terms are rebuilt on open when it differs.
TOKENIZER_VERSION = "1"

#: Stored documents are indexed in batches of at most this many (and before every search).
INDEX_BATCH = 256
#: Pages the WAL may grow to before it is checkpointed (SQLite's default is 1,000).
WAL_CHECKPOINT_PAGES = 4_000
#: Memories with fewer documents search every query term.
PRUNE_MIN_DOCUMENTS = 5_000
#: On larger memories, query terms are searched rarest first until their documents add up to this.
PRUNE_POSTINGS = 3_000
#: Document frequencies remembered per open memory.
DF_CACHE_SIZE = 50_000
#: A query term repeated more than this many times counts this many times.
MAX_TERM_REPEAT = 4

_HEAD = re.compile(r"^\s*((?:\[[^\]\n]{0,80}\]\s*)*)(?:([^\s:\[\]][^:\n]{0,40}?):(?=\s))?")


def split_head(text: str) -> tuple[str, str]:
    """``(head, body)``: a document's leading ``[...]`` brackets and ``Speaker:`` label, and the rest.

    >>> split_head("[1:56 pm on 8 May, 2023] Caroline: I went to a support group")
    ('[1:56 pm on 8 May, 2023] Caroline', 'I went to a support group')

    A label is one to four words before a colon at the very start; ``Q:``/``A:`` labels are left
    in the body (the tokenizer drops them).
    """
    m = _HEAD.match(text)
    if m is None:
        return "", text
    brackets, label = m.group(1) or "", m.group(2)
    if label is not None and (len(label.split()) > 4 or label.strip() in ("Q", "A")):
        label = None
    if not brackets and label is None:
        return "", text
    head = (brackets + (label or "")).strip()
    end = m.end() if label is not None else m.end(1)
    return head, text[end:].strip()


def _check_lang(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and re.fullmatch(r"[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*", value)):
        return None
    return "a language code such as 'en', 'pt-BR' or 'de', or null"


@dataclass
class LexicalOptions:
    """The keyword backend's own keys."""

    db_path: str | None = option(
        None, doc="The SQLite file (documents, index and history); `~` is expanded. Default: `<root>/lexical.db`."
    )
    lang: str | None = option(
        None,
        doc="Language of the stop-word list queries use (en, pt, es, fr, de, it, nl; a region such as "
        "`pt-BR` is fine). English and the CJK list always apply. null: English.",
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
        "answer. 0 turns it off.",
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


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE lexical_docs ("
        " rowid INTEGER PRIMARY KEY,"
        " doc_id TEXT NOT NULL UNIQUE,"
        " session_id TEXT NOT NULL,"
        " content TEXT NOT NULL,"
        " metadata TEXT NOT NULL,"
        " created REAL NOT NULL,"
        " body_terms TEXT NOT NULL,"
        " head_terms TEXT NOT NULL,"
        " ctx_terms TEXT NOT NULL,"
        " ctx_rowid INTEGER)"
    )
    conn.execute("CREATE INDEX lexical_docs_session ON lexical_docs (session_id, rowid)")
    conn.execute("CREATE TABLE lexical_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


MIGRATIONS = [Migration("0001_documents", _v1)]

_FTS_SQL = (
    "CREATE VIRTUAL TABLE lexical_fts USING fts5("
    "body_terms, head_terms, ctx_terms, content='lexical_docs', content_rowid='rowid', tokenize='ascii')"
)
_COLUMNS = "body_terms, head_terms, ctx_terms"


def _terms(text: str) -> tuple[str, str, bool]:
    """The stored ``(body_terms, head_terms)`` of a document and whether it is a dialogue turn."""
    head, body = split_head(text)
    turn = text.lstrip().startswith("Q:") or (bool(head) and not head.endswith("]"))
    return " ".join(tokenize(body, unigrams=True)), " ".join(tokenize(head, unigrams=True)), turn


class LexicalMemory(BaseRetrievalMemory):
    """Keyword memory over SQLite FTS5 (config: :class:`LexicalOptions` plus the shared keys)."""

    options_class: ClassVar[type[Any] | None] = LexicalOptions
    persistent: ClassVar[bool] = True
    default_min_relative_score: ClassVar[float | None] = 0.3
    #: A turn injects hits scoring at least 0.4 of the best one (docs/recall.md; search keeps 0.3).
    default_prompt_min_relative: ClassVar[float | None] = 0.4
    #: Set to False (in a subclass or a test) to use the no-FTS5 path even where FTS5 exists.
    use_fts5: ClassVar[bool] = True

    options: LexicalOptions

    # -- opening -----------------------------------------------------------------------------

    def _open_state_database(self) -> Database:
        """One file per memory: the documents, the index and the history share ``db_path``."""
        opts: LexicalOptions = self.options
        path = Path(opts.db_path).expanduser() if opts.db_path else self.root / "lexical.db"
        self.db_path = path
        self._fts = False
        try:
            db = Database(path)
        except (StorageError, OSError) as exc:
            LOG.error("LexicalMemory: cannot open %s (%s); memories are kept in RAM only", path, exc)
            db = Database(":memory:")
        try:
            self._prepare(db)
        except (StorageError, sqlite3.Error) as exc:
            LOG.error("LexicalMemory: cannot use %s (%s); memories are kept in RAM only", path, exc)
            db.close()
            db = Database(":memory:")
            self._prepare(db)
        self._db = db
        self._ranker: tuple[tuple[int, int, str | None], list[sqlite3.Row], BM25Ranker] | None = None
        self._writes = 0
        self._pending = 0
        self._count: tuple[tuple[int, int], int] | None = None
        self._df: dict[str, tuple[int, int]] = {}
        self._vocab = False
        return db

    def _prepare(self, db: Database) -> None:
        db.execute("PRAGMA secure_delete = ON")
        # checkpoint (and fsync) the WAL every ~16 MB instead of every ~4 MB: a third faster stores
        db.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        db.migrate("lexical", MIGRATIONS)
        self._fts = bool(self.use_fts5 and sqlite_layer.fts5_available())
        version = db.scalar("SELECT value FROM lexical_meta WHERE key = 'tokenizer'")
        if version is not None and version != TOKENIZER_VERSION:
            self._retokenize(db)
        elif version is None:
            db.execute("INSERT OR REPLACE INTO lexical_meta (key, value) VALUES ('tokenizer', ?)", (TOKENIZER_VERSION,))
        if self._fts:
            if not db.table_exists("lexical_fts"):
                with db.atomic() as conn:
                    conn.execute(_FTS_SQL)
                    conn.execute("INSERT INTO lexical_fts (lexical_fts) VALUES ('rebuild')")
            self._secure_delete = sqlite3.sqlite_version_info >= (3, 42, 0)
            if self._secure_delete:
                db.execute("INSERT INTO lexical_fts (lexical_fts, rank) VALUES ('secure-delete', 1)")
        else:
            LOG.warning(
                "LexicalMemory: this SQLite (%s) has no FTS5; ranking stored terms in Python with rank-bm25 "
                "(same results, slower on large memories)",
                sqlite3.sqlite_version,
            )

    def _retokenize(self, db: Database) -> None:
        """Recompute every document's stored terms (the tokenizer changed) and rebuild the index."""
        LOG.info("LexicalMemory: the tokenizer changed; re-indexing %s", self.db_path)
        rows = db.query("SELECT rowid, content, ctx_rowid FROM lexical_docs ORDER BY rowid")
        body: dict[int, str] = {}
        updates = []
        for r in rows:
            body_terms, head_terms, _ = _terms(r["content"])
            body[r["rowid"]] = body_terms
            updates.append((body_terms, head_terms, body.get(r["ctx_rowid"], ""), r["rowid"]))
        with db.atomic() as conn:
            conn.executemany(
                "UPDATE lexical_docs SET body_terms = ?, head_terms = ?, ctx_terms = ? WHERE rowid = ?", updates
            )
            if self._fts and db.table_exists("lexical_fts"):
                conn.execute("INSERT INTO lexical_fts (lexical_fts) VALUES ('rebuild')")
            conn.execute(
                "INSERT OR REPLACE INTO lexical_meta (key, value) VALUES ('tokenizer', ?)", (TOKENIZER_VERSION,)
            )

    # -- writing -----------------------------------------------------------------------------

    # Indexing is deferred: ``store`` commits the document row alone (durable at once) and the
    # index catches up in batches, before the next search and every INDEX_BATCH stores: one FTS5
    # segment per batch instead of one per document. The invariant: every row whose rowid is at
    # most the index's highest rowid is indexed (rows are indexed in rowid order, and a change to
    # an indexed row is re-indexed in the same transaction); rows above it are pending. Rows
    # another process stored are picked up the same way.

    def _indexed_upto(self, conn: sqlite3.Connection) -> int:
        if not self._fts:
            return 0
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM lexical_fts_docsize").fetchone()[0])

    def _fts_delete(self, conn: sqlite3.Connection, rows: Sequence[sqlite3.Row], upto: int) -> None:
        """Take the indexed ones of ``rows`` (rowid and term columns as stored) out of the index."""
        done = [r for r in rows if r["rowid"] <= upto]
        if self._fts and done:
            conn.executemany(
                f"INSERT INTO lexical_fts (lexical_fts, rowid, {_COLUMNS}) VALUES ('delete', ?, ?, ?, ?)",
                [(r["rowid"], r["body_terms"], r["head_terms"], r["ctx_terms"]) for r in done],
            )

    def _fts_reinsert(self, conn: sqlite3.Connection, rowids: Sequence[int], upto: int) -> None:
        """Index again the indexed ones of ``rowids`` after their terms changed."""
        done = [r for r in rowids if r <= upto]
        if self._fts and done:
            conn.executemany(
                f"INSERT INTO lexical_fts (rowid, {_COLUMNS}) SELECT rowid, {_COLUMNS} FROM lexical_docs"
                " WHERE rowid = ?",
                [(r,) for r in done],
            )

    def _index_pending(self) -> None:
        """Index every stored row not indexed yet, in one transaction."""
        if not self._fts:
            return
        with self._db.atomic() as conn:
            conn.execute(
                f"INSERT INTO lexical_fts (rowid, {_COLUMNS}) SELECT rowid, {_COLUMNS} FROM lexical_docs"
                " WHERE rowid > ? ORDER BY rowid",
                (self._indexed_upto(conn),),
            )
        self._pending = 0

    def _has_pending(self) -> bool:
        return bool(
            self._db.scalar(
                "SELECT (SELECT coalesce(max(rowid), 0) FROM lexical_docs)"
                " > (SELECT coalesce(max(id), 0) FROM lexical_fts_docsize)"
            )
        )

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        opts: LexicalOptions = self.options
        body_terms, head_terms, turn = _terms(text)
        meta = json.dumps(metadata, ensure_ascii=False, default=str)
        context = turn and opts.context_weight > 0
        with self._db.atomic() as conn:
            # the common case in one statement: a new document, its context the session's last one
            inserted = conn.execute(
                "INSERT INTO lexical_docs (doc_id, session_id, content, metadata, created, body_terms, head_terms,"
                " ctx_terms, ctx_rowid)"
                " SELECT ?, ?, ?, ?, ?, ?, ?, coalesce(prev.body_terms, ''), prev.rowid"
                " FROM (SELECT 1) LEFT JOIN (SELECT rowid, body_terms FROM lexical_docs"
                "  WHERE ? AND session_id = ? ORDER BY rowid DESC LIMIT 1) AS prev"
                " WHERE true ON CONFLICT (doc_id) DO NOTHING",
                (doc_id, session_id, text, meta, time.time(), body_terms, head_terms, context, session_id),
            ).rowcount
            if not inserted:  # the id exists: replace the text, keep its place and context
                old = conn.execute(f"SELECT rowid, {_COLUMNS} FROM lexical_docs WHERE doc_id = ?", (doc_id,)).fetchone()
                upto = self._indexed_upto(conn)
                self._fts_delete(conn, [old], upto)
                conn.execute(
                    "UPDATE lexical_docs SET session_id = ?, content = ?, metadata = ?, body_terms = ?,"
                    " head_terms = ? WHERE rowid = ?",
                    (session_id, text, meta, body_terms, head_terms, old["rowid"]),
                )
                self._fts_reinsert(conn, [old["rowid"]], upto)
        self._writes += 1
        self._pending += 1
        if self._pending >= INDEX_BATCH:
            self._index_pending()

    def _delete_rows(self, rows: Sequence[sqlite3.Row]) -> int:
        """Delete rows from the table and the index, and the copies of their words other turns
        hold as context, then purge the file."""
        if not rows:
            return 0
        gone = [r["rowid"] for r in rows]
        with self._db.atomic() as conn:
            upto = self._indexed_upto(conn)
            self._fts_delete(conn, rows, upto)
            conn.executemany("DELETE FROM lexical_docs WHERE rowid = ?", [(r,) for r in gone])
            heirs: list[sqlite3.Row] = []
            for start in range(0, len(gone), 500):
                chunk = gone[start : start + 500]
                marks = ",".join("?" * len(chunk))
                heirs.extend(
                    conn.execute(
                        f"SELECT rowid, {_COLUMNS} FROM lexical_docs WHERE ctx_rowid IN ({marks})", chunk
                    ).fetchall()
                )
            self._fts_delete(conn, heirs, upto)
            conn.executemany(
                "UPDATE lexical_docs SET ctx_terms = '', ctx_rowid = NULL WHERE rowid = ?",
                [(h["rowid"],) for h in heirs],
            )
            self._fts_reinsert(conn, [h["rowid"] for h in heirs], upto)
        self._writes += 1
        self._purge()
        return len(rows)

    def _purge(self) -> None:
        """Make deleted text unrecoverable from the file: merge the index, checkpoint the WAL."""
        try:
            if self._fts and not self._secure_delete:
                self._db.execute("INSERT INTO lexical_fts (lexical_fts) VALUES ('optimize')")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except (StorageError, sqlite3.Error) as exc:
            LOG.warning("LexicalMemory: deleted, but could not purge the file yet (%s)", exc)

    def _delete_documents(self, doc_ids: Sequence[str]) -> int:
        rows: list[sqlite3.Row] = []
        ids = list(dict.fromkeys(doc_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows.extend(self._db.query(f"SELECT rowid, {_COLUMNS} FROM lexical_docs WHERE doc_id IN ({marks})", chunk))
        return self._delete_rows(rows)

    def _delete_all(self) -> int:
        n = int(self._db.scalar("SELECT count(*) FROM lexical_docs") or 0)
        with self._db.atomic() as conn:
            conn.execute("DELETE FROM lexical_docs")
            if self._fts:
                conn.execute("INSERT INTO lexical_fts (lexical_fts) VALUES ('delete-all')")
        self._writes += 1
        self._purge()
        return n

    def _session_document_ids(self, session_id: str) -> list[str]:
        return [r[0] for r in self._db.query("SELECT doc_id FROM lexical_docs WHERE session_id = ?", (session_id,))]

    def iter_documents(self) -> Iterator[dict[str, Any]]:
        """Every stored document, oldest first, as ``{"id", "text", "session_id", "metadata"}``
        (``ovos-memory export``, the editor). Reads in pages, so a large memory streams."""
        last = 0
        while True:
            rows = self._db.query(
                "SELECT rowid, doc_id, content, session_id, metadata FROM lexical_docs"
                " WHERE rowid > ? ORDER BY rowid LIMIT 500",
                (last,),
            )
            if not rows:
                return
            for row in rows:
                yield {
                    "id": row["doc_id"],
                    "text": row["content"],
                    "session_id": row["session_id"],
                    "metadata": json.loads(row["metadata"]),
                }
            last = rows[-1]["rowid"]

    # -- querying ----------------------------------------------------------------------------

    def _query_terms(self, query: str) -> Counter[str]:
        """The query's terms and how often each counts, at most ``max_query_terms`` distinct ones.

        The last line's terms count ``last_line_weight`` times (the newest text matters most).
        """
        opts: LexicalOptions = self.options
        lines = query.strip().rsplit("\n", 1)
        terms = query_terms(lines[-1], opts.lang, extra_stopwords=opts.extra_stopwords, unigrams=True)
        if len(lines) == 2:
            earlier = query_terms(lines[0], opts.lang, extra_stopwords=opts.extra_stopwords, unigrams=True)
            terms = earlier + terms * opts.last_line_weight
        counts = Counter(terms)
        if len(counts) > opts.max_query_terms:
            newest = list(dict.fromkeys(reversed(terms)))[: opts.max_query_terms]
            counts = Counter({t: counts[t] for t in newest})
        return counts

    def word_terms(self, text: str, *, query: bool = False) -> frozenset[str] | None:
        """The terms this backend matches in ``text``: a query's (stop words out) or a document's."""
        if query:
            return frozenset(self._query_terms(text))
        return frozenset(tokenize(text, unigrams=True))

    def hit_terms(self, hits: Sequence[MemoryHit]) -> list[frozenset[str]] | None:
        """Each hit's own stored terms (its text and head, not the turn before), in one read."""
        ids = list(dict.fromkeys(h.source for h in hits))
        stored: dict[str, frozenset[str]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for r in self._db.query(
                f"SELECT doc_id, body_terms, head_terms FROM lexical_docs WHERE doc_id IN ({marks})", chunk
            ):
                stored[r["doc_id"]] = frozenset(f"{r['body_terms']} {r['head_terms']}".split())
        return [stored[h.source] if h.source in stored else frozenset(tokenize(h.content, unigrams=True)) for h in hits]

    @staticmethod
    def _match_expression(counts: Counter[str]) -> str:
        """An FTS5 query: every term quoted (a literal, whatever it holds), repeated by weight, OR'ed."""
        phrases = []
        for term, n in counts.items():
            phrases.extend([quote_fts_phrase(term)] * min(n, MAX_TERM_REPEAT))
        return " OR ".join(phrases)

    def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
        return self._query(query, top_k, None)

    def _query_session(self, query: str, top_k: int, session_id: str) -> list[MemoryHit]:
        return self._query(query, top_k, session_id)

    def _query(self, query: str, top_k: int, session_id: str | None) -> list[MemoryHit]:
        counts = self._query_terms(query)
        if not counts or top_k <= 0:
            return []
        if not self._fts:
            return self._query_fallback(counts, top_k, session_id)
        if self._pending or self._has_pending():
            self._index_pending()
        counts = self._prune(counts)
        opts: LexicalOptions = self.options
        weights = f"1.0, {float(opts.head_weight)!r}, {float(opts.context_weight)!r}"
        match = self._match_expression(counts)
        columns = "d.doc_id, d.session_id, d.content, d.metadata"
        if session_id is None:  # rank in the index, then read the few winning rows
            rows = self._db.query(
                f"SELECT {columns}, f.score FROM (SELECT rowid, -bm25(lexical_fts, {weights}) AS score"
                " FROM lexical_fts WHERE lexical_fts MATCH ? ORDER BY score DESC LIMIT ?) AS f"
                " JOIN lexical_docs AS d ON d.rowid = f.rowid ORDER BY f.score DESC",
                (match, int(top_k)),
            )
        else:
            rows = self._db.query(
                f"SELECT {columns}, -bm25(lexical_fts, {weights}) AS score"
                " FROM lexical_fts JOIN lexical_docs AS d ON d.rowid = lexical_fts.rowid"
                " WHERE lexical_fts MATCH ? AND d.session_id = ? ORDER BY score DESC LIMIT ?",
                (match, session_id, int(top_k)),
            )
        return [self._hit(r, float(r["score"])) for r in rows]

    def _doc_count(self) -> int:
        """How many documents the index holds (cached until this or another process writes)."""
        key = (int(self._db.scalar("PRAGMA data_version") or 0), self._writes)
        if self._count is None or self._count[0] != key:
            self._count = (key, int(self._db.scalar("SELECT count(*) FROM lexical_fts_docsize") or 0))
        return self._count[1]

    def _prune(self, counts: Counter[str]) -> Counter[str]:
        """On a large memory, leave out terms that cost much and tell little.

        Below ``PRUNE_MIN_DOCUMENTS`` nothing changes. Above it, a term found in more than half
        of the documents is left out (bm25 gives it no weight anyway), and the remaining terms
        are searched rarest first until their documents add up to ``PRUNE_POSTINGS`` (at least
        one term is always kept): this bounds the time of a query on any memory size.
        """
        n = self._doc_count()
        if n < PRUNE_MIN_DOCUMENTS or not counts:
            return counts
        df = self._document_frequencies(list(counts), n)
        ranked = sorted(counts, key=lambda t: df.get(t, 0))
        kept: Counter[str] = Counter()
        postings = 0
        for term in ranked:
            freq = df.get(term, 0)
            if kept and (freq > n // 2 or postings + freq > PRUNE_POSTINGS):
                break
            kept[term] = counts[term]
            postings += freq
        return kept

    def _document_frequencies(self, terms: list[str], n: int) -> dict[str, int]:
        """How many documents hold each term (fts5vocab; cached while the memory grows < 10%)."""
        if not self._vocab:
            self._db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.lexical_vocab USING fts5vocab(main, lexical_fts, 'row')"
            )
            self._vocab = True
        out: dict[str, int] = {}
        for term in terms:
            cached = self._df.get(term)
            if cached is not None and n <= cached[1] * 1.1:
                out[term] = cached[0]
                continue
            freq = int(self._db.scalar("SELECT doc FROM temp.lexical_vocab WHERE term = ?", (term,)) or 0)
            if len(self._df) >= DF_CACHE_SIZE:
                self._df.clear()
            self._df[term] = (freq, n)
            out[term] = freq
        return out

    @staticmethod
    def _hit(row: sqlite3.Row, score: float) -> MemoryHit:
        metadata = json.loads(row["metadata"])
        metadata.setdefault("session_id", row["session_id"])
        return MemoryHit(content=row["content"], source=row["doc_id"], score=score, metadata=metadata)

    def _query_fallback(self, counts: Counter[str], top_k: int, session_id: str | None) -> list[MemoryHit]:
        """No FTS5: rank-bm25 over the stored terms (cached until the file changes)."""
        version = int(self._db.scalar("PRAGMA data_version") or 0)
        key = (version, self._writes, session_id)
        if self._ranker is None or self._ranker[0] != key:
            columns = f"doc_id, session_id, content, metadata, {_COLUMNS}"
            if session_id is None:
                rows = self._db.query(f"SELECT {columns} FROM lexical_docs ORDER BY rowid")
            else:
                rows = self._db.query(
                    f"SELECT {columns} FROM lexical_docs WHERE session_id = ? ORDER BY rowid", (session_id,)
                )
            tokenized = [f"{r['body_terms']} {r['head_terms']} {r['ctx_terms']}".split() for r in rows]
            ranker = BM25Ranker([""] * len(rows), tokenized=tokenized)
            self._ranker = (key, rows, ranker)
        _, rows, ranker = self._ranker
        hits = ranker.rank_terms(list(counts.elements()), top_k)
        return [self._hit(rows[i], score) for i, score in hits]

    # -- figures and life cycle --------------------------------------------------------------

    def _backend_stats(self) -> dict[str, Any]:
        return {
            "documents": int(self._db.scalar("SELECT count(*) FROM lexical_docs") or 0),
            "sessions": int(self._db.scalar("SELECT count(DISTINCT session_id) FROM lexical_docs") or 0),
            "bytes": self._db.size_bytes(),
            "db_path": str(self.db_path),
            "fts5": self._fts,
            "stop_words": len(stop_words(self.options.lang)),
        }

    def _close(self) -> None:
        self._ranker = None
        if self._pending:
            try:
                self._index_pending()
            except (StorageError, sqlite3.Error) as exc:  # indexed by the next process that searches
                LOG.warning("LexicalMemory: could not index the last documents before closing (%s)", exc)
