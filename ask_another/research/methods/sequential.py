"""The local deep-research pipeline: research method "sequential", for any allowed model.

A research job with method "sequential" (`SEQUENTIAL`, see research/methods/) runs
`run_pipeline(ctx)`:

1. **Plan.** The job's model is asked for a plan of the plan contract's shape at the job's depth
   (`make_plan`), checked by `plan_from_model` and repaired once; only when it cannot make a
   valid one does `build_plan` (the template planner) plan, with the job's query as the topic
   (whitespace collapsed, cut to `MAX_TOPIC` characters at a word boundary; the full question
   goes into every query's prompt), and the report's methodology says so.
2. **Execute, phase by phase.** The phases are the plan's `execution_order`. Every query of a
   phase runs at once, each a task of the phase's nursery in the job's work task (`run_query`:
   a query has no state to keep or lifecycle of its own, so it is no actor). A query runs
   a router turn (`interaction.router.run_turn`) with the job's model through the gateway and the
   read tools (`research_tools`: read_article, and search_web with a `SEARCH_*` engine), and
   must answer with a JSON object that fills the query's result schema, with its sources. The
   answer is validated against the schema's required fields; an invalid answer gets one repair
   round (the validation errors are sent back and the model answers again). Queries of later
   phases see the findings of the queries they depend on.
3. **Compile** the raw results (sources renumbered to unique `S<n>` ids across queries) with
   `compile_report` (methodology included) into the markdown report (a model-made plan's
   sections headed by their query texts), then ask the model for the executive summary
   (`write_summary`: checked, repaired once, the template's kept otherwise); the job's result is
   that report, with its warnings and statistics appended, its cited sources (URL, title, the
   query they support) as citations, and the job's usage (every provider call) in its detail.

Failures: a query that fails (provider error, an answer that still does not fit after the repair)
becomes a failed raw result, so a warning in the report, not a failed job. A transient provider
error (`research.retry.TRANSIENT`: rate limit, 5xx, dropped connection) is retried by the
query's own attempt loop after `research.retry.backoff` (at most `QUERY_MAX_BACKOFF`), up to
`QUERY_ATTEMPTS` attempts per query; then the query is reported failed. An unexpected exception
(a bug) is logged and costs that attempt, within the same count, as a restart did.
The job fails only when every query failed, or at once when the planner's call finds nothing
listening at the model's URL (`ProviderUnreachable`: every query would fail the same way).

Cancellation: cancelling the job cancels its work task and so the phase's nursery: every query's
turn is cancelled, which aborts the HTTP request in flight (the gateway cancels the call). Nothing
of a cancelled pipeline keeps running.

Steps (`ctx.save_step`, research_steps): ``plan`` (the plan and why the template made it, if it
did), ``query:<id>`` (a query's raw result: its findings and sources, after its searches and
readings), ``summary`` (the executive summary or why there is none) and ``report`` (the job's
result), each stored as it ends. A job resumed after a kill skips every stored step: no
provider call, search or reading is made again for it; a step in flight at the kill runs
again. So a resumed job's report is the report it would have made undisturbed.

Progress: `ctx.report` is called for the plan, each phase, and every state change of a query
(queued, running, a tool call, repairing, attempt n, done, failed), with the phase and every
query's state as details.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import msgspec
import trio

from ask_another.articles import READ_ARTICLE_NAME
from ask_another.config import Config, ModelEntry
from ask_another.errors import AskAnotherError, ProviderUnreachable
from ask_another.gateway import CompletionResult, Gateway
from ask_another.interaction import (
    Choice,
    ChoiceFailed,
    Decision,
    Deny,
    PermissionRequest,
    Policy,
    ToolRegistry,
    ToolUpdate,
)
from ask_another.interaction.builtin import ReadScope, read_article_tool, search_web_tool
from ask_another.interaction.router import Message, TurnResult, run_turn
from ask_another.logs import get_logger
from ask_another.research.citations import read_sources, search_titles
from ask_another.research.methods.method import (
    DEPTHS,
    Cited,
    JobContext,
    Method,
    ResearchFailed,
    ResearchResult,
)
from ask_another.research.retry import TRANSIENT, backoff
from ask_another.sequential.compile import compile_report
from ask_another.sequential.contracts import (
    Citation,
    CompileRequest,
    Depth,
    Plan,
    PlanRequest,
    Query,
    RawResult,
    Report,
    ResultSchema,
    SequentialInputError,
)
from ask_another.sequential.plan import QUERY_COUNTS, build_plan, plan_from_model
from ask_another.spend.budget import BudgetExceeded
from ask_another.websearch import SEARCH_WEB_NAME

__all__ = [
    "DEPTH",
    "MAX_TOPIC",
    "QUERY_ATTEMPTS",
    "SEQUENTIAL",
    "AnswerInvalid",
    "check_answer",
    "make_plan",
    "read_json",
    "research_tools",
    "run_pipeline",
]

log = get_logger("ask_another.sequential")

DEPTH: Final[Depth] = "standard"
"""The plan depth when the job names none."""
MAX_TOPIC: Final = 200
QUERY_ATTEMPTS: Final = 2
"""Attempts of one query before it is reported failed (a transient error is retried once)."""
QUERY_MAX_BACKOFF: Final = 10.0
"""At most this long between two attempts of a query (a whole job's attempts wait up to 60 s)."""
MAX_ROUNDS: Final = 6
"""Model calls in one turn (tool rounds included) before it must answer."""
CONTEXT_CHARS: Final = 4000
"""Characters of earlier findings given to a query that depends on them."""
SOURCE_TYPES: Final = ("web", "document", "api", "database", "manual")
_SHAPES: Final[dict[str, type | tuple[type, ...]]] = {
    "string": str, "array": list, "object": dict, "number": (int, float), "boolean": bool}


# ----- the read tools ---------------------------------------------------------------------------


def research_tools(ctx: JobContext, gateway: Gateway, scope: ReadScope) -> ToolRegistry:
    """The tools a query's turn may use: the built-in read_article (class "read", allowed by the
    default policy) with ``ASK_ANOTHER_ALLOW_HOSTS``, and search_web through `gateway` (the
    query's step's: each search counted in the job's usage and ledger) when a ``SEARCH_*``
    engine is configured; `scope` is the whole job's (every query's reads). Not ask_user:
    nobody is there to answer while a job runs."""
    tools = [read_article_tool(ctx.config.allow_hosts, scope)]
    engine = ctx.config.search
    if engine is not None:
        tools.append(search_web_tool(gateway, engine, scope=scope))
    return ToolRegistry(tools)


# ----- answers: parse, validate, repair -----------------------------------------------------


class AnswerInvalid(AskAnotherError):
    """A query's answer does not fill its result schema; the message lists every problem."""


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def read_json(text: str) -> dict[str, Any]:
    """The one JSON object in a model's answer: inside a code fence or not, with any text
    before or after it; `AnswerInvalid` (one line) when there is none."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    starts = [i for i, c in enumerate(body) if c == "{"][:50]
    if not starts:
        raise AnswerInvalid("the answer holds no JSON object")
    decoder, first_error = json.JSONDecoder(), None
    for start in starts:
        try:
            # raw_decode stops at the object's end, so trailing text (even with braces) is
            # ignored; a brace in prose before the object is skipped by trying the next one.
            value, _end = decoder.raw_decode(body[start:])
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
            continue
        if isinstance(value, dict):
            return value
    assert first_error is not None
    raise AnswerInvalid(f"the answer is not valid JSON ({first_error.msg}, line "
                        f"{first_error.lineno} column {first_error.colno})")


def check_answer(text: str, schema: ResultSchema) -> tuple[dict[str, Any], list[Citation]]:
    """The `data` and `sources` of a model's answer, or `AnswerInvalid` saying what is wrong.

    The answer must hold one JSON object `{"data": {...}, "sources": [...]}` (a code fence or
    text around it is tolerated; an object without "data" is taken as the data itself). `data`
    needs every required field of `schema` with its type (a string must not be blank); each
    source needs a `title`; a missing id becomes `S<n>`, an unknown `source_type` becomes "web".
    """
    value = read_json(text)
    if "data" in value:
        data = value["data"]
    else:  # the fields given at the top level: taken as the data
        data = {k: v for k, v in value.items() if k != "sources"}
    problems: list[str] = []
    if not isinstance(data, dict):
        raise AnswerInvalid('"data" must be an object holding the result fields')
    for spec in schema.required_fields:
        if not spec.required:
            continue
        name, shape = spec.field_name, _SHAPES.get(spec.field_type, object)
        if name not in data:
            problems.append(f"data.{name} is missing ({spec.field_type}: {spec.description})")
        elif not isinstance(data[name], shape) or (
                spec.field_type == "number" and isinstance(data[name], bool)):
            article = "an" if spec.field_type[0] in "aeiou" else "a"
            problems.append(f"data.{name} must be {article} {spec.field_type}, not "
                            f"{_json_type(data[name])}")
        elif spec.field_type == "string" and not data[name].strip():
            problems.append(f"data.{name} is blank")
    sources = _check_sources(value.get("sources", []), problems)
    if problems:
        raise AnswerInvalid("; ".join(dict.fromkeys(problems)))
    return data, sources


def _check_sources(raw: object, problems: list[str]) -> list[Citation]:
    if not isinstance(raw, list):
        problems.append('"sources" must be an array of objects')
        return []
    sources: list[Citation] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            problems.append(f"sources[{i}] must be an object with at least a title")
            continue
        title = item.get("title")
        if not isinstance(title, str) or not title.strip():
            problems.append(f"sources[{i}].title is missing")
            continue
        source_id = str(item.get("id") or f"S{i + 1}").strip()
        if source_id in seen:
            problems.append(f"sources[{i}].id {source_id!r} is used twice")
            continue
        seen.add(source_id)
        kind = item.get("source_type")
        sources.append(Citation(
            id=source_id, title=title.strip(),
            source_type=kind if kind in SOURCE_TYPES else "web",
            url=_text_or_none(item.get("url")), accessed_date=_text_or_none(
                item.get("accessed_date")), excerpt=_text_or_none(item.get("excerpt"))))
    return sources


def _text_or_none(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _json_type(value: object) -> str:
    for name, shape in (("a boolean", bool), ("a string", str), ("an array", list),
                        ("an object", dict), ("a number", (int, float))):
        if isinstance(value, shape):
            return name
    return "null"


SYSTEM = """You are one researcher in a research pipeline. Research the query you are given and \
report what you found. {tools}When you are done, answer with ONLY a JSON object, no other text:
{{"data": {{...the fields below...}}, "sources": [{{"id": "S1", "source_type": "web", \
"title": "...", "url": "https://...", "excerpt": "a relevant quote"}}]}}
"data" must have these fields:
{fields}
Example of "data": {example}
Cite your sources inside the text as [S1], [S2]; list every source you cite in "sources" \
(source_type is one of web, document, api, database, manual). Do not invent sources."""

REPAIR = """Your answer did not fill the result schema: {problems}. Answer again with ONLY the \
JSON object {{"data": {{...}}, "sources": [...]}}, with every required field."""


def query_messages(question: str, query: Query, schema: ResultSchema, tools: ToolRegistry,
                   earlier: Mapping[str, RawResult]) -> list[Message]:
    """The system and user messages of one query's turn."""
    fields = "\n".join(f"- {f.field_name} ({f.field_type}): {f.description}"
                       for f in schema.required_fields)
    tool_line = (f"You may call these tools to find and read sources: "
                 f"{', '.join(tools.names())}. " if len(tools) else "")
    if SEARCH_WEB_NAME in tools:
        tool_line += "Search the web first, then read the most relevant results. "
    system = SYSTEM.format(tools=tool_line, fields=fields,
                           example=json.dumps(schema.example, ensure_ascii=False))
    lines = [f"Research question: {question}", "",
             f"Query {query.query_id} ({query.query_type}): {query.query_text}",
             "Extraction goals:", *[f"- {goal}" for goal in query.extraction_goals]]
    findings = {dep: earlier[dep].data for dep in query.depends_on
                if dep in earlier and earlier[dep].success}
    if findings:
        text = json.dumps(findings, ensure_ascii=False)
        if len(text) > CONTEXT_CHARS:
            text = text[:CONTEXT_CHARS] + " …(cut)"
        lines += ["", f"Findings of earlier queries (for context): {text}"]
    failed = [dep for dep in query.depends_on if dep in earlier and not earlier[dep].success]
    if failed:
        lines += ["", f"Earlier queries {', '.join(failed)} failed; research without them."]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


# ----- the plan: made by the model, checked against the contract ---------------------------

PLAN_SYSTEM = """You are the planner of a research pipeline. Break the research question into \
{low} to {high} focused sub-queries that together answer it; other researchers will each \
answer one query, later queries seeing the findings of the queries they depend on. Write \
query texts as real research questions about the subject (never echo the question's own \
wording as a template). Answer with ONLY a JSON object, no other text:
{{"summary": "one sentence on the approach",
 "queries": [{{"query_id": "q1", "query_text": "...", "query_type": "definition", \
"extraction_goals": ["..."], "priority": "critical", "depends_on": []}}],
 "result_schemas": [{{"query_id": "q1", "required_fields": [{{"field_name": "summary", \
"field_type": "string", "description": "..."}}]}}],
 "execution_order": [["q1"]]}}
query_type is a short word such as definition, current_state, comparison, trade_offs, \
evidence, history, applications, challenges, future_outlook. priority is one of critical, \
high, medium, low. field_type is one of string, array, object, number, boolean. Every query \
needs a result schema with 1 to 5 fields. execution_order lists the phases: each query once, \
after the queries it depends on."""

PLAN_REPAIR = """Your plan does not fit the contract: {problems}. Answer again with ONLY the \
corrected JSON plan object."""


async def make_plan(ctx: JobContext, topic: str, depth: Depth) -> tuple[Plan, str | None]:
    """The job's plan: asked of the job's model, checked against the plan contract, repaired
    once; the template planner's plan when the model cannot make a valid one. The second value
    says why the template was used (None for a model-made plan)."""
    low, high = QUERY_COUNTS[depth]
    messages: list[Message] = [
        {"role": "system", "content": PLAN_SYSTEM.format(low=low, high=high)},
        {"role": "user", "content": f"Research question: {ctx.query}\nDepth: {depth}"}]
    problem = ""
    for attempt in (1, 2):
        try:
            answer = await _complete(ctx, "plan", messages)
        except ProviderUnreachable:
            raise  # every query would fail the same way: the job fails now, naming the URL
        except AskAnotherError as exc:
            problem = f"the model could not be asked for a plan: {exc}"
            break
        try:
            return plan_from_model(read_json(answer.text), topic=topic, depth=depth), None
        except (AnswerInvalid, SequentialInputError) as exc:
            problem = str(exc)
            log.info("sequential.plan_invalid", job_id=ctx.job_id, attempt=attempt,
                     problems=problem)
            messages = [*messages, {"role": "assistant", "content": answer.text},
                        {"role": "user", "content": PLAN_REPAIR.format(problems=problem)}]
    reason = (problem if problem.startswith("the model could not") else
              f"the model's plan did not fit the plan contract, even after one repair: {problem}")
    return build_plan(PlanRequest(topic=topic, depth=depth)), reason


async def _complete(ctx: JobContext, step: str, messages: list[Message]) -> CompletionResult:
    return await ctx.calls(step).completion(ctx.entry, messages=messages,
                                            timeout=ctx.config.timeout)


# ----- the executive summary: written by the model from the compiled findings --------------

SUMMARY_SYSTEM = """You are the editor of a research pipeline. Researchers answered the parts \
of a research question; their findings follow, citing numbered sources as [1], [2]. Write the \
report's executive summary: 2 to 5 sentences that answer the question directly, drawing only \
on the findings, citing the sources they rest on as [n] (only numbers from the source list). \
Answer with ONLY a JSON object, no other text: {"executive_summary": "..."}"""

SUMMARY_REPAIR = """Your summary does not fit: {problems}. Answer again with ONLY the JSON \
object {{"executive_summary": "..."}}."""

MAX_SUMMARY: Final = 3000
_MARKER = re.compile(r"\[(\d+)\]")


def check_summary(text: str, sources: int) -> str:
    """The executive summary in a model's answer, or `AnswerInvalid` saying what is wrong."""
    value = read_json(text)
    summary = value.get("executive_summary")
    if not isinstance(summary, str) or not summary.strip():
        raise AnswerInvalid('"executive_summary" must be a non-empty string')
    summary = " ".join(summary.split())
    problems = []
    if len(summary) > MAX_SUMMARY:
        problems.append(f"the summary is {len(summary)} characters; at most {MAX_SUMMARY}")
    unknown = sorted({int(n) for n in _MARKER.findall(summary) if not 1 <= int(n) <= sources},
                     key=int)
    if unknown:
        problems.append(f"it cites {', '.join(f'[{n}]' for n in unknown)}, which the source "
                        f"list does not have (it has [1] to [{sources}])" if sources else
                        "it cites sources, but the findings have none")
    if problems:
        raise AnswerInvalid("; ".join(problems))
    return summary


async def write_summary(ctx: JobContext, report: Report) -> tuple[str | None, str | None]:
    """The model's executive summary of the compiled `report` (checked, repaired once), or
    None and the reason when it cannot write one (the template's summary then stays)."""
    findings = "\n\n".join(f"## {s.heading}\n\n{s.content}" for s in report.sections
                            if s.heading != "Methodology")
    listing = "\n".join(f"{s.id} {s.title}" + (f" — {s.url}" if s.url else "")
                        for s in report.sources)
    messages: list[Message] = [
        {"role": "system", "content": SUMMARY_SYSTEM},
        {"role": "user", "content": f"Research question: {ctx.query}\n\nFindings:\n\n"
                                    f"{findings}\n\nSources:\n{listing or '(none)'}"}]
    problem = ""
    for _attempt in (1, 2):
        try:
            answer = await _complete(ctx, "summary", messages)
        except AskAnotherError as exc:
            return None, f"the model could not be asked for it: {exc}"
        try:
            return check_summary(answer.text, len(report.sources)), None
        except AnswerInvalid as exc:
            problem = str(exc)
            messages = [*messages, {"role": "assistant", "content": answer.text},
                        {"role": "user", "content": SUMMARY_REPAIR.format(problems=problem)}]
    return None, f"the model's summary did not fit, even after one repair: {problem}"


# ----- one query: a task of its phase ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shared:
    """What every query of one job uses."""

    entry: ModelEntry
    gateway: Gateway
    config: Config
    tools: ToolRegistry
    policy: Policy
    check_budget: Callable[[], Awaitable[None]]
    """The job's budget check (spend/budget.py): raises `BudgetExceeded` once a ceiling is
    reached, which fails the query; the pipeline then stops at its next step."""


class _Watcher:
    """The Interaction of a query's turn: turns tool lifecycle updates into progress.

    Nobody is there to answer, so whatever the policy would ask a person about is denied."""

    def __init__(self, report: Callable[[str], None]) -> None:
        self.report = report

    async def tool_updated(self, update: ToolUpdate) -> None:
        self.report(f"{update.title} {update.status.replace('_', ' ')}")

    async def request_permission(self, request: PermissionRequest) -> Decision:
        return Deny("rejected")

    async def register_call(self, tool_call_id: str, handle: object) -> None:
        return None

    async def ask_choice(self, choice: Choice) -> str | ChoiceFailed:
        return ChoiceFailed("no_answer")

    async def text_delta(self, text: str) -> None:
        return None


async def run_query(query: Query, schema: ResultSchema, messages: list[Message],
                    shared: Shared, update: Callable[[str], None]) -> RawResult:
    """One query (its turn, validation and repair), as a task of its phase's nursery; `update`
    is told each state change. Its own attempt loop retries a transient provider error after a
    backoff and an unexpected exception (a bug: logged, with what it was) alike, up to
    `QUERY_ATTEMPTS`; any other failure is the query's failed result. Never raises but for
    cancellation."""
    last_error: str | None = None
    for attempt in range(1, QUERY_ATTEMPTS + 1):
        if attempt > 1:
            update(f"attempt {attempt}")
            await trio.sleep(backoff(attempt, shared.config.poll_seconds, QUERY_MAX_BACKOFF))
        update("running")
        try:
            return await _execute(query, schema, messages, shared, update, attempt)
        except TRANSIENT as exc:
            last_error = str(exc)
            log.warning("sequential.query_attempt_failed", query_id=query.query_id,
                        attempt=attempt, error=last_error)
        except AskAnotherError as exc:
            return _failed(query.query_id, str(exc))
        except Exception as exc:  # a bug: this attempt is lost, the query goes on
            last_error = _describe(exc)
            log.exception("sequential.query_crashed", query_id=query.query_id,
                          attempt=attempt, error=last_error)
    return _failed(query.query_id, f"gave up after {QUERY_ATTEMPTS} attempts; the last one "
                   f"failed with: {last_error or 'an unknown error'}")


async def _execute(query: Query, schema: ResultSchema, messages: list[Message], shared: Shared,
                   update: Callable[[str], None], attempt: int) -> RawResult:
    watcher = _Watcher(update)
    turn = await _turn(shared, messages, watcher)
    notes = []
    try:
        data, sources = check_answer(turn.text, schema)
    except AnswerInvalid as first:
        update("repairing the answer")
        log.info("sequential.repair", query_id=query.query_id, problems=str(first))
        repair = [*messages, *turn.messages,
                  {"role": "user", "content": REPAIR.format(problems=first)}]
        second = await _turn(shared, repair, watcher)
        turn.calls.extend(second.calls)
        try:
            data, sources = check_answer(second.text, schema)
        except AnswerInvalid as again:
            return _failed(query.query_id, "the answer did not fill the result schema, "
                           f"even after one repair: {again}")
        notes.append("answer repaired once")
    sources = _with_read_sources(sources, turn)
    titles = search_titles(turn.calls)
    sources = [msgspec.structs.replace(s, title=titles[s.url]) if s.url in titles and (
        s.title == s.url) else s for s in sources]
    reads = sum(1 for c in turn.calls if c.tool == READ_ARTICLE_NAME
                and c.status == "completed")
    if reads:
        notes.append(f"{reads} article(s) read")
    if attempt > 1:
        notes.append(f"attempt {attempt}")
    return RawResult(query_id=query.query_id, success=True, data=data, sources=sources,
                     execution_notes="; ".join(notes) or None)


async def _turn(shared: Shared, messages: list[Message], watcher: _Watcher) -> TurnResult:
    async def model_call(history: list[Message], definitions: list[dict[str, object]],
                         _on_delta: Callable[[str], Awaitable[None]] | None) -> Any:
        await shared.check_budget()  # a ceiling reached: this query stops before the call
        result = await shared.gateway.completion(
            shared.entry, messages=history, tools=definitions or None,
            timeout=shared.config.timeout)
        return result

    return await run_turn(model_call, messages, shared.tools, policy=shared.policy,
                          interaction=watcher, max_rounds=MAX_ROUNDS)


def _failed(query_id: str, error: str) -> RawResult:
    return RawResult(query_id=query_id, success=False, error=error)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, AskAnotherError):
        return str(exc)
    return f"internal error ({type(exc).__name__}: {str(exc)[:200]})"


