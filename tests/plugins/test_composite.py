"""The composite memory: members loaded by entry-point name through OPM, fused recall, failure
handling, scope propagation, history from the primary, LLM assists and the conformance kit.

Test members are registered the way any third-party plugin is: a ``*.dist-info`` folder with an
``entry_points.txt`` (group ``opm.agents.memory``) on ``sys.path``, so the composite reaches them
through OPM's real ``load_memory_plugin`` and ``importlib.metadata``. The entry points name
classes of this module (already imported by pytest, so importing it again is a lookup).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ovos_plugin_manager.templates.agents import AgentContextManager, MessageRole

from ovos_memory_plugins import ConfigError, MemoryHit, validate_config
from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.config import option
from ovos_memory_plugins.fakes import Delay, Garbled, HTTPFailure, ScriptedOpenAIServer
from ovos_memory_plugins.testing import InMemoryMemory, MemoryContract, exchange

SCRIPTED = "composite-test-scripted"
CONTEXT = "composite-test-context"
BROKEN = "composite-test-broken"
COMPOSITE = "ovos-memory-plugin-composite"


@dataclass
class ScriptOptions:
    script: list[list[Any]] | None = option(None, doc="Fixed hits [[content, score], ...] for any query.")
    delay_s: float = option(0.0, doc="Sleep this long in every search and context call.")
    write_delay_s: float = option(0.0, doc="Sleep this long in every update_history call.")
    fail: bool = option(False, doc="Raise in every search and context call.")
    explode: bool = option(False, doc="Raise in the constructor.")
    blocks: list[str] = option(default_factory=list, doc="The context blocks (ContextMember).")


class ScriptedMember(InMemoryMemory):
    """InMemoryMemory, optionally answering from a script, slowly, or by raising."""

    options_class = ScriptOptions

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        if self.options.explode:
            self.close()
            raise RuntimeError("scripted start-up failure")

    def _act(self) -> None:
        if self.options.delay_s:
            time.sleep(self.options.delay_s)
        if self.options.fail:
            raise RuntimeError("scripted failure")

    def update_history(self, new_messages: list[Any], session_id: str) -> None:
        time.sleep(self.options.write_delay_s)
        super().update_history(new_messages, session_id)

    def _rank(self, query: str, top_k: int, session_id: str | None) -> list[MemoryHit]:
        self._act()
        if self.options.script is not None:
            return [MemoryHit(content=c, source=f"{c}@{id(self)}", score=float(s)) for c, s in self.options.script][
                :top_k
            ]
        return super()._rank(query, top_k, session_id)


class ContextMember(ScriptedMember):
    """A member that also contributes system blocks (like notes or sticky notes)."""

    def context_blocks(self, utterance: str, session_id: str) -> list[str]:
        self._act()
        return list(self.options.blocks)


class BrokenMember(AgentContextManager):  # type: ignore[misc]
    """Has a ``search`` that cannot be called as the Retriever protocol says."""

    def search(self) -> list[MemoryHit]:
        return []

    def get_history(self, session_id: str) -> list[Any]:
        return []

    def update_history(self, new_messages: list[Any], session_id: str) -> None:
        pass

    def build_conversation_context(self, utterance: str, session_id: str) -> list[Any]:
        return []


@pytest.fixture(autouse=True)
def test_members(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Register this module's member classes as installed memory plugins."""
    site = tmp_path_factory.mktemp("site")
    info = site / "composite_test_members-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: composite-test-members\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(
        "[opm.agents.memory]\n"
        f"{SCRIPTED} = {__name__}:ScriptedMember\n"
        f"{CONTEXT} = {__name__}:ContextMember\n"
        f"{BROKEN} = {__name__}:BrokenMember\n"
    )
    monkeypatch.syspath_prepend(str(site))


def member(module: str = SCRIPTED, **block: Any) -> dict[str, Any]:
    return {"module": module, **block}


