"""The lifecycle order of a router turn, against a scripted model function.

These pin the exact callback order; tests/ask_another/server/ runs the same flows through the
real stdio client and the simulated provider.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import trio
from interaction_recorder import Recorder

from ask_another.interaction import (
    Deny,
    Policy,
    Tool,
    ToolCall,
    ToolRegistry,
)
from ask_another.interaction.router import run_turn


@dataclass
class Call:
    id: str
    name: str
    arguments: str | dict[str, object]


@dataclass
class Answer:
    text: str = ""
    tool_calls: list[Call] = field(default_factory=list)
    deltas: list[str] = field(default_factory=list)


class ScriptedModel:
    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.seen: list[list[dict[str, Any]]] = []

    async def __call__(
        self, messages: list[dict[str, Any]], tools: object, on_delta: Any
    ) -> Answer:
        self.seen.append(list(messages))
        answer = self.answers.pop(0)
        for delta in answer.deltas:
            if on_delta is not None:
                await on_delta(delta)
        return answer


def _registry(side_effects: list[str]) -> ToolRegistry:
    async def fetch(call: ToolCall) -> object:
        return {"content": f"text of {call.arguments['url']}"}

    async def delete(call: ToolCall) -> object:
        side_effects.append(str(call.arguments["path"]))
        return {"deleted": call.arguments["path"]}

    def schema(name: str) -> dict[str, object]:
        return {
            "type": "object",
            "properties": {name: {"type": "string"}},
            "required": [name],
        }

    return ToolRegistry(
        [
            Tool(name="read_article", description="read", schema=schema("url"), class_="read",
                 run=fetch),
            Tool(name="delete_file", description="delete", schema=schema("path"),
                 class_="effect", run=delete),
        ]
    )


ASK_ALL = Policy.parse("read=ask,effect=ask")


async def test_allowed_call_follows_the_spec_order_and_feeds_the_result_back() -> None:
    model = ScriptedModel(
        Answer(tool_calls=[Call("c1", "read_article", '{"url": "https://x.test/a"}')]),
        Answer(text="It says hello."),
    )
    interaction = Recorder()
    result = await run_turn(model, [{"role": "user", "content": "read it"}], _registry([]),
                            policy=ASK_ALL, interaction=interaction)
    assert interaction.events == [
        ("update", "pending"),
        ("permission", "read_article"),
        ("register", "c1"),
        ("update", "in_progress"),
        ("update", "completed"),
    ]
    assert result.text == "It says hello."
    tool_message = model.seen[1][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "c1"
    assert json.loads(tool_message["content"]) == {"content": "text of https://x.test/a"}
    assert model.seen[1][-2]["tool_calls"][0]["function"]["name"] == "read_article"


async def test_denied_effect_tool_never_runs_and_the_model_is_told_why() -> None:
    side_effects: list[str] = []
    model = ScriptedModel(
        Answer(tool_calls=[Call("c1", "delete_file", {"path": "/important"})]),
        Answer(text="I could not delete it."),
    )
    interaction = Recorder(decision=Deny("rejected"))
    result = await run_turn(model, [], _registry(side_effects), policy=Policy.parse(None),
                            interaction=interaction)
    assert side_effects == []
    assert interaction.events == [
        ("update", "pending"),
        ("permission", "delete_file"),
        ("update", "failed"),
    ]
    told = json.loads(model.seen[1][-1]["content"])
    assert told["success"] is False and "denied (rejected)" in told["error"]
    assert result.calls[0].status == "failed"


async def test_a_denial_with_a_message_tells_the_model_what_the_person_said() -> None:
    model = ScriptedModel(Answer(tool_calls=[Call("c1", "delete_file", {"path": "p"})]),
                          Answer(text="ok"))
    await run_turn(model, [], _registry([]), policy=ASK_ALL, interaction=Recorder(
        decision=Deny("rejected", message="move it to the trash instead")))
    error = json.loads(model.seen[1][-1]["content"])["error"]
    assert error.endswith("denied (rejected); the call did not run. The user said: move it to "
                          "the trash instead")


async def test_expired_permission_is_a_denial_with_that_reason() -> None:
    model = ScriptedModel(Answer(tool_calls=[Call("c9", "delete_file", {"path": "p"})]),
                          Answer(text="ok"))
    await run_turn(model, [], _registry([]), policy=ASK_ALL,
                   interaction=Recorder(decision=Deny("expired")))
    assert "denied (expired)" in json.loads(model.seen[1][-1]["content"])["error"]


async def test_unknown_tool_fails_without_asking_anyone() -> None:
    model = ScriptedModel(Answer(tool_calls=[Call("c1", "rm_rf", "{}")]), Answer(text="sorry"))
    interaction = Recorder()
    await run_turn(model, [], _registry([]), policy=ASK_ALL, interaction=interaction)
    assert interaction.events == [("update", "failed")]
    error = json.loads(model.seen[1][-1]["content"])["error"]
    assert "unknown tool 'rm_rf'" in error and "read_article, delete_file" in error


async def test_invalid_arguments_fail_before_permission_with_an_actionable_message() -> None:
    model = ScriptedModel(
        Answer(tool_calls=[Call("c1", "read_article", '{"link": 1}'),
                           Call("c2", "read_article", "{not json")]),
        Answer(text="retrying later"),
    )
    interaction = Recorder()
    await run_turn(model, [], _registry([]), policy=ASK_ALL, interaction=interaction)
    assert interaction.events == [("update", "pending"), ("update", "failed")] * 2
    tool_results = [m for m in model.seen[1] if m["role"] == "tool"]
    first, second = (json.loads(m["content"])["error"] for m in tool_results)
    assert "'url' is a required property" in first
    assert "not valid JSON" in second


async def test_turn_without_interaction_runs_under_the_policy_silently() -> None:
    side_effects: list[str] = []
    model = ScriptedModel(
        Answer(tool_calls=[Call("a", "read_article", {"url": "u"}),
                           Call("b", "delete_file", {"path": "p"})]),
        Answer(text="done"),
    )
    result = await run_turn(model, [], _registry(side_effects), policy=Policy.parse(None))
    assert [c.status for c in result.calls] == ["completed", "failed"]
    assert side_effects == []  # effect=ask with nobody to ask is a denial


async def test_cancelling_one_call_fails_it_and_the_turn_goes_on() -> None:
    started = trio.Event()

    async def slow(call: ToolCall) -> object:
        started.set()
        await trio.sleep_forever()

    registry = ToolRegistry([Tool(name="slow", description="", schema={"type": "object"},
                                  class_="read", run=slow)])
    model = ScriptedModel(Answer(tool_calls=[Call("s1", "slow", "{}")]), Answer(text="moved on"))
    interaction = Recorder()

    async def cancel_when_running() -> None:
        await started.wait()
        interaction.handles["s1"].cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_when_running)
        result = await run_turn(model, [], registry, policy=ASK_ALL, interaction=interaction)
    assert result.text == "moved on"
    assert interaction.events[-1] == ("update", "failed")
    assert json.loads(model.seen[1][-1]["content"])["error"] == "cancelled by the user"


async def test_text_deltas_arrive_in_order() -> None:
    model = ScriptedModel(Answer(text="Hello world!", deltas=["Hel", "lo ", "world", "!"]))
    interaction = Recorder()
    result = await run_turn(model, [], _registry([]), policy=ASK_ALL, interaction=interaction)
    assert [e[1] for e in interaction.events if e[0] == "delta"] == ["Hel", "lo ", "world", "!"]
    assert result.text == "Hello world!"


async def test_rounds_are_bounded() -> None:
    answers = [Answer(tool_calls=[Call(f"c{i}", "read_article", {"url": "u"})]) for i in range(3)]
    result = await run_turn(ScriptedModel(*answers), [], _registry([]),
                            policy=Policy.parse(None), max_rounds=3)
    assert result.rounds == 3 and "stopped after 3 rounds" in result.text
