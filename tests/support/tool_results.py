"""Reading a tool call's result the way a person would: its text, and whether it is an error."""

from __future__ import annotations

from typing import Any

from mcp import Client


def text_of(result: Any) -> str:
    """The text content of a `CallToolResult`, its parts joined by newlines."""
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    """Call `tool`; returns (is_error, text)."""
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), text_of(result)
