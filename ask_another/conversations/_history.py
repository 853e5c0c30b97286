"""History replay: stored messages to the OpenAI-format `messages` list sent to the model.

`build_history` is the one function that does it, for conversation turns and for the router's
turns alike. A message without tool calls replays as ``{"role", "content"}``, exactly as stored.
An assistant message that made tool calls replays with its calls (``tool_calls`` with ``id``,
``type: "function"`` and the function's ``name`` and ``arguments`` JSON text), followed by one
``tool`` message per call carrying its result under the matching ``tool_call_id``, so what a tool
returned (an article read two turns ago) is still in the model's context on every follow-up.

`tool_exchange` builds such an assistant message from calls and results, for storing.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from ask_another.store.conversations import NewMessage, StoredMessage, StoredToolCall

__all__ = ["build_history", "new_call_id", "tool_exchange"]


def new_call_id() -> str:
    """A fresh tool call id in OpenAI's ``call_...`` shape, for synthetic exchanges."""
    return f"call_{secrets.token_hex(12)}"


def _arguments_text(arguments: str | Mapping[str, Any]) -> str:
    # A string is what the model sent: replay it verbatim, even if it is not valid JSON.
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _result_text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def build_history(messages: Iterable[StoredMessage | NewMessage]) -> list[dict[str, Any]]:
    """The OpenAI-format history of `messages`, in order (system messages are left out: the
    caller puts the system prompt first)."""
    history: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if not message.tool_calls:
            history.append({"role": message.role, "content": message.content})
            continue
        history.append({
            "role": message.role,
            # OpenAI's form for a message that only calls tools: null content, not "".
            "content": message.content or None,
            "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": call.function, "arguments": _arguments_text(call.arguments)}}
                for call in message.tool_calls
            ],
        })
        history.extend(
            {"role": "tool", "tool_call_id": call.id, "content": _result_text(call.result)}
            for call in message.tool_calls
        )
    return history


def tool_exchange(calls: Iterable[tuple[str, str | Mapping[str, Any], Any]], content: str = "",
                  ) -> NewMessage:
    """An assistant message that called tools, with their results: ``(name, arguments, result)``
    per call; each call gets a fresh id."""
    return NewMessage(role="assistant", content=content, tool_calls=[
        StoredToolCall(id=new_call_id(), function=name,
                       arguments=arguments if isinstance(arguments, str) else dict(arguments),
                       result=result)
        for name, arguments, result in calls
    ])
