"""The research tools: `start_research`, `check_research`, `cancel_research`.

Each handler validates, asks `ResearchJobs` (which messages the job's actor or reads the store)
and formats the answer; the text builders are plain functions so the benchmark and the demo can
use them too.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import ElicitationResult, Resolve
from mcp.types import ToolAnnotations
from pydantic import Field

from ask_another.catalog import is_gemini_agent
from ask_another.errors import AskAnotherError, InvalidArgument
from ask_another.interaction.types import ALLOW, Deny, SpendRequest
from ask_another.research import CancelOutcome
from ask_another.research.methods import CONSENSUS_METHOD
from ask_another.research.usage import usage_text
from ask_another.server.context import runtime_of, state_of, tool_errors, user_of
from ask_another.server.lifespan import ServerState
from ask_another.server.tools.attached import (
    Attachment,
    approval_link,
    attachment,
    finish,
    last_step,
    waiting_text,
)
from ask_another.store.answers import STANDING_RULE, Answer, answers_of
from ask_another.store.jobs import JobRecord

__all__ = [
    "HOWTO",
    "cancel_text",
    "job_text",
    "jobs_table",
    "register",
    "result_json",
    "unconfirmed_text",
]

DEFAULT_MAX_CHARS: Final = 20_000
QUERY_CUT: Final = 50

HOWTO: Final = (
    "For deep research tasks, use start_research. If it is interrupted or times out, or this "
    "session ends, the job keeps running — use check_research (from this session or a later "
    "one) to retrieve results later, or cancel_research to stop a running job.",
    "A research job may ask permission to run a tool or ask the user a question: you are asked "
    "through elicitation while start_research waits; otherwise check_research shows what it "
    "waits for — answer with answer_permission or answer_choice.",
)

START = """Start a deep research job and wait up to `timeout` seconds for the report. With a \
deep-research model (a gemini/deep-research-* agent, perplexity/sonar-deep-research, \
o3-deep-research) the provider does the research; with any other allowed model (method auto) \
ask-another runs its own pipeline: a research plan whose queries the model answers in phases, \
reading articles, compiled into a cited report. If it finishes in time you get JSON with the \
report, citations, model and elapsed time. If not (the default wait is 90 s when the call asks \
for progress, below the 120 s after which some clients stop waiting for a call, and 3 s when it \
does not, so a client that gives a call 5 s gets the job id), or if this call is interrupted \
or this session ends, the job keeps running: call check_research with the job id to get the \
result later, or cancel_research to stop it. Progress is reported while waiting. Method agent: the \
model works in one tool loop and may read articles (read_article) or ask the user (ask_user). \
Tools that change something need the user's permission: while this call waits, the job's \
permission requests and questions are put to the user through elicitation; otherwise answer \
them with answer_permission / answer_choice (check_research shows them). Research can take \
many minutes."""

CHECK = """Check research jobs. Without job_id: a table of every job, newest first. With a \
job_id: the full report and citations of a finished job, or the status, elapsed time and \
current step of a running one. Long reports are paged: pass offset (and max_chars) to read on."""

CANCEL = """Cancel a running research job: its work stops, it is marked cancelled, and a Gemini \
interaction is also cancelled at the provider. Finished jobs are left as they are. With \
tool_call_id, only that tool call of the job is cancelled (a running call fails with \
"cancelled by the user", one waiting for permission is denied) and the job goes on."""

ANSWER_PERMISSION = """Answer a research job's permission request: allow or deny one tool call \
it waits on (check_research shows the tool, arguments, class, tool_call_id and when the request \
expires; no answer by then means deny). A late or repeated answer is refused and changes \
nothing."""

ANSWER_CHOICE = """Answer a research job's question to the user (the ask_user tool) with the id \
of the chosen option; check_research shows the question, its options and its tool_call_id. A \
late or repeated answer is refused and changes nothing."""


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "—"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def jobs_table(records: list[JobRecord], users: bool = False) -> str:
    """A markdown table of jobs (already newest first); with `users`, a column saying whose
    each job is (an admin's view of a shared service)."""
    if not records:
        return "No research jobs yet. Start one with start_research."
    lines = ["| job_id | model | status | query | started (UTC) | ended (UTC) |"
             + (" user |" if users else ""),
             "| --- | --- | --- | --- | --- | --- |" + (" --- |" if users else "")]
    for r in records:
        query = _cut(r.query, QUERY_CUT).replace("|", "\\|")
        who = f" {(r.user_id or '(local)').replace('|', '')} |" if users else ""
        lines.append(f"| {r.id} | {r.model} | {r.status} | {query} | "
                     f"{_when(r.started_at or r.created_at)} | {_when(r.ended_at)} |{who}")
    return "\n".join(lines)


