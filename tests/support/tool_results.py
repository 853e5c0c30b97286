"""Reading a tool call's result the way a person would: its text, and whether it is an error;
and a research job's id in a start_research answer, and its check_research polled to a text."""

from __future__ import annotations

from typing import Any

import trio
from mcp import Client


def text_of(result: Any) -> str:
    """The text content of a `CallToolResult`, its parts joined by newlines."""
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    """Call `tool`; returns (is_error, text)."""
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), text_of(result)


def job_id_in(text: str) -> str:
    """The research job id (``r-`` and ten characters) a tool's answer names."""
    for word in text.replace("'", " ").replace('"', " ").replace("(", " ").split():
        if word.startswith("r-") and len(word) == 12:
            return word
    raise AssertionError(f"no job id in {text!r}")


async def check_until(client: Client, job_id: str, wanted: str, seconds: float = 60, *,
                      no_errors: bool = False) -> str:
    """Poll check_research until its text has `wanted`; that text. Fails with the last text
    after `seconds` (real server processes: generous), and with `no_errors` at once on an
    answer marked as an error."""
    text = ""
    with trio.move_on_after(seconds):
        while True:
            error, text = await call(client, "check_research", job_id=job_id)
            assert not (no_errors and error), text
            if wanted in text:
                return text
            await trio.sleep(0.05)
    raise AssertionError(f"{job_id} never showed {wanted!r} in {seconds:g} s; last: {text}")
