"""A pydantic-ai agent with ask-another's toolset: a second opinion, then a research job whose
tool call the person approves through pydantic-ai's deferred tool approvals
(docs/interaction.md, "Agent frameworks"). Needs `ask-another[pydantic-ai]`.

    uv run python docs/examples/pydantic_ai_adapter.py   # MODEL_* and OPENAI_API_KEY set

The suite runs `main` against the simulator (tests/ask_another/aio/test_adapter_pydantic_ai.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.models import Model

import ask_another
import ask_another.aio
from ask_another import ALLOW, Deny, Tool, ToolCall
from ask_another.adapters.pydantic_ai import answer_approvals, toolset

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


async def main(config: ask_another.Config, model: Model | str,
               decide: Decide = ask_the_person) -> str:
    async with ask_another.aio.open_runtime(config) as rt:
        agent = Agent(model, toolsets=[toolset(rt, job_tools=[NOTE])],
                      output_type=[str, DeferredToolRequests],
                      instructions="Use ask-another's tools; ask for approval when a job asks.")
        result = await agent.run("Is 1 prime? Then research it and keep a note.")
        while isinstance(result.output, DeferredToolRequests):
            answers = await answer_approvals(rt, result.output, decide)
            result = await agent.run(message_history=result.all_messages(),
                                     deferred_tool_results=answers)
        return str(result.output)


if __name__ == "__main__":
    print(asyncio.run(main(ask_another.Config.from_env(),  # noqa: T201 - the example's output
                           "openai:gpt-4.1")))