def result_json(record: JobRecord, offset: int = 0, max_chars: int = DEFAULT_MAX_CHARS,
                estimate: str | None = None,
                answers: list[dict[str, Any]] | None = None) -> str:
    """A completed job as JSON: report (paged), citations (url, title, query), model, elapsed,
    the job's usage (every provider call summed) with a line for people, and the cost estimated
    before it started, when given."""
    report = record.report or ""
    page = report[offset: offset + max_chars]
    body: dict[str, Any] = {
        "job_id": record.id,
        "model": record.model,
        "status": record.status,
        "elapsed_seconds": round(record.elapsed(time.time()), 1),
        "report": page,
        "citations": record.citations,
    }
    usage = record.detail.get("usage")
    if isinstance(usage, dict):
        body["usage"] = usage
        body["usage_text"] = usage_text(usage)
    if estimate is not None:
        body["estimated_cost"] = estimate
    end = offset + len(page)
    if offset > 0 or end < len(report):
        body["report_chars"] = {"from": offset, "to": end, "total": len(report)}
        if end < len(report):
            body["note"] = (f"The report continues: call check_research with job_id="
                            f"'{record.id}' and offset={end} to read the rest.")
    if answers:
        body["answers"] = answers
    return json.dumps(body, indent=2, ensure_ascii=False)


def job_noun(record: JobRecord) -> str:
    """What a job is called where a person reads about it: a consensus started as a task is a
    job like a research one, but not research."""
    return "Consensus job" if record.method == CONSENSUS_METHOD else "Research job"


def job_text(record: JobRecord, offset: int = 0, max_chars: int = DEFAULT_MAX_CHARS,
             console_url: str | None = None) -> str:
    """One job for check_research: the result when completed, else its state (what it waits
    for with its approval links, on a server with a console at `console_url`)."""
    if record.status == "completed":
        return result_json(record, offset, max_chars)
    elapsed = record.elapsed(time.time())
    lines = [f"{job_noun(record)} {record.id} ({record.model}) is "
             f"{record.status.replace('_', ' ')}.",
             f"Query: {_cut(record.query, 300)}",
             f"Elapsed: {elapsed:.0f} s; attempts: {record.attempts}."]
    if record.step:
        lines.append(f"Current step: {record.step}")
    usage = record.detail.get("usage")
    if isinstance(usage, dict):
        lines.append(f"Usage {'in total' if record.finished else 'so far'}: "
                     f"{usage_text(usage)}.")
    if record.waiting_for and not record.finished:
        lines.append(f"Waiting for {waiting_text(record.id, record.waiting_for, console_url)}.")
    calls = record.detail.get("tool_calls")
    if calls:
        lines.append("Tool calls: " + "; ".join(
            f"{c['tool_call_id']} {c.get('title') or c.get('tool')}: "
            f"{c['status'].replace('_', ' ')}"
            + (f" ({c['current_step']})" if c.get("current_step") else "") for c in calls))
    if record.status == "failed":
        lines.append(f"Error: {record.error or 'unknown'}")
        if record.report:
            lines.append(f"Partial report:\n{record.report[offset: offset + max_chars]}")
    elif record.status == "cancelled":
        lines.append("It was cancelled; nothing more will happen.")
    else:
        lines.append(f"It continues in the background: call check_research with job_id="
                     f"'{record.id}' again later, or cancel_research to stop it.")
    return "\n".join(lines)


def background_text(record: JobRecord, waited: float) -> str:
    return (f"{job_noun(record)} {record.id} ({record.model}) is still "
            f"{record.status.replace('_', ' ')}"
            f" after {waited:.0f} s (current step: {record.step or 'starting'}). It keeps "
            "running after this session ends (if its server is killed, it waits for its lease, "
            "then resumes from its last completed step): to get the report later, call "
            f"check_research with job_id='{record.id}' (from this session or any other; "
            "it shows the current step until the report is ready), or cancel_research "
            "to stop it. Research usually takes several minutes: check back in a minute or two "
            "rather than waiting in one long call.")


