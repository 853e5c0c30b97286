"""`sequential_research_plan`: a deterministic research plan for a topic.

The plan is built from a fixed catalogue of query kinds (definition, current state, comparison,
types and categories, history, applications, challenges, future outlook) plus one query per focus
area. Depth picks which kinds are used; the same normalised request always yields the same queries,
schemas and phases. Only `plan_id` (base-36 milliseconds, then a hash of the request) and
`created_at` depend on the clock. docs/sequential.md lists the rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from ask_another.sequential.contracts import (
    FieldSpec,
    FieldType,
    Plan,
    PlanMetadata,
    PlanRequest,
    Priority,
    Query,
    ResultSchema,
    SequentialInputError,
    decode,
    revalidate,
    to_json_obj,
)

MAX_TOPIC_CHARS = 500
MAX_LIST_ITEMS = 12
MAX_ITEM_CHARS = 200

# How many sources a query of each priority is expected to consult; their sum over the plan is
# `estimated_sources` (the contract's 7-query standard example comes to 15).
_SOURCES_PER_PRIORITY: dict[str, int] = {"critical": 3, "high": 2, "medium": 2, "low": 1}


@dataclass(frozen=True)
class _Field:
    name: str
    type: FieldType
    description: str


@dataclass(frozen=True)
class _Kind:
    """One kind of query in the catalogue."""

    query_type: str
    text: str  # formatted with {topic}
    goals: tuple[str, ...]
    priority: Priority
    fields: tuple[_Field, ...]
    # Kinds (by catalogue key) this one builds on; "FOCUS" stands for every focus-area query.
    after: tuple[str, ...]


_CATALOGUE: dict[str, _Kind] = {
    "definition": _Kind(
        "definition",
        "What is {topic}",
        ("Primary definition", "Key characteristics", "Common examples", "Related terminology"),
        "critical",
        (
            _Field("definition", "string", "Core definition"),
            _Field("characteristics", "array", "Key characteristics"),
            _Field("examples", "array", "Illustrative examples"),
        ),
        (),
    ),
    "current_state": _Kind(
        "current_state",
        "Current state of {topic}",
        ("Current status", "Recent developments", "Key players or stakeholders", "Trends"),
        "critical",
        (
            _Field("current_status", "string", "Where things stand today"),
            _Field("recent_developments", "array", "Recent developments"),
            _Field("key_players", "array", "Key players or stakeholders"),
        ),
        ("definition",),
    ),
    "comparison": _Kind(
        "comparison",
        "Compare {topic}",
        ("Key similarities", "Key differences", "Trade-offs", "Use case recommendations"),
        "medium",
        (
            _Field("similarities", "array", "Key similarities between approaches"),
            _Field("differences", "array", "Key differences between approaches"),
            _Field("trade_offs", "array", "Trade-offs"),
            _Field("recommendations", "array", "Use case recommendations"),
        ),
        ("definition",),
    ),
    "types": _Kind(
        "types",
        "Types and categories of {topic}",
        ("Main types or variants", "Classification criteria", "Grouping into categories"),
        "medium",
        (
            _Field("items", "array", "Main types or variants"),
            _Field("categories", "object", "Types grouped by classification criterion"),
        ),
        ("definition",),
    ),
    "history": _Kind(
        "history",
        "History and evolution of {topic}",
        ("Origins", "Key milestones", "Evolution over time"),
        "low",
        (
            _Field("origins", "string", "How it began"),
            _Field("milestones", "array", "Key milestones, in order"),
        ),
        ("definition",),
    ),
    "applications": _Kind(
        "applications",
        "Applications of {topic}",
        ("Main applications", "Industries and sectors", "Adoption examples"),
        "medium",
        (
            _Field("applications", "array", "Main applications"),
            _Field("industries", "array", "Industries and sectors using it"),
        ),
        ("types",),
    ),
    "challenges": _Kind(
        "challenges",
        "Challenges and limitations of {topic}",
        ("Major challenges", "Technical or practical limitations", "Proposed mitigations"),
        "high",
        (
            _Field("challenges", "array", "Major challenges"),
            _Field("limitations", "array", "Technical or practical limitations"),
            _Field("mitigations", "array", "Proposed mitigations"),
        ),
        ("current_state",),
    ),
    "future_outlook": _Kind(
        "future_outlook",
        "Future outlook for {topic}",
        ("Expected developments", "Emerging trends", "Open questions"),
        "low",
        (
            _Field("outlook", "string", "Expected developments"),
            _Field("emerging_trends", "array", "Emerging trends"),
            _Field("open_questions", "array", "Open questions"),
        ),
        ("current_state", "challenges", "FOCUS"),
    ),
}

# The order of queries at each depth; "FOCUS" is where the focus-area queries go.
_LAYOUT: dict[str, tuple[str, ...]] = {
    "shallow": ("definition", "current_state", "types", "FOCUS"),
    "standard": ("definition", "current_state", "comparison", "FOCUS", "types", "future_outlook"),
    "deep": (
        "definition",
        "current_state",
        "comparison",
        "FOCUS",
        "types",
        "history",
        "applications",
        "challenges",
        "future_outlook",
    ),
}

_FOCUS_FIELDS = (
    _Field("current_status", "string", "Current state of {focus}"),
    _Field("key_developments", "array", "Key developments in {focus}"),
    _Field("challenges_and_opportunities", "array", "Challenges and opportunities"),
)

_EXAMPLE_VALUES: dict[str, Any] = {
    "string": "Example value",
    "array": ["example1", "example2"],
    "object": {"category1": ["example1", "example2"]},
    "number": 0,
    "boolean": True,
}


def focus_query_text(topic: str, focus_area: str) -> str:
    """The query text of a focus-area query; compile uses it to title that query's section."""
    return f"{topic}: {focus_area}"