def composite(tmp_path: Path, *members: dict[str, Any], **config: Any) -> CompositeMemory:
    config.setdefault("root", str(tmp_path / "composite"))
    return CompositeMemory({"members": list(members), **config})


def records(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ovos_memory_plugins.composite" and r.levelno >= level]


# -- the conformance kit ------------------------------------------------------------------------


class TestCompositeContract(MemoryContract):
    survives_restart = False  # both members keep documents in RAM

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return CompositeMemory({**config, "members": [member(), member(name="second")]})


def test_loads_by_name_through_opm() -> None:
    from ovos_plugin_manager.agents import load_memory_plugin

    assert load_memory_plugin(COMPOSITE) is CompositeMemory


# -- fusion against hand-computed rankings --------------------------------------------------------

A = [["xylophone", 3], ["yacht", 2], ["zebra", 1]]
B = [["walrus", 9], ["zebra", 5], ["xylophone", 1]]


def fused(tmp_path: Path, fusion: str) -> list[tuple[str, float]]:
    with composite(
        tmp_path,
        member(name="a", config={"script": A}),
        member(name="b", weight=2, config={"script": B}),
        fusion=fusion,
    ) as mem:
        return [(h.content, h.score) for h in mem.search("anything", top_k=10)]


def test_rrf_with_weights(tmp_path: Path) -> None:
    # score = sum of weight / (60 + rank): a has weight 1, b weight 2
    expected = [
        ("xylophone", 1 / 61 + 2 / 63),  # 0.048139
        ("zebra", 1 / 63 + 2 / 62),  # 0.048131
        ("walrus", 2 / 61),  # 0.032787
        ("yacht", 1 / 62),  # 0.016129
    ]
    got = fused(tmp_path, "rrf")
    assert [c for c, _ in got] == [c for c, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected])
    assert got[0][1] == pytest.approx(0.048139, abs=1e-6)


def test_rrf_k_is_used(tmp_path: Path) -> None:
    with composite(tmp_path, member(config={"script": A}), rrf_k=0) as mem:
        assert [h.score for h in mem.search("anything")] == pytest.approx([1.0, 1 / 2, 1 / 3])


@pytest.mark.parametrize(
    ("fusion", "order"),
    [
        # min-max normalised: a [1, .5, 0], b [1, .5, 0] x2 -> walrus 2, xylophone 1+0, zebra 0+1, yacht .5
        ("weighted", ["walrus", "xylophone", "zebra", "yacht"]),
        # raw scores: walrus 9, zebra 5, xylophone 3, yacht 2 (later duplicates dropped)
        ("merge", ["walrus", "zebra", "xylophone", "yacht"]),
        ("priority", ["xylophone", "yacht", "zebra", "walrus"]),
        ("interleave", ["xylophone", "walrus", "yacht", "zebra"]),
    ],
)
def test_other_fusions(tmp_path: Path, fusion: str, order: list[str]) -> None:
    assert [c for c, _ in fused(tmp_path, fusion)] == order


def test_hits_name_their_member_and_duplicates_fold(tmp_path: Path) -> None:
    with composite(tmp_path, member(name="a", config={"script": A}), member(name="b", config={"script": B})) as mem:
        hits = mem.search("anything", top_k=10)
        assert len(hits) == len({h.content for h in hits}) == 4
        assert {h.content: h.metadata["member"] for h in hits}["walrus"] == "b"


# -- members: loading, failing, hanging -----------------------------------------------------------


