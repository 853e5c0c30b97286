"""`read_article` as a model-callable tool (class "read") for the interaction tool registry.

The same function and description the MCP tool uses; a router turn that runs it stores the
exchange with `tool_exchange` / replays it with `build_history`, exactly as `discuss` does.
"""

from __future__ import annotations

from collections.abc import Collection

from ask_another.articles import (
    READ_ARTICLE_DESCRIPTION,
    READ_ARTICLE_NAME,
    READ_ARTICLE_PARAMETERS,
    read_article,
)
from ask_another.interaction.tools import Tool, ToolCall

__all__ = ["read_article_tool"]


def read_article_tool(allow_hosts: Collection[str] = ()) -> Tool:
    """The read_article tool for a `ToolRegistry`; its result is read_article's dict."""

    async def run(call: ToolCall) -> object:
        url = call.arguments.get("url", "")
        return await read_article(url if isinstance(url, str) else "",
                                  allow_hosts=frozenset(allow_hosts))

    return Tool(name=READ_ARTICLE_NAME, description=READ_ARTICLE_DESCRIPTION,
                schema=READ_ARTICLE_PARAMETERS, class_="read", run=run, title="Read an article")
