"""The embedding API: router turns and agent research jobs through `open_runtime`, against the
simulated provider scripting tool calls (real HTTP, real litellm, real SQLite; no MCP)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import trio
from interaction_recorder import Recorder

import ask_another
from ask_another import (
    ALLOW,
    ChoiceFailed,
    Config,
    Decision,
    Deny,
    PermissionRequest,
    Runtime,
    Tool,
    ToolCall,
    open_runtime,
)
from ask_another.errors import AskAnotherError, InvalidArgument
from ask_another.interaction.types import Question
from ask_another.simulator import Reply, Simulator, ToolCalls
from ask_another.simulator import ToolCall as SimCall


class Host(Recorder):
    """An agent host's Interaction: writes every callback down and answers from a script; the
    text it is streamed is kept apart (`deltas`)."""

    def __init__(self, decision: Decision = ALLOW, choice: str | ChoiceFailed = "yes") -> None:
        super().__init__(decision, choice)
        self.deltas: list[str] = []

    async def text_delta(self, text: str) -> None:
        self.deltas.append(text)


def effect_tool(side_effects: list[str], name: str = "write_note") -> Tool:
    async def run(call: ToolCall) -> object:
        side_effects.append(str(call.arguments["text"]))
        return {"written": call.arguments["text"]}

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return Tool(name=name, description="Write a note", schema=schema, class_="effect", run=run)


def slow_tool(started: trio.Event) -> Tool:
    async def run(call: ToolCall) -> object:
        started.set()
        await trio.sleep(60)
        return {"slept": True}

    return Tool(name="slow_lookup", description="slow", schema={"type": "object"},
                class_="read", run=run)


@pytest.fixture
async def runtime(make_config: Callable[..., Config]) -> AsyncIterator[Runtime]:
    async with open_runtime(make_config(ASK_ANOTHER_PERMISSION_TIMEOUT="1"),
                            prewarm_after=0) as rt:
        yield rt


def tool_results(sim: Simulator) -> list[dict[str, Any]]:
    last = sim.requests_for("m1")[-1]
    return [json.loads(m["content"]) for m in last.messages if m["role"] == "tool"]


async def test_allowed_effect_tool_runs_in_the_spec_order(runtime: Runtime, sim: Simulator):
    notes: list[str] = []
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "hello"}, id="c1")]),
                      Reply("Noted.")])
    host = Host(ALLOW)
    turn = await runtime.run_turn("sim", "write hello", tools=[effect_tool(notes)],
                                  interaction=host)
    assert host.events == [("update", "pending"), ("permission", "write_note"),
                           ("register", "c1"), ("update", "in_progress"),
                           ("update", "completed")]
    assert notes == ["hello"]
    assert turn.text == "Noted."
    assert tool_results(sim) == [{"written": "hello"}]
    request = host.requests[0]
    assert (request.tool_call_id, request.class_, request.arguments) == (
        "c1", "effect", {"text": "hello"})


async def test_denied_effect_tool_never_runs(runtime: Runtime, sim: Simulator):
    notes: list[str] = []
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "secret"}, id="c1")]),
                      Reply("I was not allowed.")])
    host = Host(Deny("rejected"))
    await runtime.run_turn("sim", "write it", tools=[effect_tool(notes)], interaction=host)
    assert notes == []
    assert host.events == [("update", "pending"), ("permission", "write_note"),
                           ("update", "failed")]
    (told,) = tool_results(sim)
    assert told["success"] is False and "denied (rejected)" in told["error"]


async def test_unknown_tool_and_invalid_arguments_fail_without_asking(
    runtime: Runtime, sim: Simulator
):
    notes: list[str] = []
    sim.script("m1", [ToolCalls([SimCall("format_disk", {}, id="c1"),
                                 SimCall("write_note", {"txt": 1}, id="c2"),
                                 SimCall("write_note", "{broken", id="c3")]),
                      Reply("ok")])
    host = Host(ALLOW)
    await runtime.run_turn("sim", "go", tools=[effect_tool(notes)], interaction=host)
    assert host.events == [("update", "failed"),
                           ("update", "pending"), ("update", "failed"),
                           ("update", "pending"), ("update", "failed")]
    unknown, invalid, broken = (r["error"] for r in tool_results(sim))
    assert "unknown tool 'format_disk'" in unknown and "write_note" in unknown
    assert "'text' is a required property" in invalid
    assert "not valid JSON" in broken
    assert notes == []


async def test_text_deltas_arrive_in_order_and_make_the_answer(runtime: Runtime, sim: Simulator):
    answer = "First, the facts. Then the reasons, one by one. Finally, a conclusion."
    sim.script("m1", [Reply(answer)])
    host = Host()
    turn = await runtime.run_turn("sim", "explain", interaction=host)
    assert len(host.deltas) > 1
    assert "".join(host.deltas) == answer == turn.text
    assert sim.requests_for("m1")[-1].stream is True


async def test_turn_without_interaction_runs_under_the_policy_silently(
    runtime: Runtime, sim: Simulator
):
    notes: list[str] = []
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "x"}, id="c1")]),
                      Reply("done")])
    turn = await runtime.run_turn("sim", "write", tools=[effect_tool(notes)])
    assert notes == []  # effect=ask by default, and nobody can be asked: denied
    assert [c.status for c in turn.calls] == ["failed"]
    assert sim.requests_for("m1")[-1].stream is False  # nobody listens for text: no stream


async def test_policy_allow_lets_an_effect_tool_run_without_an_interaction(
    make_config: Callable[..., Config], sim: Simulator
):
    notes: list[str] = []
    config = make_config(ASK_ANOTHER_PERMISSIONS="write_note=allow")
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "y"})]), Reply("done")])
    async with open_runtime(config, prewarm_after=0) as rt:
        await rt.run_turn("sim", "write", tools=[effect_tool(notes)])
    assert notes == ["y"]


async def test_ask_user_goes_through_ask_choice(runtime: Runtime, sim: Simulator):
    options = [{"id": "yes", "label": "Go ahead"}, {"id": "no", "label": "Stop"}]
    sim.script("m1", [ToolCalls([SimCall("ask_user", {"prompt": "Proceed?", "options": options},
                                         id="q1")]),
                      Reply("You said yes."),
                      ToolCalls([SimCall("ask_user", {"prompt": "Again?", "options": options},
                                         id="q2")]),
                      Reply("Nobody answered.")])
    host = Host(choice="yes")
    await runtime.run_turn("sim", "ask me", interaction=host)
    assert ("choice", "Proceed?") in host.events
    assert tool_results(sim) == [{"success": True, "option_id": "yes", "label": "Go ahead"}]
    await runtime.run_turn("sim", "ask me")  # no interaction: nobody can answer
    (told,) = tool_results(sim)
    assert told["success"] is False and "no_answer" in told["error"]


async def test_ask_user_under_read_ask_asks_the_question_once_not_permission_first(
    make_config: Callable[..., Config], sim: Simulator
):
    options = [{"id": "yes", "label": "Go ahead"}, {"id": "no", "label": "Stop"}]
    sim.script("m1", [ToolCalls([SimCall("ask_user", {"prompt": "Proceed?", "options": options},
                                         id="q1")]), Reply("ok")])
    host = Host(choice="yes")
    async with open_runtime(make_config(ASK_ANOTHER_PERMISSIONS="read=ask"),
                            prewarm_after=0) as rt:
        await rt.run_turn("sim", "ask me", interaction=host)
    assert [e for e in host.events if e[0] in ("permission", "choice")] == [
        ("choice", "Proceed?")]
    assert tool_results(sim) == [{"success": True, "option_id": "yes", "label": "Go ahead"}]


async def test_ask_user_denied_by_the_policy_does_not_ask(
    make_config: Callable[..., Config], sim: Simulator
):
    options = [{"id": "yes", "label": "Go ahead"}]
    sim.script("m1", [ToolCalls([SimCall("ask_user", {"prompt": "Proceed?", "options": options},
                                         id="q1")]), Reply("ok")])
    host = Host(choice="yes")
    async with open_runtime(make_config(ASK_ANOTHER_PERMISSIONS="ask_user=deny"),
                            prewarm_after=0) as rt:
        await rt.run_turn("sim", "ask me", interaction=host)
    assert not [e for e in host.events if e[0] in ("permission", "choice")]


async def test_host_can_cancel_one_running_call(runtime: Runtime, sim: Simulator):
    started = trio.Event()
    sim.script("m1", [ToolCalls([SimCall("slow_lookup", {}, id="s1")]), Reply("gave up")])
    host = Host()

    async def cancel_when_started() -> None:
        await started.wait()
        host.handles["s1"].cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_when_started)
        with trio.fail_after(30):
            turn = await runtime.run_turn("sim", "look", tools=[slow_tool(started)],
                                          interaction=host)
    assert turn.text == "gave up"
    (told,) = tool_results(sim)
    assert told == {"success": False, "error": "cancelled by the user"}


async def test_bad_embedding_requests_are_clear_errors(runtime: Runtime):
    with pytest.raises(InvalidArgument, match="Interaction protocol"):
        await runtime.run_turn("sim", "x", interaction=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="method 'agent' only"):
        await runtime.jobs.start("sim", "q", method="provider", interaction=Host())
    with pytest.raises(InvalidArgument, match="shadow a built-in"):
        await runtime.jobs.start("sim", "q", "agent", tools=[effect_tool([], "read_article")])


async def test_a_host_tool_named_search_web_is_refused_before_the_job_is_stored(
        runtime: Runtime):
    # search_web is a built-in tool too: a host tool of that name passed the start check, was
    # stored, and the job then failed on the registry's name clash.
    before = await runtime.jobs.list()
    with pytest.raises(InvalidArgument, match="shadow a built-in tool: search_web"):
        await runtime.jobs.start("sim", "q", "agent", tools=[effect_tool([], "search_web")])
    assert await runtime.jobs.list() == before  # nothing stored


# ----- agent jobs -----------------------------------------------------------------------------


async def test_agent_job_with_the_host_interaction_and_tools(runtime: Runtime, sim: Simulator):
    notes: list[str] = []
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "from job"}, id="j1")]),
                      Reply("The report.")])
    host = Host(ALLOW)
    record = await runtime.jobs.start("sim", "research and note", "agent",
                                      tools=[effect_tool(notes)], interaction=host)
    final = await runtime.jobs.wait(record.id, 30)
    assert final.status == "completed" and final.report == "The report."
    assert notes == ["from job"]
    assert ("permission", "write_note") in host.events
    assert final.detail["tool_calls"] == [
        {"tool_call_id": "j1", "tool": "write_note", "status": "completed"}]


async def test_agent_job_waits_for_answer_permission_and_refuses_late_answers(
    runtime: Runtime, sim: Simulator
):
    notes: list[str] = []
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "a"}, id="p1")]),
                      Reply("done")])
    record = await runtime.jobs.start("sim", "note it", "agent", tools=[effect_tool(notes)])
    waiting = await _waiting_for(runtime, record.id)
    request = waiting.request
    assert waiting.tool_call_id == "p1" and waiting.kind == "permission"
    assert isinstance(request, PermissionRequest) and request.class_ == "effect"
    assert request.tool == "write_note" and request.arguments == {"text": "a"}
    with pytest.raises(AskAnotherError, match="must be a Decision, Allow"):
        await runtime.jobs.answer_permission(record.id, "p1", "maybe")  # type: ignore[arg-type]
    assert "allowed" in await runtime.jobs.answer_permission(record.id, "p1", ALLOW)
    with pytest.raises(AskAnotherError, match="already allowed by the user"):
        await runtime.jobs.answer_permission(record.id, "p1", Deny())
    final = await runtime.jobs.wait(record.id, 30)
    assert final.status == "completed" and notes == ["a"]
    with pytest.raises(AskAnotherError, match="completed and waits for nothing"):
        await runtime.jobs.answer_permission(record.id, "p1", ALLOW)


async def test_unanswered_permission_expires_as_a_denial(runtime: Runtime, sim: Simulator):
    notes: list[str] = []
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "late"}, id="e1")]),
                      Reply("expired, so nothing written")])
    record = await runtime.jobs.start("sim", "note it", "agent", tools=[effect_tool(notes)])
    final = await runtime.jobs.wait(record.id, 30)  # ASK_ANOTHER_PERMISSION_TIMEOUT=1
    assert final.status == "completed" and notes == []
    (told,) = tool_results(sim)
    assert "denied (expired)" in told["error"]


async def _waiting_for(runtime: Runtime, job_id: str) -> Question:
    with trio.fail_after(20):
        while True:
            record = await runtime.jobs.get(job_id)
            if record.waiting_for:
                return record.waiting_for[0]
            await trio.sleep(0.02)


def test_the_public_face_is_explicit() -> None:
    exported = ask_another.__all__
    assert "open_runtime" in exported and "Interaction" in exported
    for name in exported:
        assert hasattr(ask_another, name)
