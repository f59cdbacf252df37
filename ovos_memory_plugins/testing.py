"""The conformance kit: check a memory backend against the contract in your own pytest suite.

Subclass :class:`MemoryContract` in a test module, name the subclass ``Test...`` and give it a
``make_memory(config)`` that builds your backend from a config dict (the kit puts ``root`` in
it, a fresh temporary folder per test)::

    from ovos_memory_plugins.testing import MemoryContract

    class TestMyMemory(MemoryContract):
        survives_restart = True          # False for a backend that keeps documents in RAM

        def make_memory(self, config):
            return MyMemory(config)

pytest then runs every ``test_*`` method below against it: ids, metadata round trip, the five
inject-mode shapes, the user-last rule, never-raise on hostile input, thread safety, session
scope, and forgetting: ``delete``, ``forget_session`` and ``forget_all`` each leave nothing of
what they removed to ``search``, to the next prompt or (for a
:class:`~ovos_memory_plugins.protocols.DocumentLister`) to ``iter_documents``, which is checked
too.

Profiles (class attributes of your subclass):

* ``survives_restart``: documents survive a new instance on the same ``root``.
* ``context_only``: for memories whose exchanges do not become documents (sticky notes): the
  kit seeds memories with ``store()`` instead of a conversation and checks that turns stay
  history only. Left at None it follows the memory's own declaration,
  ``archives_exchanges = False`` on the class.
* ``can_forget``: False for a backend without delete hooks; the kit then checks that ``delete``
  and ``forget_*`` refuse loudly (:class:`~ovos_memory_plugins.errors.BackendError`) instead of
  pretending.

No backend needs to skip a test of the kit. :class:`InMemoryMemory` is stub storage for tests
that need a memory but no disk.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.dates import Clock
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.protocols import DocumentLister

__all__ = ["HOSTILE_TEXTS", "InMemoryMemory", "MemoryContract", "exchange"]

_WORD = re.compile(r"\w+")

#: Inputs every public method must survive.
HOSTILE_TEXTS: tuple[str, ...] = (
    "",
    "   ",
    "\x00",
    "a\x00b\x01c\x1b[31m",
    '"unbalanced quote',
    "NEAR(a b) AND OR NOT * ^ : ( ) {col}",
    "'; DROP TABLE documents; --",
    "\ud800 lone surrogate \udfff",
    "🦄🎉 emoji only 👍🏽",
    "中文没有空格的句子我喜欢红色自行车",
    "x" * 1_000_000,
)


def exchange(user: str, assistant: str) -> list[AgentMessage]:
    """One ``[USER, ASSISTANT]`` pair, as ovos-persona records it."""
    return [
        AgentMessage(role=MessageRole.USER, content=user),
        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
    ]


class InMemoryMemory(BaseRetrievalMemory):
    """Stub storage: documents in a dict, scored by how many query words they share.

    Implements the optional hooks (session filter, delete) and lists its documents, so it also
    serves as a reference for backends that push the session filter into their query.
    """

    def __init__(self, config: dict[str, Any] | None = None, *, clock: Clock | None = None) -> None:
        super().__init__(config, clock=clock)
        self.docs: dict[str, tuple[str, str, dict[str, Any]]] = {}

    @staticmethod
    def _words(text: str) -> set[str]:
        return {w.casefold() for w in _WORD.findall(text) if len(w) > 2}

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        self.docs[doc_id] = (text, session_id, dict(metadata))

    def _rank(self, query: str, top_k: int, session_id: str | None) -> list[MemoryHit]:
        words = self._words(query)
        hits = []
        for doc_id, (text, sid, meta) in self.docs.items():
            if session_id is not None and sid != session_id:
                continue
            score = float(len(words & self._words(text)))
            if score > 0:
                hits.append(MemoryHit(content=text, source=doc_id, score=score, metadata=dict(meta)))
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits[:top_k]

    def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
        return self._rank(query, top_k, None)

    def _query_session(self, query: str, top_k: int, session_id: str) -> list[MemoryHit]:
        return self._rank(query, top_k, session_id)

    def _session_document_ids(self, session_id: str) -> list[str]:
        return [d for d, (_, sid, _) in self.docs.items() if sid == session_id]

    def _delete_documents(self, doc_ids: Sequence[str]) -> int:
        return sum(self.docs.pop(d, None) is not None for d in doc_ids)

    def _delete_all(self) -> int:
        n = len(self.docs)
        self.docs.clear()
        return n

    def _backend_stats(self) -> dict[str, Any]:
        return {"documents": len(self.docs)}

    def iter_documents(self) -> Iterator[dict[str, Any]]:
        """Every document, oldest first (a :class:`~ovos_memory_plugins.protocols.DocumentLister`)."""
        for doc_id, (text, sid, meta) in list(self.docs.items()):
            yield {"id": doc_id, "text": text, "session_id": sid, "metadata": dict(meta)}


class MemoryContract:
    """The contract suite. Subclass it as ``Test<Name>`` and implement :meth:`make_memory`."""

    #: Whether documents survive a new instance on the same ``root``.
    survives_restart: bool = True
    #: Whether exchanges stay history only (sticky notes); None: the memory's own
    #: ``archives_exchanges`` declaration decides.
    context_only: bool | None = None
    #: Whether the backend can delete; False: ``delete``/``forget_*`` must raise BackendError.
    can_forget: bool = True

    def make_memory(self, config: dict[str, Any]) -> Any:
        """Build the memory under test from ``config`` (which holds a fresh ``root``)."""
        raise NotImplementedError("define make_memory(config) in your MemoryContract subclass")

    # -- helpers -----------------------------------------------------------------------------

    def _memory(self, tmp_path: Path, **config: Any) -> Any:
        config.setdefault("root", str(tmp_path / "memory"))
        return self.make_memory(config)

    def _context_only(self, mem: Any) -> bool:
        if self.context_only is not None:
            return self.context_only
        return getattr(mem, "archives_exchanges", True) is False

    def _remember(self, mem: Any, user: str, assistant: str, session_id: str) -> None:
        """Give the memory something to recall: the exchange, or (context-only) the user's words."""
        if self._context_only(mem):
            mem.store(user, session_id)
        else:
            mem.update_history(exchange(user, assistant), session_id)

    @staticmethod
    def _found(mem: Any, query: str, word: str, session_id: str | None = None) -> list[str]:
        """The contents of ``search`` hits holding ``word``."""
        return [h.content for h in mem.search(query, session_id=session_id, top_k=10) if word in h.content]

    @staticmethod
    def _listed(mem: Any) -> list[dict[str, Any]] | None:
        """Every listed document, or None when the memory is not a DocumentLister."""
        if not isinstance(mem, DocumentLister):
            return None
        return list(mem.iter_documents())

    def _assert_gone(self, mem: Any, word: str, session_id: str) -> None:
        """Nothing holding ``word`` is found, listed or put in a prompt any more."""
        assert self._found(mem, word, word) == [], f"search still finds {word!r}"
        assert self._found(mem, word, word, session_id) == [], f"search in {session_id!r} still finds {word!r}"
        listed = self._listed(mem)
        if listed is not None:
            assert [d for d in listed if word in d["text"]] == [], f"iter_documents still lists {word!r}"
        msgs = mem.build_conversation_context(f"what about the {word}", "kit-elsewhere")
        assert all(word not in m.content for m in msgs[:-1]), f"the prompt still holds {word!r}"

    # -- documents ---------------------------------------------------------------------------

    def test_store_ids_are_content_derived(self, tmp_path: Path) -> None:
        with self._memory(tmp_path) as mem:
            a = mem.store("the garage door code is 4471", "s1")
            assert a == mem.store("the garage door code is 4471", "s1")
            assert a != mem.store("the garage door code is 9999", "s1")
            assert isinstance(a, str) and a

    def test_metadata_round_trip(self, tmp_path: Path) -> None:
        with self._memory(tmp_path) as mem:
            meta = {"ref": "D1:3", "n": 7, "tags": ["x", "y"]}
            doc = mem.store("my saxophone teacher is called Imelda", "s1", meta)
            hits = mem.search("saxophone teacher Imelda", top_k=3)
            assert hits and hits[0].source == doc
            assert {k: hits[0].metadata.get(k) for k in meta} == meta

    def test_search_finds_and_limits(self, tmp_path: Path) -> None:
        with self._memory(tmp_path) as mem:
            for i in range(12):
                mem.store(f"note {i}: the tortoise Gregor likes lettuce number {i}", "s1")
            hits = mem.search("tortoise Gregor lettuce", top_k=3)
            assert len(hits) == 3 and all("tortoise Gregor" in h.content for h in hits)
            assert len({h.source for h in hits}) == 3
            assert mem.search("tortoise Gregor lettuce", top_k=0) == []
            assert mem.search("", top_k=3) == []

    def test_replay_and_restart_keep_ids_unique(self, tmp_path: Path) -> None:
        config = {"root": str(tmp_path / "memory")}
        mem = self.make_memory(dict(config))
        context_only = self._context_only(mem)
        mem.update_history(exchange("where is the passport", "in the blue drawer"), "s1")
        mem.update_history(exchange("where is the passport", "in the blue drawer"), "s1")  # replay
        first = self._found(mem, "passport blue drawer", "passport")
        assert len(mem.get_history("s1")) == 2
        mem.close()
        assert first == ([] if context_only else ["Q: where is the passport\nA: in the blue drawer"])
        if not self.survives_restart:
            return
        mem = self.make_memory(dict(config))
        try:
            mem.update_history(exchange("and the visa", "in the passport, blue drawer"), "s1")
            hits = [h for h in mem.search("passport blue drawer", top_k=10) if "passport" in h.content]
            assert len(hits) == (0 if context_only else 2)
            assert len({h.source for h in hits}) == len(hits)
            assert len(mem.get_history("s1")) == 4
        finally:
            mem.close()

    # -- forgetting --------------------------------------------------------------------------

    def _refuses(self, call: Any, *args: Any) -> None:
        try:
            call(*args)
        except BackendError:
            return
        raise AssertionError(f"{call.__name__} neither forgot nor raised BackendError (can_forget = False)")

    def test_delete_forgets_the_document(self, tmp_path: Path) -> None:
        with self._memory(tmp_path) as mem:
            gone = mem.store("the zumbrella code is 7731", "s1", {"k": "v"})
            kept = mem.store("the quokkaphone is green", "s1")
            if not self.can_forget:
                self._refuses(mem.delete, [gone])
                return
            assert mem.delete([gone]) == 1
            assert mem.delete([gone]) == 0 and mem.delete(["no-such-document"]) == 0
            self._assert_gone(mem, "zumbrella", "s1")
            assert self._found(mem, "quokkaphone", "quokkaphone") == ["the quokkaphone is green"]
            listed = self._listed(mem)
            if listed is not None:
                assert gone not in [d["id"] for d in listed] and kept in [d["id"] for d in listed]

    def test_delete_takes_the_ids_search_gives(self, tmp_path: Path) -> None:
        with self._memory(tmp_path) as mem:
            self._remember(mem, "my zumbrella locker code is 5512", "5512, noted", "s1")
            hits = [h for h in mem.search("zumbrella locker code", top_k=5) if "5512" in h.content]
            assert len(hits) == 1 and hits[0].source
            if not self.can_forget:
                self._refuses(mem.delete, [hits[0].source])
                return
            assert mem.delete([hits[0].source]) == 1
            assert self._found(mem, "zumbrella locker code", "5512") == []
            assert self._found(mem, "zumbrella locker code", "5512", "s1") == []

    def _two_sessions(self, mem: Any) -> None:
        self._remember(mem, "my zumbrella code is 7731", "7731, noted", "s1")
        mem.store("the zumbrella lives in the hall closet", "s1")
        mem.update_history(exchange("good morning", "good morning to you"), "s1")
        mem.store("the other quokkaphone belongs to Tom", "s2")
        mem.update_history(exchange("what colour is Tom's quokkaphone", "it is blue"), "s2")

    def test_forget_session_forgets_that_session_only(self, tmp_path: Path) -> None:
        with self._memory(tmp_path) as mem:
            self._two_sessions(mem)
            if not self.can_forget:
                self._refuses(mem.forget_session, "s1")
                return
            assert mem.forget_session("s1") >= 2
            self._assert_gone(mem, "zumbrella", "s1")
            assert mem.get_history("s1") == []
            assert "s1" not in mem.sessions() and "s2" in mem.sessions()
            assert len(mem.get_history("s2")) == 2
            assert "the other quokkaphone belongs to Tom" in self._found(mem, "quokkaphone Tom", "Tom")
            assert "the other quokkaphone belongs to Tom" in self._found(mem, "quokkaphone Tom", "Tom", "s2")
            assert mem.forget_session("s1") == 0

    def test_forget_all_forgets_everything(self, tmp_path: Path) -> None:
        config = {"root": str(tmp_path / "memory")}
        mem = self.make_memory(dict(config))
        try:
            self._two_sessions(mem)
            if not self.can_forget:
                self._refuses(mem.forget_all)
                return
            assert mem.forget_all() >= 3
            for word in ("zumbrella", "quokkaphone"):
                self._assert_gone(mem, word, "s1")
                self._assert_gone(mem, word, "s2")
            assert mem.sessions() == [] and mem.get_history("s1") == [] and mem.get_history("s2") == []
            assert self._listed(mem) in (None, [])
            assert mem.forget_all() == 0
        finally:
            mem.close()
        if self.survives_restart:
            with self.make_memory(dict(config)) as again:
                self._assert_gone(again, "zumbrella", "s1")
                assert again.sessions() == []

    def test_listing_lists_what_was_stored(self, tmp_path: Path) -> None:
        with self._memory(tmp_path) as mem:
            a = mem.store("the zumbrella code is 7731", "s1", {"k": "v"})
            b = mem.store("the quokkaphone is green", "s2")
            mem.update_history(exchange("where is the passport", "in the blue drawer"), "s1")
            listed = self._listed(mem)
            if listed is None:
                import pytest

                pytest.skip(f"{type(mem).__name__} does not list its documents (not a DocumentLister)")
            assert all({"id", "text", "session_id", "metadata"} <= set(d) for d in listed)
            by_id = {d["id"]: d for d in listed}
            assert len(by_id) == len(listed), "an id is listed twice"
            assert by_id[a]["text"] == "the zumbrella code is 7731" and by_id[a]["session_id"] == "s1"
            assert by_id[a]["metadata"].get("k") == "v"
            assert by_id[b]["text"] == "the quokkaphone is green" and by_id[b]["session_id"] == "s2"
            exchanges = [d for d in listed if d["text"] == "Q: where is the passport\nA: in the blue drawer"]
            assert len(exchanges) == (0 if self._context_only(mem) else 1)
            assert all(d["session_id"] == "s1" for d in exchanges)

    # -- the conversation --------------------------------------------------------------------

    def _seeded(self, tmp_path: Path, **config: Any) -> Any:
        config.setdefault("system_prompt", "You are Ada.")
        mem = self._memory(tmp_path, **config)
        self._remember(mem, "my cat Bartholomew is orange", "Bartholomew sounds lovely", "old")
        return mem

    def _ask(self, tmp_path: Path, mode: str) -> tuple[list[AgentMessage], bool]:
        """Ask about the seeded memory from another session in ``mode``: the messages (checked
        to end on the utterance) and whether the memory is context-only."""
        with self._seeded(tmp_path, inject_mode=mode) as mem:
            msgs: list[AgentMessage] = mem.build_conversation_context("what colour is Bartholomew", "new")
            context_only = self._context_only(mem)
        assert msgs[-1].role == MessageRole.USER and msgs[-1].content.endswith("what colour is Bartholomew")
        assert msgs[0].role == MessageRole.SYSTEM and msgs[0].content.startswith("You are Ada.")
        return msgs, context_only

    def test_inject_mode_system(self, tmp_path: Path) -> None:
        msgs, context_only = self._ask(tmp_path, "system")
        assert msgs[-1].content == "what colour is Bartholomew"
        if context_only:  # a contributor's block joins the system prompt
            assert [m.role for m in msgs] == [MessageRole.SYSTEM, MessageRole.USER]
            assert "Bartholomew is orange" in msgs[0].content
        else:
            assert [m.role for m in msgs] == [MessageRole.SYSTEM, MessageRole.SYSTEM, MessageRole.USER]
            assert msgs[0].content == "You are Ada." and "Bartholomew is orange" in msgs[1].content

    def test_inject_mode_developer(self, tmp_path: Path) -> None:
        msgs, _ = self._ask(tmp_path, "developer")
        assert [m.role for m in msgs] == [MessageRole.SYSTEM, MessageRole.DEVELOPER, MessageRole.USER]
        assert msgs[0].content == "You are Ada." and "Bartholomew is orange" in msgs[1].content

    def test_inject_mode_system_prompt(self, tmp_path: Path) -> None:
        msgs, _ = self._ask(tmp_path, "system_prompt")
        assert [m.role for m in msgs] == [MessageRole.SYSTEM, MessageRole.USER]
        assert "Bartholomew is orange" in msgs[0].content

    def test_inject_mode_user(self, tmp_path: Path) -> None:
        msgs, _ = self._ask(tmp_path, "user")
        assert [m.role for m in msgs] == [MessageRole.SYSTEM, MessageRole.USER]
        assert msgs[0].content == "You are Ada." and "Bartholomew is orange" in msgs[1].content

    def test_inject_mode_tool(self, tmp_path: Path) -> None:
        with self._seeded(tmp_path, inject_mode="tool") as mem:
            mem.update_history(exchange("hello there", "hi, how can I help"), "new")
            msgs = mem.build_conversation_context("what colour is Bartholomew", "new")
            roles = [m.role for m in msgs]
            assert roles == [
                MessageRole.SYSTEM,
                MessageRole.USER,
                MessageRole.ASSISTANT,
                MessageRole.TOOL,
                MessageRole.USER,
            ]
            assert msgs[0].content == "You are Ada."
            calling, result = msgs[-3], msgs[-2]
            assert calling.content == "hi, how can I help" and calling.tool_calls
            assert result.tool_call_id == calling.tool_calls[0].id
            assert result.name == calling.tool_calls[0].name
            assert "Bartholomew is orange" in result.content
            assert msgs[-1].content == "what colour is Bartholomew"

    def test_no_hits_no_context_message(self, tmp_path: Path) -> None:
        with self._memory(tmp_path, system_prompt="You are Ada.") as mem:
            if not self._context_only(mem):  # a context-only memory shows what it has every turn
                self._remember(mem, "my cat Bartholomew is orange", "Bartholomew sounds lovely", "old")
            msgs = mem.build_conversation_context("zzyzx qwertyuiop", "new")
            assert [(m.role, m.content) for m in msgs] == [
                (MessageRole.SYSTEM, "You are Ada."),
                (MessageRole.USER, "zzyzx qwertyuiop"),
            ]

    def test_history_window_starts_on_user_and_is_not_recalled_again(self, tmp_path: Path) -> None:
        with self._memory(tmp_path, max_history=3) as mem:
            for i in range(4):
                mem.update_history(exchange(f"question {i} about zebras", f"answer {i} about zebras"), "s")
            history = mem.get_history("s")
            assert history and history[0].role == MessageRole.USER and len(history) <= 3
            msgs = mem.build_conversation_context("zebras", "s")
            shown = [m.content for m in msgs if m.role in (MessageRole.USER, MessageRole.ASSISTANT)]
            context = " ".join(m.content for m in msgs if m.role == MessageRole.SYSTEM)
            for text in shown[:-1]:
                assert text not in context

    def test_single_message_style(self, tmp_path: Path) -> None:
        with self._memory(tmp_path) as mem:
            mem.update_history([AgentMessage(role=MessageRole.USER, content="my locker is number 88")], "s")
            mem.update_history([AgentMessage(role=MessageRole.ASSISTANT, content="locker 88, noted")], "s")
            assert [m.content for m in mem.get_history("s")] == ["my locker is number 88", "locker 88, noted"]
            hits = self._found(mem, "locker number", "locker")
            if self._context_only(mem):
                assert hits == []
            else:
                assert hits == ["Q: my locker is number 88\nA: locker 88, noted"]

    def test_never_raises_and_user_is_last(self, tmp_path: Path) -> None:
        with self._seeded(tmp_path) as mem:
            for text in HOSTILE_TEXTS:
                mem.update_history(exchange(text, text), "s")
                msgs = mem.build_conversation_context(text, "s")
                assert msgs[-1].role == MessageRole.USER and msgs[-1].content == text
                roles = [m.role for m in msgs]
                assert all(not (a == b == MessageRole.USER) for a, b in pairwise(roles)), roles
                assert all(not (a == b == MessageRole.ASSISTANT) for a, b in pairwise(roles)), roles
                mem.search(text, top_k=3)

    def test_threads_lose_nothing(self, tmp_path: Path) -> None:
        threads, per_thread = 8, 25
        with self._memory(tmp_path, max_history=2 * per_thread) as mem:

            def work(t: int) -> None:
                for i in range(per_thread):
                    mem.update_history(exchange(f"t{t} question {i}", f"t{t} answer {i}"), f"thread-{t}")
                    mem.build_conversation_context(f"t{t} question", f"thread-{t}")

            pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
            for th in pool:
                th.start()
            for th in pool:
                th.join()
            for t in range(threads):
                assert len(mem.get_history(f"thread-{t}")) == 2 * per_thread

    def test_session_scope_isolation_and_no_crowd_out(self, tmp_path: Path) -> None:
        with self._memory(tmp_path, scope="session", retrieval={"max_num_results": 3}) as mem:
            for i in range(40):
                mem.store(f"the quokka festival report number {i} from the crowd", "crowd")
            mem.store("my own quokka festival ticket is in the red wallet", "mine")
            hits = mem.search("quokka festival", session_id="mine", top_k=3)
            assert [h.content for h in hits] == ["my own quokka festival ticket is in the red wallet"]
            msgs = mem.build_conversation_context("quokka festival", "mine")
            context = " ".join(m.content for m in msgs[:-1])
            assert "red wallet" in context and "from the crowd" not in context

    def test_config_problems_do_not_raise(self, tmp_path: Path) -> None:
        mem = self._memory(tmp_path, inject_mode="telepathy", max_history="ten", bogus_key=1)
        try:
            assert mem.settings.inject_mode == "system" and mem.settings.max_history == 10
            assert any("inject_mode" in p for p in mem.config_problems)
        finally:
            mem.close()