def test_member_that_fails_to_load_is_skipped_with_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with composite(
        tmp_path,
        member("no-such-memory-plugin"),
        member(name="explodes", config={"explode": True}),
        member(BROKEN),
        member(name="good"),
        system_prompt="You are Ada.",
    ) as mem:
        assert list(mem.members) == ["good"]
        errors = records(caplog, logging.ERROR)
        assert len(errors) == 3
        assert "'no-such-memory-plugin'" in errors[0] and "no memory plugin of that name is installed" in errors[0]
        assert "'explodes'" in errors[1] and "scripted start-up failure" in errors[1]
        assert "'composite-test-broken'" in errors[2] and "BrokenMember" in errors[2] and "search" in errors[2]
        assert set(mem.skipped) == {"no-such-memory-plugin", "explodes", "composite-test-broken"}
        mem.update_history(exchange("the spare key is under the frog statue", "noted"), "s")
        msgs = mem.build_conversation_context("where is the spare key", "t")
        assert "frog statue" in msgs[1].content


def test_member_that_raises_is_skipped_for_the_turn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with composite(tmp_path, member(name="good"), member(name="bad", config={"fail": True})) as mem:
        mem.update_history(exchange("my locker is number 88", "locker 88, noted"), "s")
        for _ in range(3):
            msgs = mem.build_conversation_context("which locker number", "s2")
            assert "locker 88" in msgs[-2].content and msgs[-1].content == "which locker number"
        assert sum("'bad' raised RuntimeError" in line for line in records(caplog)) == 1  # no flood
        mem.members["bad"].options.fail = False
        mem.build_conversation_context("which locker number", "s2")
        assert any("'bad' answers again" in line for line in records(caplog, logging.INFO))
        mem.members["bad"].options.fail = True
        mem.build_conversation_context("which locker number", "s2")
        assert sum("'bad' raised RuntimeError" in line for line in records(caplog)) == 2


@pytest.mark.parametrize("slow_is_primary", [False, True])
def test_member_that_hangs_costs_only_the_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, slow_is_primary: bool
) -> None:
    slow = member(name="slow", config={"delay_s": 0.8})
    good = member(name="good")
    with composite(
        tmp_path,
        *([slow, good] if slow_is_primary else [good, slow]),
        member(CONTEXT, name="sticky", config={"blocks": ["The user's name is Ada."]}),
        member_timeout_ms=300,
    ) as mem:
        mem.store("the passport is in the blue drawer", "s")
        for _ in range(2):  # the second turn skips the still-busy member at once
            start = time.monotonic()
            msgs = mem.build_conversation_context("where is the passport", "s")
            elapsed = time.monotonic() - start
            assert elapsed < 0.3 + 0.25
            assert "blue drawer" in msgs[-2].content and "Ada" in msgs[0].content
        assert sum("'slow' took longer than 300 ms" in line for line in records(caplog)) >= 1


def test_members_are_queried_concurrently(tmp_path: Path) -> None:
    with composite(
        tmp_path,
        *[member(name=f"m{i}", config={"delay_s": 0.2}) for i in range(4)],
        member(CONTEXT, name="sticky", config={"delay_s": 0.2, "blocks": ["note"]}),
    ) as mem:
        start = time.monotonic()
        mem.search("anything")
        mem.context_blocks("anything", "s")
        assert time.monotonic() - start < 2 * 0.2 + 0.3  # sequential would be 5 x 0.2


# -- config reaching members ----------------------------------------------------------------------


def test_scope_namespace_and_root_reach_members_that_set_none(tmp_path: Path, _isolated_data_home: Path) -> None:
    with composite(
        tmp_path,
        member(name="shared"),
        member(name="own", config={"scope": "global", "root": str(tmp_path / "elsewhere")}),
        member(name="ns", config={"namespace": "other"}),
        scope="session",
        namespace="ada",
    ) as mem:
        shared, own, ns = (mem.members[n] for n in ("shared", "own", "ns"))
        assert (shared.settings.scope, shared.settings.namespace) == ("session", "ada")
        assert shared.root == tmp_path / "composite" / "shared" / "ada"  # the member adds its namespace
        assert (own.settings.scope, own.root) == ("global", tmp_path / "elsewhere" / "ada")
        assert (ns.settings.scope, ns.settings.namespace) == ("session", "other")
        assert ns.root == _isolated_data_home / "ovos" / "memory" / "other"
        mem.update_history(exchange("my bike is the red one", "red bike, noted"), "alice")
        assert (tmp_path / "composite" / "shared" / "ada" / "history.db").exists()
        assert (tmp_path / "elsewhere" / "ada" / "history.db").exists()
        # bob's turn: only the global member recalls alice's exchange
        msgs = mem.build_conversation_context("which bike is mine", "bob")
        assert "red bike" in msgs[-2].content
        hits = mem.recall("which bike is mine", "bob", [])
        assert {h.metadata["member"] for h in hits} == {"own"}