def execution_phases(queries: Sequence[Query]) -> list[list[str]]:
    """Group query ids into phases: each query lands in the first phase after all it depends on.

    Within a phase, ids keep the order of `queries`. Raises `SequentialInputError` (field
    `queries`) for a dependency on an unknown id or a dependency cycle.
    """
    ids = [query.query_id for query in queries]
    known = set(ids)
    for index, query in enumerate(queries):
        for dependency in query.depends_on:
            if dependency not in known:
                raise SequentialInputError(
                    f"queries[{index}].depends_on",
                    f"query {query.query_id} depends on {dependency}, which is not in the plan",
                )
    phase_of: dict[str, int] = {}
    remaining = list(queries)
    while remaining:
        ready = [q for q in remaining if all(d in phase_of for d in q.depends_on)]
        if not ready:
            stuck = ", ".join(q.query_id for q in remaining)
            raise SequentialInputError("queries", f"dependency cycle among queries: {stuck}")
        for query in ready:
            phase_of[query.query_id] = 1 + max((phase_of[d] for d in query.depends_on), default=-1)
        remaining = [q for q in remaining if q.query_id not in phase_of]
    phases: list[list[str]] = [[] for _ in range(1 + max(phase_of.values(), default=-1))]
    for query_id in ids:
        phases[phase_of[query_id]].append(query_id)
    return phases


def _clean_text(value: str) -> str:
    # Collapse runs of whitespace (newlines would break headings and query lines).
    return " ".join(value.split())


def _clean_list(values: list[str], field: str) -> list[str]:
    if len(values) > MAX_LIST_ITEMS:
        raise SequentialInputError(
            field, f"{field} has {len(values)} entries; at most {MAX_LIST_ITEMS} are allowed"
        )
    cleaned: list[str] = []
    seen: set[str] = set()
    for index, raw in enumerate(values):
        value = _clean_text(raw)
        if not value:
            raise SequentialInputError(f"{field}[{index}]", f"{field}[{index}] is empty")
        if len(value) > MAX_ITEM_CHARS:
            raise SequentialInputError(
                f"{field}[{index}]",
                f"{field}[{index}] is {len(value)} characters; at most {MAX_ITEM_CHARS} allowed",
            )
        if value.casefold() not in seen:  # the same focus area twice would plan a twin query
            seen.add(value.casefold())
            cleaned.append(value)
    return cleaned


