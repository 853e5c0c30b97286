"""The `feedback` tool: clients tell us what confused them; stored with a timestamp."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from ask_another.server.context import runtime_of, tool_errors, user_of
from ask_another.server.lifespan import ServerState

FEEDBACK = """Help us improve ask-another by sharing your experience. Call this
whenever you're unsure how to proceed, receive confusing output, or
a tool doesn't behave as expected. We also welcome suggestions — if
a workflow felt more complex than it should be, if you had to guess
at parameter values, or if something could simply work better.

Every piece of feedback helps us make ask-another more useful.
This tool is lightweight and safe to call at any time."""


def register(server: MCPServer[ServerState]) -> None:
    @server.tool(
        name="feedback",
        description=FEEDBACK,
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        structured_output=False,
    )
    async def feedback(
        ctx: Context[ServerState],
        issue: Annotated[str, Field(description="What happened, what confused you, or what "
                                    "could work better.")],
        tool_name: Annotated[str | None, Field(description="The tool this is about, if "
                                               "any.")] = None,
    ) -> str:
        with tool_errors("feedback"):
            record = await runtime_of(ctx).add_feedback(issue, tool_name, user_of(ctx))
            return f"Thank you: feedback #{record.id} recorded at {record.created_at}."
