"""The `completion` tool: one prompt to one allowed model, in a conversation.

Every answer ends with ``conversation_id: <id>``; passing it back continues that conversation
with the same model (its history, tool exchanges included, is replayed; see
docs/conversations.md). Without it, a new conversation starts.

When the caller asked for progress (a progress token), the answer is streamed from the provider
and each piece of text is sent as a progress notification's message as it arrives; the tool result
is the whole answer either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from ask_another.conversations import TurnOutcome
from ask_another.gateway import CompletionResult
from ask_another.server.context import runtime_of, tool_errors, user_of
from ask_another.server.lifespan import ServerState

COMPLETION = """Call a model for a quick completion. Use this for standard prompts that return \
in seconds. Use a favourite shorthand (e.g. 'openai') or an exact model ID verified via \
search_models. Do not set temperature unless you have a specific reason — some models reject \
non-default values. Every answer ends with a conversation_id: pass it back (with the same \
model) to ask a follow-up in the same conversation."""


def result_text(result: CompletionResult) -> str:
    """The answer, then its sources, then one usage line."""
    parts = [result.text.strip() or "(the model returned an empty answer)"]
    if result.tool_calls:
        parts.append("Tool calls requested: " + ", ".join(
            f"{c.name}({c.arguments})" for c in result.tool_calls))
    if result.citations:
        parts.append("Sources:\n" + "\n".join(
            f"[{n}] {url}" for n, url in enumerate(result.citations, 1)))
    parts.append(f"— {result.model} · {result.usage.describe()}")
    return "\n\n".join(parts)


def conversation_text(outcome: TurnOutcome) -> str:
    """A turn's answer (`result_text`), then the conversation id to continue with (or, when the
    store could not keep the turn, why, and what that means for the conversation)."""
    if outcome.not_stored is None:
        return f"{result_text(outcome.result)}\nconversation_id: {outcome.conversation_id}"
    if outcome.continuable:
        what = (f"conversation {outcome.conversation_id} goes on without this turn "
                f"(conversation_id: {outcome.conversation_id})")
    else:
        what = "there is no conversation to continue"
    return (f"{result_text(outcome.result)}\n\nThis answer was NOT stored ({outcome.not_stored}); "
            f"the provider answered and billed it, so here it is; {what}.")


def progress_reporter(ctx: Context[ServerState]) -> Callable[[str], Awaitable[None]] | None:
    """Streams answer text to the caller as progress messages, if it asked for progress."""
    if not _wants_progress(ctx):
        return None
    received = 0

    async def report(text: str) -> None:
        nonlocal received
        received += len(text)
        await ctx.report_progress(received, None, text)

    return report


def register(server: MCPServer[ServerState]) -> None:
    @server.tool(
        name="completion",
        description=COMPLETION,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True),
        structured_output=False,
    )
    async def completion(
        ctx: Context[ServerState],
        model: Annotated[str, Field(description="A shorthand from list_models (e.g. 'openai') "
                                    "or an exact model ID such as 'openai/gpt-4o'.")],
        prompt: Annotated[str, Field(description="The question or prompt to send.")],
        system: Annotated[str | None, Field(description="Optional system prompt (kept for the "
                                            "rest of the conversation).")] = None,
        temperature: Annotated[float | None, Field(
            strict=True,  # no true -> 1.0, no "0.5" -> 0.5: a wrong type is an error
            description="0.0 to 2.0. Leave unset unless you need it: it is sent only when "
                        "given.")] = None,
        timeout: Annotated[float | None, Field(  # noqa: ASYNC109 - the tool's public argument
            strict=True,
            description="Seconds to wait for the answer (default 60, configurable with "
                        "ASK_ANOTHER_TIMEOUT).")] = None,
        conversation_id: Annotated[str | None, Field(
            description="Continue the conversation with this id (printed at the end of an "
                        "earlier answer), with the same model; leave empty to start a new "
                        "one.")] = None,
    ) -> str:
        with tool_errors("completion"):
            outcome = await runtime_of(ctx).conversations_for(user_of(ctx)).turn(
                model, prompt, conversation_id, system=system, temperature=temperature,
                timeout=timeout, on_delta=progress_reporter(ctx),
            )
            return conversation_text(outcome)


def _wants_progress(ctx: Context[ServerState]) -> bool:
    meta = ctx.request_context.meta or {}
    return bool(meta.get("progress_token") or meta.get("progressToken"))