def normalise(request: PlanRequest) -> PlanRequest:
    """The request as the plan sees it: whitespace collapsed, duplicates dropped, limits checked."""
    topic = _clean_text(request.topic)
    if not topic:
        raise SequentialInputError("topic", "topic is empty: say what to research")
    if len(topic) > MAX_TOPIC_CHARS:
        raise SequentialInputError(
            "topic", f"topic is {len(topic)} characters; at most {MAX_TOPIC_CHARS} are allowed"
        )
    return PlanRequest(
        topic=topic,
        depth=request.depth,
        focus_areas=_clean_list(request.focus_areas, "focus_areas"),
        constraints=_clean_list(request.constraints, "constraints"),
        output_format=request.output_format,
    )


def _fields(kind_fields: Sequence[_Field], focus: str = "") -> list[FieldSpec]:
    return [
        FieldSpec(
            field_name=f.name,
            field_type=f.type,
            description=f.description.format(focus=focus),
            required=True,
        )
        for f in kind_fields
    ]


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if number == 0:
            return out


def timestamp(now: datetime | None) -> tuple[str, int]:
    """ISO-8601 UTC with milliseconds and `Z`, and the same instant in epoch milliseconds.

    A naive `now` is taken to be UTC.
    """
    moment = datetime.now(UTC) if now is None else now
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    millis = moment.microsecond // 1000
    iso = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis:03d}Z"
    return iso, int(moment.timestamp()) * 1000 + millis


def make_id(prefix: str, epoch_ms: int, fingerprint: bytes) -> str:
    """`prefix-<base-36 milliseconds>-<6 base-36 characters of a hash of fingerprint>`."""
    digest = int.from_bytes(hashlib.sha256(fingerprint).digest()[:8], "big")
    return f"{prefix}-{_base36(epoch_ms)}-{_base36(digest)[-6:].rjust(6, '0')}"


def build_plan(request: PlanRequest, *, now: datetime | None = None) -> Plan:
    """Typed `sequential_research_plan`: validate `request` and return its `Plan`."""
    request = normalise(revalidate(request))
    topic = request.topic
    constraint_goals = (
        [f"Respect constraints: {'; '.join(request.constraints)}"] if request.constraints else []
    )

    queries: list[Query] = []
    schemas: list[ResultSchema] = []
    id_of: dict[str, str] = {}  # catalogue key -> query id
    focus_ids: list[str] = []

    def add(
        text: str,
        kind: str,
        goals: list[str],
        priority: Priority,
        fields: list[FieldSpec],
        after: Sequence[str],
    ) -> str:
        query_id = f"q{len(queries) + 1}"
        depends: list[str] = []
        for key in after:
            for dependency in focus_ids if key == "FOCUS" else [id_of.get(key, "")]:
                if dependency and dependency not in depends:
                    depends.append(dependency)
        queries.append(
            Query(
                query_id=query_id,
                query_text=text,
                query_type=kind,
                extraction_goals=goals + constraint_goals,
                priority=priority,
                depends_on=depends,
            )
        )
        schemas.append(
            ResultSchema(
                query_id=query_id,
                required_fields=fields,
                example={f.field_name: _EXAMPLE_VALUES[f.field_type] for f in fields},
            )
        )
        return query_id

    for key in _LAYOUT[request.depth]:
        if key == "FOCUS":
            focus_ids.extend(
                add(
                    focus_query_text(topic, focus),
                    "current_state",
                    [
                        f"Current state of {focus}",
                        f"Key developments in {focus}",
                        "Challenges and opportunities",
                    ],
                    "high",
                    _fields(_FOCUS_FIELDS, focus),
                    ("definition",),
                )
                for focus in request.focus_areas
            )
            continue
        kind = _CATALOGUE[key]
        id_of[key] = add(
            kind.text.format(topic=topic),
            kind.query_type,
            list(kind.goals),
            kind.priority,
            _fields(kind.fields),
            kind.after,
        )

    phases = execution_phases(queries)
    created_at, epoch_ms = timestamp(now)
    focus_sentence = (
        f" Focus areas: {', '.join(request.focus_areas)}." if request.focus_areas else ""
    )
    return Plan(
        plan_id=make_id("plan", epoch_ms, msgspec.json.encode(request)),
        topic=topic,
        created_at=created_at,
        summary=(
            f'Research plan for "{topic}" with {len(queries)} queries at {request.depth} depth.'
            f"{focus_sentence} Execution in {len(phases)} phases."
        ),
        queries=queries,
        result_schemas=schemas,
        execution_order=phases,
        estimated_sources=sum(_SOURCES_PER_PRIORITY[q.priority] for q in queries),
        metadata=PlanMetadata(
            depth=request.depth,
            focus_areas=request.focus_areas,
            constraints=request.constraints,
            output_format=request.output_format,
        ),
    )