def test_default_root_gives_each_member_its_own_folder(_isolated_data_home: Path) -> None:
    with CompositeMemory({"namespace": "ada", "members": [member(), member()]}) as mem:
        roots = [m.root for m in mem.members.values()]
        base = _isolated_data_home / "ovos" / "memory" / "ada"
        assert roots == [base / "composite-test-scripted" / "ada", base / "composite-test-scripted-2" / "ada"]


def test_two_members_in_one_folder_are_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    shared = {"root": str(tmp_path / "same")}
    with composite(tmp_path, member(name="a", config=shared), member(name="b", config=shared)) as mem:
        assert list(mem.members) == ["a"]
        assert "would share the folder" in mem.skipped["b"] and "'a'" in mem.skipped["b"]


# -- history -------------------------------------------------------------------------------------


def test_new_turns_reach_every_member(tmp_path: Path) -> None:
    with composite(tmp_path, member(name="a"), member(name="b")) as mem:
        mem.update_history(exchange("the wifi password is platypus", "noted"), "s")
        for m in mem.members.values():
            assert [x.content for x in m.get_history("s")] == ["the wifi password is platypus", "noted"]
            assert m.search("wifi password platypus")


def test_a_slow_writer_costs_only_the_write_timeout_and_keeps_order(tmp_path: Path) -> None:
    with composite(
        tmp_path, member(name="fast"), member(name="slow", config={"write_delay_s": 0.3}), write_timeout_ms=100
    ) as mem:
        start = time.monotonic()
        mem.update_history(exchange("first question", "first answer"), "s")
        mem.update_history(exchange("second question", "second answer"), "s")
        assert time.monotonic() - start < 2 * 0.1 + 0.25
    # close() let the queued writes finish, in order: a new instance on the member's folder sees them
    with InMemoryMemory({"root": str(tmp_path / "composite" / "slow")}) as slow:
        history = [m.content for m in slow.get_history("s")]
    assert history == [
        "first question",
        "first answer",
        "second question",
        "second answer",
    ]


def test_documents_verbs_reach_every_member(tmp_path: Path) -> None:
    with composite(tmp_path, member(name="a"), member(name="b")) as mem:
        doc = mem.store("the spare key is under the frog statue", "s1")
        mem.store("the bins go out on tuesday", "s2")
        assert all(doc in m.docs for m in mem.members.values())
        assert mem.delete([doc]) == 1
        assert not any(doc in m.docs for m in mem.members.values())
        assert mem.forget_session("s2") == 1
        assert mem.search("bins tuesday") == []
        stats = mem.stats()
        assert stats["primary"] == "a" and set(stats["members"]) == {"a", "b"} and stats["skipped"] == {}
        mem.store("one more", "s3")
        assert mem.forget_all() == 1


def test_history_comes_from_the_primary(tmp_path: Path) -> None:
    with composite(tmp_path, member(name="a", config={"max_history": 0}), member(name="b")) as mem:
        assert mem.primary == "b"  # the first member that keeps history
    with composite(tmp_path, member(name="a"), member(name="b"), primary="b") as mem:
        assert mem.primary == "b"
        mem.update_history(exchange("hello", "hi"), "s")
        mem.members["b"].update_history(exchange("only b heard this", "yes"), "s")
        assert [m.content for m in mem.get_history("s")] == ["hello", "hi", "only b heard this", "yes"]
        msgs = mem.build_conversation_context("next", "s")
        assert [m.content for m in msgs] == ["hello", "hi", "only b heard this", "yes", "next"]


