"""Asking the person at the client: the answer schema of a permission, whether the client can be
asked, and the resolver chain that asks a call's questions one after another.

The SDK's resolver form (`Annotated[ElicitationResult[M], Resolve(fn)]`, `fn` returning
`Elicit(message, M)`) is the elicitation that works in both protocol eras, but a resolver runs
*before* the tool body and asks one question. A call that may ask several (an attached
start_research, server/tools/attached.py) asks them through `resolver_chain`: `MAX_ELICITED`
resolvers, each given the call's first value (found by its own resolver) and the answer to the
previous step's question. A call that asks once (a consensus spend confirmation,
server/tools/confirm.py) has one resolver returning `Elicit(message, Approval)`.

- Up to 2025-11-25 each `Elicit` is a server-to-client request in the middle of the one call.
- From 2026-07-28 an `Elicit` ends the round with an `InputRequiredResult`; the client answers
  and calls again with the same arguments. The resolvers re-run from the start on each round,
  so each must ask exactly the question it asked before: the SDK matches the recorded answer
  to it.
"""

# No `from __future__ import annotations`: the chain's annotations name the previous step's
# function object, and the SDK reads them with get_type_hints, which cannot see closures.

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import ElicitationResult, Resolve
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from ask_another.server.lifespan import ServerState

__all__ = ["MAX_ELICITED", "Approval", "Step", "asks_by_url", "can_elicit", "resolver_chain"]

MAX_ELICITED: Final = 4
"""Questions one call asks by elicitation; later ones wait for answer_permission /
answer_choice (the client's input-required driver allows 10 rounds by default)."""


class Approval(BaseModel):
    """The elicited answer to a permission request or a spend confirmation (a flat primitive
    schema, as MCP requires)."""

    decision: Literal["allow", "deny"] = Field(
        description="allow: run this tool call; deny: do not run it")


def can_elicit(ctx: Context[ServerState]) -> bool:
    """Whether this call's client can be asked (form elicitation)."""
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def asks_by_url(ctx: Context[ServerState]) -> bool:
    """Whether this call's client is asked through a link rather than a form: it declares
    URL-mode elicitation and not forms (`elicitation: {url: {}}`), on a session before 2026-07-28
    (the SDK has URL mode, with its completion notification, on those only). A client that takes
    forms keeps them: it answers in the chat, and the form's message carries the link anyway."""
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    return (elicitation is not None and elicitation.url is not None
            and elicitation.form is None
            and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS)


Step = Callable[[Context[ServerState], Any, int, ElicitationResult[Any] | None], Awaitable[Any]]
"""One step of a chain: ``(ctx, first, index, answer to step index-1 or None)``; it returns an
`Elicit` to ask, or the value the tool body receives."""


def resolver_chain(first: Callable[..., Any], step: Step, length: int = MAX_ELICITED) -> Any:
    """The last of `length` resolvers, each running `step` with `first`'s value (a resolver of
    the call's arguments) and the previous step's answer; give it to the tool body as
    `Annotated[ElicitationResult[Any], Resolve(resolver_chain(...))]`."""

    async def step_0(ctx: Context[ServerState],
                     value: Annotated[Any, Resolve(first)]) -> Any:
        return await step(ctx, value, 0, None)

    def after(previous: Any, index: int) -> Any:
        async def step_n(ctx: Context[ServerState],
                         value: Annotated[Any, Resolve(first)],
                         answer: Annotated[ElicitationResult[Any], Resolve(previous)]) -> Any:
            return await step(ctx, value, index, answer)
        step_n.__name__ = step_n.__qualname__ = f"step_{index}"
        return step_n

    last: Any = step_0
    for index in range(1, length):
        last = after(last, index)
    return last
