"""An attached start_research call: it waits on its job and puts the job's questions to the
client through MCP elicitation.

It asks through the resolver chain of server/elicitation.py: a step delivers the previous
answer to the job (the same message `answer_permission` / `answer_choice` send), then waits on
the job until it finishes, the call's time is up, or a new question opens, which it returns as
its own `Elicit`. The tool body gets the last outcome: a finished (or still running) job to
format, or a last answer to deliver before waiting on without asking. From 2026-07-28 the
resolvers re-run on every round; the attachment (the job and the questions asked so far, in
order) is found again by the call's arguments in `ServerState.attached`, so every step re-asks
exactly the question it asked before.

A client without the elicitation capability is never asked: the job shows what it waits for in
check_research and in the progress messages, and waits for answer_permission / answer_choice.
A job waiting for a person (its spend to be confirmed, an agent's permission request or
question) ends such a call's wait at once, and its answer names the call to make: nothing would
happen before that call, so waiting on would only hang until the call's time is up.
A question answered some other way first (or expired) is not asked; an elicited answer that
arrives after that is refused by the job and changes nothing.
"""

# No `from __future__ import annotations`: the SDK reads the resolvers' annotations with
# get_type_hints, which cannot see names that only exist here at type-check time.

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import trio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import (
    AcceptedElicitation,
    Elicit,
    ElicitationResult,
)
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from pydantic import Field, create_model

from ask_another.calls import MAX_TIMEOUT
from ask_another.console_link import approval_url
from ask_another.errors import AskAnotherError, InvalidArgument
from ask_another.interaction.types import (
    ALLOW,
    Choice,
    Deny,
    PermissionRequest,
    Question,
    SpendRequest,
)
from ask_another.logs import get_logger
from ask_another.research import JobUpdate
from ask_another.server.attachment import Asked, Attachment
from ask_another.server.context import runtime_of, state_of, tool_errors, user_of
from ask_another.server.elicitation import (
    MAX_ELICITED,
    Approval,
    asks_by_url,
    can_elicit,
    resolver_chain,
)
from ask_another.server.lifespan import ServerState
from ask_another.spend.before import stored_estimate
from ask_another.store.jobs import JobRecord

__all__ = [
    "MAX_WAIT",
    "QUIET_WAIT",
    "Attachment",
    "Finished",
    "asked_of",
    "asks_for_progress",
    "attachment",
    "default_wait",
    "finish",
    "last_step",
    "progress_text",
    "waiting_text",
]

log = get_logger("ask_another.server")

MAX_WAIT: Final = MAX_TIMEOUT
KEEP_ATTACHED: Final = 3600.0
QUIET_WAIT: Final = 3.0
"""Seconds start_research waits, when the call gives no `timeout`, for a client that asked for
no progress: such a client hears nothing until the answer, and common ones give a call 5 s (the
OpenAI Agents SDK's `client_session_timeout_seconds`), so it gets the job id well before that.
A client that asked for progress waits up to `ASK_ANOTHER_START_WAIT`, hearing from the job at
least every 5 s meanwhile."""


@dataclass(frozen=True)
class Finished:
    """The wait is over: the job finished, or the call's time is up (`record.finished` says)."""

    record: JobRecord