def sequential_research_plan(
    arguments: Mapping[str, Any], *, now: datetime | None = None
) -> dict[str, Any]:
    """The plan contract on plain data: tool arguments in, the plan object as a JSON-ready dict.

    Raises `SequentialInputError` naming the offending field for invalid arguments.
    """
    return to_json_obj(build_plan(decode(arguments, PlanRequest), now=now))


# ----- plans made by a model ---------------------------------------------------------------------

QUERY_COUNTS: dict[str, tuple[int, int]] = {"shallow": (2, 5), "standard": (3, 8), "deep": (5, 12)}
"""How many queries a model-made plan may have at each depth (inclusive bounds)."""

_PRIORITIES = ("critical", "high", "medium", "low")
_FIELD_TYPES = ("string", "array", "object", "number", "boolean")


def plan_from_model(
    value: object, *, topic: str, depth: str, now: datetime | None = None
) -> Plan:
    """A `Plan` from the JSON object a model wrote, checked against the plan contract.

    The model gives `queries` (each with `query_id`, `query_text`, `query_type`,
    `extraction_goals`, `priority`, `depends_on`), `result_schemas` (one per query, each with at
    least one field) and optionally `summary` and `execution_order` (checked against the
    dependencies when given, computed otherwise). `plan_id`, `created_at`, `estimated_sources`
    and `metadata` are filled in here. Raises `SequentialInputError` (field `plan`) whose message
    lists every problem, once each, so the model can be asked to repair them.
    """
    problems: list[str] = []
    if not isinstance(value, dict):
        raise SequentialInputError("plan", "the plan must be a JSON object")
    raw_queries = value.get("queries")
    if not isinstance(raw_queries, list) or not raw_queries:
        raise SequentialInputError("plan", '"queries" must be a non-empty array of queries')
    low, high = QUERY_COUNTS.get(depth, (1, MAX_LIST_ITEMS))
    if not low <= len(raw_queries) <= high:
        problems.append(f"a {depth} plan needs {low} to {high} queries, not {len(raw_queries)}")
    queries: list[Query] = []
    for i, raw in enumerate(raw_queries):
        query = _model_query(i, raw, problems)
        if query is not None:
            if any(q.query_id == query.query_id for q in queries):
                problems.append(f"queries[{i}].query_id {query.query_id!r} is used twice")
                continue
            queries.append(query)
    schemas = _model_schemas(value.get("result_schemas"), queries, problems)
    phases: list[list[str]] = []
    if not problems:
        try:
            phases = execution_phases(queries)
        except SequentialInputError as exc:
            problems.append(str(exc))
    given = value.get("execution_order")
    if not problems and given is not None and not _order_fits(given, queries, phases):
        problems.append('"execution_order" must list every query once, each in a later phase '
                        "than the queries it depends on (or leave it out)")
    if problems:
        raise SequentialInputError("plan", "; ".join(dict.fromkeys(problems)))
    order = given if given is not None else phases
    created_at, epoch_ms = timestamp(now)
    summary = value.get("summary")
    return Plan(
        plan_id=make_id("plan", epoch_ms, msgspec.json.encode([topic, depth, value])),
        topic=topic,
        created_at=created_at,
        summary=_clean_text(summary) if isinstance(summary, str) and summary.strip() else (
            f'Research plan for "{topic}" with {len(queries)} queries at {depth} depth, made by '
            f"the model. Execution in {len(order)} phases."),
        queries=queries,
        result_schemas=schemas,
        execution_order=order,
        estimated_sources=sum(_SOURCES_PER_PRIORITY[q.priority] for q in queries),
        metadata=PlanMetadata(depth=depth if depth in QUERY_COUNTS else "standard"),  # type: ignore[arg-type]
    )


