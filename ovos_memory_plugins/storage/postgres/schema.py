"""The PostgreSQL engine's schema: the memory tables of documents, the keyword index, vectors
and history, as versioned, append-only migrations (:data:`MIGRATIONS`), applied by
:meth:`~ovos_memory_plugins.storage.postgres.database.PgDatabase.migrate` in one transaction
under ``pg_advisory_xact_lock``, so many processes starting at once apply each step exactly once.

The notes', sticky notes' and summaries' tables are
:mod:`~ovos_memory_plugins.storage.postgres.notes`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.storage.postgres.database import PgMigration, namespace_lexeme

if TYPE_CHECKING:
    import psycopg

__all__ = ["MIGRATIONS"]


def _v1(conn: psycopg.Connection[Any]) -> None:
    for sql in (
        # every memory's documents: the one table every index of a memory shares
        "CREATE TABLE memory_documents ("
        " id bigserial PRIMARY KEY,"
        " namespace text NOT NULL,"
        " doc_id text NOT NULL,"
        " session_id text NOT NULL,"
        " content text NOT NULL,"
        " metadata text NOT NULL DEFAULT '{}',"
        " created double precision NOT NULL,"
        " UNIQUE (namespace, doc_id))",
        "CREATE INDEX memory_documents_session ON memory_documents (namespace, session_id, id)",
        # the keyword index: per document, each term's counts in body, head and context
        # ({"term": body | head << 8 | context << 16}), the same terms as a tsvector (GIN: which documents hold a term),
        # and the token count
        "CREATE TABLE memory_keywords ("
        " id bigint PRIMARY KEY REFERENCES memory_documents (id) ON DELETE CASCADE,"
        " namespace text NOT NULL,"
        " session_id text NOT NULL,"
        " tf jsonb NOT NULL,"
        " terms tsvector NOT NULL,"
        " length integer NOT NULL,"
        " ctx_id bigint)"
        # rows stay uncompressed up to a page: ranking reads tf once per query term, and a
        # compressed tf would be decompressed every time
        " WITH (toast_tuple_target = 8160)",
        "CREATE INDEX memory_keywords_terms ON memory_keywords USING gin (terms)",
        "CREATE INDEX memory_keywords_namespace ON memory_keywords (namespace, session_id, id) INCLUDE (length)",
        "CREATE INDEX memory_keywords_ctx ON memory_keywords (ctx_id) WHERE ctx_id IS NOT NULL",
        # vectors: one per (embedder space, document)
        "CREATE TABLE memory_vector_spaces ("
        " namespace text NOT NULL, space text NOT NULL, dims integer NOT NULL,"
        " created double precision NOT NULL, PRIMARY KEY (namespace, space))",
        "CREATE TABLE memory_vectors ("
        " id bigint NOT NULL REFERENCES memory_documents (id) ON DELETE CASCADE,"
        " space text NOT NULL,"
        " namespace text NOT NULL,"
        " session_id text NOT NULL,"
        " dims integer NOT NULL,"
        " embedding vector NOT NULL,"
        " PRIMARY KEY (id, space))",
        "CREATE INDEX memory_vectors_namespace ON memory_vectors (namespace, space, session_id)",
        # short-term history, the exchange-id chains
        "CREATE TABLE memory_history ("
        " id bigserial PRIMARY KEY,"
        " namespace text NOT NULL,"
        " session_id text NOT NULL,"
        " role text NOT NULL,"
        " content text NOT NULL,"
        " created double precision NOT NULL,"
        " exchange_id text)",
        "CREATE INDEX memory_history_session ON memory_history (namespace, session_id, id)",
        "CREATE INDEX memory_history_exchange ON memory_history (namespace, exchange_id) WHERE exchange_id IS NOT NULL",
        "CREATE TABLE memory_sessions ("
        " namespace text NOT NULL, session_id text NOT NULL, last_exchange_id text NOT NULL,"
        " PRIMARY KEY (namespace, session_id))",
    ):
        conn.execute(sql)


def _v2(conn: psycopg.Connection[Any]) -> None:
    """Every keyword row carries its namespace's lexeme (see :func:`namespace_lexeme`)."""
    conn.execute("SET LOCAL statement_timeout = 0")  # one pass over the keyword rows, once
    namespaces = [r[0] for r in conn.execute("SELECT DISTINCT namespace FROM memory_keywords").fetchall()]
    for namespace in namespaces:
        conn.execute(
            "UPDATE memory_keywords SET terms = terms || array_to_tsvector(ARRAY[%s::text]) WHERE namespace = %s",
            (namespace_lexeme(namespace), namespace),
        )


def _v3(conn: psycopg.Connection[Any]) -> None:
    """A short pending list for the keyword GIN index: new rows' entries wait in an unsorted list
    that every search scans in full, up to ``gin_pending_list_limit`` (4 MB by default); measured
    at 100,000 documents right after 5,000 writes, that nearly doubled a turn's server time.
    128 kB keeps a search's scan short and still batches the index's inserts (without a list,
    ``fastupdate = off``, a write cost 0.3 ms more server time, measured the same way)."""
    conn.execute("ALTER INDEX memory_keywords_terms SET (fastupdate = on, gin_pending_list_limit = 128)")
    conn.execute("SELECT gin_clean_pending_list('memory_keywords_terms'::regclass)")