def _with_read_sources(sources: list[Citation], turn: TurnResult) -> list[Citation]:
    """`sources` plus every article the turn read successfully that the answer did not list."""
    listed = {s.url for s in sources if s.url}
    ids = {s.id for s in sources}
    today = datetime.now(UTC).date().isoformat()
    extra: list[Citation] = []
    for read in read_sources(turn.calls):
        if read.url in listed:
            continue
        source_id = f"read-{len(extra) + 1}"
        while source_id in ids:
            source_id += "x"
        extra.append(Citation(id=source_id, source_type="web", title=read.title or read.url,
                              url=read.url, accessed_date=today))
    return [*sources, *extra]


# ----- source renumbering ----------------------------------------------------------------------

_REFERENCE = re.compile(r"(?P<group>[\[(][^\[\]()]{1,200}[\])])|(?P<bare>\bS\d+\b)")


def renumber(results: Sequence[RawResult]) -> list[RawResult]:
    """The results with every source id made unique across results (`S1`, `S2`, ... in order)
    and the references to them in the data text rewritten to match, in one pass per string."""
    counter = 0
    renamed: list[RawResult] = []
    for result in results:
        mapping: dict[str, str] = {}
        for source in result.sources:
            counter += 1
            mapping[source.id] = f"S{counter}"
        sources = [msgspec.structs.replace(s, id=mapping[s.id]) for s in result.sources]
        data = _rewrite(result.data, mapping) if result.data is not None else None
        renamed.append(msgspec.structs.replace(result, sources=sources, data=data))
    return renamed


