"""The SQLite engine's keyword index (:class:`SqliteKeywordIndex`): our own tokens
(:mod:`ovos_memory_plugins.storage.keyword`, shared by every engine) in SQLite FTS5, over the
memory's documents table.

The index keeps the terms in ``keyword_terms`` (one row per
document, keyed by the document's key, cascading with it) and indexes them with an FTS5 table
``keyword_fts`` (three columns: body, head and context terms, the ``ascii`` tokenizer, ranked by
bm25 with per-column weights). Each term is quoted in the MATCH expression, so no query text is
ever an FTS5 operator.

* **Layouts.** A memory below :data:`UNSIZED_MIN_DOCUMENTS` documents has an external-content
  table (``content='keyword_terms'``) that keeps every document's column sizes, and its searches
  take FTS5's bm25 as their scores. FTS5's bm25 reads one size record per matching document (a
  statement on ``keyword_fts_docsize`` each: 1,890 per turn at 100,000 exchanges, three quarters
  of the MATCH statement's time), so once the index holds that many documents it is rebuilt, in
  one transaction, as a contentless table without sizes (``content='', columnsize=0``): there
  FTS5's bm25 (its length term then constant) only *finds* the best :data:`RESCORE_CANDIDATES`,
  and every search is ranked again by :func:`bm25_scores`, with the lengths of the candidates'
  terms rows and the average FTS5 keeps in its averages record (kept in both layouts). The
  scores are those of the sized index; which documents are candidates can differ at the edge of
  the best 50 (the PostgreSQL engine's candidates are ranked with lengths). Below half the
  threshold the sized table comes back. The layout is fitted when the memory opens and after
  every FTS5 batch and delete, outside a caller's transaction; a connection reads it from
  ``sqlite_master`` again after another's commit. A rebuild that fails is rolled back whole,
  logged, and tried again at the next fit: either layout answers every search.
* **Deferred indexing.** ``add`` writes the terms row in the write transaction (durable at once)
  and FTS5 catches up in batches of :data:`INDEX_BATCH` adds (on the write that fills one, and
  on close), so a batch is one FTS5 segment instead of one per document. Invariant: every terms
  row whose id is at most the index's mark (``keyword_meta`` key ``fts_upto``, set in the
  transaction that changes what FTS5 holds; a file of an earlier version is marked once from its
  sizes) is indexed; rows above it are pending (rows another process added are picked up the
  same way). A search on a memory of :data:`PRUNE_MIN_DOCUMENTS` or more leaves the pending
  rows to the batch and ranks them in Python
  (:mod:`~ovos_memory_plugins.storage.sqlite.unindexed` keeps them in RAM, reading only what is
  new): those holding a kept term join FTS5's candidates, and both are ranked by the
  second ranking with the statistics of both, the scores the indexed memory gives. A host
  alternates a turn and a write, so the turn no longer holds an FTS5 transaction. A smaller
  memory (whose searches keep FTS5's own scores), more than a batch pending, or a search inside
  a transaction indexes them first, as before.
* **Pruning.** On a memory of :data:`PRUNE_MIN_DOCUMENTS` or more, query terms found in more than
  half the documents are left out and the others are searched rarest first until their postings
  add up to :data:`PRUNE_POSTINGS`, keeping at least the rarest. When that one is kept alone and
  found in more documents than that, only its newest :data:`PRUNE_POSTINGS` are searched
  (unscored, its doclist read from the end finds where they begin), which bounds the time of a
  query on any size; a session's or a window's search reads every posting. The kept terms
  only *find* candidates: the best :data:`RESCORE_CANDIDATES` of them are ranked again by
  :func:`bm25_scores` on every query term, so a left-out term still orders what the rare terms
  found. A large memory ranks with bm25's ``k1`` = :data:`RESCORE_K1` (FTS5's is 1.2): among
  many documents, long texts that repeat one query word (lists, assistant paragraphs) otherwise
  outrank the one holding more of the query's words. FTS5's k1 is fixed, but its bm25 with every
  column weight times ``BM25_K1 / RESCORE_K1`` ranks exactly as bm25 with ``RESCORE_K1`` (its
  score is that bm25 times ``(BM25_K1 + 1) / (RESCORE_K1 + 1)``), so the candidates are found,
  and a search without pruned terms is ranked, with the same saturation as the second ranking.
* **Forgetting.** Deleted rows are removed from FTS5 with its ``delete`` command before the terms
  row goes; on SQLite 3.42+ the index runs with ``secure-delete``, else it is merged
  (``optimize``) after deletes, so deleted words do not stay in ``keyword_fts_data``.
* **No FTS5** (some Python builds): the same API ranks the stored terms with
  :class:`~ovos_memory_plugins.ranking.BM25Ranker` (rank-bm25's formula), cached until the file
  changes (one log line says so).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.ranking import BM25Ranker
from ovos_memory_plugins.storage import keyword as shared
from ovos_memory_plugins.storage.keyword import MAX_TERM_REPEAT, bm25_scores, document_terms, query_counts
from ovos_memory_plugins.storage.records import Document, KeywordSettings, StoredDocument
from ovos_memory_plugins.storage.sqlite import database as sqlite_layer
from ovos_memory_plugins.storage.sqlite.database import Database, chunked, quote_fts_phrase
from ovos_memory_plugins.storage.sqlite.unindexed import UnindexedRow, UnindexedRows

LOG = logging.getLogger(__name__)

__all__ = [
    "DF_CACHE_SIZE",
    "INDEX_BATCH",
    "TOKENIZER_VERSION",
    "UNSIZED_MIN_DOCUMENTS",
    "WAL_CHECKPOINT_PAGES",
    "SqliteKeywordIndex",
    "match_expression",
]

#: Bumped whenever tokenization changes; stored terms are rebuilt on open when it differs.
TOKENIZER_VERSION = "1"
#: Stored documents are indexed in batches of at most this many (a small memory's search indexes first).
INDEX_BATCH = 256
#: Pages the WAL may grow to before it is checkpointed (SQLite's default is 1,000).
WAL_CHECKPOINT_PAGES = 4_000
#: A memory's index takes the layout without document sizes once FTS5 holds this many documents,
#: and the sized one again below half of it (module docstring, "Layouts").
UNSIZED_MIN_DOCUMENTS = 5_000
#: Document frequencies remembered per open index.
DF_CACHE_SIZE = 50_000


def match_expression(counts: Counter[str]) -> str:
    """An FTS5 query: every term quoted (a literal, whatever it holds), repeated by weight, OR'ed."""
    phrases = []
    for term, n in counts.items():
        phrases.extend([quote_fts_phrase(term)] * min(n, MAX_TERM_REPEAT))
    return " OR ".join(phrases)


