"""The msgspec types of the two sequential research contracts, and the one input validator.

`sequential_research_plan` turns a `PlanRequest` into a `Plan`; `sequential_research_compile`
turns a `CompileRequest` (a plan plus the raw results of its queries) into a `Report`. Field names,
order and optionality follow docs/sequential.md, which follows the mcp-sequential-research 1.0.0
tool contracts. Requests forbid unknown fields (a misspelt argument is an error that names it);
plans and raw results read by compile tolerate extra fields, because they may come from another
planner or from a model.

Every validation failure is a `SequentialInputError` whose `.field` names the offending input
field as a dotted path (`topic`, `depth`, `raw_results[2].query_id`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

import msgspec

from ask_another.errors import AskAnotherError

Depth = Literal["shallow", "standard", "deep"]
OutputFormat = Literal["markdown", "json", "structured"]
Priority = Literal["critical", "high", "medium", "low"]
FieldType = Literal["string", "array", "object", "number", "boolean"]
SourceType = Literal["web", "document", "api", "database", "manual"]
CitationStyle = Literal["inline", "footnote", "endnote"]


class SequentialInputError(AskAnotherError):
    """Input to a sequential research contract is invalid.

    `field` is the offending input field as a path (`"topic"`, `"plan.queries[1].query_id"`,
    `"raw_results[0].sources[1].id"`); the message names it too, so it can be shown as is.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# ---------------------------------------------------------------------------- plan


class PlanRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of `sequential_research_plan`."""

    topic: str
    depth: Depth = "standard"
    focus_areas: list[str] = msgspec.field(default_factory=list)
    constraints: list[str] = msgspec.field(default_factory=list)
    output_format: OutputFormat = "markdown"


class Query(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One research query; `depends_on` is left out of the JSON when empty."""

    query_id: str
    query_text: str
    query_type: str
    extraction_goals: list[str]
    priority: Priority
    depends_on: list[str] = msgspec.field(default_factory=list)


class FieldSpec(msgspec.Struct, kw_only=True):
    """One field a query's result `data` must hold."""

    field_name: str
    field_type: FieldType
    description: str
    required: bool = True


class ResultSchema(msgspec.Struct, kw_only=True):
    """The shape of one query's result `data`, with an example value."""

    query_id: str
    required_fields: list[FieldSpec]
    example: dict[str, Any] = msgspec.field(default_factory=dict)


class PlanMetadata(msgspec.Struct, kw_only=True):
    """The request options a plan was made with."""

    depth: Depth = "standard"
    focus_areas: list[str] = msgspec.field(default_factory=list)
    constraints: list[str] = msgspec.field(default_factory=list)
    output_format: OutputFormat = "markdown"


class Plan(msgspec.Struct, kw_only=True):
    """The plan object. Only `plan_id`, `topic` and `queries` are required when a plan is read
    back by compile; a plan made by `sequential_research_plan` always has every field."""

    plan_id: str
    topic: str
    created_at: str = ""
    summary: str = ""
    queries: list[Query]
    result_schemas: list[ResultSchema] = msgspec.field(default_factory=list)
    execution_order: list[list[str]] = msgspec.field(default_factory=list)
    estimated_sources: int = 0
    metadata: PlanMetadata = msgspec.field(default_factory=PlanMetadata)


# ---------------------------------------------------------------------------- compile


