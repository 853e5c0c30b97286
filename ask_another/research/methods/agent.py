"""Research method "agent": one router turn in which the model may use the built-in tools.

The turn runs in the job's work task under the lifecycle of docs/interaction.md, with the
configured permission policy. Its Interaction is the job itself (`JobInteraction`): tool updates
become the job's timeline, permission requests and choices wait in the job actor for an answer
message (`answer_permission` / `answer_choice`, or an MCP elicitation on an attached
start_research call), and text fragments are coalesced into previews sent without waiting, so a
slow reader never slows the model.

An embedding host may pass its own Interaction to a job: it then answers the questions, and the
job still keeps its timeline (`HostInteraction`).

An agent job is not retried after a provider error: tools may already have run, and running an
effect tool twice is worse than failing once.

Steps (research_steps): ``turn:<n>:asked``, the model's tool-call answer of round n, stored
before its tools run, and ``turn:<n>``, the conversation after round n (every message, tool
call and result so far). A job resumed after a kill continues from the last stored round
without asking the model again for it; the tool calls of a round whose answer was stored but
whose tools had not all finished run again, except that an ``effect`` call is asked of a person
again (a permission request), never run twice silently (interaction/router.py).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from ask_another.errors import AskAnotherError
from ask_another.gateway import CompletionResult
from ask_another.interaction.builtin import builtin_tools
from ask_another.interaction.protocol import CallHandle, Interaction
from ask_another.interaction.router import (
    CallRecord,
    Message,
    TurnResult,
    TurnSoFar,
    run_turn,
)
from ask_another.interaction.types import (
    Choice,
    ChoiceFailed,
    Decision,
    PermissionRequest,
    ToolUpdate,
)
from ask_another.logs import get_logger
from ask_another.policy import Rule, scope_text
from ask_another.research.citations import read_sources
from ask_another.research.messages import (
    AskChoice,
    AskPermission,
    RegisterCall,
    TextPreview,
    ToolUpdated,
)
from ask_another.research.methods.method import JobContext, Method, ResearchFailed, ResearchResult
from ask_another.spend.budget import BudgetExceeded
from ask_another.store.answers import STANDING_RULE, Answer, record_answer
from supervisors import ActorRef, SupervisorError

__all__ = ["AGENT", "PREVIEW_EVERY", "SYSTEM_PROMPT", "HostInteraction", "JobInteraction",
           "run_agent"]

log = get_logger("ask_another.research")

PREVIEW_EVERY: Final = 0.25
"""Seconds between two text previews of an agent job's answer (the fragments in between are
coalesced)."""
TAIL: Final = 200

SYSTEM_PROMPT: Final = (
    "You are a careful research assistant. Answer the user's question with a well-organised "
    "report. You may call search_web (when offered) to find sources, read_article to read a "
    "web page in full, and ask_user when a decision belongs to the person you work for. Cite "
    "the URLs you relied on."
)


class JobInteraction:
    """The Interaction of an agent job's turn: every callback is a message to the job actor."""

    def __init__(self, ref: ActorRef, preview_every: float = PREVIEW_EVERY) -> None:
        self._ref = ref
        self._every = preview_every
        self._text: list[str] = []
        self._chars = 0
        self._sent = 0
        self._last = -math.inf

    async def tool_updated(self, update: ToolUpdate) -> None:
        self._preview()
        await self._ref.call(ToolUpdated(update))

    async def request_permission(self, request: PermissionRequest) -> Decision:
        decision: Decision = await self._ref.call(AskPermission(request), timeout=None)
        return decision

    async def register_call(self, tool_call_id: str, handle: CallHandle) -> None:
        await self._ref.call(RegisterCall(tool_call_id, handle))

    async def ask_choice(self, choice: Choice) -> str | ChoiceFailed:
        answer: str | ChoiceFailed = await self._ref.call(AskChoice(choice), timeout=None)
        return answer

    async def text_delta(self, text: str) -> None:
        self._text.append(text)
        self._chars += len(text)
        if trio.current_time() - self._last >= self._every:
            self._preview()

    def _preview(self) -> None:
        """Send what was written since the last preview, without waiting (best effort)."""
        if self._chars == self._sent:
            return
        joined = "".join(self._text)
        self._text = [joined[-TAIL:]]
        self._sent = self._chars
        self._last = trio.current_time()
        try:
            self._ref.send(TextPreview(self._chars, joined[-TAIL:]))
        except SupervisorError:
            pass  # a full mailbox: the next preview says more

    def finish(self) -> None:
        self._preview()


class HostInteraction:
    """An embedding host's Interaction for a job: the host answers, the job keeps its timeline."""

    def __init__(self, host: Interaction, job: JobInteraction) -> None:
        self._host = host
        self._job = job

    async def tool_updated(self, update: ToolUpdate) -> None:
        await self._job.tool_updated(update)
        await self._host.tool_updated(update)

    async def request_permission(self, request: PermissionRequest) -> Decision:
        return await self._host.request_permission(request)

    async def register_call(self, tool_call_id: str, handle: CallHandle) -> None:
        await self._job.register_call(tool_call_id, handle)
        await self._host.register_call(tool_call_id, handle)

    async def ask_choice(self, choice: Choice) -> str | ChoiceFailed:
        return await self._host.ask_choice(choice)

    async def text_delta(self, text: str) -> None:
        await self._job.text_delta(text)
        await self._host.text_delta(text)


