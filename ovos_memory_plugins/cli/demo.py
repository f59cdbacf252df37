"""``ovos-memory demo``: a scripted conversation, a restart, and what the memory recalls."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ovos_memory_plugins.cli.check import is_installed
from ovos_memory_plugins.cli.opening import DEFAULT_MODULE, PREFIX, notes_keeper_of, plugin_class, plugin_name
from ovos_memory_plugins.cli.output import Output

DEMO_SYSTEM = "You are Ada, a friendly voice assistant."
DEMO_CONVERSATION: list[tuple[str, str, str]] = [
    (
        "kitchen",
        "Remember that my sister Ingrid lives in Tromsø and her birthday is on the 14th of March.",
        "Noted: Ingrid, 14 March.",
    ),
    ("kitchen", "Remember that I am allergic to peanuts.", "Understood, no peanuts."),
    ("hallway", "Remember that the spare house key is under the blue flowerpot.", "Got it, blue flowerpot."),
]
DEMO_QUESTIONS: list[tuple[str, str]] = [
    ("living-room", "When is my sister's birthday?"),
    ("kitchen", "Where is the spare key?"),
]
#: Per-backend demo config: each shows what that backend does, offline.
DEMO_CONFIGS: dict[str, dict[str, Any]] = {
    PREFIX + "vector": {"embedder": "local", "hybrid": True},
    PREFIX + "composite": {
        "members": [
            {"module": PREFIX + "lexical", "name": "keyword"},
            {"module": PREFIX + "sticky", "name": "sticky"},
        ]
    },
}


def _demo_config(name: str, root: Path) -> dict[str, Any]:
    config: dict[str, Any] = {"root": str(root), "system_prompt": DEMO_SYSTEM}
    config.update(json.loads(json.dumps(DEMO_CONFIGS.get(name, {}))))
    if name == PREFIX + "vector" and not is_installed("onnxruntime"):
        config["embedder"] = "hash"  # the offline model is an extra; the hashing embedder is built in
    return config


def _marked(messages: list[dict[str, str]], bare: set[str]) -> list[str]:
    """The context as lines; ``+`` marks every line the memory added (not the prompt, not the question)."""
    lines = []
    for m in messages:
        head = f"{m['role']:>9}: "
        for j, line in enumerate(m["content"].splitlines() or [""]):
            mark = " " if line in bare else "+"
            lines.append(f" {mark} " + (head if j == 0 else " " * len(head)) + line)
    return lines


def cmd_demo(args: argparse.Namespace, output: Output) -> int:
    from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

    started = time.perf_counter()
    name = plugin_name(args.module or DEFAULT_MODULE)
    cls = plugin_class(name)
    keep = args.root is not None
    root = Path(args.root) if keep else Path(tempfile.mkdtemp(prefix="ovos-memory-demo-"))
    config = _demo_config(name, root)
    lines = [f"ovos-memory demo: {name} in {root}" + ("" if keep else " (removed afterwards)"), ""]
    turns: list[dict[str, Any]] = []
    remembered: list[str] = []
    try:
        memory = cls(config=dict(config))
        try:
            for session, user, assistant in DEMO_CONVERSATION:
                memory.build_conversation_context(user, session)  # a real turn: context first, then the answer
                memory.update_history(
                    [
                        AgentMessage(role=MessageRole.USER, content=user),
                        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
                    ],
                    session,
                )
                turns.append({"session_id": session, "user": user, "assistant": assistant})
                lines += [f"[{session}] user:      {user}", f"[{session}] assistant: {assistant}"]
            notes = notes_keeper_of(memory)
            if notes is not None and not notes.list_notes():
                # no model digests the conversation offline: note the facts as the model's memory tool would
                lines += [
                    "",
                    "no model digests the conversation offline; the facts are noted as its memory tool would:",
                ]
                for _session, user, _answer in DEMO_CONVERSATION:
                    fact = user.removeprefix("Remember that ").rstrip(".") + "."
                    fact = fact[0].upper() + fact[1:]
                    change = notes.remember(fact, session_id=_session)
                    remembered.append(change.status)
                    lines.append(f"  remember({fact!r}) -> {change.status}")
        finally:
            memory.close()
        lines += ["", "-- restart: the memory is closed and built again from its files --", ""]
        recalled = []
        memory = cls(config=dict(config))
        try:
            for session, question in DEMO_QUESTIONS:
                messages = memory.build_conversation_context(question, session)
                shown = [{"role": str(getattr(m.role, "value", m.role)), "content": m.content} for m in messages]
                added = [m for m in shown if m["content"] not in (DEMO_SYSTEM, question)]
                recalled.append({"session_id": session, "utterance": question, "messages": shown, "added": added})
                lines.append(f'[{session}] next turn "{question}": the chat engine receives (+ = added by the memory)')
                lines += _marked(shown, {DEMO_SYSTEM, question, ""})
                lines.append("")
        finally:
            memory.close()
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    seconds = time.perf_counter() - started
    if keep:
        lines.append(f"done in {seconds:.2f} s, offline. Look inside: ovos-memory search --root {root} birthday")
    else:
        lines.append(f"done in {seconds:.2f} s, offline. Keep the files with: ovos-memory demo --root DIR")
    data = {
        "module": name,
        "root": str(root),
        "config": config,
        "conversation": turns,
        "remembered": remembered,
        "after_restart": recalled,
        "seconds": seconds,
    }
    output.emit(data, "\n".join(lines))
    return 0
