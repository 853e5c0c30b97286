"""The `usage` tool: what the provider calls cost, for a period, by day, model and tool."""

from __future__ import annotations

from typing import Annotated, Final

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from ask_another.server.context import runtime_of, tool_errors, user_of
from ask_another.server.lifespan import ServerState
from ask_another.spend.report import PERIODS, usage_report

__all__ = ["USAGE", "register"]

USAGE: Final = """What ask-another's provider calls have cost: totals for a period by day, \
model and tool (completion, consensus, research, search), with tokens, and the budget ceilings \
if set. On a shared service: your own calls only (an admin sees everyone's). A call whose price \
is unknown is counted as unknown, never as $0."""


def register(server: MCPServer[ServerState]) -> None:
    @server.tool(name="usage", title="Usage and cost", description=USAGE, structured_output=False,
                 annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True,
                                             open_world_hint=False))
    async def usage(
        ctx: Context[ServerState],
        period: Annotated[str, Field(description=f"{PERIODS} (default month).")] = "month",
    ) -> str:
        with tool_errors("usage"):
            return await usage_report(runtime_of(ctx).services, period, user_of(ctx))