def _v4(conn: psycopg.Connection[Any]) -> None:
    """Document frequencies kept on write: ``memory_keyword_df`` holds, per namespace and term,
    how many of the namespace's keyword rows hold the term (the keys of their ``tf``), so a
    search reads a term's frequency with one index lookup instead of counting its postings.
    Filled here from the rows written before it, under a SHARE lock (writers wait for the
    migration, so the counts start exact); from then on every write of the keyword index
    updates it in its own transaction (:class:`PgKeywordIndex`). Idempotent: deleting this
    step's row from ``memory_migrations`` and starting a process counts everything again."""
    conn.execute("SET LOCAL statement_timeout = 0")  # one pass over the keyword rows, once
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_keyword_df ("
        " namespace text NOT NULL, term text NOT NULL, df integer NOT NULL,"
        " PRIMARY KEY (namespace, term))"
        # every write updates the rows of its terms: room on the page for HOT updates
        " WITH (fillfactor = 70)"
    )
    conn.execute("LOCK TABLE memory_keywords IN SHARE MODE")
    conn.execute("DELETE FROM memory_keyword_df")
    conn.execute(
        "INSERT INTO memory_keyword_df (namespace, term, df)"
        " SELECT k.namespace, t.term, count(*) FROM memory_keywords k"
        " CROSS JOIN LATERAL jsonb_object_keys(k.tf) AS t(term) GROUP BY 1, 2"
    )


def _v5(conn: psycopg.Connection[Any]) -> None:
    """Documents by when they were made: time words read a window's newest documents
    (``made_between``) and filter searches by ``created``, as the SQLite file's index on it does."""
    conn.execute("CREATE INDEX IF NOT EXISTS memory_documents_created ON memory_documents (namespace, created)")


def _v6(conn: psycopg.Connection[Any]) -> None:
    """Keyword postings: one row per (namespace, term, document) with the term's packed counts
    (``tf``, as in ``memory_keywords.tf``) and the document's token count, under one covering
    primary key, so a search scores its candidates by an index-only scan of its terms' ranges
    instead of reading every candidate's wide keyword row (its ``jsonb`` and ``tsvector``).
    Nothing per term is repeated here: document frequencies stay in ``memory_keyword_df``.
    Filled from the rows written before it under a SHARE lock on ``memory_keywords`` (writers
    wait), the key built after the rows (sorted, compact); from then on every write of the
    keyword index changes it in the same statement or transaction (:class:`PgKeywordIndex`).
    Idempotent: deleting this step's row from ``memory_migrations`` and starting a process
    builds it again."""
    conn.execute("SET LOCAL statement_timeout = 0")  # one pass over the keyword rows, once
    conn.execute("LOCK TABLE memory_keywords IN SHARE MODE")
    conn.execute("DROP TABLE IF EXISTS memory_keyword_postings")
    conn.execute(
        "CREATE TABLE memory_keyword_postings ("
        " id bigint NOT NULL, tf integer NOT NULL, length integer NOT NULL,"
        " namespace text NOT NULL, term text NOT NULL)"
        # insert-mostly: vacuumed often enough that most pages are all-visible (index-only scans)
        " WITH (autovacuum_vacuum_insert_scale_factor = 0.05)"
    )
    conn.execute(
        "INSERT INTO memory_keyword_postings (id, tf, length, namespace, term)"
        " SELECT k.id, e.value::int, k.length, k.namespace, e.key FROM memory_keywords k"
        " CROSS JOIN LATERAL jsonb_each(k.tf) AS e ORDER BY k.namespace, e.key, k.id"
    )
    conn.execute(
        "ALTER TABLE memory_keyword_postings ADD CONSTRAINT memory_keyword_postings_pkey"
        " PRIMARY KEY (namespace, term, id) INCLUDE (tf, length)"
    )
    conn.execute("ANALYZE memory_keyword_postings")


def _v7(conn: psycopg.Connection[Any]) -> None:
    """Which namespaces' keyword postings are complete: ``memory_keyword_postings_built`` holds a
    row per namespace whose postings every write has kept since they were built. A namespace
    whose memory turns ``keyword_postings`` off loses its row and its postings; one that turns it
    on again and finds no row rebuilds its postings from its keyword rows at open, then writes
    the row (:class:`~ovos_memory_plugins.storage.postgres.keyword.PgKeywordIndex`); a search
    reads the postings only while the row is there. Every namespace with keyword rows now is
    complete (0006 built them, and every write has kept them)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_keyword_postings_built ("
        " namespace text PRIMARY KEY, built double precision NOT NULL)"
    )
    conn.execute(
        "INSERT INTO memory_keyword_postings_built (namespace, built)"
        " SELECT DISTINCT namespace, extract(epoch FROM now()) FROM memory_keywords ON CONFLICT DO NOTHING"
    )


#: The schema. Append only; never rename or reorder an applied step.
MIGRATIONS = [
    PgMigration("0001_documents_keywords_vectors_history", _v1),
    PgMigration("0002_keyword_namespace_lexeme", _v2),
    PgMigration("0003_keyword_index_short_pending_list", _v3),
    PgMigration("0004_keyword_document_frequencies", _v4),
    PgMigration("0005_documents_created", _v5),
    PgMigration("0006_keyword_postings", _v6),
    PgMigration("0007_keyword_postings_built", _v7),
]