@pytest.mark.parametrize("mode", ["history", "utterance"])
def test_history_query_mode_searches_with_the_window(tmp_path: Path, mode: str) -> None:
    with composite(tmp_path, member(), retrieval={"query_mode": mode}) as mem:
        mem.store("Bartholomew the cat is orange", "old")
        mem.update_history(exchange("tell me about Bartholomew", "which one?"), "s")
        msgs = mem.build_conversation_context("what colour", "s")
        recalled = any("Bartholomew the cat is orange" in m.content for m in msgs)
        assert recalled == (mode == "history")


def test_context_blocks_go_after_the_system_prompt_and_before_recall(tmp_path: Path) -> None:
    with composite(
        tmp_path,
        member(name="words"),
        member(CONTEXT, name="sticky", config={"blocks": ["Sticky: the user drinks tea."]}),
        system_prompt="You are Ada.",
    ) as mem:
        mem.store("the kettle is broken", "s")
        msgs = mem.build_conversation_context("is the kettle broken", "s")
        assert [m.role for m in msgs] == [MessageRole.SYSTEM, MessageRole.SYSTEM, MessageRole.USER]
        assert msgs[0].content == "You are Ada.\n\nSticky: the user drinks tea."
        assert "kettle is broken" in msgs[1].content


def test_recall_flag_decides_whose_hits_are_fused(tmp_path: Path) -> None:
    blocks = {"blocks": ["b"]}
    with composite(tmp_path, member(name="words"), member(CONTEXT, name="ctx", recall=False, config=blocks)) as mem:
        mem.store("the kettle is broken", "s")
        assert mem.members["ctx"].docs == {}  # store() reaches only the members that recall
        assert [h.metadata["member"] for h in mem.search("kettle broken")] == ["words"]
    with composite(tmp_path, member(CONTEXT, name="ctx", config=blocks)) as mem:  # default: fused
        mem.store("the kettle is broken", "s")
        assert [h.metadata["member"] for h in mem.search("kettle broken")] == ["ctx"]


# -- strict validation -----------------------------------------------------------------------------


def test_validate_config_checks_member_blocks() -> None:
    good = {"members": [member(), member(CONTEXT, config={"blocks": ["x"]})], "primary": "composite-test-context"}
    assert validate_config(good, plugin=COMPOSITE).options.members == good["members"]
    bad = {
        "members": [
            member("no-such-memory-plugin"),
            member(config={"bogus": 1, "inject_mode": "telepathy"}),
            {"config": {}},
            member(weight=-1),
        ],
        "primary": "nobody",
        "llm": {"base_url": 3},
    }
    with pytest.raises(ConfigError) as err:
        validate_config(bad, plugin=COMPOSITE)
    text = "\n".join(err.value.problems)
    assert "members[0] (no-such-memory-plugin): no memory plugin named" in text
    assert "members[1] (composite-test-scripted): unknown key 'bogus'" in text
    assert "members[1] (composite-test-scripted): key 'inject_mode'" in text
    assert "key 'members[2].module'" in text
    assert "members[3] (composite-test-scripted).weight" in text
    assert "key 'primary': 'nobody'" in text
    assert "llm.base_url" in text


# -- LLM assists through a scripted OpenAI-compatible server ------------------------------------------


def llm_block(server: ScriptedOpenAIServer) -> dict[str, Any]:
    return {"base_url": server.base_url, "api_key": "test", "model": "scripted", "timeout": 2, "backoff_s": 60}


CHINESE = "我的猫是什么颜色"


