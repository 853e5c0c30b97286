"""What the simulator can be told to do: the step types, the recorded request and the scripts.

A *step* says how to answer one request. Tests queue steps per model name with
`Simulator.script`; a step queue is consumed in order, one step per request for that model.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias


@dataclass(frozen=True)
class ToolCall:
    """One function call the simulated model asks for.

    `arguments` may be a dict (sent as its JSON text) or a string sent verbatim, so a test can
    send arguments that are not valid JSON or do not match the tool's schema. `id` defaults to a
    unique ``call_sim<n>_<i>`` id (not ``call_<n>``: litellm treats
    that form as a non-unique index on the Responses API and swaps in the item id).
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """Answer with `text`.

    `citations` (URLs) are sent the way Perplexity sends them (top-level ``citations`` and
    ``search_results``) and, unless the caller is litellm's Perplexity client, also as OpenAI
    ``url_citation`` annotations on the message. `usage` overrides the computed token counts
    (keys ``prompt_tokens``, ``completion_tokens``).
    """

    text: str
    citations: list[str] | None = None
    usage: Mapping[str, int] | None = None


@dataclass(frozen=True)
class ToolCalls:
    """The model asks for these tool calls (finish_reason ``tool_calls``), with optional text."""

    calls: list[ToolCall]
    text: str = ""


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error in the OpenAI error envelope.

    A 429 carries ``Retry-After: <retry_after>`` (seconds). `error_type` defaults to the type
    OpenAI uses for the status (``rate_limit_error``, ``invalid_request_error``, ...).
    """

    status: int
    message: str = "simulated failure"
    error_type: str | None = None
    retry_after: float = 0


@dataclass(frozen=True)
class Slow:
    """Wait `seconds` (on top of the simulator's latency), then answer as `then` says."""

    seconds: float
    then: Step | None = None


@dataclass(frozen=True)
class Drop:
    """Close the connection without sending any response byte."""


@dataclass(frozen=True)
class Malformed:
    """Answer 200 with a body that is not a completion.

    `body` defaults to text that is not valid JSON; pass e.g. ``'{"unexpected": true}'`` for
    valid JSON that is not a completion. For a streaming request the body is sent as one SSE event.
    """

    body: str = "this is {not json"


Step: TypeAlias = Reply | ToolCalls | Fail | Slow | Drop | Malformed


@dataclass(frozen=True)
class SimRequest:
    """One HTTP request the simulator received, as the provider saw it.

    `model` is the body's ``model`` (or the Gemini ``agent``) after litellm stripped its provider
    prefix; `headers` has lower-case names.
    """

    method: str
    path: str
    model: str | None
    json: dict[str, Any]
    headers: Mapping[str, str]

    @property
    def stream(self) -> bool:
        return bool(self.json.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.json.get("messages")
        return messages if isinstance(messages, list) else []

    @property
    def api_key(self) -> str | None:
        """The key the client sent: the Bearer token, or Gemini's ``x-goog-api-key``."""
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:]
        return self.headers.get("x-goog-api-key")

    @property
    def turns(self) -> list[tuple[str, str]]:
        """The conversation as (role, text) pairs, whichever API sent it.

        Chat completions ``messages`` keep their roles; Responses API ``input`` items map
        ``function_call_output`` to ``tool`` and ``function_call`` to ``assistant``; a Gemini
        interaction's ``input`` is one user turn.
        """
        if self.messages:
            return [
                (str(m.get("role", "")), content_text(m.get("content")))
                for m in self.messages
                if isinstance(m, dict)
            ]
        items = self.json.get("input")
        if isinstance(items, list) and all(isinstance(i, dict) for i in items):
            turns = []
            for item in items:
                kind = item.get("type", "message")
                if kind == "function_call_output":
                    turns.append(("tool", content_text(item.get("output"))))
                elif kind == "function_call":
                    turns.append(("assistant", str(item.get("arguments", ""))))
                else:
                    turns.append((str(item.get("role", "user")), content_text(item.get("content"))))
            return turns
        if items is not None:
            return [("user", content_text(items))]
        return []

    @property
    def last_user_text(self) -> str:
        """The text of the last user message (or the Gemini interaction's input text)."""
        for role, text in reversed(self.turns):
            if role == "user":
                return text
        return ""


Responder: TypeAlias = Callable[[SimRequest], Step]


def content_text(content: object) -> str:
    """Flatten an OpenAI or Gemini content value (string, parts list, turns) to plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (content_text(part) for part in content) if t)
    if isinstance(content, dict):
        text = content.get("text")
        if isinstance(text, str):
            return text
        if "content" in content:
            return content_text(content["content"])
        if "parts" in content:
            return content_text(content["parts"])
    return ""


class Scripts:
    """Per-model step queues and responders; shared between the test thread and the server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, collections.deque[Step]] = {}
        self._responders: dict[str, Responder] = {}

    def add(self, model: str, steps: list[Step] | Responder) -> None:
        with self._lock:
            if callable(steps):
                self._responders[model] = steps
                return
            for step in steps:
                if not isinstance(step, Step):
                    raise TypeError(f"not a simulator step: {step!r}")
            self._queues.setdefault(model, collections.deque()).extend(steps)

    def next_for(self, request: SimRequest) -> Step | None:
        """The scripted step for this request, or None for default behaviour."""
        model = request.model or ""
        with self._lock:
            queue = self._queues.get(model)
            if queue:
                return queue.popleft()
            responder = self._responders.get(model)
        return responder(request) if responder is not None else None

    def pending(self, model: str) -> int:
        with self._lock:
            return len(self._queues.get(model, ()))

    def clear(self) -> None:
        with self._lock:
            self._queues.clear()
            self._responders.clear()
