"""ask-another for pydantic-ai (`pip install 'ask-another[pydantic-ai]'`).

`toolset(rt)` is a `FunctionToolset` over an `ask_another.aio` runtime: `second_opinion(model,
prompt)`, `consensus(models, prompt)`, `research(model, query)` (a job, waited on until it ends
or asks the user) and `allow_job_tool(job_id, tool_call_id)`, which requires approval: the model
calls it when a job asks to run a tool, and the run ends with `DeferredToolRequests` (give the
agent `output_type=[str, DeferredToolRequests]`). `answer_approvals` turns the host's own
decisions into the `DeferredToolResults` to run on with; a denial is also told to the job at
once (`Deny`, with the person's message), so it never waits out its timeout, and the job is
waited on until it has acted on it (its state is in the denial's text).

    agent = Agent(model, toolsets=[toolset(rt)], output_type=[str, DeferredToolRequests])
    result = await agent.run("Research X and keep notes")
    while isinstance(result.output, DeferredToolRequests):
        answers = await answer_approvals(rt, result.output, decide=my_ui)  # -> Decision
        result = await agent.run(message_history=result.all_messages(),
                                 deferred_tool_results=answers)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, FunctionToolset, ToolDenied

from ask_another.adapters._jobs import PERMIT_TOOL, deny, job_text, permission, settle
from ask_another.aio import Runtime
from ask_another.consensus import panel_text
from ask_another.interaction.tools import Tool
from ask_another.interaction.types import ALLOW, Decision, Deny, PermissionRequest

__all__ = ["PERMIT_TOOL", "answer_approvals", "toolset"]

Decide = Callable[[PermissionRequest], Awaitable[Decision]]


def toolset(rt: Runtime, *, job_tools: Iterable[Tool] = (), method: str = "agent",
            wait: float = 600.0) -> FunctionToolset[Any]:
    """The toolset for `rt`. `job_tools`: the host's own `Tool`s a research job may call
    (asyncio coroutines), `method`: the research method, `wait`: seconds a tool waits on a job
    before it reports its state."""
    tools = list(job_tools)
    found: FunctionToolset[Any] = FunctionToolset()

    @found.tool_plain
    async def second_opinion(model: str, prompt: str) -> str:
        """Ask another model for its answer: `model` is an ask-another model id or shorthand."""
        return (await rt.complete(model, prompt, tool="second_opinion")).text

    @found.tool_plain
    async def consensus(models: list[str], prompt: str) -> str:
        """Ask several models the same question at once and get every answer."""
        result = await rt.consensus.ask(models, prompt)
        return panel_text(result.answers)

    @found.tool_plain
    async def research(model: str, query: str) -> str:
        """Start a research job and wait for its report, or for what it asks the user."""
        record = await rt.jobs.start(model, query, method, tools=tools)
        return job_text(await settle(rt, record.id, wait))

    @found.tool_plain(name=PERMIT_TOOL, requires_approval=True)
    async def allow_job_tool(job_id: str, tool_call_id: str) -> str:
        """Let a research job run the tool call it asks permission for (the user approves)."""
        answer = await rt.jobs.answer_permission(job_id, tool_call_id, ALLOW)
        answered = frozenset({tool_call_id})
        return f"{answer}\n{job_text(await settle(rt, job_id, wait, answered), answered)}"

    return found


async def answer_approvals(rt: Runtime, requests: DeferredToolRequests, decide: Decide,
                           *, wait: float = 600.0) -> DeferredToolResults:
    """The answers to the run's `allow_job_tool` approvals, from `decide(request)` (the host's
    UI, given the job's `PermissionRequest`). A denial is told to the job, which is waited on
    (up to `wait` seconds) until it has acted on it; the denial's text gives the model the job's
    state then. Other tools' approvals are left out: add the host's own answers to the returned
    value."""
    answers = DeferredToolResults()
    for call in requests.approvals:
        if call.tool_name != PERMIT_TOOL:
            continue
        arguments = call.args_as_dict()
        job_id, tool_call_id = str(arguments.get("job_id")), str(arguments.get("tool_call_id"))
        request = permission(await rt.jobs.get(job_id), tool_call_id)
        decision: Decision = await decide(request) if request is not None else Deny()
        if isinstance(decision, Deny):
            answers.approvals[call.tool_call_id] = ToolDenied(
                await deny(rt, job_id, tool_call_id, decision, request, wait))
        else:
            answers.approvals[call.tool_call_id] = True
    return answers
