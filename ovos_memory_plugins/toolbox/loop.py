"""A host's tool loop: let a tool-aware chat engine answer, running the tools it calls."""

from __future__ import annotations

import json
from typing import Any

from ovos_plugin_manager.templates.agent_tools import ToolBox
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.toolbox.box import MemoryToolBox


def run_tool_loop(
    engine: Any,
    messages: list[AgentMessage],
    toolbox: ToolBox,
    *,
    session_id: str = "default",
    max_rounds: int = 4,
) -> AgentMessage:
    """Let a tool-aware chat engine answer, running the tools it calls, and return its answer.

    Each round sends ``messages`` with the tool box's tools (``engine.continue_chat(...,
    tools=toolbox)``); when the reply calls tools, the assistant turn and one ``TOOL`` message per
    call (the result as JSON) are appended to ``messages`` and the engine is asked again. After
    ``max_rounds`` rounds the engine answers without tools. ``messages`` ends up holding the whole
    exchange, tool turns included.
    """
    for _ in range(max(1, max_rounds)):
        reply: AgentMessage = engine.continue_chat(list(messages), session_id=session_id, tools=toolbox)
        if not reply.tool_calls:
            messages.append(reply)
            return reply
        messages.append(reply)
        for call in reply.tool_calls:
            if isinstance(toolbox, MemoryToolBox):
                with toolbox.for_session(session_id):
                    result = toolbox.call_tool(call.name, call.arguments)
                content = result.model_dump_json()
            else:
                try:
                    content = toolbox.call_tool(call.name, call.arguments).model_dump_json()
                except Exception as exc:
                    content = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
            messages.append(AgentMessage(role=MessageRole.TOOL, content=content, tool_call_id=call.id, name=call.name))
    reply = engine.continue_chat(list(messages), session_id=session_id)
    messages.append(reply)
    return reply
