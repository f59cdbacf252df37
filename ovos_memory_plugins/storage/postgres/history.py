"""The PostgreSQL engine's history: recent messages, exchange-id chains, and which messages an
exchange document came from (``memory_history``, ``memory_sessions``), for one namespace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

# exchange_parts: a name of the old ``database`` module, still read from here (``database._HOMES``)
from ovos_memory_plugins.common import exchange_parts as exchange_parts
from ovos_memory_plugins.storage.records import StoredDocument, StoredMessage
from ovos_memory_plugins.storage.shared import EngineHistory, HistoryWrite

if TYPE_CHECKING:
    from ovos_memory_plugins.storage.postgres.database import PgDatabase

__all__ = ["PgHistory"]


_HISTORY_INSERT = (
    "INSERT INTO memory_history (namespace, session_id, role, content, created, exchange_id)"
    " SELECT %(ns)s, %(session)s, m.role, m.content, %(now)s, m.exchange_id"
    " FROM unnest(%(roles)s::text[], %(contents)s::text[], %(ids)s::text[]) WITH ORDINALITY"
    " AS m(role, content, exchange_id, n) ORDER BY m.n"
)
#: The trim of :meth:`PgHistory.append` (as SQLite's): once the session holds ``keep + batch``
#: messages, every message older than its newest ``keep`` goes; the trimmed rows come back. The
#: offsets count the rows the statement sees (an insert in the same statement is not seen).
_HISTORY_TRIM = (
    " DELETE FROM memory_history WHERE namespace = %(ns)s AND session_id = %(session)s"
    " AND EXISTS (SELECT 1 FROM memory_history WHERE namespace = %(ns)s AND session_id = %(session)s"
    "  ORDER BY id DESC LIMIT 1 OFFSET %(full)s)"
    " AND id <= (SELECT id FROM memory_history WHERE namespace = %(ns)s AND session_id = %(session)s"
    "  ORDER BY id DESC LIMIT 1 OFFSET %(offset)s)"
    " RETURNING id, role, content, created"
)

#: The session's chain moved to the newest exchange id (``last``), when the call gives one.
_CHAIN_MOVE = (
    "INSERT INTO memory_sessions (namespace, session_id, last_exchange_id)"
    " SELECT %(ns)s, %(session)s, %(last)s WHERE %(last)s::text IS NOT NULL"
    " ON CONFLICT (namespace, session_id) DO UPDATE SET last_exchange_id = excluded.last_exchange_id"
)


#: The history's tables: the messages first (what a clear counts), then the sessions' chains.
_TABLES = ("memory_history", "memory_sessions")


def _trim_params(keep: int, batch: int, unseen: int) -> dict[str, Any]:
    """The offsets of :data:`_HISTORY_TRIM` when ``unseen`` new messages are not visible to it
    (``batch`` at least 1)."""
    return {"offset": keep - unseen, "full": keep + batch - 1 - unseen}


class PgHistory(EngineHistory):
    """History and exchange-id chains of one namespace
    (see :class:`~ovos_memory_plugins.storage.seam.HistoryStore`)."""

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace

    def write_messages(self, write: HistoryWrite) -> list[StoredMessage]:
        """The insert, chain update and trim of :meth:`append` (the seam's
        :class:`~ovos_memory_plugins.storage.shared.EngineHistory`)."""
        messages, keep, batch = write.messages, write.keep, write.batch
        params = {
            "ns": self.namespace,
            "session": write.session_id,
            "roles": [r for r, _ in messages],
            "contents": [c for _, c in messages],
            "ids": write.exchange_ids,
            "now": write.now,
            "last": write.last_exchange_id,
        }
        if keep < len(messages):  # a window smaller than one call's messages: keep the simple path
            with self.db.transaction() as conn:
                conn.execute(_HISTORY_INSERT, params)
                conn.execute(_CHAIN_MOVE, params)
                rows = conn.execute(_HISTORY_TRIM, {**params, **_trim_params(keep, batch, 0)}).fetchall()
            return [StoredMessage(r[1], r[2], float(r[3])) for r in sorted(rows, key=lambda r: int(r[0]))]
        # one statement: insert, move the chain, trim (the base records a turn's messages and
        # its exchange document in one transaction, so one durable commit covers both)
        with self.db.connection() as conn:
            rows = conn.execute(
                "WITH ins AS (" + _HISTORY_INSERT + " RETURNING id), chain AS (" + _CHAIN_MOVE + ")" + _HISTORY_TRIM,
                {**params, **_trim_params(keep, batch, len(messages))},
            ).fetchall()
        return [StoredMessage(r[1], r[2], float(r[3])) for r in sorted(rows, key=lambda r: int(r[0]))]

    def tag_exchange(self, session_id: str, exchange_id: str) -> None:
        """Mark the session's last untagged user message as part of ``exchange_id``."""
        with self.db.connection() as conn:
            conn.execute(
                "UPDATE memory_history SET exchange_id = %s WHERE id = (SELECT id FROM memory_history"
                " WHERE namespace = %s AND session_id = %s AND role = 'user' AND exchange_id IS NULL"
                " ORDER BY id DESC LIMIT 1)",
                (exchange_id, self.namespace, session_id),
            )

    def recent(self, session_id: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a session, oldest first, each with its ``created``."""
        rows = self.db.query(
            "SELECT role, content, created FROM memory_history WHERE namespace = %s AND session_id = %s"
            " ORDER BY id DESC LIMIT %s",
            (self.namespace, session_id, max(limit, 0)),
        )
        return [StoredMessage(r[0], r[1], float(r[2])) for r in reversed(rows)]

    def last_exchange_id(self, session_id: str) -> str:
        """The id of the session's newest exchange document, ``""`` when it has none."""
        value = self.db.scalar(
            "SELECT last_exchange_id FROM memory_sessions WHERE namespace = %s AND session_id = %s",
            (self.namespace, session_id),
        )
        return str(value) if value is not None else ""

    def sessions(self) -> list[str]:
        """Every session that has history, sorted."""
        return self.db.sessions("memory_history", self.namespace)

    def remove_exchanges(self, docs: Sequence[StoredDocument]) -> int:
        """Delete the messages the given exchange documents were recorded from; return how many."""
        if not docs:
            return 0
        n = 0
        with self.db.transaction() as conn:
            n += conn.execute(
                "DELETE FROM memory_history WHERE namespace = %s AND exchange_id = ANY(%s)",
                (self.namespace, [d.doc_id for d in docs]),
            ).rowcount
            for session_id, question, answer in self.untagged_parts(docs):
                n += conn.execute(
                    "DELETE FROM memory_history WHERE namespace = %s AND session_id = %s AND exchange_id IS NULL"
                    " AND ((role = 'user' AND content = %s) OR (role = 'assistant' AND content = %s))",
                    (self.namespace, session_id, question, answer),
                ).rowcount
        return n

    def remove_quoting(self, session_id: str, text: str) -> int:
        """Delete the session's user messages that quote ``text`` (case folded) and the
        exchanges they belong to; return how many messages went."""
        if not text.strip():
            return 0
        quoting = "namespace = %s AND session_id = %s AND role = 'user' AND strpos(lower(content), lower(%s)) > 0"
        with self.db.transaction() as conn:
            n = conn.execute(
                "DELETE FROM memory_history WHERE namespace = %s AND session_id = %s AND exchange_id IN"
                f" (SELECT exchange_id FROM memory_history WHERE {quoting} AND exchange_id IS NOT NULL)",
                (self.namespace, session_id, self.namespace, session_id, text),
            ).rowcount
            n += conn.execute(
                f"DELETE FROM memory_history WHERE {quoting}", (self.namespace, session_id, text)
            ).rowcount
        return int(n)

    def clear_session(self, session_id: str) -> int:
        """Delete a session's history; return how many messages went."""
        return self.db.delete_rows(_TABLES, "namespace = %s AND session_id = %s", (self.namespace, session_id))

    def clear_all(self) -> int:
        """Delete all of the namespace's history; return how many messages went."""
        return self.db.delete_rows(_TABLES, "namespace = %s", (self.namespace,))

    def message_count(self) -> int:
        """How many messages the history holds."""
        return int(self.db.scalar("SELECT count(*) FROM memory_history WHERE namespace = %s", (self.namespace,)) or 0)