def unconfirmed_text(record: JobRecord, console_url: str | None = None) -> str | None:
    """For a job still waiting for its spend to be confirmed: its estimate and how to confirm
    (and its approval link, on a server with a console at `console_url`)."""
    spend = next((q for q in record.waiting_for if isinstance(q.request, SpendRequest)), None)
    if spend is None or record.finished:
        return None
    assert isinstance(spend.request, SpendRequest)
    return (f"Research job {record.id} ({record.model}) has not started: its estimated cost, "
            f"{spend.request.estimated_cost}, is above ASK_ANOTHER_CONFIRM_USD="
            f"${spend.request.confirm_above_usd:.2f}, so it waits for the user to confirm it. "
            f"Nothing has been spent. Ask the user; if they agree, call answer_permission("
            f"job_id='{record.id}', tool_call_id='{spend.tool_call_id}', decision='allow') (or "
            f"decision='deny' to drop it) before {spend.expires_text}: no answer by then "
            f"means deny{approval_link(console_url, record.id, spend.tool_call_id)}.")


def cancel_text(outcome: CancelOutcome) -> str:
    record = outcome.record
    if not outcome.cancelled:
        return (f"Research job {record.id} had already finished ({record.status}); nothing was "
                "cancelled. Call check_research to see its result.")
    text = f"Research job {record.id} was cancelled: its work on this server was stopped."
    if outcome.remote:
        text += f" Provider: {outcome.remote}."
    elif is_gemini_agent(record.model):
        text += " No Gemini interaction had been created yet, so none runs at the provider."
    else:
        text += (" The request in flight to the provider was aborted; a completion cannot be "
                 "cancelled at the provider once it has been received.")
    return text


def _check_paging(offset: int, max_chars: int) -> None:
    if offset < 0:
        raise InvalidArgument(f"offset must be 0 or more, got {offset}")
    if not 1 <= max_chars <= 100_000:
        raise InvalidArgument(f"max_chars must be between 1 and 100000, got {max_chars}")


