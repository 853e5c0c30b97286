"""What `tools/list` tells a client beyond each tool's own registration: a human title, numeric
limits as JSON-schema `minimum`/`maximum`, the output schema of tools that return structured
content, and input schemas every client reads.

The limits are the ones the tools and the runtime enforce (the constants are imported, not
copied); the tools keep their own messages for a value out of range, and the schema lets a client
or a model see the range before it calls. Applied by the server's `list_tools` (app.py).

Input schemas are written for the plainest readers (`plain_schema`): an optional argument is its
own type, not pydantic's ``anyOf [T, null]`` (the MCP Inspector CLI converts an argument by the
property's top-level ``type``, so it sent ``anyOf [number, null]`` as a string, refused), and
every object is closed (``additionalProperties: false``, with declared properties), which the
strict-mode converters of agent frameworks need (the OpenAI Agents SDK's
``ensure_strict_json_schema`` refuses an open object and leaves the tool non-strict). Where a
tool accepts more than the schema shows (`ADVERTISED`: consensus's old ``stances`` map, a
sequential plan's every field), the tool still takes it; the schema shows the one form that
every reader can write.
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

__all__ = ["ADVERTISED", "LIMITS", "TITLES", "describe_tool", "output_schemas", "plain_schema"]

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


def _closed(properties: dict[str, Any], required: list[str], description: str | None = None
            ) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": required, "additionalProperties": False}
    return {**schema, "description": description} if description else schema


_STRINGS: Final = {"type": "array", "items": {"type": "string"}}
_QUERY: Final = _closed({"query_id": {"type": "string"}, "query_text": {"type": "string"},
                         "query_type": {"type": "string"}, "extraction_goals": _STRINGS,
                         "priority": {"enum": ["critical", "high", "medium", "low"]},
                         "depends_on": _STRINGS},
                        ["query_id", "query_text", "query_type", "extraction_goals", "priority"])
_SOURCE: Final = _closed({"id": {"type": "string"},
                          "source_type": {"enum": ["web", "document", "api", "database",
                                                   "manual"]},
                          "title": {"type": "string"}, "url": {"type": "string"},
                          "accessed_date": {"type": "string"}, "excerpt": {"type": "string"}},
                         ["id", "source_type", "title"])

# tool -> argument -> the schema shown for it, where the tool accepts more than that
ADVERTISED: Final[Mapping[str, Mapping[str, Mapping[str, Any]]]] = {
    "consensus": {"stances": {
        "type": "array", "description": "Optional stance per model, one entry per model that "
        "takes one: {model, stance} with stance 'for', 'against', 'neutral' or your own words.",
        "items": _closed({"model": {"type": "string"}, "stance": {"type": "string"}},
                         ["model", "stance"])}},
    "sequential_research_compile": {
        # What compile reads of the plan; the whole plan sequential_research_plan returned is
        # accepted too (its other fields are ignored).
        "plan": _closed({"plan_id": {"type": "string"}, "topic": {"type": "string"},
                         "queries": {"type": "array", "items": _QUERY},
                         "execution_order": {"type": "array", "items": _STRINGS}},
                        ["plan_id", "topic", "queries"],
                        "The plan returned by sequential_research_plan (pass it whole; "
                        "compile reads these fields)."),
        # A result's `data` fills the query's own schema, which no closed schema can say: it
        # may come as JSON text (an object is accepted too).
        "raw_results": {
            "type": "array", "description": "One raw result per executed query.",
            "items": _closed({"query_id": {"type": "string"}, "success": {"type": "boolean"},
                              "data": {"type": "string", "description": "The result's data "
                                       "object (filling the query's result schema), as JSON "
                                       "text; an object is accepted too."},
                              "sources": {"type": "array", "items": _SOURCE},
                              "error": {"type": "string"},
                              "execution_notes": {"type": "string"}},
                             ["query_id", "success"])}},
}


def plain_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (an input schema, changed in place and returned) with each optional argument
    as its own type (``anyOf [T, {type: null}]`` with a null default becomes T, without the
    default: leaving it out is the default) and the top object closed."""
    for name, prop in list(schema.get("properties", {}).items()):
        variants = prop.get("anyOf")
        if not isinstance(variants, list) or prop.get("default", ...) is not None:
            continue
        kept = [v for v in variants if v.get("type") != "null"]
        if len(kept) == 1 and len(kept) < len(variants):
            plain = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            schema["properties"][name] = {**kept[0], **plain}
    schema["additionalProperties"] = False
    return schema


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
    schema = plain_schema(copy.deepcopy(tool.input_schema))
    for argument, shown in ADVERTISED.get(tool.name, {}).items():
        if argument in schema.get("properties", {}):
            schema["properties"][argument] = copy.deepcopy(dict(shown))
    for argument, keywords in LIMITS.get(tool.name, {}).items():
        prop = schema.get("properties", {}).get(argument)
        if prop is not None:
            prop.update(keywords)
    updates["input_schema"] = schema
    if tool.output_schema is None and tool.name in output_schemas:
        updates["output_schema"] = output_schemas[tool.name]
    return tool.model_copy(update=updates) if updates else tool

