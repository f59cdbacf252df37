"""The write path of a recorded turn on PostgreSQL: one transaction for the messages, the chain,
the exchange document and its keyword row; the messages kept when the document cannot be
written (against a real throwaway server, tests/pg_server.py)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.postgres import database as pg

_ns = itertools.count()


def exchange(user: str, assistant: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def test_a_recorded_turn_is_one_transaction(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with LexicalMemory({"database": postgres_url, "namespace": f"writes-{next(_ns)}"}) as mem:
        db = mem.storage.db
        assert isinstance(db, pg.PgDatabase)
        opened: list[int] = []
        atomic = pg.PgDatabase.atomic

        @contextlib.contextmanager
        def counting(self: pg.PgDatabase) -> Iterator[Any]:
            if not self.in_transaction:
                opened.append(1)
            with atomic(self) as conn:
                yield conn

        monkeypatch.setattr(pg.PgDatabase, "atomic", counting)
        mem.update_history(exchange("My passport is in the top drawer.", "Top drawer, noted."), "s")
        mem.update_history(exchange("And the car keys hang by the door.", "By the door, got it."), "s")
        assert len(opened) == 2  # one transaction per recorded turn
        assert [m.content for m in mem.messages("s")][-1] == "By the door, got it."
        assert mem.search("passport")[0].content.startswith("Q: My passport")
        mem.forget_all()


def test_a_document_that_cannot_be_written_leaves_the_messages(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LexicalMemory({"database": postgres_url, "namespace": f"writes-{next(_ns)}"}) as mem:

        def refuse(docs: Any) -> Any:
            raise StorageError("the documents table refused the row")

        monkeypatch.setattr(mem.storage.documents, "put", refuse)
        mem.update_history(exchange("The wifi password is on the fridge.", "On the fridge, noted."), "s")
        monkeypatch.undo()
        assert [m.content for m in mem.messages("s")] == [
            "The wifi password is on the fridge.",
            "On the fridge, noted.",
        ]
        assert mem.stats()["documents"] == 0  # rolled back with its transaction, nothing half-written
        mem.update_history(exchange("Dinner is at eight.", "Eight it is."), "s")
        assert mem.stats()["documents"] == 1 and len(mem.messages("s")) == 4
        mem.forget_all()
