"""The article tools: `read_article` (for the client) and `discuss` (an article with a model).

`read_article` returns the articles package's result as JSON, unchanged, with the configured
``ASK_ANOTHER_ALLOW_HOSTS``: ``{"success": true, "type": "article_content", "url", "content",
"truncated"}``, or ``{"success": false, "error": ...}`` (a failed fetch is a result to read, not
a tool error). `discuss` reads the article into a conversation as a read_article tool exchange and
asks the model about it; its answer ends with the conversation id, like completion's.
"""

from __future__ import annotations

import json
from typing import Annotated, Final

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from ask_another.articles import READ_ARTICLE_DESCRIPTION, read_article
from ask_another.conversations import DISCUSS_PROMPT
from ask_another.server.context import runtime_of, tool_errors, user_of
from ask_another.server.lifespan import ServerState
from ask_another.server.tools.completion import conversation_text, progress_reporter

__all__ = ["DISCUSS", "HOWTO", "READ_ARTICLE", "register"]

READ_ARTICLE: Final = (
    READ_ARTICLE_DESCRIPTION.replace("Do not use search_web for URLs — use this tool instead.",
                                     "").strip()
    + " Returns JSON: success, type, url, content (article text, at most 40,000 characters) "
    "and truncated; or success false with an error."
)

DISCUSS: Final = """Read a web article and discuss it with a model. The article is fetched now \
and put into the conversation as a read_article tool result (not pasted into your message), then \
the model answers `prompt` about it. The answer ends with a conversation_id: pass it to \
completion (or discuss) with the same model to ask follow-up questions; the article stays in the \
model's context. Give conversation_id to bring the article into an existing conversation."""

HOWTO: Final = (
    "To have a model read a web page with you, use discuss(url, model); follow up with completion "
    "and the conversation_id it returns.",
)


def register(server: MCPServer[ServerState]) -> None:
    @server.tool(name="read_article", description=READ_ARTICLE, structured_output=False,
                 annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    async def read_article_tool(
        ctx: Context[ServerState],
        url: Annotated[str, Field(description="The http or https URL of the page to read.")],
    ) -> str:
        with tool_errors("read_article"):
            result = await read_article(url, allow_hosts=runtime_of(ctx).config.allow_hosts)
            return json.dumps(result, ensure_ascii=False)

    @server.tool(name="discuss", description=DISCUSS, structured_output=False,
                 annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    async def discuss(
        ctx: Context[ServerState],
        url: Annotated[str, Field(description="The http or https URL of the article.")],
        model: Annotated[str, Field(description="A shorthand from list_models (e.g. 'openai') "
                                    "or an exact model ID such as 'openai/gpt-4o'.")],
        conversation_id: Annotated[str | None, Field(
            description="Continue this conversation (from an earlier answer); leave empty to "
                        "start a new one.")] = None,
        prompt: Annotated[str, Field(description="What to ask about the article.")]
        = DISCUSS_PROMPT,
    ) -> str:
        with tool_errors("discuss"):
            outcome = await runtime_of(ctx).conversations_for(user_of(ctx)).discuss(
                url, model, conversation_id, prompt, on_delta=progress_reporter(ctx))
            return conversation_text(outcome)
