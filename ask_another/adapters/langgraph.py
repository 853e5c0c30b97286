"""ask-another for LangGraph (`pip install 'ask-another[langgraph]'`).

`research_graph(rt)` is a compiled graph over an `ask_another.aio` runtime that runs a research
job and puts each permission request of the job to the person with LangGraph's `interrupt()`:
the run stops with the request as the interrupt's value (`job_id`, `tool_call_id`, `tool`,
`class`, `arguments`), and the host resumes it with its person's answer, `Command(resume=
"allow")`, `"deny"`, or `{"decision": "deny", "message": "..."}`. The graph's nodes
(`start_job`, `follow_job`) go into a host's own graph the same way; their state is
`ResearchState`. Interrupts need a checkpointer (an `InMemorySaver` by default) and a
`thread_id` in the run's config.

    graph = research_graph(rt)
    run = {"configurable": {"thread_id": "t1"}}
    state = await graph.ainvoke({"model": "gpt4", "query": "..."}, run)
    while interrupts := state.get("__interrupt__"):
        state = await graph.ainvoke(Command(resume=ask_my_ui(interrupts[0].value)), run)
    print(state["report"])
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Checkpointer, Command, interrupt

from ask_another.adapters._jobs import open_questions, settle
from ask_another.aio import Runtime
from ask_another.errors import InvalidArgument
from ask_another.interaction.tools import Tool
from ask_another.interaction.types import ALLOW, Decision, Deny, PermissionRequest

__all__ = ["ResearchState", "decision_of", "research_graph", "research_nodes"]


class ResearchState(TypedDict, total=False):
    model: str
    query: str
    job_id: str
    status: str
    report: str | None
    error: str | None
    answered: list[str]  # the tool_call_ids the person has answered


def decision_of(answer: object) -> Decision:
    """The person's answer as given to `Command(resume=...)`: "allow", "deny", or a mapping
    `{"decision": "allow" | "deny", "message": ...}`; anything else is refused."""
    message = None
    if isinstance(answer, dict):
        message = answer.get("message")
        answer = answer.get("decision")
    if answer == "allow":
        return ALLOW
    if answer == "deny":
        return Deny("rejected", str(message) if message else None)
    raise InvalidArgument(f"resume a permission request with 'allow' or 'deny' (or "
                          f"{{'decision': ..., 'message': ...}}), not {answer!r}")


def research_nodes(rt: Runtime, *, job_tools: Iterable[Tool] = (), method: str = "agent",
                   wait: float = 600.0) -> tuple[Any, Any]:
    """The two nodes: `start_job` (starts the job of `model` and `query`) and
    `follow_job`, which waits for the job and, while it asks permission, interrupts with
    the request and answers it with the resume value, then comes back to itself (one
    interrupt per pass, so a pass run again on resume meets the same question). Both are async
    functions of a `ResearchState` (typed loosely: LangGraph's node overloads do not take them
    otherwise)."""
    tools = list(job_tools)

    async def start_job(state: ResearchState) -> ResearchState:
        record = await rt.jobs.start(state["model"], state["query"], method, tools=tools)
        return {"job_id": record.id, "status": record.status, "answered": []}

    async def follow_job(state: ResearchState) -> Command[str]:
        answered = frozenset(state.get("answered", []))
        record = await settle(rt, state["job_id"], wait, answered)
        if record.finished:
            return Command(goto=END, update={"status": record.status, "report": record.report,
                                             "error": record.error})
        for question in open_questions(record, answered):
            request = question.request
            if not isinstance(request, PermissionRequest):
                continue
            answer = interrupt({"job_id": record.id, "tool_call_id": question.tool_call_id,
                                "tool": request.tool, "class": request.class_,
                                "arguments": json.loads(json.dumps(dict(request.arguments)))})
            await rt.jobs.answer_permission(record.id, question.tool_call_id,
                                            decision_of(answer))
            return Command(goto="follow_job", update={
                "status": record.status,
                "answered": [*state.get("answered", []), question.tool_call_id]})
        # Still running (or waiting on a question these nodes do not put): look again.
        return Command(goto="follow_job", update={"status": record.status})

    return start_job, follow_job


def research_graph(rt: Runtime, *, job_tools: Iterable[Tool] = (), method: str = "agent",
                   wait: float = 600.0, checkpointer: Checkpointer = None) -> Any:
    """START -> start_job -> follow_job (-> itself while the job runs) -> END,
    compiled with `checkpointer` (an `InMemorySaver` when None)."""
    start_job, follow_job = research_nodes(rt, job_tools=job_tools, method=method,
                                                     wait=wait)
    graph = StateGraph(ResearchState)
    graph.add_node("start_job", start_job)
    graph.add_node("follow_job", follow_job,
                   destinations=("follow_job", END))
    graph.add_edge(START, "start_job")
    graph.add_edge("start_job", "follow_job")
    return graph.compile(checkpointer=checkpointer if checkpointer is not None
                         else InMemorySaver())