async def run_agent(ctx: JobContext) -> ResearchResult:
    """One router turn for the job's query; the report is the model's final answer, its
    citations the articles the turn read, its usage every model call and search of the turn."""
    engine = ctx.config.search
    # The turn's searches: each counted in the job's usage and ledger by its gateway.
    tools = builtin_tools(ctx.config.allow_hosts, ctx.tools or (),
                          search=(ctx.calls("search"), engine) if engine else None)

    so_far = _so_far(ctx)
    # Each round's text: the partial report if a ceiling stops it.
    written: list[str] = [str(m["content"]).strip() for m in (so_far.messages if so_far else [])
                          if m.get("role") == "assistant" and str(m.get("content") or "").strip()]
    rounds = 0 if so_far is None else so_far.rounds + (so_far.asked is not None)

    async def model(messages: list[Message], definitions: list[dict[str, object]],
                    on_delta: Callable[[str], Awaitable[None]] | None) -> CompletionResult:
        # gateway_model's call, counted in the job's usage.
        nonlocal rounds
        with ctx.traced(f"turn:{rounds + 1}"):
            result = await ctx.calls(f"turn:{rounds + 1}").completion(
                ctx.entry, messages=messages, tools=[dict(t) for t in definitions] or None,
                timeout=ctx.config.research_timeout, on_delta=on_delta)
        rounds += 1
        if result.text.strip():
            written.append(result.text.strip())
        try:
            await ctx.check_budget()  # before the next round: a ceiling reached stops the job
        except BudgetExceeded as exc:
            kept = ("what it wrote so far is kept as the partial report" if written
                    else "it had written nothing yet")
            raise ResearchFailed(f"{exc}. The agent stopped after {rounds} model "
                                 f"call{'s' if rounds != 1 else ''}; {kept}",
                                 report="\n\n".join(written) or None) from None
        return result

    async def asked(n: int, message: Message) -> None:
        await ctx.save_step(f"turn:{n}:asked", message)

    async def standing_used(request: PermissionRequest, rule: Rule, scope: str) -> None:
        # A standing answer decided for the person: audited as theirs, by the rule it applied.
        if ctx.services is not None:
            await record_answer(await ctx.services.database(), Answer(
                job_id=ctx.job_id, at=time.time(), principal=ctx.user_id, face=STANDING_RULE,
                tool_call_id=request.tool_call_id, tool=request.tool, answer=rule,
                rule=f"always {rule} {request.tool}: {scope_text(scope)}"))

    async def round_done(turn: TurnResult) -> None:
        await ctx.save_step(f"turn:{turn.rounds}", {
            "messages": turn.messages, "rounds": turn.rounds,
            "calls": [dataclasses.asdict(c) for c in turn.calls]})

    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": ctx.query}]
    if so_far is None:
        ctx.report(f"asking {ctx.entry.model} (agent turn with tools: "
                   f"{', '.join(tools.names())})")
    else:
        ctx.report(f"resuming the agent turn after round {so_far.rounds}")
    try:
        policy = ctx.policy if ctx.policy is not None else ctx.config.permissions
        result = await run_turn(model, messages, tools, policy=policy,
                                interaction=ctx.interaction, so_far=so_far, on_asked=asked,
                                on_round=round_done, on_standing=standing_used)
    except ResearchFailed:
        raise
    except AskAnotherError as exc:
        # Not retried (see the module docstring): the job fails with the provider's message.
        raise ResearchFailed(str(exc)) from None
    finally:
        if isinstance(ctx.interaction, JobInteraction):
            ctx.interaction.finish()
    calls = [{"tool_call_id": c.id, "tool": c.tool, "status": c.status} for c in result.calls]
    log.info("research.agent_done", job_id=ctx.job_id, rounds=result.rounds, tool_calls=len(calls))
    return ResearchResult(report=result.text, citations=tuple(read_sources(result.calls)),
                          detail={"rounds": result.rounds, "tool_calls": calls,
                                  "model": ctx.entry.model, "usage": ctx.usage.as_dict()})


def _so_far(ctx: JobContext) -> TurnSoFar | None:
    """The stored rounds of the job's turn (None: none, a fresh turn)."""
    last, n = None, 0
    while (stored := ctx.step(f"turn:{n + 1}")) is not None:
        last, n = stored, n + 1
    asked = ctx.step(f"turn:{n + 1}:asked")
    if last is None and asked is None:
        return None
    if last is None:
        return TurnSoFar(messages=[], calls=[], rounds=0, asked=asked)
    return TurnSoFar(messages=list(last["messages"]),
                     calls=[CallRecord(**c) for c in last["calls"]], rounds=int(last["rounds"]),
                     asked=asked)


# Resumed after a kill from its stored rounds (see the module docstring).
AGENT: Final = Method(run=run_agent)