def register(server: MCPServer[ServerState]) -> None:
    @server.tool(name="start_research", description=START, structured_output=False,
                 annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True))
    async def start_research(
        ctx: Context[ServerState],
        attached: Annotated[Attachment, Resolve(attachment)],
        outcome: Annotated[ElicitationResult[Any], Resolve(last_step)],
        model: Annotated[str, Field(description="A shorthand from list_models or an exact "
                                    "model ID (a deep-research model, or any model for the "
                                    "agent and sequential methods).")],
        query: Annotated[str, Field(description="The research question, with any context.")],
        timeout: Annotated[float | None, Field(  # noqa: ASYNC109 - the tool's public argument
            strict=True,  # true is not 1 second
            description="Seconds to wait for the report before leaving the job running in "
                        "the background (at most 3600; default 90, ASK_ANOTHER_START_WAIT, "
                        "when the call asks for progress, else 3). Some clients give up on a "
                        "call after 120 s, some after 5 s: keep it below your client's limit "
                        "and call check_research for the result.")] = None,
        method: Annotated[str, Field(
            description="auto (default: provider for deep-research models, sequential for "
                        "every other model), provider, agent or sequential.",
            json_schema_extra={"enum": ["auto", "provider", "agent", "sequential"]})] = "auto",
        depth: Annotated[str, Field(
            description="How thorough the local pipeline (method sequential) is: shallow (2-5 "
                        "queries), standard (default, 3-8) or deep (5-12).",
            json_schema_extra={"enum": ["shallow", "standard", "deep"]})] = "standard",
    ) -> str:
        # The resolvers started the job, waited on it and elicited its questions (attached.py).
        with tool_errors("start_research"):
            began = attached.began
            final = await finish(ctx, attached, outcome)
            estimate = f"Estimated cost before it started: {attached.estimate}."
            if final.status == "completed":
                return result_json(final, estimate=attached.estimate)
            if final.status == "failed":
                raise AskAnotherError(f"Research job {final.id} failed: {final.error} {estimate}")
            if final.status == "cancelled":
                return f"Research job {final.id} was cancelled before it finished. {estimate}"
            console_url = state_of(ctx).console_root()
            unconfirmed = unconfirmed_text(final, console_url)
            if unconfirmed is not None:
                return unconfirmed
            waiting = final.waiting_for
            # A client without elicitation: the call to make, at once.
            if waiting and not final.finished:
                return (f"Research job {final.id} ({final.model}) waits for "
                        f"{waiting_text(final.id, waiting, console_url)}. Ask the user, then "
                        "make that call; "
                        f"the job goes on in the background meanwhile (check_research with "
                        f"job_id='{final.id}' shows what it waits for and, later, the report). "
                        f"{estimate}")
            return f"{background_text(final, time.monotonic() - began)} {estimate}"

    @server.tool(name="answer_permission", description=ANSWER_PERMISSION, structured_output=False,
                 annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def answer_permission(
        ctx: Context[ServerState],
        job_id: Annotated[str, Field(description="The research job's id.")],
        tool_call_id: Annotated[str, Field(description="The tool call that waits, as "
                                           "check_research shows it.")],
        decision: Annotated[Literal["allow", "deny"], Field(
            description="allow: let the tool call run; deny: it does not run.")],
    ) -> str:
        with tool_errors("answer_permission"):
            runtime, user = runtime_of(ctx), user_of(ctx)
            jobs, job_id, tool_call_id = runtime.jobs_for(user), job_id.strip(), \
                tool_call_id.strip()
            return await jobs.answer_permission(
                job_id, tool_call_id, ALLOW if decision == "allow" else Deny("rejected"),
                face="mcp")

    @server.tool(name="answer_choice", description=ANSWER_CHOICE, structured_output=False,
                 annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def answer_choice(
        ctx: Context[ServerState],
        job_id: Annotated[str, Field(description="The research job's id.")],
        tool_call_id: Annotated[str, Field(description="The ask_user call that waits, as "
                                           "check_research shows it.")],
        option_id: Annotated[str, Field(description="The id of the chosen option.")],
    ) -> str:
        with tool_errors("answer_choice"):
            return await runtime_of(ctx).jobs_for(user_of(ctx)).answer_choice(
                job_id.strip(), tool_call_id.strip(), option_id.strip(), face="mcp")

    @server.tool(name="check_research", description=CHECK, structured_output=False,
                 annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def check_research(
        ctx: Context[ServerState],
        job_id: Annotated[str | None, Field(description="A job id from start_research; "
                                            "leave empty to list every job.")] = None,
        offset: Annotated[int, Field(
            strict=True, description="Where to start reading a long report "
                                     "(characters).")] = 0,
        max_chars: Annotated[int, Field(
            strict=True, description="How many characters of the report to "
                                        "return (default 20000).")] = DEFAULT_MAX_CHARS,
    ) -> str:
        with tool_errors("check_research"):
            _check_paging(offset, max_chars)
            user = user_of(ctx)
            jobs = runtime_of(ctx).jobs_for(user)
            if job_id is None or not job_id.strip():
                records = await jobs.list()
                # Whose each job is, for an admin of a shared service (stdio: all the local
                # user's, no column).
                return jobs_table(records, user.admin
                                  and any(r.user_id is not None for r in records))
            record = await jobs.get(job_id.strip())
            answers = await answers_of(await runtime_of(ctx).database(), record.id)
            if record.status == "completed":
                # The completed job's text is JSON that clients parse: the audit goes inside.
                return result_json(record, offset, max_chars, answers=_answers_json(answers))
            return job_text(record, offset, max_chars, state_of(ctx).console_root()) + \
                _answers_text(answers)

    @server.tool(name="cancel_research", description=CANCEL, structured_output=False,
                 annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                             idempotent_hint=True, open_world_hint=True))
    async def cancel_research(
        ctx: Context[ServerState],
        job_id: Annotated[str, Field(description="The id of the job to cancel.")],
        tool_call_id: Annotated[str | None, Field(
            description="Cancel only this tool call of the job; the job goes on.")] = None,
    ) -> str:
        with tool_errors("cancel_research"):
            jobs = runtime_of(ctx).jobs_for(user_of(ctx))
            if tool_call_id is not None and tool_call_id.strip():
                return await jobs.cancel_call(job_id.strip(), tool_call_id.strip())
            return cancel_text(await jobs.cancel(job_id.strip()))


def _answers_json(answers: list[Answer]) -> list[dict[str, Any]]:
    """The audit of a job's answers (store/answers.py) as a completed job's JSON carries it."""
    return [{"at": datetime.fromtimestamp(a.at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "who": a.principal or "the local user", "face": a.face,
             "tool_call_id": a.tool_call_id, "tool": a.tool or None, "answer": a.answer,
             "reason": a.reason, "rule": a.rule} for a in answers]


def _answers_text(answers: list[Answer]) -> str:
    """The audit of a job's answers (store/answers.py), after its text: who answered what,
    where and when."""
    if not answers:
        return ""
    lines = []
    for a in answers:
        when = datetime.fromtimestamp(a.at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        who = a.principal or "the local user"
        if a.face == STANDING_RULE:
            lines.append(f"- {when}: a standing rule of {who} answered {a.answer} to {a.tool} "
                         f"({a.tool_call_id}) without asking: {a.rule}")
            continue
        line = f"- {when}: {who} answered {a.answer} to {a.tool or 'a question'} " \
               f"({a.tool_call_id}) in the {a.face}"
        if a.reason:
            line += f", saying {a.reason!r}"
        if a.rule:
            line += f"; rule made: {a.rule}"
        lines.append(line)
    return "\n\nAnswers given:\n" + "\n".join(lines)
