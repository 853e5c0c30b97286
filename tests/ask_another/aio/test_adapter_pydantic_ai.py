"""The pydantic-ai adapter through the real framework, the simulator as the agent's model and as
ask-another's: docs/examples/pydantic_ai_adapter.py, its deferred approval answered both ways."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aio_helpers import example, host_model
from asyncio_runs import RunAsyncio
from openai import AsyncOpenAI
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import ask_another
from ask_another import ALLOW, Config, Deny
from ask_another.simulator import Reply, Simulator, ToolCalls
from ask_another.simulator import ToolCall as SimCall


@pytest.mark.parametrize("allowed", [True, False])
def test_a_jobs_permission_request_is_a_deferred_tool_approval(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator, allowed: bool
):
    sim.script("host-model", host_model)
    sim.script("m1", [Reply("No: 1 is not prime."),
                      ToolCalls([SimCall("save_note", {"text": "1 is not prime"}, id="p1")]),
                      Reply("The report.")])
    module = example("pydantic_ai_adapter")
    module.NOTES.clear()
    asked: list[ask_another.PermissionRequest] = []

    async def decide(request: ask_another.PermissionRequest) -> ask_another.Decision:
        asked.append(request)
        return ALLOW if allowed else Deny("rejected", "not that one")

    async def program() -> str:
        async with AsyncOpenAI(base_url=sim.openai_base, api_key="sk-sim",
                               max_retries=0) as client:
            model = OpenAIChatModel("host-model", provider=OpenAIProvider(openai_client=client))
            answer: str = await module.main(make_config(), model, decide)
            return answer

    answer = run(program)
    assert [(r.tool, r.arguments) for r in asked] == [("save_note", {"text": "1 is not prime"})]
    second_opinion = sim.requests_for("host-model")[1].messages[-1]["content"]
    assert second_opinion == "No: 1 is not prime."
    if allowed:
        assert module.NOTES == ["1 is not prime"]
        assert "allowed" in answer and "completed. Report:\nThe report." in answer
    else:
        assert module.NOTES == []
        assert "denied the job's tool call p1: not that one" in answer
        assert "not that one" in sim.requests_for("m1")[-1].messages[-1]["content"]