def test_expand_query_lets_a_chinese_question_find_an_english_memory(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(chat=["cat colour color Bartholomew orange 猫 颜色"]) as server:
        mem = composite(tmp_path, member(), llm=llm_block(server))
        with mem:
            mem.update_history(exchange("my cat Bartholomew is orange", "lovely"), "old")
            msgs = mem.build_conversation_context(CHINESE, "new")
            assert "Bartholomew is orange" in msgs[-2].content
            (request,) = server.chat_requests
            assert request["messages"][-1]["content"] == CHINESE


def test_expand_query_fails_open(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(chat=[HTTPFailure(500), Garbled()]) as server:
        mem = composite(tmp_path, member(), llm={**llm_block(server), "backoff_s": 0.001})
        with mem:
            mem.update_history(exchange("my cat Bartholomew is orange", "lovely"), "old")
            for _ in range(2):
                msgs = mem.build_conversation_context(CHINESE, "new")
                assert [m.content for m in msgs] == [CHINESE]
                time.sleep(0.01)
            msgs = mem.build_conversation_context("what colour is Bartholomew", "new")
            assert "Bartholomew is orange" in msgs[-2].content  # unexpanded recall still works
            assert len(server.chat_requests) == 3


def test_a_hanging_llm_costs_only_its_timeout(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(chat=[Delay(5.0, then="cat orange")]) as server:
        mem = composite(tmp_path, member(), llm={**llm_block(server), "timeout": 0.3})
        with mem:
            mem.update_history(exchange("my cat Bartholomew is orange", "lovely"), "old")
            start = time.monotonic()
            msgs = mem.build_conversation_context("what colour is Bartholomew", "new")
            assert time.monotonic() - start < 0.3 + 0.4
            assert "Bartholomew is orange" in msgs[-2].content  # recall without the expansion


def test_expand_query_auto_is_off_with_a_semantic_member(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(chat=["cat orange"]) as server:
        with composite(tmp_path, member(semantic=True), member(name="words"), llm=llm_block(server)) as mem:
            mem.build_conversation_context(CHINESE, "new")
        with composite(tmp_path, member(semantic=True), llm=llm_block(server), expand_query=True) as mem:
            mem.build_conversation_context(CHINESE, "new")
        assert len(server.chat_requests) == 1  # only the forced one


def test_summarize_recall(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(chat=["Bartholomew, the user's cat, is orange.", HTTPFailure(503)]) as server:
        config = {"llm": {**llm_block(server), "backoff_s": 0.001}, "summarize_recall": True, "expand_query": False}
        with composite(tmp_path, member(), **config) as mem:
            mem.update_history(exchange("my cat Bartholomew is orange", "lovely"), "old")
            msgs = mem.build_conversation_context("what colour is Bartholomew", "new")
            assert msgs[-2].content.endswith("- Bartholomew, the user's cat, is orange.")
            assert "Q: my cat" not in msgs[-2].content
            sent = server.chat_requests[0]["messages"][-1]["content"]
            assert "Question: what colour is Bartholomew" in sent and "Q: my cat Bartholomew is orange" in sent
            time.sleep(0.01)
            msgs = mem.build_conversation_context("what colour is Bartholomew", "new")  # server fails
            assert "Q: my cat Bartholomew is orange" in msgs[-2].content


# -- the protocols -----------------------------------------------------------------------------------


def test_protocol_checks_name_the_culprit() -> None:
    from ovos_memory_plugins.errors import BackendError
    from ovos_memory_plugins.protocols import ContextContributor, Retriever, capabilities, check_retriever

    with InMemoryMemory() as mem:
        assert isinstance(mem, Retriever) and isinstance(mem, ContextContributor)
        caps = capabilities(mem)
        assert (caps.retriever, caps.contributor, caps.history) == (True, False, True)  # base blocks: always empty
    with pytest.raises(BackendError, match=re.escape(f"member 'x' ({__name__}.BrokenMember): search()")):
        check_retriever(BrokenMember(), "x")

    class Nothing:
        pass

    with pytest.raises(BackendError, match=r"Nothing.*has none of search"):
        capabilities(Nothing())
