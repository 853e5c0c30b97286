"""What the asyncio-face and adapter tests share: an asyncio host's Interaction and tool that
write down where they ran, the example programs of docs/examples/, and the framework's scripted
model."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import threading
from pathlib import Path
from types import ModuleType

import sniffio

import ask_another
from ask_another import ALLOW, Tool, ToolCall
from ask_another.simulator import Reply, SimRequest, Step, ToolCalls
from ask_another.simulator import ToolCall as SimCall

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"


def on_the_host(where: list[tuple[str, bool]], what: str) -> None:
    """Write down that `what` runs as asyncio code in the host's own thread."""
    where.append((what, sniffio.current_async_library() == "asyncio"
                  and asyncio.current_task() is not None
                  and threading.current_thread() is threading.main_thread()))


class AsyncioUI:
    """An agent host's Interaction whose callbacks await asyncio things."""

    def __init__(self, where: list[tuple[str, bool]]) -> None:
        self.where = where
        self.events: list[tuple[str, str]] = []
        self.deltas: list[str] = []

    async def tool_updated(self, update: ask_another.ToolUpdate) -> None:
        await asyncio.sleep(0)
        self.events.append(("update", update.status))

    async def request_permission(self, request: ask_another.PermissionRequest
                                 ) -> ask_another.Decision:
        await asyncio.sleep(0.01)  # a person thinking, on the host's loop
        on_the_host(self.where, "request_permission")
        self.events.append(("permission", request.tool))
        return ALLOW

    async def register_call(self, tool_call_id: str, handle: ask_another.CallHandle) -> None:
        self.events.append(("register", tool_call_id))

    async def ask_choice(self, choice: ask_another.Choice) -> str | ask_another.ChoiceFailed:
        return choice.options[0].id

    async def text_delta(self, text: str) -> None:
        self.deltas.append(text)


def note_tool(notes: list[str], where: list[tuple[str, bool]]) -> Tool:
    async def run(call: ToolCall) -> object:
        await asyncio.sleep(0)
        on_the_host(where, "tool")
        notes.append(str(call.arguments["text"]))
        return {"written": call.arguments["text"]}

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return Tool(name="write_note", description="Write a note", schema=schema, class_="effect",
                run=run)


def example(name: str) -> ModuleType:
    """docs/examples/<name>.py, imported afresh."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def host_model(request: SimRequest) -> Step:
    """The framework's model in the adapter tests: a second opinion, a research job, the
    approval the job asks for, then an answer quoting the last tool result."""
    results = [m["content"] for m in request.messages if m["role"] == "tool"]
    if len(results) == 0:
        return ToolCalls([SimCall("second_opinion", {"model": "sim", "prompt": "Is 1 prime?"})])
    if len(results) == 1:
        return ToolCalls([SimCall("research", {"model": "sim", "query": "1 and primes"})])
    if len(results) == 2:
        asked = re.search(r"job_id='(r-\w+)', tool_call_id='(\w+)'", results[1])
        assert asked, results[1]
        return ToolCalls([SimCall("allow_job_tool", {"job_id": asked[1],
                                                     "tool_call_id": asked[2]})])
    return Reply(f"Done. {results[-1]}")
