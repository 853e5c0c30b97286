"""The sequential research tools: `sequential_research_plan` and `sequential_research_compile`.

Both are the library contracts of `ask_another.sequential` behind an MCP face: the handler passes
the arguments through unchanged, and the contract's JSON document comes back as the tool's text
(indented JSON) and as its structured content. Nothing here touches the runtime: the contracts
are pure functions.

The parameter types are deliberately permissive (enums as strings, the plan as an object, the raw
results as a list of anything): pydantic validates MCP arguments before the handler runs, and its
messages would hide the library's, which name the offending field as a path
(`raw_results[2].sources[1].id`) and list the allowed values. The published schema still shows
the enums and the required fields. Invalid input is a `ToolError` made by the one error mapping
(`errors.error_text`), so it ends with the feedback pointer.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ask_another.errors import InvalidArgument
from ask_another.sequential import sequential_research_compile, sequential_research_plan
from ask_another.server.context import tool_errors
from ask_another.server.lifespan import ServerState

__all__ = ["COMPILE", "HOWTO", "PLAN", "register"]

HOWTO: Final = (
    "To research a topic step by step yourself: sequential_research_plan → run each phase's "
    "queries (any tools or models) → sequential_research_compile with the raw results.",
)

PLAN = """Plan a sequential research project on a topic. Returns a JSON plan: queries (query_id, \
query_text, query_type, extraction_goals, priority, depends_on), a result schema per query \
(required_fields with an example of the `data` to return), execution_order (phases: run each \
phase's queries, in parallel if you like, before the next phase), estimated_sources and metadata. \
Deterministic: the same input gives the same queries. depth: shallow (fewer queries), standard, \
deep (more). Every focus area gets its own query; constraints are added to every query's \
extraction goals. Execute the queries yourself (web search, read_article, completion with \
another model), then call sequential_research_compile with the plan and the raw results."""

COMPILE = """Compile the raw results of a sequential research plan into a report. Pass the plan \
returned by sequential_research_plan and one raw result per executed query: {query_id, success, \
data (an object filling the query's result schema), sources: [{id: "S1", source_type: \
web|document|api|database|manual, title, url?, accessed_date?, excerpt?}], error (when success \
is false), execution_notes?}. Source ids must be unique across all results; cite them in data \
text as [S1]. Returns a JSON report: title, executive_summary, sections (with citations_used), \
markdown_report, sources renumbered [1], [2], ..., statistics and warnings (failed queries are \
skipped with a warning, not an error). citation_style: inline, footnote or endnote."""

_DEPTHS: Final = ["shallow", "standard", "deep"]
_FORMATS: Final = ["markdown", "json", "structured"]
_STYLES: Final = ["inline", "footnote", "endnote"]


def _document(doc: dict[str, Any]) -> CallToolResult:
    """The contract's document as indented JSON text and as structured content."""
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc)


def _with_data(result: Any) -> Any:
    """A raw result with its `data` as an object: the schema shows it as JSON text (no closed
    schema can say the shape each query's data has), and older clients send the object."""
    if not isinstance(result, dict) or not isinstance(result.get("data"), str):
        return result
    text = result["data"].strip()
    if not text:
        return {**result, "data": None}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"Invalid arguments for sequential_research_compile: the data of "
                              f"query {result.get('query_id')!r} is not JSON text of an object "
                              f"({exc})") from None
    if not isinstance(data, dict):
        raise InvalidArgument(f"Invalid arguments for sequential_research_compile: the data of "
                              f"query {result.get('query_id')!r} must be an object, got "
                              f"{type(data).__name__}")
    return {**result, "data": data}


def register(server: MCPServer[ServerState]) -> None:
    @server.tool(name="sequential_research_plan", description=PLAN,
                 annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True,
                                             open_world_hint=False))
    async def plan_tool(
        topic: Annotated[str, Field(description="The research topic (at most 500 characters).")],
        depth: Annotated[str, Field(description="shallow, standard or deep.",
                                    json_schema_extra={"enum": _DEPTHS})] = "standard",
        focus_areas: Annotated[list[Any], Field(description="Aspects to research, each with "
                                                "its own query (at most 12).",
                                                json_schema_extra={"items": {"type": "string"}},
                                                )] = [],  # noqa: B006 - pydantic copies defaults
        constraints: Annotated[list[Any], Field(description="Constraints every query must "
                                                "respect, e.g. 'post-2020'.",
                                                json_schema_extra={"items": {"type": "string"}},
                                                )] = [],  # noqa: B006
        output_format: Annotated[str, Field(description="markdown, json or structured "
                                            "(recorded in the plan's metadata).",
                                            json_schema_extra={"enum": _FORMATS})] = "markdown",
    ) -> CallToolResult:
        with tool_errors("sequential_research_plan"):
            return _document(sequential_research_plan({
                "topic": topic, "depth": depth, "focus_areas": focus_areas,
                "constraints": constraints, "output_format": output_format,
            }))

    @server.tool(name="sequential_research_compile", description=COMPILE,
                 annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True,
                                             open_world_hint=False))
    async def compile_tool(
        plan: Annotated[dict[str, Any], Field(description="The plan object returned by "
                                              "sequential_research_plan.")],
        raw_results: Annotated[list[Any], Field(description="One raw result per executed "
                                                "query (see the description).",
                                                json_schema_extra={"items": {"type": "object"}},
                                                )],
        include_sources: Annotated[bool, Field(
            strict=True, description="Cite sources and list them "
                                               "(default true).")] = True,
        include_methodology: Annotated[bool, Field(
            strict=True, description="Add a Methodology section "
                                                   "(default false).")] = False,
        citation_style: Annotated[str, Field(description="inline, footnote or endnote.",
                                             json_schema_extra={"enum": _STYLES})] = "inline",
    ) -> CallToolResult:
        with tool_errors("sequential_research_compile"):
            return _document(sequential_research_compile({
                "plan": plan, "raw_results": [_with_data(r) for r in raw_results],
                "include_sources": include_sources,
                "include_methodology": include_methodology, "citation_style": citation_style,
            }))
