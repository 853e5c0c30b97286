"""What the gateway hands back: plain values, the same from either transport.

No litellm here: these cross the worker process's pipe as msgpack (msgspec encodes dataclasses)
and are what the rest of ask-another reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ask_another.costs import cost_text


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the provider sent it


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None  # None when litellm does not know the model's price

    def describe(self) -> str:
        """A short usage line for people: tokens in/out, and the cost when known."""
        parts = []
        if self.prompt_tokens is not None or self.completion_tokens is not None:
            parts.append(f"{self.prompt_tokens or 0} tokens in, {self.completion_tokens or 0} out")
        parts.append(cost_text(self.cost_usd or 0.0, int(self.cost_usd is None), 1))
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class CompletionResult:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    tool_calls: tuple[ToolCall, ...] = ()
    citations: tuple[str, ...] = ()
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str = ""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One web search through litellm's search API: the hits, and what the search cost."""

    query: str
    provider: str
    hits: tuple[SearchHit, ...] = ()
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class InteractionState:
    """A Gemini interaction as the provider last described it (create, get or cancel)."""

    id: str | None = None
    status: str | None = None
    steps: list[dict[str, Any]] | None = None  # the current shape of the report
    outputs: list[dict[str, Any]] | None = None  # the legacy shape
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    cost_usd: float | None = None  # `usage` priced by litellm; None: no usage, or no price


@dataclass(frozen=True, slots=True)
class GatewayStatistics:
    ready: bool  # litellm is loaded where the calls run
    in_flight: int  # provider calls running right now
    worker_pid: int | None = None  # the worker process, while one runs
    # Not ready because a worker is being started for these calls (litellm's import: seconds),
    # not because a running one has yet to answer (a busy machine can take longer than usual).
    starting: bool = False