class Citation(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A source a query consulted, as given in a raw result (`id` like `S1`)."""

    id: str
    source_type: SourceType
    title: str
    url: str | None = None
    accessed_date: str | None = None
    excerpt: str | None = None


class RawResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The outcome of executing one planned query."""

    query_id: str
    success: bool
    data: dict[str, Any] | None = None
    sources: list[Citation] = msgspec.field(default_factory=list)
    error: str | None = None
    execution_notes: str | None = None


class CompileRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of `sequential_research_compile`."""

    plan: Plan
    raw_results: list[RawResult]
    include_sources: bool = True
    include_methodology: bool = False
    citation_style: CitationStyle = "inline"


class Source(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A cited source in the report, renumbered: `id` is `[1]`, `[2]`, ... in every style."""

    id: str
    source_type: SourceType
    title: str
    url: str | None = None
    accessed_date: str | None = None
    excerpt: str | None = None


class Section(msgspec.Struct, kw_only=True):
    """One report section; `citations_used` holds the `Source.id`s cited in `content`."""

    heading: str
    level: int
    content: str
    citations_used: list[str]


class Statistics(msgspec.Struct, kw_only=True):
    """Counts over the compile; `word_count` follows the rule in `count_words`."""

    queries_executed: int
    queries_succeeded: int
    queries_failed: int
    total_sources: int
    word_count: int


class Report(msgspec.Struct, kw_only=True):
    """The report object, plus `warnings`: what was skipped or looked wrong, for a person."""

    report_id: str
    plan_id: str
    title: str
    compiled_at: str
    executive_summary: str
    sections: list[Section]
    markdown_report: str
    sources: list[Source]
    statistics: Statistics
    warnings: list[str]


# ---------------------------------------------------------------------------- validation

T = TypeVar("T")

_AT_PATH = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_MISSING = re.compile(r"missing required field `(?P<name>[^`]+)`")
_UNKNOWN = re.compile(r"unknown field `(?P<name>[^`]+)`")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def field_of(error: msgspec.ValidationError) -> tuple[str, str]:
    """The offending field (`depth`, `raw_results[1].success`) and msgspec's complaint.

    msgspec reports `Object missing required field `topic` - at `$.plan``: the field named in
    the complaint hangs off the path, so both are joined. An error at the root with no field
    (the arguments were not an object) is reported as field `arguments`.
    """
    match = _AT_PATH.match(str(error))
    assert match is not None  # the pattern accepts every string
    what = match["what"]
    path = (match["path"] or "").removeprefix(".")
    named = _MISSING.search(what) or _UNKNOWN.search(what)
    if named is not None:
        path = _join(path, named["name"])
    return (path or "arguments"), what


def decode(arguments: object, type_: type[T]) -> T:
    """Validate plain JSON-like `arguments` into `type_`, or raise `SequentialInputError`."""
    if isinstance(arguments, Mapping) and not isinstance(arguments, dict):
        arguments = dict(arguments)
    try:
        return msgspec.convert(arguments, type_)
    except msgspec.ValidationError as error:
        field, what = field_of(error)
        raise SequentialInputError(field, _message(field, what)) from None


# The allowed values of each enum field, by the field's own name, for messages a person can act on.
_CHOICES: dict[str, tuple[str, ...]] = {
    "depth": ("shallow", "standard", "deep"),
    "output_format": ("markdown", "json", "structured"),
    "citation_style": ("inline", "footnote", "endnote"),
    "priority": ("critical", "high", "medium", "low"),
    "source_type": ("web", "document", "api", "database", "manual"),
    "field_type": ("string", "array", "object", "number", "boolean"),
}


def _message(field: str, what: str) -> str:
    if _MISSING.search(what):
        return f"{field} is required"
    if _UNKNOWN.search(what):
        return f"{field} is not a known field"
    message = f"invalid {field}: {what}"
    choices = _CHOICES.get(field.rsplit(".", 1)[-1])
    if what.startswith("Invalid enum value") and choices:
        message += f" (expected one of: {', '.join(choices)})"
    return message


def revalidate(value: T) -> T:
    """Re-check a Struct built in Python (Struct constructors do not validate types or enums)."""
    return decode(msgspec.to_builtins(value), type(value))


def to_json_obj(value: msgspec.Struct) -> dict[str, Any]:
    """A Struct as the plain JSON-compatible dict the contracts exchange."""
    result = msgspec.to_builtins(value)
    assert isinstance(result, dict)
    return result
