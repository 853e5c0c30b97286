"""A LangGraph graph running an ask-another research job, each permission request of the job
put to the person with `interrupt()` and answered with `Command(resume=...)`
(docs/interaction.md, "Agent frameworks"). Needs `ask-another[langgraph]`.

    uv run python docs/examples/langgraph_adapter.py   # MODEL_* set

The suite runs `main` against the simulator (tests/ask_another/aio/test_adapter_langgraph.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.types import Command

import ask_another
import ask_another.aio
from ask_another import Tool, ToolCall
from ask_another.adapters.langgraph import research_graph

NOTES: list[str] = []
Decide = Callable[[dict[str, Any]], Awaitable[object]]


async def save_note(call: ToolCall) -> object:
    NOTES.append(str(call.arguments["text"]))
    return {"saved": True}


NOTE = Tool(name="save_note", description="Save a note for later", class_="effect",
            schema={"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"]},
            run=save_note)


async def ask_the_person(request: dict[str, Any]) -> object:
    """The host's approval UI, given the interrupt's value (here: a line on the terminal)."""
    answer = await asyncio.to_thread(input, f"Let job {request['job_id']} run "
                                            f"{request['tool']} {request['arguments']}? [y/N] ")
    if answer.strip().lower() == "y":
        return "allow"
    return {"decision": "deny", "message": "not that one"}


async def main(config: ask_another.Config, model: str, decide: Decide = ask_the_person
               ) -> dict[str, Any]:
    async with ask_another.aio.open_runtime(config) as rt:
        graph = research_graph(rt, job_tools=[NOTE])
        run = {"configurable": {"thread_id": "research-1"}}
        state = await graph.ainvoke({"model": model, "query": "Is 1 prime? Keep a note."}, run)
        while interrupts := state.get("__interrupt__"):
            state = await graph.ainvoke(Command(resume=await decide(interrupts[0].value)), run)
        return dict(state)


if __name__ == "__main__":
    final = asyncio.run(main(ask_another.Config.from_env(), "gpt4"))
    print(final["status"], final.get("report"))  # noqa: T201 - the example's output
