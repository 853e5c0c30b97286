"""ask-another for the OpenAI Agents SDK (`pip install 'ask-another[openai-agents]'`).

`function_tools(rt)` gives the SDK's function tools over an `ask_another.aio` runtime:
`second_opinion(model, prompt)`, `consensus(models, prompt)`, `research(model, query)` (a job,
waited on until it ends or asks the user) and `allow_job_tool(job_id, tool_call_id)`, which has
`needs_approval`: the model calls it when a job asks to run a tool, the SDK stops the run with a
tool-approval interruption, and the host's own approval UI answers it. `answer_interruptions`
answers them: an approval lets the job's tool run when the run resumes; a rejection is also told
to the job at once (`Deny`, with the person's message), so it never waits out its timeout, and
the job is waited on until it has acted on it (its state is in the rejection message).

    agent = Agent(name="host", model=..., tools=function_tools(rt))
    result = await Runner.run(agent, "Research X and keep notes")
    while result.interruptions:
        state = await answer_interruptions(rt, result, decide=my_ui)  # my_ui(request) -> Decision
        result = await Runner.run(agent, state)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from agents import RunResult, RunState, function_tool
from agents import Tool as AgentTool

from ask_another.adapters._jobs import PERMIT_TOOL, deny, job_text, permission, settle
from ask_another.aio import Runtime
from ask_another.consensus import panel_text
from ask_another.interaction.tools import Tool
from ask_another.interaction.types import ALLOW, Decision, Deny, PermissionRequest

__all__ = ["PERMIT_TOOL", "answer_interruptions", "function_tools"]

Decide = Callable[[PermissionRequest], Awaitable[Decision]]


def function_tools(rt: Runtime, *, job_tools: Iterable[Tool] = (), method: str = "agent",
                   wait: float = 600.0) -> list[AgentTool]:
    """The SDK's tools for `rt`. `job_tools`: the host's own `Tool`s a research job may call
    (asyncio coroutines), `method`: the research method (`agent`: one router turn with tools),
    `wait`: seconds a tool waits on a job before it reports its state."""
    tools = list(job_tools)

    @function_tool
    async def second_opinion(model: str, prompt: str) -> str:
        """Ask another model for its answer: `model` is an ask-another model id or shorthand."""
        return (await rt.complete(model, prompt, tool="second_opinion")).text

    @function_tool
    async def consensus(models: list[str], prompt: str) -> str:
        """Ask several models the same question at once and get every answer."""
        result = await rt.consensus.ask(models, prompt)
        return panel_text(result.answers)

    @function_tool
    async def research(model: str, query: str) -> str:
        """Start a research job and wait for its report, or for what it asks the user."""
        record = await rt.jobs.start(model, query, method, tools=tools)
        return job_text(await settle(rt, record.id, wait))

    @function_tool(name_override=PERMIT_TOOL, needs_approval=True)
    async def allow_job_tool(job_id: str, tool_call_id: str) -> str:
        """Let a research job run the tool call it asks permission for (the user approves)."""
        answer = await rt.jobs.answer_permission(job_id, tool_call_id, ALLOW)
        answered = frozenset({tool_call_id})
        return f"{answer}\n{job_text(await settle(rt, job_id, wait, answered), answered)}"

    return [second_opinion, consensus, research, allow_job_tool]


async def answer_interruptions(rt: Runtime, result: RunResult | RunState[Any], decide: Decide,
                               *, wait: float = 600.0) -> RunState[Any]:
    """Answer the run's `allow_job_tool` approvals with `decide(request)` (the host's UI, given
    the job's `PermissionRequest`) and return the state to resume the run with. A rejection is
    told to the job, which is waited on (up to `wait` seconds) until it has acted on it; the
    rejection message gives the model the job's state then. Other tools' approvals are left for
    the host to answer on the returned state."""
    state = result.to_state() if isinstance(result, RunResult) else result
    for item in state.get_interruptions():
        if item.name != PERMIT_TOOL:
            continue
        arguments = _arguments(item.arguments)
        job_id, tool_call_id = str(arguments.get("job_id")), str(arguments.get("tool_call_id"))
        request = permission(await rt.jobs.get(job_id), tool_call_id)
        decision: Decision = await decide(request) if request is not None else Deny()
        if isinstance(decision, Deny):
            state.reject(item, rejection_message=await deny(rt, job_id, tool_call_id, decision,
                                                            request, wait))
        else:
            state.approve(item)
    return state


def _arguments(raw: str | None) -> dict[str, Any]:
    import json

    try:
        parsed = json.loads(raw or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


