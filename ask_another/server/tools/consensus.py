"""The `consensus` tool: one prompt to 2-8 allowed models at once, their replies side by side.

A thin face over `Consensus` (consensus/): it validates through it, reports progress as each
model's call ends (when the caller asked for progress), and formats the result with
`consensus_text`. Partial panels are results; bad arguments and refusals (a budget ceiling, a
cost that was not confirmed: confirm.py) are tool errors.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import ElicitationResult, Resolve
from mcp.types import ToolAnnotations
from pydantic import Field

from ask_another.consensus import MAX_MODELS, MIN_MODELS, Answer, answer_heading
from ask_another.consensus import consensus_text as format_result
from ask_another.interaction.types import Decision
from ask_another.server.context import runtime_of, tool_errors, user_of
from ask_another.server.lifespan import ServerState
from ask_another.server.tools.confirm import SpendCheck, spend_answer, spend_check, spend_decision
from ask_another.server.tools.stances import Stance, stances_map
from ask_another.spend.estimate import Estimate

__all__ = ["CONSENSUS", "HOWTO", "register"]

CONSENSUS: Final = f"""Ask {MIN_MODELS} to {MAX_MODELS} allowed models the same prompt at once \
and get their replies side by side (model, latency, tokens, cost). Each model may take a stance \
(for, against, neutral, or your own words). Name a synthesize model to have it compare the \
replies: agreements, differences, claims only one model made. A model that fails or times out \
is reported in its place; the others still answer. The answer ends with a conversation_id: pass \
it back to consensus, or to completion or discuss with one of the panel's models, to continue. \
The cost is estimated first; above ASK_ANOTHER_CONFIRM_USD (default $1.00) the user is asked to \
confirm it (a client that cannot ask gets the estimate back: call again with confirm_spend=true \
only once the user agreed)."""

HOWTO: Final = (
    "For several opinions at once, use consensus(models=[...], prompt=...), optionally with "
    "stances and a synthesize model.",
)


def register(server: MCPServer[ServerState]) -> None:
    @server.tool(name="consensus", description=CONSENSUS, structured_output=False,
                 annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    async def consensus(
        ctx: Context[ServerState],
        check: Annotated[SpendCheck, Resolve(spend_check)],
        spend: Annotated[ElicitationResult[Any], Resolve(spend_answer)],
        models: Annotated[list[str], Field(description=f"{MIN_MODELS} to {MAX_MODELS} allowed "
                                           "models (shorthands or exact ids), each once.")],
        prompt: Annotated[str, Field(description="The question or prompt every model gets.")],
        system: Annotated[str | None, Field(description="Optional system prompt for every "
                                            "model (kept for the rest of the thread).")] = None,
        stances: Annotated[list[Stance] | dict[str, str] | None, Field(
            description="Optional stance per model: [{model, stance}] with stance 'for', "
                        "'against', 'neutral' or your own words (the older {model: stance} "
                        "map is accepted too).")] = None,
        synthesize: Annotated[str | None, Field(
            description="An allowed model that compares the replies afterwards (default: "
                        "none).")] = None,
        conversation_id: Annotated[str | None, Field(
            description="Continue this conversation (its history goes to every model); leave "
                        "empty to start a new one.")] = None,
        temperature: Annotated[float | None, Field(
            strict=True,  # true is not 1.0
            description="0.0 to 2.0. Leave unset unless you need it.")] = None,
        timeout: Annotated[float | None, Field(  # noqa: ASYNC109 - the tool's public argument
            strict=True,
            description="Seconds each model may take (default 60, ASK_ANOTHER_TIMEOUT).")]
        = None,
        confirm_spend: Annotated[bool, Field(
            strict=True,
            description="Only for clients that cannot ask the user (no elicitation): true once "
                        "the user has agreed to the estimated cost a previous call refused "
                        "with. Leave false otherwise.")] = False,
    ) -> str:
        with tool_errors("consensus"):
            decision = spend_decision(ctx, check, spend)

            async def progress(answer: Answer, ended: int, total: int) -> None:
                await ctx.report_progress(ended, total, answer_heading(answer))

            async def confirm(_estimate: Estimate) -> Decision:
                return decision

            result = await runtime_of(ctx).consensus_for(user_of(ctx)).ask(
                models, prompt, system=system, stances=stances_map(stances),
                synthesize=synthesize,
                conversation_id=conversation_id, temperature=temperature, timeout=timeout,
                on_answer=progress, confirm=confirm,
            )
            return format_result(result)