def _key(user: str | None, model: str, query: str, timeout: float | None, method: str,
         depth: str) -> str:
    # The user is part of the key: another user's call with the same arguments is not theirs.
    text = json.dumps([user, model, query, timeout, method, depth], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def approval_link(console_url: str | None, job_id: str, tool_call_id: str) -> str:
    """"; the user can answer it at URL" for a server with a console (its approval page,
    console/_app.py), else ""."""
    if console_url is None:
        return ""
    return f"; the user can also answer it at {approval_url(console_url, job_id, tool_call_id)}"


def waiting_text(job_id: str, waiting: Sequence[Question], console_url: str | None = None
                 ) -> str:
    """What a job waits for, with the tool call that answers it (progress and check_research),
    and each question's approval link where a console is served (`console_url`)."""
    lines = []
    for q in waiting:
        answer = (f"tool_call_id '{q.tool_call_id}', expires {q.expires_text}: answer with "
                  f"answer_permission(job_id='{job_id}', tool_call_id='{q.tool_call_id}', "
                  "decision='allow' or 'deny')"
                  f"{approval_link(console_url, job_id, q.tool_call_id)}")
        match q.request:
            case PermissionRequest() as r:
                lines.append(
                    f"permission to run {r.tool} (class {r.class_}, server {r.server}) with "
                    f"arguments {json.dumps(r.arguments, ensure_ascii=False)}; {answer}")
            case SpendRequest() as r:
                lines.append(
                    f"confirmation of its estimated cost, {r.estimated_cost} (above "
                    f"ASK_ANOTHER_CONFIRM_USD=${r.confirm_above_usd:.2f}; model {r.model}); "
                    f"{answer}")
            case Choice() as r:
                options = ", ".join(f"'{o.id}' ({o.label})" for o in r.options)
                lines.append(
                    f"an answer to the question {r.prompt!r}, options {options}; tool_call_id "
                    f"'{q.tool_call_id}', expires {q.expires_text}: answer with "
                    f"answer_choice(job_id='{job_id}', tool_call_id='{q.tool_call_id}', "
                    f"option_id=...){approval_link(console_url, job_id, q.tool_call_id)}")
    return "; ".join(lines)


def asked_of(job_id: str, q: Question, console_url: str | None = None) -> Asked:
    """The form that puts `q` to a person: an attached call's elicitation, and an MCP Task's
    input request (server/tasks/); with the console's approval link where one is served."""
    asked = _asked_of(job_id, q)
    if console_url is None:
        return asked
    return Asked(asked.tool_call_id, asked.kind, f"{asked.message}. Or answer it at "
                 f"{approval_url(console_url, job_id, q.tool_call_id)}", asked.schema)


def _asked_of(job_id: str, q: Question) -> Asked:
    deny = f"(tool call {q.tool_call_id}; no answer by {q.expires_text} means deny)"
    match q.request:
        case PermissionRequest() as r:
            return Asked(q.tool_call_id, q.kind, (
                f"Research job {job_id} asks to run the tool {r.tool} (class {r.class_}, server "
                f"{r.server}) with arguments {json.dumps(r.arguments, ensure_ascii=False)}. "
                f"Allow it? {deny}"), Approval)
        case SpendRequest() as r:
            return Asked(q.tool_call_id, q.kind, (
                f"Research job {job_id} ({r.model}) is estimated at {r.estimated_cost}, above "
                f"ASK_ANOTHER_CONFIRM_USD=${r.confirm_above_usd:.2f}. Run it? Nothing is spent "
                f"unless you allow it {deny}"), Approval)
    assert isinstance(q.request, Choice)
    ids = tuple(o.id for o in q.request.options)
    labels = "; ".join(f"{o.id}: {o.label}" for o in q.request.options)
    schema = create_model(
        "Pick",
        option_id=(Literal[ids], Field(description=f"The chosen option ({labels})")),  # type: ignore[arg-type]
    )
    message = (f"Research job {job_id} asks: {q.request.prompt} (options: {labels}; tool call "
               f"{q.tool_call_id}; expires {q.expires_text})")
    return Asked(q.tool_call_id, q.kind, message, schema)


# ----- the resolvers -------------------------------------------------------------------------


def asks_for_progress(ctx: Context[ServerState]) -> bool:
    """Whether this call's client asked for progress notifications: a ``progressToken`` in the
    request's ``_meta`` on the wire, or a progress callback in memory (the SDK's direct
    dispatcher carries the callback, not a token)."""
    request = ctx.request_context
    if progress_token_from_params(request.params) is not None:
        return True
    outbound = getattr(request.session, "_request_outbound", None)
    direct = getattr(outbound, "_inner", outbound)
    return getattr(direct, "_on_progress", None) is not None


def default_wait(ctx: Context[ServerState], start_wait: float) -> float:
    """How long a start_research call that gives no `timeout` waits: `start_wait`
    (`ASK_ANOTHER_START_WAIT`) when its client hears progress, else at most `QUIET_WAIT`."""
    return start_wait if asks_for_progress(ctx) else min(start_wait, QUIET_WAIT)


async def attachment(ctx: Context[ServerState], model: str, query: str,
                     timeout: float | None,  # noqa: ASYNC109 - start_research's, by name
                     method: str, depth: str = "standard") -> Attachment:
    """Start the job (first round), or find it again (a 2026-07-28 retry with answers)."""
    with tool_errors("start_research"):
        runtime = runtime_of(ctx)
        user = user_of(ctx)
        table = state_of(ctx).attached
        now = trio.current_time()
        for key in [k for k, atts in table.items()
                    if all(a.deadline + KEEP_ATTACHED < now for a in atts)]:
            del table[key]
        # Keyed by the arguments as given: a 2026-07-28 retry round finds its call again even if
        # it differs in asking for progress.
        key = _key(user.id, model, query, timeout, method, depth)
        if timeout is None:
            timeout = default_wait(ctx, runtime.config.start_wait)
        if ctx.request_state is not None:
            found = table.get(key)
            if found:
                return found[-1]
            raise AskAnotherError("this start_research call came back with answers, but its "
                                  "job is no longer attached; call check_research to find it")
        if not 0 <= timeout <= MAX_WAIT:
            raise InvalidArgument(f"timeout must be between 0 and {MAX_WAIT:g} seconds, "
                                  f"got {timeout:g}")
        record = await runtime.jobs_for(user).start(
            model, query, method.strip() or "auto", depth=depth.strip() or "standard")
        # The estimate ResearchJobs.start made (and checked against the ceilings), stated in
        # the answer.
        estimate = stored_estimate(record.detail)
        attached = Attachment(key, record, timeout, time.monotonic(), now + timeout,
                              estimate=estimate.describe() if estimate is not None else None)
        table.setdefault(key, []).append(attached)
        return attached


async def _deliver(ctx: Context[ServerState], att: Attachment, index: int,
                   answer: ElicitationResult[Any]) -> None:
    question = att.asked[index]
    if (question.tool_call_id, question.kind) in att.delivered:
        return
    att.delivered.add((question.tool_call_id, question.kind))
    jobs = runtime_of(ctx).jobs_for(user_of(ctx))
    data = answer.data if isinstance(answer, AcceptedElicitation) else None
    try:
        if question.kind in ("permission", "spend"):
            allowed = isinstance(data, Approval) and data.decision == "allow"
            await jobs.answer_permission(att.record.id, question.tool_call_id,
                                         ALLOW if allowed else Deny("rejected"),
                                         face="elicitation")
        elif data is not None:
            await jobs.answer_choice(att.record.id, question.tool_call_id, data.option_id,
                                     face="elicitation")
        # A declined choice stays open: answer_choice can still answer it until it expires.
    except AskAnotherError as exc:
        log.info("research.elicited_answer_refused", job_id=att.record.id,
                 tool_call_id=question.tool_call_id, reason=str(exc))


async def _watch(ctx: Context[ServerState], att: Attachment, elicit: bool) -> Finished | Asked:
    """Wait on the job: until it finishes, the call's time is up, or (when `elicit`) a question
    opens that this call has not asked yet. Progress goes to the client meanwhile. A client
    that cannot elicit gets its answer as soon as the job waits for a person (its spend to be
    confirmed, a permission, a question): nothing happens until someone calls answer_permission
    or answer_choice, so waiting on would only hang."""
    jobs = runtime_of(ctx).jobs_for(user_of(ctx))
    remaining = att.deadline - trio.current_time()
    if remaining <= 0:
        return Finished(await jobs.get(att.record.id))
    found: Asked | None = None
    final: JobRecord | None = None
    waits_for_a_person = False
    asking = can_elicit(ctx) or _url_root(ctx) is not None
    console_url = state_of(ctx).console_root()
    with trio.CancelScope() as scope:

        async def progress(update: JobUpdate) -> None:
            nonlocal found, waits_for_a_person
            fresh = [q for q in update.waiting_for
                     if (q.tool_call_id, q.kind) not in att.asked_keys()]
            if elicit and fresh:
                found = asked_of(att.record.id, fresh[0], console_url)
                scope.cancel()
                return
            if not asking and update.waiting_for:
                waits_for_a_person = True
                scope.cancel()
                return
            await ctx.report_progress(min(time.monotonic() - att.began, att.timeout),
                                      att.timeout, progress_text(update, console_url))

        final = await jobs.wait(att.record.id, remaining, on_progress=progress)
    if found is not None:
        return found
    if waits_for_a_person:
        return Finished(await jobs.get(att.record.id))
    return Finished(final if final is not None else await jobs.get(att.record.id))


def progress_text(update: JobUpdate, console_url: str | None = None) -> str:
    text = (f"job {update.job_id} {update.status.replace('_', ' ')}, {update.elapsed:.0f} s: "
            f"{update.step or 'starting'}")
    if update.detail.get("tail"):
        text += f" …{update.detail['tail'][-80:]}"
    if update.waiting_for:
        text += f". Waiting for {waiting_text(update.job_id, update.waiting_for, console_url)}"
    return text


async def _step(ctx: Context[ServerState], att: Attachment, index: int,
                answer: ElicitationResult[Any] | None) -> Any:
    if answer is not None:
        if isinstance(answer, AcceptedElicitation) and isinstance(answer.data, Finished):
            return answer.data
        await _deliver(ctx, att, index - 1, answer)
    if index < len(att.asked):
        question = att.asked[index]  # asked in an earlier round: ask it again, identically
        return Elicit(question.message, question.schema)
    root = _url_root(ctx)
    with tool_errors("start_research"):
        while True:
            event = await _watch(ctx, att, elicit=can_elicit(ctx) or root is not None)
            if isinstance(event, Finished):
                return event
            if root is None:
                break
            await _ask_by_url(ctx, att, event, approval_url(root, att.record.id,
                                                             event.tool_call_id))
    att.asked.append(event)
    log.info("research.elicit", job_id=att.record.id, tool_call_id=event.tool_call_id,
             kind=event.kind)
    return Elicit(event.message, event.schema)


def _url_root(ctx: Context[ServerState]) -> str | None:
    """The console to send this call's questions to as URL elicitations, or None (forms, or not
    asked): for a client that takes links and not forms, where a console serves the job."""
    return state_of(ctx).console_root() if asks_by_url(ctx) else None


async def _ask_by_url(ctx: Context[ServerState], att: Attachment, question: Asked,
                      url: str) -> None:
    """Send `question` as a URL elicitation (its approval page), then wait until it is answered
    there (or any other way, or it expires) and say so with notifications/elicitation/complete.
    A person who will not open the page has declined: a permission or spend is denied, as a
    declined form denies; a choice stays open. The call's time bounds the wait."""
    key = (question.tool_call_id, question.kind)
    att.by_url.add(key)
    elicitation_id = f"{att.record.id}/{question.tool_call_id}/{question.kind}"
    log.info("research.elicit", job_id=att.record.id, tool_call_id=question.tool_call_id,
             kind=question.kind, mode="url")
    reply = await ctx.elicit_url(f"{question.message}. Answer it on its console page.", url,
                                 elicitation_id)
    jobs = runtime_of(ctx).jobs_for(user_of(ctx))
    if reply.action != "accept":
        if question.kind in ("permission", "spend"):
            try:
                await jobs.answer_permission(att.record.id, question.tool_call_id,
                                             Deny("rejected"), face="elicitation")
            except AskAnotherError as exc:  # answered or expired meanwhile
                log.info("research.elicited_answer_refused", job_id=att.record.id,
                         tool_call_id=question.tool_call_id, reason=str(exc))
        return
    remaining = att.deadline - trio.current_time()
    if remaining <= 0:
        return
    answered = False
    with trio.CancelScope() as scope:

        async def progress(update: JobUpdate) -> None:
            nonlocal answered
            if all((q.tool_call_id, q.kind) != key for q in update.waiting_for):
                answered = True
                scope.cancel()

        final = await jobs.wait(att.record.id, remaining, on_progress=progress)
        answered = answered or (final is not None and final.finished)
    if answered:
        await ctx.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)


last_step = resolver_chain(attachment, _step)
"""The resolver whose outcome the start_research body receives."""


async def finish(ctx: Context[ServerState], att: Attachment,
                 outcome: ElicitationResult[Any]) -> JobRecord:
    """The body's part: deliver a last answer if there is one, wait on without eliciting, and
    detach. Returns the job's record (finished, or still running when the time is up)."""
    if isinstance(outcome, AcceptedElicitation) and isinstance(outcome.data, Finished):
        event: Finished | Asked = outcome.data
    else:
        await _deliver(ctx, att, MAX_ELICITED - 1, outcome)
        event = await _watch(ctx, att, elicit=False)
    assert isinstance(event, Finished)
    table = state_of(ctx).attached
    attached = table.get(att.key, [])
    if att in attached:
        attached.remove(att)
        if not attached:
            table.pop(att.key, None)
    return event.record
