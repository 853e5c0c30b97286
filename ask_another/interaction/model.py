"""The router's model call, wired to the gateway: one chat completion per round, with tools.

`gateway_model(gateway, entry)` returns the `ModelCall` that `run_turn` needs. When the turn
listens for text (`on_delta` given, i.e. the turn has an Interaction), the completion is streamed
and every fragment is awaited in order before the answer returns; otherwise it is one plain
request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ask_another.config import ModelEntry
from ask_another.gateway import CompletionResult, Gateway
from ask_another.interaction.router import Message, ModelCall

__all__ = ["gateway_model"]


def gateway_model(
    gateway: Gateway,
    entry: ModelEntry,
    *,
    timeout: float = 60.0,
    temperature: float | None = None,
    on_result: Callable[[CompletionResult], Awaitable[None]] | None = None,
) -> ModelCall:
    """A `ModelCall` that asks `entry`'s model through `gateway`; each round has `timeout` s.

    `on_result` sees each round's result before the turn goes on (the usage ledger records it).
    """

    async def call(
        messages: list[Message],
        tools: list[dict[str, object]],
        on_delta: Callable[[str], Awaitable[None]] | None,
    ) -> CompletionResult:
        definitions: list[dict[str, Any]] | None = [dict(t) for t in tools] or None
        result = await gateway.completion(
            entry, messages=messages, tools=definitions, temperature=temperature,
            timeout=timeout, on_delta=on_delta,
        )
        if on_result is not None:
            await on_result(result)
        return result

    return call
