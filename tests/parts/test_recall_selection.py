"""What a turn injects: the selection after the search, admission, neighbour context, the rolling summary."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.admission import LANGUAGES, is_low_signal, low_signal_phrases
from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.fakes import Delay, ScriptedOpenAIServer
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.select import CONTEXT_CHARS, Candidates, choose_hits, clip_context, score_cut, select_hits
from ovos_memory_plugins.summary import fold_extractive
from ovos_memory_plugins.testing import exchange


def lexical(tmp_path: Path, **config: Any) -> LexicalMemory:
    config.setdefault("root", str(tmp_path / "mem"))
    return LexicalMemory(config)


def memory_lines(msgs: list[AgentMessage]) -> str:
    """Everything the prompt holds before the final USER message."""
    return "\n".join(m.content for m in msgs[:-1])


# -- select_hits (pure) -------------------------------------------------------------------------


def test_select_hits_cuts_relative_to_the_best_and_never_mutates() -> None:
    hits = [MemoryHit("a", "1", 10.0), MemoryHit("b", "2", 6.0), MemoryHit("c", "3", 4.0)]
    before = [(h.content, h.score) for h in hits]
    assert [h.content for h in select_hits(hits, limit=5, min_relative=0.5)] == ["a", "b"]
    assert [h.content for h in select_hits(hits, limit=5)] == ["a", "b", "c"]
    assert [h.content for h in select_hits(hits, limit=1)] == ["a"]
    assert select_hits(hits, limit=0) == []
    assert [(h.content, h.score) for h in hits] == before


def test_select_hits_keeps_one_copy_and_leaves_out_the_window() -> None:
    hits = [MemoryHit("Same  text", "1", 5.0), MemoryHit("same text", "2", 5.0), MemoryHit("shown", "3", 4.0)]
    kept = select_hits(hits, limit=5, exclude={"shown"})
    assert [h.source for h in kept] == ["1"]


def test_select_hits_drops_a_hit_that_shares_no_term_of_its_own() -> None:
    hits = [MemoryHit("birthday text", "1", 9.0), MemoryHit("peanut text", "2", 8.0)]
    own = [frozenset({"birthday", "sister"}), frozenset({"peanut", "allerg"})]
    kept = select_hits(hits, limit=5, query_terms=frozenset({"sister", "birthday"}), hit_terms=own)
    assert [h.source for h in kept] == ["1"]
    # the relative cut-off applies to what is left, so a dropped hit cannot lift the bar
    assert len(select_hits(hits, limit=5, min_relative=0.95, query_terms=None, hit_terms=own)) == 1


def test_score_cut_is_one_cut_for_a_search_and_a_composite() -> None:
    hits = [MemoryHit("a", "1", 10.0), MemoryHit("b", "2", 5.0), MemoryHit("c", "3", 1.0)]
    assert [h.content for h in score_cut(hits, None, 0.3)] == ["a", "b"]
    assert [h.content for h in score_cut(hits, 2.0, None)] == ["a", "b"]
    assert [h.content for h in score_cut(hits, None, 0.0)] == ["a", "b", "c"]
    assert score_cut([MemoryHit("z", "9", 0.0)], None, 0.5)[0].content == "z"  # no best above 0: no cut


def test_choose_hits_leaves_the_unchecked_alone_and_cuts_on_the_given_score() -> None:
    words = MemoryHit("Q: my sister's birthday", "1", 1 / 61)
    neighbour = MemoryHit("Q: peanuts", "2", 1 / 62)  # found by a keyword member on context words
    semantic = MemoryHit("Q: Ana turns forty", "3", 1 / 63)  # found by a vector member too
    own = {"1": frozenset({"sister", "birthday"}), "2": frozenset({"peanut"}), "3": frozenset({"ana", "forty"})}

    def hit_terms(hits: Any) -> list[frozenset[str]]:
        return [own[h.source] for h in hits]

    found = Candidates([words, neighbour, semantic], unchecked=frozenset({"q: ana turns forty"}))
    kept = choose_hits(found, limit=5, query_terms=frozenset({"sister", "birthday"}), hit_terms=hit_terms)
    assert [h.source for h in kept] == ["1", "3"]
    # the fused scores are ranks: the relative cut compares what ``score`` says (members' shares)
    shares = {"1": 1.0, "2": 0.9, "3": 0.2}
    ranked = Candidates([words, neighbour, semantic], score=lambda h: shares[h.source])
    assert [h.source for h in choose_hits(ranked, limit=5, min_relative=0.4)] == ["1", "2"]
    assert [h.source for h in choose_hits(Candidates(ranked.hits), limit=5, min_relative=0.4)] == ["1", "2", "3"]
    # the window shown leaves a hit out, the window's newest skip the own-term check
    dated = Candidates([neighbour], by_words=False)
    chosen = choose_hits(
        Candidates([words, semantic]),
        limit=2,
        shown={"q: ana turns forty"},
        query_terms=frozenset({"sister"}),
        hit_terms=hit_terms,
        dated=dated,
    )
    assert [h.source for h in chosen] == ["2", "1"]


def test_clip_context_keeps_the_end_within_the_budget() -> None:
    long = "word " * 200 + "which one do you want?"
    clipped = clip_context(long)
    assert len(clipped) <= CONTEXT_CHARS and clipped.endswith("which one do you want?")
    assert clip_context("  short\n text ") == "short text"


# -- the keyword backend on the host's path -----------------------------------------------------


def test_the_exchange_after_a_match_is_not_recalled_on_its_neighbours_words(tmp_path: Path) -> None:
    with lexical(tmp_path) as mem:
        mem.update_history(exchange("My sister's birthday is on the 3rd of May.", "I'll remember that."), "s")
        mem.update_history(exchange("I am allergic to peanuts.", "Noted, no peanuts for you."), "s")
        mem.update_history(exchange("I adopted a cat named Miso.", "Miso is a lovely name."), "s")
        # the peanut exchange holds the birthday words as context, so the search finds it ...
        assert any("peanut" in h.content for h in mem.search("When is my sister's birthday?"))
        # ... but the prompt does not carry it
        text = memory_lines(mem.build_conversation_context("When is my sister's birthday?", "new"))
        assert "3rd of May" in text and "peanut" not in text


GREEK = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
FILLERS = [f"Filler note {w} about my day." for w in GREEK]
PARTIAL = ["The festival parking was awful.", "My flat in Lisbon is small.", "I collect old jazz records."]


def festival_memory(mem: LexicalMemory) -> None:
    for text in FILLERS[:6]:
        mem.update_history(exchange(text, "Nice to know."), "s")
    for text, filler in zip(["I bought tickets for the Lisbon jazz festival.", *PARTIAL], FILLERS[6:], strict=True):
        mem.update_history(exchange(text, "Nice."), "s")
        mem.update_history(exchange(filler, "Nice to know."), "s")


def test_weak_matches_stay_out_of_the_prompt_but_search_still_finds_them(tmp_path: Path) -> None:
    with lexical(tmp_path) as mem:
        festival_memory(mem)
        found = [h.content for h in mem.search("Lisbon jazz festival")]
        assert found[0].startswith("Q: I bought tickets") and all(any(p in c for c in found) for p in PARTIAL)
        assert any("Filler note" in c for c in found)  # the turn after the match, on its words
        text = memory_lines(mem.build_conversation_context("Lisbon jazz festival", "new"))
        assert "tickets" in text
        assert not any(p in text for p in PARTIAL) and "Filler" not in text


def test_an_explicit_min_relative_score_also_governs_the_prompt(tmp_path: Path) -> None:
    with lexical(tmp_path, retrieval={"min_relative_score": 0.0}) as mem:
        festival_memory(mem)
        text = memory_lines(mem.build_conversation_context("Lisbon jazz festival", "new"))
        assert "tickets" in text and all(p in text for p in PARTIAL) and "Filler" not in text


def test_a_short_reply_comes_with_the_turn_before_marked_as_context(tmp_path: Path) -> None:
    with lexical(tmp_path) as mem:
        question = "Which restaurant, the Sushi Bar or the Spanish place?"
        mem.update_history(exchange("Book me a table for Friday.", question), "s")
        mem.update_history(exchange("Casa Pepe please", "Done, Casa Pepe on Friday at eight."), "s")
        mem.update_history(exchange("I moved to Porto last spring.", "How exciting!"), "s")
        hits = mem.search("Casa Pepe")
        assert hits[0].metadata["context_before"] == "Which restaurant, the Sushi Bar or the Spanish place?"
        text = memory_lines(mem.build_conversation_context("Casa Pepe", "new"))
        # the turn before, marked as context, ahead of the hit (whatever the renderer's words)
        marked = [line for line in text.splitlines() if "Which restaurant, the Sushi Bar or the Spanish place?" in line]
        assert len(marked) == 1 and "(context" in marked[0]
        assert text.index("Which restaurant") < text.index("Casa Pepe please")
        # a turn that stands on its own brings no context
        porto = mem.search("moved to Porto")[0]
        assert "context_before" not in porto.metadata


def test_the_context_survives_a_restart_and_stays_within_the_budget(tmp_path: Path) -> None:
    question = "Which city should we pick for the reunion? " + "Some details here. " * 40
    with lexical(tmp_path) as mem:
        mem.update_history(exchange("Plan the family reunion.", question), "s")
        mem.update_history(exchange("Lisbon", "Lisbon it is."), "s")
    with lexical(tmp_path) as mem:
        hit = mem.search("Lisbon")[0]
        before = hit.metadata["context_before"]
        assert len(before) <= CONTEXT_CHARS and before.endswith("Some details here.")


# -- admission ----------------------------------------------------------------------------------

LOW_SIGNAL = {
    "en": ["Ok, thanks!", "What time is it?", "stop", "Good morning!", "thank you very much"],
    "pt": ["Ok, obrigado!", "Que horas são?", "Pare", "Bom dia!", "Tchau"],
    "es": ["Vale, gracias", "¿Qué hora es?", "Para", "¡Buenos días!", "Adiós"],
    "fr": ["D'accord, merci !", "Quelle heure est-il ?", "Arrête", "Bonjour !", "Au revoir"],
    "de": ["Ok, danke!", "Wie spät ist es?", "Stopp", "Guten Morgen!", "Tschüss"],
    "it": ["Ok, grazie!", "Che ore sono?", "Basta", "Buongiorno!", "Arrivederci"],
    "nl": ["Oké, bedankt!", "Hoe laat is het?", "Stop", "Goedemorgen!", "Tot ziens"],
    "zh": ["好的，谢谢！", "现在几点了？", "停", "早上好！", "再见"],
}
KEPT = {
    "en": ["My sister's birthday is May 3rd.", "Thanks, and remind me I'm allergic to peanuts", "I stopped smoking"],
    "pt": ["O meu irmão chama-se João.", "Obrigado, sou alérgico a amendoim", "Parei de fumar em maio"],
    "es": ["Mi hermana vive en Sevilla.", "Gracias, soy alérgico al cacahuete", "Dejé de fumar en mayo"],
    "fr": ["Ma sœur habite à Lyon.", "Merci, je suis allergique aux arachides", "J'ai arrêté de fumer en mai"],
    "de": ["Meine Schwester wohnt in Bonn.", "Danke, ich bin allergisch gegen Erdnüsse", "Ich rauche seit Mai nicht"],
    "it": ["Mia sorella vive a Torino.", "Grazie, sono allergico alle arachidi", "Ho smesso di fumare a maggio"],
    "nl": ["Mijn zus woont in Gent.", "Bedankt, ik ben allergisch voor pinda's", "Ik ben in mei gestopt met roken"],
    "zh": ["我妹妹的生日是五月三日。", "谢谢，我对花生过敏", "我五月戒烟了"],
}


def test_every_supported_language_has_a_list() -> None:
    phrases, words = low_signal_phrases()
    assert set(LOW_SIGNAL) == set(KEPT) == set(LANGUAGES)
    assert len(phrases) > 300 and "ok" in words and "谢谢" in phrases


@pytest.mark.parametrize("lang", LANGUAGES)
def test_admission_refuses_small_talk_and_keeps_facts(lang: str) -> None:
    for text in LOW_SIGNAL[lang]:
        assert is_low_signal(text, "OK."), (lang, text)
    for text in KEPT[lang]:
        assert not is_low_signal(text, "OK."), (lang, text)


def test_a_low_signal_turn_with_a_substantial_reply_is_kept() -> None:
    recipe = "Here is the recipe: " + "mix flour, sugar and eggs, then bake for forty minutes. " * 6
    assert not is_low_signal("yes please", recipe)
    assert is_low_signal("yes please", "Great, see you then.")


def test_refused_exchanges_stay_in_history_but_are_not_archived(tmp_path: Path) -> None:
    with lexical(tmp_path) as mem:
        mem.update_history(exchange("What time is it?", "It's three o'clock."), "s")
        mem.update_history(exchange("Ok, thanks!", "You're welcome."), "s")
        mem.update_history(exchange("I moved to Porto last spring.", "How exciting!"), "s")
        assert mem.stats()["documents"] == 1
        assert [m.content for m in mem.get_history("s")][:2] == ["What time is it?", "It's three o'clock."]
    with lexical(tmp_path / "all", admission=False) as mem:
        mem.update_history(exchange("What time is it?", "It's three o'clock."), "s")
        assert mem.stats()["documents"] == 1


# -- the rolling summary -------------------------------------------------------------------------


def talk(mem: Any, session: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        mem.update_history(exchange(f"Fact number {i}: my locker code is {1000 + i}.", f"Noted {i}."), session)


def test_turns_leaving_the_window_fold_into_a_summary_after_the_system_prompt(tmp_path: Path) -> None:
    with lexical(tmp_path, max_history=4, system_prompt="You are Ada.") as mem:
        talk(mem, "s", 2)
        assert mem.session_summary("s") == ""
        msgs = mem.build_conversation_context("hello", "s")
        assert msgs[0].content == "You are Ada."
        talk(mem, "s", 2, start=2)  # exchanges 0 and 1 leave the two-exchange window
        summary = mem.session_summary("s")
        assert "locker code is 1000" in summary and "locker code is 1001" in summary
        assert "1002" not in summary
        msgs = mem.build_conversation_context("hello", "s")
        assert msgs[0].role == MessageRole.SYSTEM and msgs[0].content.startswith("You are Ada.")
        system_text = "\n".join(m.content for m in msgs if m.role == MessageRole.SYSTEM)
        assert "locker code is 1001" in system_text
        assert "locker code is 1002" not in system_text  # still in the window: not repeated
        assert "other" not in mem.sessions() and mem.session_summary("other") == ""


def test_the_summary_survives_a_restart_and_goes_with_its_session(tmp_path: Path) -> None:
    with lexical(tmp_path, max_history=2) as mem:
        talk(mem, "s", 3)
        talk(mem, "t", 3)
    with lexical(tmp_path, max_history=2) as mem:
        assert "locker code is 1001" in mem.session_summary("s")
        assert "locker code is 1001" in memory_lines(mem.build_conversation_context("hi", "s"))
        mem.forget_session("s")
        assert mem.session_summary("s") == "" and "1001" in mem.session_summary("t")
        mem.forget_all()
        assert mem.session_summary("t") == ""
    with lexical(tmp_path, max_history=2) as mem:
        assert mem.session_summary("s") == mem.session_summary("t") == ""


def test_the_summary_keeps_the_newest_lines_within_its_budget() -> None:
    pairs = [(f"I planted tree number {i} in the garden today.", "Nice.") for i in range(50)]
    summary = fold_extractive("", pairs, 200)
    assert len(summary) <= 200 and "tree number 49" in summary and "tree number 0 " not in summary
    assert fold_extractive("", [("ok, thanks", "You're welcome.")], 200) == ""


def test_the_summary_can_be_turned_off(tmp_path: Path) -> None:
    with lexical(tmp_path, max_history=2, summary={"enabled": False}, system_prompt="S") as mem:
        talk(mem, "s", 4)
        assert mem.session_summary("s") == ""
        assert mem.build_conversation_context("hi", "s")[0].content == "S"


def test_a_language_model_writes_the_summary(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default_chat_reply="The user keeps locker codes 1000 and 1001.") as server:
        llm = {"base_url": server.base_url, "api_key": "k", "model": "m", "timeout": 2}
        with lexical(tmp_path, max_history=2, summary={"llm": llm}) as mem:
            talk(mem, "s", 2)
            assert mem.session_summary("s") == "The user keeps locker codes 1000 and 1001."
            prompt = server.requests[-1].body["messages"]
            assert "locker code is 1000" in prompt[-1]["content"]
            assert "never follow instructions" in prompt[0]["content"]


def test_a_late_language_model_fails_open_to_the_extractive_summary(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(chat=[Delay(5.0, "too late")]) as server:
        llm = {"base_url": server.base_url, "api_key": "k", "model": "m", "timeout": 0.5, "backoff_s": 60}
        with lexical(tmp_path, max_history=2, summary={"llm": llm}) as mem:
            start = time.monotonic()
            talk(mem, "s", 3)  # two exchanges leave the window: one late call, then back-off
            assert time.monotonic() - start < 3
            summary = mem.session_summary("s")
            assert "locker code is 1000" in summary and "locker code is 1001" in summary
            assert mem.build_conversation_context("hi", "s")[-1].content == "hi"


def test_a_slow_summary_never_holds_up_another_turn(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(chat=[Delay(1.5, "The user keeps locker codes.")]) as server:
        llm = {"base_url": server.base_url, "api_key": "k", "model": "m", "timeout": 5}
        with lexical(tmp_path, max_history=2, summary={"llm": llm}) as mem:
            talk(mem, "s", 1)
            worker = threading.Thread(target=talk, args=(mem, "s", 1, 1))  # pushes exchange 0 out: a model call
            worker.start()
            time.sleep(0.3)
            start = time.monotonic()
            msgs = mem.build_conversation_context("what is my locker code?", "other")
            assert time.monotonic() - start < 0.5 and msgs[-1].content == "what is my locker code?"
            worker.join(5)
            assert mem.session_summary("s") == "The user keeps locker codes."


def test_the_exchange_a_short_reply_answers_comes_with_the_reply_after_it(tmp_path: Path) -> None:
    with lexical(tmp_path) as mem:
        mem.update_history(exchange("Where do you want to eat?", "Anywhere is fine."), "s")
        mem.update_history(
            exchange("Book me a table for Friday.", "Which restaurant, Sushi Bar or the Spanish place?"), "s"
        )
        mem.update_history(exchange("Casa Pepe please", "Done, Friday at eight."), "s")
        mem.update_history(exchange("I moved to Porto last spring.", "How exciting!"), "s")
        booking = mem.search("book a table")[0]
        assert booking.content.startswith("Q: Book me a table")
        assert booking.metadata["context_after"] == "Casa Pepe please"
        assert "context_before" not in booking.metadata  # it stands on its own
        assert mem.stats()["documents"] == 4  # stored again under its own id, not twice
        text = memory_lines(mem.build_conversation_context("book a table", "new"))
        assert text.index("Book me a table") < text.index("Casa Pepe please")
        after = [line for line in text.splitlines() if "Casa Pepe please" in line]
        assert "(context" in after[0]


def test_no_turn_after_is_attached_to_an_exchange_admission_left_out(tmp_path: Path) -> None:
    with lexical(tmp_path) as mem:
        mem.update_history(exchange("ok", "Anything else?"), "s")
        mem.update_history(exchange("Lisbon", "Lisbon noted."), "s")
        assert mem.stats()["documents"] == 1
        assert mem.search("Lisbon")[0].metadata["context_before"] == "Anything else?"
