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
from collections.abc import Sequence
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
    conn.execute("CREATE INDEX lexical_docs_ctx ON lexical_docs (ctx_rowid) WHERE ctx_rowid IS NOT NULL")
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
        return db

    def _prepare(self, db: Database) -> None:
        db.execute("PRAGMA secure_delete = ON")
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

    def _fts_delete(self, conn: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> None:
        """Remove rows (their ``rowid`` and the three term columns as stored) from the index."""
        if self._fts and rows:
            conn.executemany(
                f"INSERT INTO lexical_fts (lexical_fts, rowid, {_COLUMNS}) VALUES ('delete', ?, ?, ?, ?)",
                [(r["rowid"], r["body_terms"], r["head_terms"], r["ctx_terms"]) for r in rows],
            )

    def _fts_insert(self, conn: sqlite3.Connection, rowid: int, body: str, head: str, ctx: str) -> None:
        if self._fts:
            conn.execute(f"INSERT INTO lexical_fts (rowid, {_COLUMNS}) VALUES (?, ?, ?, ?)", (rowid, body, head, ctx))

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        opts: LexicalOptions = self.options
        body_terms, head_terms, turn = _terms(text)
        meta = json.dumps(metadata, ensure_ascii=False, default=str)
        with self._db.atomic() as conn:
            old = conn.execute(
                f"SELECT rowid, ctx_rowid, {_COLUMNS} FROM lexical_docs WHERE doc_id = ?", (doc_id,)
            ).fetchone()
            ctx_rowid, ctx_terms = None, ""
            if old is not None:
                self._fts_delete(conn, [old])
                ctx_rowid, ctx_terms = old["ctx_rowid"], old["ctx_terms"]
            elif turn and opts.context_weight > 0:
                prev = conn.execute(
                    "SELECT rowid, body_terms FROM lexical_docs WHERE session_id = ? ORDER BY rowid DESC LIMIT 1",
                    (session_id,),
                ).fetchone()
                if prev is not None:
                    ctx_rowid, ctx_terms = prev["rowid"], prev["body_terms"]
            if old is not None:
                conn.execute(
                    "UPDATE lexical_docs SET session_id = ?, content = ?, metadata = ?, body_terms = ?,"
                    " head_terms = ? WHERE rowid = ?",
                    (session_id, text, meta, body_terms, head_terms, old["rowid"]),
                )
                rowid = int(old["rowid"])
            else:
                cur = conn.execute(
                    "INSERT INTO lexical_docs (doc_id, session_id, content, metadata, created, body_terms,"
                    " head_terms, ctx_terms, ctx_rowid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc_id, session_id, text, meta, time.time(), body_terms, head_terms, ctx_terms, ctx_rowid),
                )
                rowid = int(cur.lastrowid or 0)
            self._fts_insert(conn, rowid, body_terms, head_terms, ctx_terms)
        self._writes += 1

    def _delete_rows(self, rows: Sequence[sqlite3.Row]) -> int:
        """Delete rows from the table and the index, and the copies of their words other turns
        hold as context, then purge the file."""
        if not rows:
            return 0
        gone = [(r["rowid"],) for r in rows]
        with self._db.atomic() as conn:
            self._fts_delete(conn, rows)
            conn.executemany("DELETE FROM lexical_docs WHERE rowid = ?", gone)
            heirs: list[sqlite3.Row] = []
            for (rowid,) in gone:
                heirs.extend(
                    conn.execute(f"SELECT rowid, {_COLUMNS} FROM lexical_docs WHERE ctx_rowid = ?", (rowid,)).fetchall()
                )
            self._fts_delete(conn, heirs)
            for h in heirs:
                conn.execute("UPDATE lexical_docs SET ctx_terms = '', ctx_rowid = NULL WHERE rowid = ?", (h["rowid"],))
                self._fts_insert(conn, h["rowid"], h["body_terms"], h["head_terms"], "")
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

    # -- querying ----------------------------------------------------------------------------

    def _query_terms(self, query: str) -> Counter[str]:
        """The query's terms and how often each counts, at most ``max_query_terms`` distinct ones.

        The last line's terms count ``last_line_weight`` times (the newest text matters most).
        """
        opts: LexicalOptions = self.options
        lines = query.rstrip().rsplit("\n", 1)
        terms = query_terms(lines[-1], opts.lang, extra_stopwords=opts.extra_stopwords, unigrams=True)
        terms = terms * opts.last_line_weight
        if len(lines) == 2:
            terms = query_terms(lines[0], opts.lang, extra_stopwords=opts.extra_stopwords, unigrams=True) + terms
        counts = Counter(terms)
        if len(counts) > opts.max_query_terms:
            newest = list(dict.fromkeys(reversed(terms)))[: opts.max_query_terms]
            counts = Counter({t: counts[t] for t in newest})
        return counts

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
        opts: LexicalOptions = self.options
        weights = f"1.0, {float(opts.head_weight)!r}, {float(opts.context_weight)!r}"
        where = "lexical_fts MATCH ?"
        params: list[Any] = [self._match_expression(counts)]
        if session_id is not None:
            where += " AND d.session_id = ?"
            params.append(session_id)
        params.append(int(top_k))
        rows = self._db.query(
            f"SELECT d.doc_id, d.session_id, d.content, d.metadata, -bm25(lexical_fts, {weights}) AS score"
            " FROM lexical_fts JOIN lexical_docs AS d ON d.rowid = lexical_fts.rowid"
            f" WHERE {where} ORDER BY score DESC LIMIT ?",
            params,
        )
        return [self._hit(r, float(r["score"])) for r in rows]

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
