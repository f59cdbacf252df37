"""The keyword terms rows FTS5 has not indexed yet, held in RAM (:class:`UnindexedRows`), so a
search on a large memory ranks them in Python beside FTS5's candidates instead of indexing
them inside the turn.

The SQLite keyword index (:mod:`ovos_memory_plugins.storage.sqlite.keyword`) writes a terms row
with every stored document and indexes the rows in FTS5 in batches. A host alternates a turn and
a write, so "index before every search" was one FTS5 transaction (a segment and a commit) inside
every turn. The rows above the index's highest id are the unindexed ones; this class keeps them,
reading only what is new: after this connection appended rows, the rows above the highest one it
holds; after anything else (another process's commit, a delete, a replaced row, an indexing
batch), all of them again.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ovos_memory_plugins.storage.sqlite.database import Database

__all__ = ["UnindexedRow", "UnindexedRows"]

_SELECT = (
    "SELECT t.id, t.body_terms, t.head_terms, t.ctx_terms, d.session_id FROM keyword_terms t"
    " JOIN documents d ON d.id = t.id WHERE t.id > ? ORDER BY t.id"
)


@dataclass(frozen=True)
class UnindexedRow:
    """One terms row FTS5 has not indexed: its key, its three term columns as stored (body, head,
    context), its length in terms (as FTS5 counts it) and its session."""

    key: int
    columns: tuple[str, str, str]
    length: int
    session_id: str


class UnindexedRows:
    """The unindexed terms rows of one database, by key (see the module docstring); one per
    open :class:`Database` (:meth:`of`), shared by every keyword index over it (a second keyword
    part over one storage sees the first's rows)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        #: Changes any index over this database made to FTS5's contents: with the file's version,
        #: what the indexed count and averages are cached on (unindexed rows do not change them).
        self.fts_changes = 0
        self._rows: dict[int, UnindexedRow] | None = None
        self._version: int | None = None
        self._upto = 0
        self._appended = False
        #: The rows' terms in all (as FTS5 counts a document's length), how many rows hold each
        #: term, and which rows: what a search reads instead of looping over the rows.
        self.total_length = 0
        self._frequency: Counter[str] = Counter()
        self._postings: dict[str, list[int]] = {}

    @classmethod
    def of(cls, db: Database) -> UnindexedRows:
        """The one instance for ``db``."""
        found = _BY_DATABASE.get(db)
        if found is None:
            found = _BY_DATABASE[db] = cls(db)
        return found

    def forget(self) -> None:
        """Read every unindexed row again at the next look (rows were deleted, replaced or indexed)."""
        self._rows = None

    def appended(self) -> None:
        """This connection added rows with new keys (above every key it holds): read them next."""
        self._appended = True

    def rows(self, version: int, indexed_upto: Callable[[], int]) -> dict[int, UnindexedRow]:
        """The unindexed rows, by key, as of the file's ``version`` (``PRAGMA data_version``);
        ``indexed_upto`` reads the index's highest key when every row must be read again. Call it
        outside a transaction (what a transaction wrote may still roll back). Holds the
        database's lock: the parts of a composite search at once."""
        with self.db.lock:
            return self._rows_locked(version, indexed_upto)

    def _rows_locked(self, version: int, indexed_upto: Callable[[], int]) -> dict[int, UnindexedRow]:
        if self._rows is None or self._version != version:
            self._rows, self._upto, self.total_length = {}, indexed_upto(), 0
            self._frequency, self._postings = Counter(), {}
            start = self._upto
        elif self._appended:
            start = max(self._rows, default=self._upto)
        else:
            return self._rows
        self._appended = False
        self._version = version
        self._add(self.db.query(_SELECT, (start,)))
        return self._rows

    def _add(self, found: Iterable[Sequence[Any]]) -> None:
        assert self._rows is not None
        for key, body, head, ctx, session_id in found:
            if int(key) in self._rows:
                continue
            columns = (str(body), str(head), str(ctx))
            terms = set(" ".join(columns).split())
            length = sum(col.count(" ") + 1 for col in columns if col)
            self._rows[int(key)] = UnindexedRow(int(key), columns, length, str(session_id))
            self.total_length += length
            self._frequency.update(terms)
            for term in terms:
                self._postings.setdefault(term, []).append(int(key))

    def frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """How many of the rows :meth:`rows` returned last hold each of ``terms`` (in any column)."""
        return {t: self._frequency.get(t, 0) for t in terms}

    def holding(self, terms: Iterable[str]) -> list[UnindexedRow]:
        """The rows :meth:`rows` returned last that hold any of ``terms``, by key."""
        if not self._rows:
            return []
        keys = {key for t in terms for key in self._postings.get(t, ())}
        return [self._rows[key] for key in sorted(keys)]


_BY_DATABASE: weakref.WeakKeyDictionary[Database, UnindexedRows] = weakref.WeakKeyDictionary()
