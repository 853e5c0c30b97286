"""An OpenAI Agents SDK agent with ask-another's tools: a second opinion, then a research job
whose tool call the person approves through the SDK's tool-approval interruption
(docs/interaction.md, "Agent frameworks"). Needs `ask-another[openai-agents]`.

    uv run python docs/examples/openai_agents_adapter.py   # MODEL_* and OPENAI_API_KEY set

The suite runs `main` against the simulator (tests/ask_another/aio/test_adapter_openai_agents.py).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

from agents import Agent, Model, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

import ask_another
import ask_another.aio
from ask_another import ALLOW, Deny, Tool, ToolCall
from ask_another.adapters.openai_agents import answer_interruptions, function_tools

NOTES: list[str] = []
Decide = Callable[[ask_another.PermissionRequest], Awaitable[ask_another.Decision]]


async def save_note(call: ToolCall) -> object:
    NOTES.append(str(call.arguments["text"]))
    return {"saved": True}


NOTE = Tool(name="save_note", description="Save a note for later", class_="effect",
            schema={"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"]},
            run=save_note)


async def ask_the_person(request: ask_another.PermissionRequest) -> ask_another.Decision:
    """The host's approval UI (here: a line on the terminal, read without blocking the loop)."""
    answer = await asyncio.to_thread(input, f"Let the job run {request.tool} "
                                            f"{dict(request.arguments)}? [y/N] ")
    return ALLOW if answer.strip().lower() == "y" else Deny("rejected", "not that one")


async def main(config: ask_another.Config, model: Model, decide: Decide = ask_the_person
               ) -> str:
    async with ask_another.aio.open_runtime(config) as rt:
        agent = Agent(name="host", model=model, tools=function_tools(rt, job_tools=[NOTE]),
                      instructions="Use ask-another's tools; ask for approval when a job asks.")
        result = await Runner.run(agent, "Is 1 prime? Then research it and keep a note.")
        while result.interruptions:
            state = await answer_interruptions(rt, result, decide)
            result = await Runner.run(agent, state)
        return str(result.final_output)


if __name__ == "__main__":
    set_tracing_disabled(True)
    client = AsyncOpenAI(api_key=os.environ["OPENAI_API_KEY"])
    print(asyncio.run(main(ask_another.Config.from_env(),  # noqa: T201 - the example's output
                           OpenAIChatCompletionsModel("gpt-4.1", client))))