def _rewrite(value: Any, mapping: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _REFERENCE.sub(lambda m: _replace(m, mapping), value) if mapping else value
    if isinstance(value, list):
        return [_rewrite(item, mapping) for item in value]
    if isinstance(value, dict):
        return {key: _rewrite(item, mapping) for key, item in value.items()}
    return value


def _replace(match: re.Match[str], mapping: Mapping[str, str]) -> str:
    text = match.group(0)
    if match.group("bare") is not None:
        return mapping.get(text, text)
    inner = text[1:-1]
    parts = re.split(r"([,;]\s*)", inner)
    ids = parts[::2]
    if not all(part.strip() in mapping for part in ids):
        return text  # not a citation group (or one naming another query's sources)
    parts[::2] = [mapping[part.strip()] for part in ids]
    return text[0] + "".join(parts) + text[-1]


# ----- the pipeline -----------------------------------------------------------------------------


def topic_of(question: str) -> str:
    """The plan topic for a research question: whitespace collapsed, at most `MAX_TOPIC`
    characters, cut at a word boundary."""
    topic = " ".join(question.split())
    if len(topic) <= MAX_TOPIC:
        return topic
    cut = topic[:MAX_TOPIC].rsplit(" ", 1)[0] or topic[:MAX_TOPIC]
    return cut.rstrip(" ,;:") + "…"


@dataclass(slots=True)
class _Progress:
    ctx: JobContext
    phases: int
    phase: int = 0
    states: dict[str, str] = field(default_factory=dict)

    def show(self, query_id: str | None = None, state: str | None = None) -> None:
        if query_id is not None and state is not None:
            self.states[query_id] = state
        summary = ", ".join(f"{q} {s}" for q, s in self.states.items())
        self.ctx.report(f"phase {self.phase}/{self.phases}: {summary}", phase=self.phase,
                        phases=self.phases, queries=dict(self.states),
                        usage=self.ctx.usage.as_dict())


async def run_pipeline(ctx: JobContext) -> ResearchResult:
    """Plan, execute phase by phase, compile (see the module docstring)."""
    depth: Depth = ctx.depth if ctx.depth in DEPTHS else DEPTH  # type: ignore[assignment]
    done = ctx.step("report")
    if done is not None:  # compiled before the kill: nothing left to do
        return msgspec.convert(done, ResearchResult)
    stored = ctx.step("plan")
    if stored is not None:
        plan, fallback = msgspec.convert(stored["plan"], Plan), stored["fallback"]
    else:
        ctx.report(f"asking {ctx.entry.model} for a {depth} research plan",
                   usage=ctx.usage.as_dict())
        with ctx.traced("plan"):
            plan, fallback = await make_plan(ctx, topic_of(ctx.query), depth)
        await ctx.save_step("plan", {"plan": msgspec.to_builtins(plan), "fallback": fallback})
    schemas = {s.query_id: s for s in plan.result_schemas}
    queries = {q.query_id: q for q in plan.queries}
    made_by = "the template planner" if fallback else "the model"
    ctx.report(f"planned {len(plan.queries)} queries in {len(plan.execution_order)} phases "
               f"({made_by})", plan_id=plan.plan_id, execution_order=plan.execution_order,
               plan_source="template" if fallback else "model", usage=ctx.usage.as_dict())
    scope = ReadScope(ctx.config.allow_hosts)
    tools = research_tools(ctx, ctx.gateway, scope)  # as the prompts name them

    def shared_for(query_id: str) -> Shared:
        # Each query's calls are its step's (their ledger ids name it).
        gateway = ctx.calls(f"query:{query_id}")
        return Shared(entry=ctx.entry, gateway=gateway, config=ctx.config,
                      tools=research_tools(ctx, gateway, scope), policy=ctx.config.permissions,
                      check_budget=ctx.check_budget)
    results: dict[str, RawResult] = {}
    progress = _Progress(ctx, len(plan.execution_order))

    async def one(query_id: str, messages: list[Message]) -> None:
        def update(state: str) -> None:
            progress.show(query_id, state)

        stored = ctx.step(f"query:{query_id}")
        if stored is not None:
            result = msgspec.convert(stored, RawResult)
        else:
            with ctx.traced(f"query:{query_id}"):
                result = await run_query(queries[query_id], schemas[query_id], messages,
                                         shared_for(query_id), update)
            await ctx.save_step(f"query:{query_id}", msgspec.to_builtins(result))
        results[query_id] = result
        progress.show(query_id, _outcome(result))

    for progress.phase, phase in enumerate(plan.execution_order, 1):
        await _within_budget(ctx, plan, results, fallback)
        for query_id in phase:
            progress.states[query_id] = "queued"
        progress.show()
        # Every query of the phase at once; each sees the findings of the phases before.
        prompts = {query_id: query_messages(ctx.query, queries[query_id], schemas[query_id],
                                            tools, results) for query_id in phase}
        async with trio.open_nursery() as nursery:
            for query_id in phase:
                nursery.start_soon(one, query_id, prompts[query_id])
    await _within_budget(ctx, plan, results, fallback)
    ctx.report("writing the executive summary", usage=ctx.usage.as_dict())
    with ctx.traced("report"):
        result = await _compile(ctx, plan, results, fallback)
    await ctx.save_step("report", _result_value(result))
    return result


def _result_value(result: ResearchResult) -> dict[str, Any]:
    """The job's result as its ``report`` step stores it (`ResearchResult` again by convert)."""
    return {"report": result.report, "detail": result.detail,
            "citations": [{"url": c.url, "title": c.title, "query": c.query}
                          for c in result.citations]}


async def _within_budget(ctx: JobContext, plan: Plan, results: Mapping[str, RawResult],
                         fallback: str | None) -> None:
    """Before each step: a budget ceiling reached ends the job, with the report of what the
    queries found so far as its partial report."""
    try:
        await ctx.check_budget()
    except BudgetExceeded as exc:
        partial = None
        if results:
            ordered = renumber([results[q.query_id] for q in plan.queries
                                if q.query_id in results])
            partial = report_text(compile_report(CompileRequest(
                plan=plan, raw_results=distinct_failures(ordered), include_methodology=True)),
                fallback)
        raise ResearchFailed(f"{exc}. The research stopped after "
                             f"{len(results)} of {len(plan.queries)} queries",
                             report=partial) from None


def _outcome(result: RawResult) -> str:
    if result.success:
        return f"done ({len(result.sources)} sources)"
    return "failed"


def distinct_failures(results: Sequence[RawResult]) -> list[RawResult]:
    """The results with each failure reason spelt out once: a query that failed for the same
    reason as an earlier one says so by naming it, so a report never repeats one reason."""
    first: dict[str, str] = {}
    out: list[RawResult] = []
    for result in results:
        if result.success or not result.error:
            out.append(result)
            continue
        earlier = first.setdefault(result.error, result.query_id)
        if earlier == result.query_id:
            out.append(result)
        else:
            out.append(msgspec.structs.replace(
                result, error=f"the same reason as {earlier}"))
    return out


def failure_summary(results: Sequence[RawResult]) -> str:
    """One clause per distinct failure reason, naming the queries that failed with it."""
    by_reason: dict[str, list[str]] = {}
    for result in results:
        if not result.success:
            by_reason.setdefault(result.error or "an unknown error", []).append(result.query_id)
    return "; ".join(f"{', '.join(ids)}: {reason}" for reason, ids in by_reason.items())


async def _compile(ctx: JobContext, plan: Plan, results: Mapping[str, RawResult],
                   fallback: str | None) -> ResearchResult:
    usage = ctx.usage
    ordered = renumber([results[q.query_id] for q in plan.queries if q.query_id in results])
    report = compile_report(CompileRequest(plan=plan, raw_results=distinct_failures(ordered),
                                           include_methodology=True))
    if not fallback:
        report = _headed_by_queries(report, plan, ordered)
    stored = ctx.step("summary")
    if stored is not None:
        summary, why_not = stored["summary"], stored["why_not"]
    else:
        with ctx.traced("summary"):
            summary, why_not = (await write_summary(ctx, report)
                                if report.statistics.queries_succeeded else (None, None))
        await ctx.save_step("summary", {"summary": summary, "why_not": why_not})
    text = report_text(report, fallback, summary, why_not)
    if report.statistics.queries_succeeded == 0:
        raise ResearchFailed("every query of the research plan failed "
                             f"({failure_summary(ordered)})", report=text)
    query_of = {r.query_id: results_query(plan, r.query_id) for r in ordered}
    supports = {s.url: query_of[r.query_id] for r in ordered if r.success
                for s in r.sources if s.url}
    citations = tuple({s.url: Cited(s.url, s.title, supports.get(s.url))
                       for s in report.sources if s.url}.values())
    return ResearchResult(report=text, citations=citations, detail={
        "method": "sequential", "plan_id": plan.plan_id, "report_id": report.report_id,
        "depth": plan.metadata.depth, "plan_source": "template" if fallback else "model",
        "statistics": msgspec.to_builtins(report.statistics), "warnings": report.warnings,
        "execution_order": plan.execution_order, "usage": usage.as_dict(),
        "sources_found": len({s.url or s.title for r in ordered for s in r.sources}),
        "summary_source": "model" if summary else "template",
    })


def _headed_by_queries(report: Report, plan: Plan, ordered: Sequence[RawResult]) -> Report:
    """A model-made plan's report with each finding's section headed by its query text.

    The compile heads a section by its query's type (the catalogue's headings), which suits the
    template's plan; a model's plan may have two queries of one type (`Overview`, `Overview
    (q2)`), while its query texts say what each section answers."""
    texts = {q.query_id: q.query_text for q in plan.queries}
    succeeded = [r.query_id for r in ordered if r.success]
    findings = [s for s in report.sections if s.heading != "Methodology"]
    markdown = report.markdown_report
    sections = list(report.sections)
    for query_id, section in zip(succeeded, findings, strict=False):
        heading = texts[query_id].rstrip()
        markdown = markdown.replace(f"\n## {section.heading}\n", f"\n## {heading}\n", 1)
        sections[sections.index(section)] = msgspec.structs.replace(section, heading=heading)
    return msgspec.structs.replace(report, markdown_report=markdown, sections=sections)


def results_query(plan: Plan, query_id: str) -> str | None:
    return next((q.query_text for q in plan.queries if q.query_id == query_id), None)


def report_text(report: Report, fallback: str | None = None, summary: str | None = None,
                why_not: str | None = None) -> str:
    """The job's report: the compiled markdown (with the model's executive summary when it
    wrote one; the methodology saying who made the plan and the summary), then its warnings and
    statistics."""
    s = report.statistics
    markdown = report.markdown_report.rstrip()
    if summary:
        markdown = markdown.replace(f"## Executive Summary\n\n{report.executive_summary}",
                                    f"## Executive Summary\n\n{summary}", 1)
    who = ("The research plan was made by the template planner, because " + fallback + "."
           if fallback else "The research plan was made by the model.")
    if summary:
        who += " The executive summary was written by the model from the findings."
    elif why_not:
        who += f" The executive summary is the template's, because {why_not}."
    markdown = markdown.replace("## Methodology\n\n", f"## Methodology\n\n{who} ", 1)
    parts = [markdown]
    if report.warnings:
        parts.append("### Warnings\n\n" + "\n".join(f"- {w}" for w in report.warnings))
    parts.append(f"*Research statistics: {s.queries_executed} queries executed, "
                 f"{s.queries_succeeded} succeeded, {s.queries_failed} failed; "
                 f"{s.total_sources} sources; {s.word_count} words.*")
    return "\n\n".join(parts) + "\n"


# Resumed after a kill from its stored steps (see the module docstring).
SEQUENTIAL: Final = Method(run=run_pipeline)
