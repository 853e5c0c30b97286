"""Model discovery tools: `list_models`, `search_families`, `search_models`."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from ask_another.catalog import allowlist_text
from ask_another.server.context import runtime_of, tool_errors
from ask_another.server.lifespan import ServerState

LIST_MODELS = """List the models you may call, with their shorthands and what is known about each \
(context window, price per million tokens, support for tools, vision, reasoning and web search). \
Shorthands (e.g. 'openai') can be passed to completion as the model."""

SEARCH_FAMILIES = """List model families (providers such as 'openai' or 'gemini') among the \
allowed models, optionally filtered by a search string. Use a family with search_models to find \
exact model IDs."""

SEARCH_MODELS = """Find exact model identifiers. Always call this to verify a model ID before \
passing it to completion — do not guess IDs. Filters the allowed models by a search string \
(every word must match) and/or a family (provider)."""

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def register(server: MCPServer[ServerState]) -> None:
    @server.tool(name="list_models", description=LIST_MODELS, annotations=_READ_ONLY,
                 structured_output=False)
    async def list_models(ctx: Context[ServerState]) -> str:
        with tool_errors("list_models"):
            runtime = runtime_of(ctx)
            return allowlist_text(await runtime.catalog(), runtime.config)

    @server.tool(name="search_families", description=SEARCH_FAMILIES, annotations=_READ_ONLY,
                 structured_output=False)
    async def search_families(
        ctx: Context[ServerState],
        search: Annotated[str | None, Field(description="Text to look for in the family "
                                            "name or its model IDs; omit to list all.")] = None,
    ) -> str:
        with tool_errors("search_families"):
            catalog = await runtime_of(ctx).catalog()
            families = catalog.families(search)
            if not families:
                return (f"No family matches {search!r}. Call search_families with no search "
                        "to see them all.")
            return "Families:\n" + "\n".join(
                f"- {f.name}: {len(f.models)} model(s): {', '.join(f.models)}" for f in families
            )

    @server.tool(name="search_models", description=SEARCH_MODELS, annotations=_READ_ONLY,
                 structured_output=False)
    async def search_models(
        ctx: Context[ServerState],
        search: Annotated[str | None, Field(description="Words that must all appear in the "
                                            "model ID or shorthand; omit to list all.")] = None,
        family: Annotated[str | None, Field(description="A family (provider) from "
                                            "search_families, e.g. 'openai'.")] = None,
    ) -> str:
        with tool_errors("search_models"):
            catalog = await runtime_of(ctx).catalog()
            found = catalog.models(search, family)
            if not found:
                where = f" in family {family!r}" if family else ""
                return (f"No allowed model matches {search or ''!r}{where}. Call list_models "
                        "to see every allowed model.")
            return "Matching models (use the exact ID or a shorthand):\n" + "\n".join(
                f"- {i.describe()}" for i in found
            )
