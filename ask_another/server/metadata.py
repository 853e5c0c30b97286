"""What `tools/list` tells a client beyond each tool's own registration: a human title, numeric
limits as JSON-schema `minimum`/`maximum`, and the output schema of tools that return structured
content.

The limits are the ones the tools and the runtime enforce (the constants are imported, not
copied); the tools keep their own messages for a value out of range, and the schema lets a client
or a model see the range before it calls. Applied by the server's `list_tools` (app.py).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

import msgspec
from mcp.types import Tool

from ask_another.calls import MAX_TIMEOUT
from ask_another.consensus import MAX_MODELS, MIN_MODELS
from ask_another.sequential.plan import MAX_ITEM_CHARS, MAX_LIST_ITEMS, MAX_TOPIC_CHARS
from ask_another.server.tools.attached import MAX_WAIT

__all__ = ["LIMITS", "TITLES", "describe_tool", "output_schemas"]

TITLES: Final[Mapping[str, str]] = {
    "list_models": "List the allowed models",
    "search_families": "Search model families",
    "search_models": "Search model IDs",
    "completion": "Ask another model",
    "consensus": "Ask several models at once",
    "start_research": "Start a research job",
    "answer_permission": "Answer a research job's permission request",
    "answer_choice": "Answer a research job's question",
    "check_research": "Check research jobs",
    "cancel_research": "Cancel a research job",
    "read_article": "Read a web article",
    "discuss": "Discuss an article with a model",
    "sequential_research_plan": "Plan sequential research",
    "sequential_research_compile": "Compile a sequential research report",
    "feedback": "Send feedback",
    "usage": "Usage and cost",
}

_LIST: Final = {"maxItems": MAX_LIST_ITEMS}

# tool -> argument -> JSON-schema keywords (for a list of strings, `items` limits each string)
LIMITS: Final[Mapping[str, Mapping[str, Mapping[str, Any]]]] = {
    "completion": {"temperature": {"minimum": 0.0, "maximum": 2.0},
                   "timeout": {"exclusiveMinimum": 0, "maximum": MAX_TIMEOUT}},
    "consensus": {"models": {"minItems": MIN_MODELS, "maxItems": MAX_MODELS},
                  "temperature": {"minimum": 0.0, "maximum": 2.0},
                  "timeout": {"exclusiveMinimum": 0, "maximum": MAX_TIMEOUT}},
    "start_research": {"timeout": {"minimum": 0, "maximum": MAX_WAIT}},
    "check_research": {"offset": {"minimum": 0}, "max_chars": {"minimum": 1, "maximum": 100_000}},
    "sequential_research_plan": {
        "topic": {"maxLength": MAX_TOPIC_CHARS},
        "focus_areas": {**_LIST, "items": {"type": "string", "maxLength": MAX_ITEM_CHARS}},
        "constraints": {**_LIST, "items": {"type": "string", "maxLength": MAX_ITEM_CHARS}},
    },
}


def output_schemas() -> dict[str, dict[str, Any]]:
    """The structured results' schemas, by tool (the sequential contracts' documents)."""
    from ask_another.sequential.contracts import Plan, Report

    return {"sequential_research_plan": _inline(msgspec.json.schema(Plan)),
            "sequential_research_compile": _inline(msgspec.json.schema(Report))}


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """msgspec puts the top type behind a `$ref`; MCP wants an object schema at the top."""
    ref = schema.get("$ref", "")
    if not ref.startswith("#/$defs/"):
        return schema
    defs = schema.get("$defs", {})
    return {**defs[ref.removeprefix("#/$defs/")], "$defs": defs}


def describe_tool(tool: Tool, output_schemas: Mapping[str, dict[str, Any]]) -> Tool:
    """`tool` with its title, its arguments' limits and its output schema filled in."""
    updates: dict[str, Any] = {}
    if tool.title is None and tool.name in TITLES:
        updates["title"] = TITLES[tool.name]
    limits = LIMITS.get(tool.name)
    if limits:
        schema = copy.deepcopy(tool.input_schema)
        for argument, keywords in limits.items():
            prop = schema.get("properties", {}).get(argument)
            if prop is None:
                continue
            # Optional arguments are `anyOf: [{type: number}, {type: null}]`: limit the number.
            targets = [p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
            for target in targets:
                target.update(keywords)
        updates["input_schema"] = schema
    if tool.output_schema is None and tool.name in output_schemas:
        updates["output_schema"] = output_schemas[tool.name]
    return tool.model_copy(update=updates) if updates else tool