def _varints(blob: bytes) -> list[int]:
    """SQLite's big-endian varints (as FTS5 stores its records)."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


#: The index of a smaller memory: external content (``keyword_terms``), a size per document,
#: which FTS5's bm25 reads for every match.
_FTS_SQL = (
    "CREATE VIRTUAL TABLE keyword_fts USING fts5("
    "body_terms, head_terms, ctx_terms, content='keyword_terms', content_rowid='id', tokenize='ascii')"
)
#: The index of a large memory (module docstring, "Layouts"): contentless, no sizes; its bm25 reads
#: no per-document record and only finds candidates, which the second ranking ranks with lengths.
_FTS_UNSIZED_SQL = (
    "CREATE VIRTUAL TABLE keyword_fts USING fts5("
    "body_terms, head_terms, ctx_terms, content='', columnsize=0, tokenize='ascii')"
)
#: ``keyword_meta``'s key for the index's mark: the highest key FTS5 holds (module docstring).
_MARK = "fts_upto"
_MARK_SQL = f"coalesce((SELECT CAST(value AS INTEGER) FROM keyword_meta WHERE key = '{_MARK}'), 0)"
_COLUMNS = "body_terms, head_terms, ctx_terms"


class SqliteKeywordIndex:
    """The keyword index over a memory's SQLite file (see the module docstring)."""

    #: Its ``search`` takes ``window=``: a ``(since, until)`` range of the documents' ``created``.
    filters_time: ClassVar[bool] = True

    name = "keyword"

    def __init__(self, db: Database, settings: KeywordSettings | None = None) -> None:
        self.db = db
        self.settings = settings or KeywordSettings()
        self._ranker: tuple[tuple[Any, ...], list[sqlite3.Row], BM25Ranker] | None = None
        self._writes = 0
        self._pending = 0
        #: The terms rows FTS5 has not indexed yet, which a large memory's search ranks in Python
        #: (shared by the keyword indexes over this database), and its count of FTS5's changes.
        self._unindexed = UnindexedRows.of(db)
        self._count: tuple[tuple[int, int], int] | None = None
        self._averages_cache: tuple[tuple[int, int], tuple[int, float] | None] | None = None
        self._df: dict[str, tuple[int, int]] = {}
        #: The stored terms (body and head) of the last search's hits, by document id, and the
        #: state they were read in: ``own_terms`` of those hits then needs no read.
        self._hit_terms: tuple[tuple[int, int], dict[str, str]] | None = None
        #: ``(data version, the connection's changes)`` when no terms row was left to index: a
        #: search while both are the same needs no look for pending rows (rows appear only by a
        #: write, this connection's, whichever index made it, or another connection's commit).
        self._indexed_at: tuple[int, int] | None = None
        self._vocab = False
        #: Whether ``keyword_fts`` has the layout without document sizes, and the file's version
        #: that was read in (another process may change it).
        self._unsized: tuple[int, bool] | None = None
        self.fts = bool(self.settings.use_fts5 and sqlite_layer.fts5_available())
        self.secure_delete = self.fts and sqlite3.sqlite_version_info >= (3, 42, 0)
        if not db.in_ram:
            # checkpoint (and fsync) the WAL every ~16 MB instead of every ~4 MB: a third faster stores
            db.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        self._prepare()

    # -- opening -----------------------------------------------------------------------------

    def _prepare(self) -> None:
        db = self.db
        with db.atomic() as conn:  # check and create inside one write transaction (many processes)
            version = conn.execute("SELECT value FROM keyword_meta WHERE key = 'tokenizer'").fetchone()
            if version is None:
                conn.execute(
                    "INSERT OR REPLACE INTO keyword_meta (key, value) VALUES ('tokenizer', ?)", (TOKENIZER_VERSION,)
                )
            has_fts = bool(conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'keyword_fts'").fetchone())
            if self.fts and not has_fts:
                self._create_fts(conn, unsized=False)
            elif self.fts and conn.execute("SELECT 1 FROM keyword_meta WHERE key = ?", (_MARK,)).fetchone() is None:
                # a file of an earlier version (its index's highest key was read from the sizes): mark it once
                top = conn.execute("SELECT coalesce(max(id), 0) FROM keyword_fts_docsize").fetchone()[0]
                self._mark(conn, int(top))
            if self.fts and self.secure_delete:
                conn.execute("INSERT INTO keyword_fts (keyword_fts, rank) VALUES ('secure-delete', 1)")
            if not self.fts and has_fts:
                # an index this build cannot maintain would keep deleted words: drop it
                with contextlib.suppress(sqlite3.OperationalError):
                    conn.execute("DROP TABLE keyword_fts")
                self._mark(conn, 0)
        if version is not None and version[0] != TOKENIZER_VERSION:
            self._retokenize()
        self._catch_up()
        self._fit_layout()
        if not self.fts:
            LOG.warning(
                "keyword index: this SQLite (%s) has no FTS5; ranking stored terms in Python with rank-bm25 "
                "(same results, slower on large memories)",
                sqlite3.sqlite_version,
            )

    def _catch_up(self) -> None:
        """Give terms to documents that have none (moved in from a vector memory, hybrid switched
        on later), in the order of their keys."""
        missing = self.db.query(
            "SELECT d.id, d.session_id, d.content FROM documents d"
            " WHERE NOT EXISTS (SELECT 1 FROM keyword_terms t WHERE t.id = d.id) ORDER BY d.id"
        )
        if not missing:
            return
        LOG.info("keyword index: indexing %d document(s) that have no keyword terms yet", len(missing))
        stored = [StoredDocument(int(r[0]), "", r[1], r[2], {}, 0.0, True) for r in missing]
        with self.db.atomic() as conn:
            self._insert_terms(conn, stored)
        self._index_pending()

    def _retokenize(self) -> None:
        """Recompute every document's stored terms (the tokenizer changed) and rebuild the index."""
        LOG.info("keyword index: the tokenizer changed; re-indexing %s", self.db.path)
        rows = self.db.query(
            "SELECT t.id, d.content, t.ctx_id FROM keyword_terms t JOIN documents d ON d.id = t.id ORDER BY t.id"
        )
        body: dict[int, str] = {}
        updates = []
        for r in rows:
            body_terms, head_terms, _ = document_terms(r[1])
            body[r[0]] = body_terms
            updates.append((body_terms, head_terms, body.get(r[2], ""), r[0]))
        with self.db.atomic() as conn:
            conn.executemany(
                "UPDATE keyword_terms SET body_terms = ?, head_terms = ?, ctx_terms = ? WHERE id = ?", updates
            )
            if self.fts:
                conn.execute("INSERT INTO keyword_fts (keyword_fts) VALUES ('delete-all')")
                self._fts_fill(conn)
            conn.execute(
                "INSERT OR REPLACE INTO keyword_meta (key, value) VALUES ('tokenizer', ?)", (TOKENIZER_VERSION,)
            )
        self._unindexed.fts_changes += 1
        self._unindexed.forget()

    # -- writing -----------------------------------------------------------------------------

    def _indexed_upto(self, conn: sqlite3.Connection | None = None) -> int:
        """The index's mark (the highest key FTS5 holds), inside the caller's transaction
        (``conn``) or on its own."""
        if not self.fts:
            return 0
        sql = f"SELECT {_MARK_SQL}"
        return int((conn.execute(sql).fetchone()[0]) if conn is not None else (self.db.scalar(sql) or 0))

    @staticmethod
    def _mark(conn: sqlite3.Connection, upto: int) -> None:
        """Set the index's mark, in the transaction that changed what FTS5 holds."""
        conn.execute("INSERT OR REPLACE INTO keyword_meta (key, value) VALUES (?, ?)", (_MARK, str(int(upto))))

    def _create_fts(self, conn: sqlite3.Connection, *, unsized: bool) -> None:
        """Create ``keyword_fts`` in the given layout and index every terms row into it."""
        conn.execute(_FTS_UNSIZED_SQL if unsized else _FTS_SQL)
        self._fts_fill(conn)

    def _fts_fill(self, conn: sqlite3.Connection) -> None:
        """Index every terms row into the empty FTS5 table, and mark the highest."""
        sql = f"INSERT INTO keyword_fts (rowid, {_COLUMNS}) SELECT id, {_COLUMNS} FROM keyword_terms ORDER BY id"
        conn.execute(sql)
        self._mark(conn, int(conn.execute("SELECT coalesce(max(id), 0) FROM keyword_terms").fetchone()[0]))
        self._unindexed.fts_changes += 1

    def unsized(self, key: tuple[int, int] | None = None) -> bool:
        """Whether the index has the layout without document sizes (read again after another
        process's commit; ``key``: :meth:`_state`, when the caller has it)."""
        version = (key or self._state())[0]
        if self._unsized is None or self._unsized[0] != version:
            sql = self.db.scalar("SELECT sql FROM sqlite_master WHERE name = 'keyword_fts'")
            self._unsized = (version, "columnsize=0" in str(sql or ""))
        return self._unsized[1]

    def _fit_layout(self) -> None:
        """Give the index the layout its size calls for (module docstring, "Layouts"): rebuilt
        in one transaction, when FTS5 reaches :data:`UNSIZED_MIN_DOCUMENTS` documents or falls
        below half of it. Either layout answers the same, so a rebuild that fails (the file is
        busy, the disk full) is logged and tried again at the next write or open."""
        if not self.fts or self.db.in_transaction:
            return
        try:
            self._relayout()
        except (StorageError, sqlite3.Error) as exc:
            LOG.warning("keyword index: could not change the index's layout yet (%s)", exc)

    def _relayout(self) -> None:
        """Rebuild the index with or without document sizes if its size calls for it."""
        n = self.count()
        unsized = self.unsized()
        if unsized == (n >= UNSIZED_MIN_DOCUMENTS) or (unsized and n >= UNSIZED_MIN_DOCUMENTS // 2):
            return
        LOG.info(
            "keyword index: %d documents; rebuilding the index %s document sizes",
            n,
            "without" if not unsized else "with",
        )
        with self.db.atomic() as conn:
            conn.execute("DROP TABLE keyword_fts")
            self._create_fts(conn, unsized=not unsized)
            if self.secure_delete:
                conn.execute("INSERT INTO keyword_fts (keyword_fts, rank) VALUES ('secure-delete', 1)")
        self._unsized = None
        self._unindexed.forget()

    def _fts_delete(self, conn: sqlite3.Connection, rows: Sequence[Any], upto: int) -> int:
        """Take the indexed ones of ``rows`` (id and term columns as stored) out of the index."""
        done = [r for r in rows if r[0] <= upto]
        if self.fts and done:
            self._unindexed.fts_changes += 1
            conn.executemany(
                f"INSERT INTO keyword_fts (keyword_fts, rowid, {_COLUMNS}) VALUES ('delete', ?, ?, ?, ?)",
                [(r[0], r[1], r[2], r[3]) for r in done],
            )
        return len(done)

    def _fts_reinsert(self, conn: sqlite3.Connection, ids: Sequence[int], upto: int) -> None:
        """Index again the indexed ones of ``ids`` after their terms changed."""
        done = [i for i in ids if i <= upto]
        if self.fts and done:
            self._unindexed.fts_changes += 1
            conn.executemany(
                f"INSERT INTO keyword_fts (rowid, {_COLUMNS}) SELECT id, {_COLUMNS} FROM keyword_terms WHERE id = ?",
                [(i,) for i in done],
            )

    def _index_pending(self) -> None:
        """Index every terms row not indexed yet, in one transaction."""
        if not self.fts:
            self._pending = 0
            return
        self._unindexed.fts_changes += 1
        self._unindexed.forget()
        with self.db.atomic() as conn:
            upto = self._indexed_upto(conn)
            conn.execute(
                f"INSERT INTO keyword_fts (rowid, {_COLUMNS}) SELECT id, {_COLUMNS} FROM keyword_terms"
                " WHERE id > ? ORDER BY id",
                (upto,),
            )
            top = int(conn.execute("SELECT coalesce(max(id), 0) FROM keyword_terms").fetchone()[0])
            if top > upto:
                self._mark(conn, top)
        self._pending = 0
        self._fit_layout()

    def _has_pending(self) -> bool:
        return bool(self.db.scalar(f"SELECT (SELECT coalesce(max(id), 0) FROM keyword_terms) > {_MARK_SQL}"))

    def prepare(self, docs: Sequence[Document]) -> None:
        """Nothing to do before the transaction (tokenizing is local and fast)."""
        return None

    def _insert_terms(self, conn: sqlite3.Connection, docs: Sequence[StoredDocument], fresh: bool = False) -> None:
        """Terms rows for documents that have none; a turn takes the session's previous document
        as context. Rows below the indexed mark go into FTS5 at once (keeping the invariant);
        ``fresh`` documents were just inserted, so their keys are above every indexed one."""
        context_on = self.settings.context_weight > 0
        upto = 0 if fresh else self._indexed_upto(conn)
        late: list[int] = []
        for doc in docs:
            body_terms, head_terms, turn = document_terms(doc.text)
            # one statement: the terms, and as context the session's previous document's (turns only)
            conn.execute(
                "INSERT INTO keyword_terms (id, body_terms, head_terms, ctx_terms, ctx_id)"
                " SELECT ?, ?, ?, coalesce(prev.body_terms, ''), prev.id FROM (SELECT 1) LEFT JOIN ("
                "  SELECT t.id, t.body_terms FROM documents d JOIN keyword_terms t ON t.id = d.id"
                "  WHERE ? AND d.session_id = ? AND d.id < ? ORDER BY d.id DESC LIMIT 1) AS prev",
                (doc.key, body_terms, head_terms, turn and context_on, doc.session_id, doc.key),
            )
            if doc.key <= upto:
                late.append(doc.key)
        self._fts_reinsert(conn, late, upto)

    def add(self, docs: Sequence[StoredDocument], prepared: Any = None) -> None:
        """Store the terms of new or changed documents (inside the write transaction)."""
        todo = [d for d in docs if d.changed]
        if not todo:
            return
        with self.db.atomic(savepoint=False) as conn:
            fresh = [d for d in todo if d.new]
            if fresh:
                self._insert_terms(conn, fresh, fresh=True)
            existing: dict[int, Any] = {}
            for chunk, marks in chunked([d.key for d in todo if not d.new]):
                for r in conn.execute(f"SELECT id, {_COLUMNS} FROM keyword_terms WHERE id IN ({marks})", chunk):
                    existing[int(r[0])] = r
            missing = [d for d in todo if not d.new and d.key not in existing]
            if missing:
                self._insert_terms(conn, missing)
            replaced = [d for d in todo if d.key in existing]
            if replaced:  # the id exists: replace its terms, keep its place and context
                upto = self._indexed_upto(conn)
                self._fts_delete(conn, [existing[d.key] for d in replaced], upto)
                for doc in replaced:
                    body_terms, head_terms, _ = document_terms(doc.text)
                    conn.execute(
                        "UPDATE keyword_terms SET body_terms = ?, head_terms = ? WHERE id = ?",
                        (body_terms, head_terms, doc.key),
                    )
                self._fts_reinsert(conn, [d.key for d in replaced], upto)
        self._writes += 1
        self._pending += len(fresh) + len(missing)
        if missing or replaced:  # rows below the highest unindexed key changed
            self._unindexed.forget()
        elif fresh:  # new keys, above every other
            self._unindexed.appended()
        if self._pending >= INDEX_BATCH:
            self.db.on_commit(self._index_pending)

    def remove(self, docs: Sequence[StoredDocument]) -> int:
        """Take documents out of the index and out of other turns' context (before their rows go)."""
        gone = [d.key for d in docs]
        if not gone:
            return 0
        with self.db.atomic(savepoint=False) as conn:
            rows: list[Any] = []
            for chunk, marks in chunked(gone):
                rows.extend(conn.execute(f"SELECT id, {_COLUMNS} FROM keyword_terms WHERE id IN ({marks})", chunk))
            upto = self._indexed_upto(conn)
            self._fts_delete(conn, rows, upto)
            for chunk, marks in chunked(gone):
                conn.execute(f"DELETE FROM keyword_terms WHERE id IN ({marks})", chunk)
            if self.fts and any(int(r[0]) == upto for r in rows):  # the mark: the highest key still indexed
                left = conn.execute("SELECT coalesce(max(id), 0) FROM keyword_terms WHERE id <= ?", (upto,))
                upto = int(left.fetchone()[0])
                self._mark(conn, upto)
            heirs: list[Any] = []
            for chunk, marks in chunked(gone):
                heirs.extend(conn.execute(f"SELECT id, {_COLUMNS} FROM keyword_terms WHERE ctx_id IN ({marks})", chunk))
            self._fts_delete(conn, heirs, upto)
            conn.executemany(
                "UPDATE keyword_terms SET ctx_terms = '', ctx_id = NULL WHERE id = ?", [(h[0],) for h in heirs]
            )
            self._fts_reinsert(conn, [h[0] for h in heirs], upto)
        self._writes += 1
        self._unindexed.forget()
        self.db.on_commit(self._merge)
        return len(rows)

    def remove_all(self) -> int:
        """Empty the index; return how many terms rows went."""
        with self.db.atomic(savepoint=False) as conn:
            n = int(conn.execute("DELETE FROM keyword_terms").rowcount)
            if self.fts:
                conn.execute("INSERT INTO keyword_fts (keyword_fts) VALUES ('delete-all')")
                self._mark(conn, 0)
        self._writes += 1
        self._unindexed.fts_changes += 1
        self._pending = 0
        self._unindexed.forget()
        self.db.on_commit(self._merge)
        return n

    def _merge(self) -> None:
        """Without FTS5 secure-delete, merge the index so deleted words leave its segments."""
        try:
            if self.fts and not self.secure_delete:
                self.db.execute("INSERT INTO keyword_fts (keyword_fts) VALUES ('optimize')")
        except (StorageError, sqlite3.Error) as exc:
            LOG.warning("keyword index: deleted, but could not merge the index yet (%s)", exc)
        self._fit_layout()

    # -- querying ----------------------------------------------------------------------------

    def search(
        self, query: str, k: int, session_id: str | None = None, *, window: tuple[float, float] | None = None
    ) -> list[MemoryHit]:
        """The best ``k`` documents by bm25 over the query's terms, best first; with ``window``
        (``(since, until)``, seconds since the epoch), only documents made in it (``created``)."""
        counts = query_counts(query, self.settings)
        if not counts or k <= 0:
            return []
        if window is not None and self._holds_every_document(window):
            window = None  # the same hits without the filter, ranked in the index ("in December")
        if not self.fts:
            return self._search_fallback(counts, k, session_id, window)
        key = self._state()  # one look at the file's version for the whole search
        unindexed = self._unindexed_rows(key)
        kept = self._prune(counts, key, unindexed)
        column_weights = self.settings.column_weights
        # A large memory ranks with k1 = RESCORE_K1. FTS5's k1 is fixed, but its bm25 with every
        # column weight times c ranks as bm25 with k1 / c (tf (k1 + 1) / (c tf + k1 N) c = tf (k1 + 1)
        # / (tf + k1 / c N)), and its score times (RESCORE_K1 + 1) / (BM25_K1 + 1) is that bm25.
        large = self.count(key) + len(unindexed) >= shared.PRUNE_MIN_DOCUMENTS
        saturation = shared.BM25_K1 / shared.RESCORE_K1 if large else 1.0
        weights = ", ".join(repr(w * saturation) for w in column_weights)
        match = match_expression(kept)
        k1 = shared.RESCORE_K1 if large else shared.BM25_K1
        alone = large and len(kept) == 1 and session_id is None and window is None
        newest = self._newest_postings(match, kept, key, unindexed) if alone else 0
        if len(kept) < len(counts) or unindexed or self.unsized(key):  # ranked again (module docstring)
            return self._rescored(
                counts, match, weights, column_weights, int(k), session_id, key, window, kept, unindexed, k1, newest
            )
        factor = (shared.RESCORE_K1 + 1) / (shared.BM25_K1 + 1) if large else 1.0
        # the hits' own terms come along (prompt selection asks for them next: own_terms)
        columns = "d.doc_id, d.session_id, d.content, d.metadata"
        where, params = _document_filter(session_id, window)
        if not where:  # rank in the index, then read the few winning rows
            rows = self.db.query(
                f"SELECT {columns}, f.score, t.body_terms, t.head_terms FROM (SELECT rowid,"
                f" -bm25(keyword_fts, {weights}) AS score FROM keyword_fts WHERE keyword_fts MATCH ?"
                " AND rowid >= ? ORDER BY score DESC LIMIT ?) AS f JOIN documents AS d ON d.id = f.rowid"
                " JOIN keyword_terms AS t ON t.id = f.rowid ORDER BY f.score DESC",
                (match, newest, int(k)),
            )
        else:
            rows = self.db.query(
                f"SELECT {columns}, -bm25(keyword_fts, {weights}) AS score, t.body_terms, t.head_terms"
                " FROM keyword_fts JOIN documents AS d ON d.id = keyword_fts.rowid"
                " JOIN keyword_terms AS t ON t.id = keyword_fts.rowid"
                f" WHERE keyword_fts MATCH ?{where} ORDER BY score DESC LIMIT ?",
                (match, *params, int(k)),
            )
        self._hit_terms = (key, {r[0]: f"{r[5]} {r[6]}" for r in rows})
        return [self._hit(r, float(r[4]) * factor) for r in rows]

    def _newest_postings(
        self, match: str, kept: Counter[str], key: tuple[int, int], unindexed: dict[int, UnindexedRow]
    ) -> int:
        """The lowest key among the newest :data:`PRUNE_POSTINGS` documents holding the one kept
        term (``match``, ``kept``) when more hold it; 0 (every document) otherwise.

        Pruning keeps the rarest term however common it is, and FTS5's bm25 scores every one of
        its postings: a question whose every word is common ("What does Jon tell Gina he won't
        do?", a name in 14 % of 100,000 exchanges) cost 6 ms of SQL. The newest postings are
        found by reading the doclist from its end, unscored (0.1 to 0.4 ms), so a search's cost is
        bounded on any size, and a word said everywhere finds what was said last. The unindexed
        rows are the newest of all (their keys are above the index's mark), so the same
        documents are candidates before and after FTS5 indexes them."""
        budget = shared.PRUNE_POSTINGS
        if sum(self._frequencies(list(kept), key, unindexed).values()) <= budget:
            return 0
        late = sorted((r.key for r in self._unindexed.holding(kept)), reverse=True) if unindexed else []
        if len(late) >= budget:
            return late[budget - 1]
        row = self.db.query(
            "SELECT rowid FROM keyword_fts WHERE keyword_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (match, budget - len(late) - 1),
        )
        return int(row[0][0]) if row else 0

    def _holds_every_document(self, window: tuple[float, float]) -> bool:
        """Whether every document was made in ``window`` (two seeks of the ``created`` index).

        A window search joins each match's document to test its time before it can rank, so a
        window holding the whole memory (a memory begun this month, asked about "this month")
        read and ranked every match: 11 ms at 100,000 exchanges against 1.8 for the same hits
        ranked in the index."""
        oldest, newest = self.db.query(
            "SELECT (SELECT min(created) FROM documents), (SELECT max(created) FROM documents)"
        )[0]
        return oldest is not None and newest is not None and window[0] <= oldest and newest < window[1]

    def _rescored(
        self,
        counts: Counter[str],
        match: str,
        weights: str,
        column_weights: Sequence[float],
        k: int,
        session_id: str | None,
        key: tuple[int, int],
        window: tuple[float, float] | None = None,
        kept: Counter[str] | None = None,
        unindexed: dict[int, UnindexedRow] | None = None,
        k1: float = shared.RESCORE_K1,
        newest: int = 0,
    ) -> list[MemoryHit]:
        """The best :data:`RESCORE_CANDIDATES` matches of the kept terms by FTS5's bm25
        (``weights``: the column weights, scaled to saturate as ``k1``; without document lengths
        in the unsized layout), and the ``unindexed`` rows holding a kept term, ranked on every
        query term by :func:`bm25_scores` with ``k1`` and the statistics of both (documents,
        lengths, document frequencies); only the winners' documents are read."""
        fetch = max(k, shared.RESCORE_CANDIDATES)
        where, params = _document_filter(session_id, window)
        found: Sequence[Sequence[Any]]
        # the candidates first (joined to their documents only to test a session or window),
        # then their stored terms by rowid: cheaper than one statement joining the terms of
        # every match (a window of 100,000 exchanges: 4.8 ms against 8.6)
        joined = " JOIN documents AS d ON d.id = f.rowid" if where else ""
        ranked = self.db.query(
            f"SELECT f.rowid, -bm25(keyword_fts, {weights}) AS score FROM keyword_fts AS f{joined}"
            f" WHERE keyword_fts MATCH ? AND f.rowid >= ?{where} ORDER BY score DESC LIMIT ?",
            (match, newest, *params, fetch),
        )
        ids = [int(r[0]) for r in ranked]
        marks = ",".join("?" * len(ids))
        sql = f"SELECT id, body_terms, head_terms, ctx_terms FROM keyword_terms WHERE id IN ({marks})"
        stored = {int(r[0]): r for r in self.db.query(sql, ids)} if ids else {}
        found = [(r[0], r[1], *stored[i][1:]) for r, i in zip(ranked, ids, strict=True) if i in stored]
        unindexed = unindexed or {}
        if unindexed:
            found = [
                *found,
                *(
                    (r.key, 0.0, *r.columns)
                    for r in self._unindexed_matches(kept or counts, session_id, window)
                    if r.key >= newest
                ),
            ]
        scores = [float(r[1]) for r in found]
        averages = self._averages(key) if found else None
        if averages is not None:
            n, avg_length = averages
            if unindexed:
                total = n * avg_length + self._unindexed.total_length
                n += len(unindexed)
                avg_length = total / n
            df = self._frequencies(list(counts), key, unindexed)
            columns = [(r[2], r[3], r[4]) for r in found]
            scores = bm25_scores(counts, columns, df, n, avg_length, column_weights, k1=k1)
        best = sorted(range(len(found)), key=lambda i: (-scores[i], -float(found[i][1])))[:k]
        if not best:
            return []
        ids = [int(found[i][0]) for i in best]
        marks = ",".join("?" * len(ids))
        rows = {
            int(r[0]): r
            for r in self.db.query(
                f"SELECT id, doc_id, session_id, content, metadata FROM documents WHERE id IN ({marks})", ids
            )
        }
        self._hit_terms = (
            key,
            {rows[i][1]: f"{found[j][2]} {found[j][3]}" for i, j in zip(ids, best, strict=True) if i in rows},
        )
        return [self._hit(rows[i][1:], scores[j]) for i, j in zip(ids, best, strict=True) if i in rows]

    def _state(self) -> tuple[int, int]:
        """What RAM caches of the file are keyed on: its version (other processes' commits) and
        this index's own writes."""
        return (self.db.data_version(), self._writes)

    def _averages(self, key: tuple[int, int] | None = None) -> tuple[int, float] | None:
        """``(documents, average terms per document)`` from FTS5's averages record (None when
        unreadable: the search then keeps the index's own scores); ``key``: :meth:`_state`,
        when the caller has it."""
        key = key or self._state()
        at = (key[0], self._unindexed.fts_changes)
        if self._averages_cache is not None and self._averages_cache[0] == at:
            return self._averages_cache[1]
        try:
            blob = self.db.scalar("SELECT block FROM keyword_fts_data WHERE id = 1")
            values = _varints(bytes(blob or b""))
        except (StorageError, sqlite3.Error, TypeError, IndexError) as exc:
            LOG.debug("keyword index: no averages record (%s)", exc)
            values = []
        found = (values[0], sum(values[1:]) / values[0]) if len(values) >= 2 and values[0] > 0 else None
        self._averages_cache = (at, found)
        return found

    def count(self, key: tuple[int, int] | None = None) -> int:
        """How many documents FTS5 has indexed (all of them without FTS5; cached until this index
        changes FTS5's contents or another process writes; ``key``: :meth:`_state`, when the
        caller has it). The search adds the unindexed rows."""
        key = key or self._state()
        if self.fts:  # FTS5's averages record counts its rows
            averages = self._averages(key)
            return averages[0] if averages is not None else 0
        at = (key[0], self._writes)
        if self._count is None or self._count[0] != at:
            self._count = (at, int(self.db.scalar("SELECT count(*) FROM keyword_terms") or 0))
        return self._count[1]

    def _prune(
        self,
        counts: Counter[str],
        key: tuple[int, int] | None = None,
        unindexed: dict[int, UnindexedRow] | None = None,
    ) -> Counter[str]:
        """On a large memory, leave out terms that cost much and tell little (module docstring)."""
        unindexed = unindexed or {}
        n = self.count(key) + len(unindexed)
        if n < shared.PRUNE_MIN_DOCUMENTS or not counts:
            return counts
        df = self._frequencies(list(counts), key, unindexed)
        ranked = sorted(counts, key=lambda t: df.get(t, 0))
        kept: Counter[str] = Counter()
        postings = 0
        for term in ranked:
            freq = df.get(term, 0)
            if kept and (freq > n // 2 or postings + freq > shared.PRUNE_POSTINGS):
                break
            kept[term] = counts[term]
            postings += freq
        return kept

    def _unindexed_rows(self, key: tuple[int, int]) -> dict[int, UnindexedRow]:
        """The terms rows FTS5 has not indexed yet, by key, which the search ranks in Python
        beside FTS5's candidates (a host's turn then does no indexing: module docstring); none,
        after indexing them first, on a memory below :data:`PRUNE_MIN_DOCUMENTS` (its searches
        keep FTS5's own scores), beyond :data:`INDEX_BATCH` of them, inside a transaction, or
        when the driver cannot say what this connection changed."""
        changes = self.db.changes()
        if self.db.in_transaction or changes is None:
            if self._pending or changes is None or (key[0], changes) != self._indexed_at:
                if self._pending or self._has_pending():
                    self._index_pending()  # this connection's own write: the file's version stays
                changes = self.db.changes()
                self._indexed_at = (key[0], changes) if changes is not None else None
            return {}
        rows = self._unindexed.rows(key[0], self._indexed_upto)
        if rows and (
            len(rows) > INDEX_BATCH or self.count(key) < shared.PRUNE_MIN_DOCUMENTS or self._averages(key) is None
        ):
            self._index_pending()
            return {}
        return rows

    def _unindexed_matches(
        self,
        kept: Counter[str],
        session_id: str | None,
        window: tuple[float, float] | None,
    ) -> list[UnindexedRow]:
        """The unindexed rows that hold a kept term (what FTS5's MATCH would find), of the
        session, made in the window (one read of their ``created``)."""
        found = self._unindexed.holding(kept)
        if session_id is not None:
            found = [r for r in found if r.session_id == session_id]
        if found and window is not None:
            marks = ",".join("?" * len(found))
            made = self.db.query(
                f"SELECT id FROM documents WHERE id IN ({marks}) AND created >= ? AND created < ?",
                (*(r.key for r in found), float(window[0]), float(window[1])),
            )
            inside = {int(r[0]) for r in made}
            found = [r for r in found if r.key in inside]
        return found

    def _frequencies(
        self, terms: list[str], key: tuple[int, int] | None, unindexed: dict[int, UnindexedRow]
    ) -> dict[str, int]:
        """How many documents hold each term: FTS5's (:meth:`_document_frequencies`) plus the
        unindexed rows'."""
        df = self._document_frequencies(terms, self.count(key))
        if not unindexed:
            return df
        extra = self._unindexed.frequencies(terms)
        return {t: df.get(t, 0) + extra[t] for t in terms}

    def _document_frequencies(self, terms: list[str], n: int) -> dict[str, int]:
        """How many documents hold each term (fts5vocab; cached while the memory grows < 10%)."""
        if not self._vocab:
            self.db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.keyword_vocab USING fts5vocab(main, keyword_fts, 'row')"
            )
            self._vocab = True
        out: dict[str, int] = {}
        for term in terms:
            cached = self._df.get(term)
            if cached is not None and n <= cached[1] * 1.1:
                out[term] = cached[0]
                continue
            freq = int(self.db.scalar("SELECT doc FROM temp.keyword_vocab WHERE term = ?", (term,)) or 0)
            if len(self._df) >= DF_CACHE_SIZE:
                self._df.clear()
            self._df[term] = (freq, n)
            out[term] = freq
        return out

    def own_terms(self, doc_ids: Sequence[str]) -> dict[str, frozenset[str]]:
        """Each document's own stored terms (its text and head, not the turn before it), by id;
        documents without terms are left out. The last search's hits are answered from what it
        read (while nothing was written since); other ids, one read per 500."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, frozenset[str]] = {}
        memo = self._hit_terms
        if memo is not None and ids:
            known = memo[1]
            if all(i in known for i in ids) and memo[0] == self._state():
                return {i: frozenset(known[i].split()) for i in ids}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for r in self.db.query(
                "SELECT d.doc_id, t.body_terms, t.head_terms FROM keyword_terms t JOIN documents d ON d.id = t.id"
                f" WHERE d.doc_id IN ({marks})",
                chunk,
            ):
                out[r[0]] = frozenset(f"{r[1]} {r[2]}".split())
        return out

    @staticmethod
    def _hit(row: Any, score: float) -> MemoryHit:
        metadata = json.loads(row[3])
        metadata.setdefault("session_id", row[1])
        return MemoryHit(content=row[2], source=row[0], score=score, metadata=metadata)

    def _search_fallback(
        self, counts: Counter[str], k: int, session_id: str | None, window: tuple[float, float] | None = None
    ) -> list[MemoryHit]:
        """No FTS5: rank-bm25 over the stored terms (cached until the file changes)."""
        key = (self.db.data_version(), self._writes, session_id, window)
        if self._ranker is None or self._ranker[0] != key:
            sql = (
                f"SELECT d.doc_id, d.session_id, d.content, d.metadata, {_COLUMNS} FROM keyword_terms t"
                " JOIN documents d ON d.id = t.id"
            )
            where, params = _document_filter(session_id, window)
            rows = self.db.query(sql + (" WHERE true" + where if where else "") + " ORDER BY t.id", params)
            tokenized = [f"{r[4]} {r[5]} {r[6]}".split() for r in rows]
            self._ranker = (key, rows, BM25Ranker([""] * len(rows), tokenized=tokenized))
        _, rows, ranker = self._ranker
        return [self._hit(rows[i], score) for i, score in ranker.rank_terms(list(counts.elements()), k)]

    # -- figures and life cycle --------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """``fts5`` (whether FTS5 ranks) and ``keyword_rows``."""
        return {"fts5": self.fts, "keyword_rows": int(self.db.scalar("SELECT count(*) FROM keyword_terms") or 0)}

    def close(self) -> None:
        """Index what is pending, so the next process does not have to."""
        self._ranker = None
        if self._pending:
            try:
                self._index_pending()
            except (StorageError, sqlite3.Error) as exc:  # indexed by the next process that searches
                LOG.warning("keyword index: could not index the last documents before closing (%s)", exc)


def _document_filter(session_id: str | None, window: tuple[float, float] | None) -> tuple[str, tuple[Any, ...]]:
    """`` AND ...`` conditions on the documents table (alias ``d``) for a session and a
    ``(since, until)`` window of ``created``, and their parameters ("" when neither is given)."""
    where = ""
    params: tuple[Any, ...] = ()
    if session_id is not None:
        where, params = " AND d.session_id = ?", (session_id,)
    if window is not None:
        where += " AND d.created >= ? AND d.created < ?"
        params = (*params, float(window[0]), float(window[1]))
    return where, params