def _text(value: object) -> str:
    return _clean_text(value) if isinstance(value, str) else ""


def _model_query(i: int, raw: object, problems: list[str]) -> Query | None:
    where = f"queries[{i}]"
    if not isinstance(raw, dict):
        problems.append(f"{where} must be an object")
        return None
    query_id, text, kind = _text(raw.get("query_id")), _text(raw.get("query_text")), _text(
        raw.get("query_type"))
    for name, got in (("query_id", query_id), ("query_text", text), ("query_type", kind)):
        if not got:
            problems.append(f"{where}.{name} must be a non-empty string")
    goals = raw.get("extraction_goals", [])
    if not isinstance(goals, list) or not all(isinstance(g, str) and g.strip() for g in goals):
        problems.append(f"{where}.extraction_goals must be an array of strings")
        goals = []
    priority = raw.get("priority", "medium")
    if priority not in _PRIORITIES:
        problems.append(f"{where}.priority must be one of {', '.join(_PRIORITIES)}")
    depends = raw.get("depends_on", [])
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        problems.append(f"{where}.depends_on must be an array of query ids")
        depends = []
    if not (query_id and text and kind) or priority not in _PRIORITIES:
        return None
    return Query(query_id=query_id, query_text=text[:MAX_TOPIC_CHARS], query_type=kind,
                 extraction_goals=[_clean_text(g) for g in goals][:MAX_LIST_ITEMS],
                 priority=priority, depends_on=list(dict.fromkeys(d.strip() for d in depends)))


def _model_schemas(raw: object, queries: Sequence[Query], problems: list[str]
                   ) -> list[ResultSchema]:
    if not isinstance(raw, list):
        problems.append('"result_schemas" must be an array with one schema per query')
        return []
    by_id: dict[str, ResultSchema] = {}
    for i, item in enumerate(raw):
        where = f"result_schemas[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object")
            continue
        query_id = _text(item.get("query_id"))
        fields_raw = item.get("required_fields")
        if not isinstance(fields_raw, list) or not fields_raw:
            problems.append(f"{where}.required_fields must be a non-empty array")
            continue
        fields: list[FieldSpec] = []
        for j, spec in enumerate(fields_raw):
            name = _text(spec.get("field_name")) if isinstance(spec, dict) else ""
            kind = spec.get("field_type") if isinstance(spec, dict) else None
            if not name or kind not in _FIELD_TYPES:
                problems.append(f"{where}.required_fields[{j}] needs a field_name and a "
                                f"field_type (one of {', '.join(_FIELD_TYPES)})")
                continue
            description = _text(spec.get("description")) or name.replace("_", " ")
            fields.append(FieldSpec(field_name=name, field_type=kind, description=description))
        if fields:
            by_id[query_id] = ResultSchema(
                query_id=query_id, required_fields=fields,
                example={f.field_name: _EXAMPLE_VALUES[f.field_type] for f in fields})
    missing = [q.query_id for q in queries if q.query_id not in by_id]
    if missing:
        problems.append(f"result_schemas lacks a schema for {', '.join(missing)}")
    return [by_id[q.query_id] for q in queries if q.query_id in by_id]


def _order_fits(given: object, queries: Sequence[Query], phases: list[list[str]]) -> bool:
    if not isinstance(given, list) or not all(
            isinstance(p, list) and p and all(isinstance(q, str) for q in p) for p in given):
        return False
    phase_of = {q: n for n, phase in enumerate(given) for q in phase}
    listed = [q for phase in given for q in phase]
    if sorted(listed) != sorted(q.query_id for q in queries):
        return False
    return all(phase_of[d] < phase_of[q.query_id] for q in queries for d in q.depends_on)
