"""The research job actor: one supervised actor per job, the store written before every answer.

A `ResearchJob` is a transient child of the job supervisor, registered as ``("job", job_id)``.
Its work (a research method, see research/methods/) runs in a task the actor owns, so the actor
keeps answering `Status`, `Cancel`, `Subscribe` and `AwaitResult` while the provider works.

State changes follow one rule: written to the store first, then acknowledged. The move to a
terminal state happens only in the actor's own message loop (the result arriving as `TaskDone`,
or a `Cancel`), one message at a time, and the store's guarded update refuses a second terminal
state, so a result that arrives after a cancel (or a cancel after a result) never flips a
finished job. Once finished the actor replies to every waiter, closes the subscribers' channels
and exits normally; its record stays in the store.

Attempts and retries: the job's one actor lives for the whole job, and its work task runs the
attempt loop. A transient provider error (`TRANSIENT`: rate limit, 5xx, a dropped connection)
ends the attempt: its error and the attempt count are written to the store, the task waits the
backoff (`backoff(attempt, unit)`: ``ASK_ANOTHER_POLL_SECONDS`` × 2^(n-2), at most 60 s) and
tries again, for Gemini polling the saved interaction rather than creating a second one. After
`max_attempts` the job fails with "gave up after n attempts; the last one failed with: ...".
A provider that cannot be reached at all (`ProviderUnreachable`: refused, no route) fails the job
at once, naming the URL tried.
Every caller keeps talking to the same actor meanwhile. A supervisor restart is for a bug (an
unexpected exception): the restarted actor reloads the job from the store (its first write only
succeeds on a pending job, so it knows) and goes on within the same attempt bound.

A database that cannot be reached (`StoreUnavailable`: a PostgreSQL restart, a dropped link) is
waited for, never counted as an attempt: each of the job's writes and reads runs again until it
goes through (`until_stored`, store/outage.py, up to `STORE_PATIENCE` seconds), and an attempt
whose work met the outage runs again under the same number once the database answers (a Gemini
job polls its saved interaction). Before this, 9 of 80 jobs failed "cannot reach the database"
in a 10 s outage. If the outage outlasts the fence (research/lease.py), the job is stopped here
first and resumed (or failed with the reason) once the database is back.

Ownership: the job's row names this process as its owner (a lease renewed by the `JobOwner`'s
heartbeat, supervisor.py). Progress steps and the job's live detail (what it waits for, its tool
calls) are written to the row in batches, so `check_research` in another process sharing the
home shows the live step. `Relinquish` (another process took the lease) stops the work without
writing anything.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec
import trio

from ask_another import tracing
from ask_another.errors import AskAnotherError, ProviderUnreachable
from ask_another.interaction.protocol import CallHandle, Interaction
from ask_another.interaction.tools import Tool
from ask_another.interaction.types import (
    Allow,
    Choice,
    Decision,
    Deny,
    PermissionRequest,
    SpendRequest,
)
from ask_another.logs import get_logger
from ask_another.policy import Policy
from ask_another.research.messages import (
    Answered,
    AskChoice,
    AskPermission,
    AskSpend,
    AwaitResult,
    Cancel,
    CancelOutcome,
    ChoiceAnswer,
    JobUpdate,
    NotWaiting,
    PermissionAnswer,
    RegisterCall,
    Relinquish,
    Status,
    Subscribe,
    TextPreview,
    ToolUpdated,
)
from ask_another.research.methods import (
    JOB_METHODS,
    JobContext,
    ResearchFailed,
    ResearchResult,
)
from ask_another.research.methods.agent import HostInteraction, JobInteraction
from ask_another.research.questions import Expired, Questions
from ask_another.research.retry import TRANSIENT, backoff
from ask_another.research.usage import JobUsage
from ask_another.services import Services
from ask_another.spend import Purpose, record_call
from ask_another.spend.before import estimate_research, stored_estimate
from ask_another.spend.budget import check_budget
from ask_another.spend.confirm import needs_confirmation, not_confirmed_text
from ask_another.store.jobs import JobEvent, JobRecord, JobStore, job_store
from ask_another.store.outage import WAITS_FOR_SPACE, until_stored
from ask_another.store.rules import rules_of
from ask_another.store.usage import Spent, spent_by_job
from supervisors import (
    NOREPLY,
    Actor,
    ActorRef,
    Caller,
    Crash,
    ExitReason,
    Registry,
    Shutdown,
    TaskCancelled,
    TaskDone,
)

__all__ = ["DEFAULT_MAX_ATTEMPTS", "JobOptions", "ResearchJob", "Services", "job_name",
           "running_actor"]

log = get_logger("ask_another.research")

DEFAULT_MAX_ATTEMPTS: Final = 3
STORE_PATIENCE: Final = 60.0
"""Seconds a job's store statement waits for a database that cannot be reached."""
CONFIRM_SPEND: Final = "confirm-spend"
"""The tool call id of a job's spend confirmation (its `Question` of kind ``spend``; answered
like a permission)."""


def job_name(job_id: str) -> tuple[str, str]:
    """The registry name of a job's actor."""
    return ("job", job_id)


async def running_actor(registry: Registry, store: JobStore, job_id: str, owner: str
                        ) -> ActorRef | None:
    """The actor of job `job_id` in this process (whose lease is `owner`'s), waited for while
    the store says the job is still `owner`'s and unfinished but no actor runs it: stopped by
    the fence (a renewal that came back late) or between a crash and its restart, it starts
    again here shortly. None once the job has ended or moved; bound the wait with a deadline."""
    while (ref := registry.whereis(job_name(job_id))) is None:
        stored = await store.get(job_id)
        if stored is None or stored.finished or stored.owner != owner:
            return None
        await trio.sleep(0.05)  # the supervisor starts it: nothing here to wait on
    return ref


@dataclass(frozen=True, slots=True)
class JobOptions:
    """What an embedding host gives one agent job: its own Interaction (which then answers the
    permission requests and choices) and its own tools, next to the built-in ones."""

    interaction: Interaction | None = None
    tools: tuple[Tool, ...] = ()


@dataclass(frozen=True, slots=True)
class _Progress:
    step: str
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Failure:
    message: str
    report: str | None = None


class ResearchJob(Actor):
    """One research job. Start it through the job supervisor (see jobs.py), not directly.

    `init(record, services, max_attempts, options)`: `record` is the job as it was just stored
    (a new job) or just claimed (a takeover); a restarted actor gets the same arguments and
    reloads the job from the store (see `_load`).
    """

    record: JobRecord
    services: Services
    max_attempts: int

    async def init(self, record: JobRecord, services: Services,
                   max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                   options: JobOptions | None = None) -> None:
        # No I/O here: init runs in the supervisor's task, so it must be quick and cannot fail.
        self.record = msgspec.structs.replace(record)
        self.services = services
        self.max_attempts = max_attempts
        self.waiters: list[Caller] = []
        self.subscribers: list[Any] = []
        self.unwritten: list[JobEvent] = []
        self.detail_changed = False
        self.writer: Any = None
        self.relinquished = False
        self.options = options or JobOptions()
        # Agent jobs: what the turn waits for, the running tool calls and their last state.
        self.questions = Questions()
        self.calls: dict[str, CallHandle] = {}
        self.tool_states: dict[str, dict[str, Any]] = {}
        # The job's completed steps (research_steps), read when this run loads the job, and the
        # attempt that stored the latest one: attempts are counted from there (see `_tries`).
        self.steps: dict[str, Any] = {}
        self.progress_attempt = 0
        self.call_counts: dict[tuple[int, str], int] = {}  # the calls made per attempt and step
        self.usage = JobUsage()  # every call of the job, from its ledger rows when resumed
        self.work = self.start_task(self._run)

    # ----- messages --------------------------------------------------------------------------

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        match msg:
            case Status():
                return msgspec.structs.replace(self.record)
            case AwaitResult():
                if self.record.finished:
                    return msgspec.structs.replace(self.record)
                self.waiters.append(caller)
                return NOREPLY
            case Cancel(tool_call_id=None):
                return await self._cancel()
            case Cancel(tool_call_id=str(call_id)):
                return self._cancel_call(call_id)
            case Subscribe(channel=channel):
                self.subscribers.append(channel)
                self._notify_one(channel, self._update())
                return None
            case PermissionAnswer(tool_call_id=call_id, decision=decision):
                return self._answer_permission(call_id, decision)
            case ChoiceAnswer(tool_call_id=call_id, option_id=option_id):
                return self._answer_choice(call_id, option_id)
            case AskPermission(request=PermissionRequest() as request) | \
                    AskChoice(choice=Choice() as request):
                self._ask(request, request.tool_call_id, caller)
                return NOREPLY
            case AskSpend(request=spend):
                self._ask(spend, CONFIRM_SPEND, caller)
                return NOREPLY
            case ToolUpdated(update=update):
                self._tool_updated(update)
                return None
            case RegisterCall(tool_call_id=call_id, handle=handle):
                self.calls[call_id] = handle
                return None
        return await super().handle_call(msg, caller)

    async def handle_info(self, msg: Any) -> None:
        match msg:
            case Relinquish():
                self._relinquish()
            case _Progress(step=step, detail=detail):
                await self._progress(step, detail)
            case TextPreview(chars=chars, tail=tail):
                if not self.record.finished:
                    self.record.step = f"writing the answer ({chars} characters so far)"
                    self._notify(self._update({"chars": chars, "tail": tail}))
            case TaskDone(task=task) if task is self.writer:
                self.writer = None
                self._write_soon()
            case TaskDone(value=Expired(tool_call_id=call_id)):
                if self.questions.expire(call_id):
                    log.info("research.question_expired", job_id=self.record.id,
                             tool_call_id=call_id)
                    self._questions_changed()
            case TaskDone(task=task) if task is not self.work:
                pass
            case TaskDone(value=ResearchResult() as result):
                await self._finish("completed", step="completed", report=result.report,
                                   citations=[c.as_dict() for c in result.citations],
                                   detail=result.detail)
            case TaskDone(value=_Failure(message=message, report=report)):
                # The usage so far (reported with progress) is what the failed job spent.
                usage = self.record.detail.get("usage")
                await self._finish("failed", step="failed", error=message, report=report,
                                   detail={**self.record.detail, "usage": usage} if usage
                                   else None)
            case TaskDone(value=None):
                # The job had already finished (or vanished) when this run loaded it.
                await self._settle()
            case TaskCancelled():
                pass  # our own cancel: the terminal state was written by _cancel
            case _:
                await super().handle_info(msg)

    async def terminate(self, reason: ExitReason) -> None:
        if isinstance(reason, Shutdown) and not self.record.finished and not self.relinquished \
                and self.record.owner is not None:
            # The runtime is closing (a server stopping, SIGTERM): hand the job back now, so
            # another process sharing the store takes it over at its next sweep instead of
            # after the lease runs out (resumed if its method can, failed with the reason if not).
            with trio.move_on_after(5), trio.CancelScope(shield=True):
                store = await self._store()
                if await store.release(self.record.id, self.record.owner):
                    log.info("research.released", job_id=self.record.id,
                             owner=self.record.owner)
            return
        if isinstance(reason, Crash) and not self.record.finished and not self.relinquished:
            # Record why this attempt failed, so the next one (or the last) can say it.
            message = _describe(reason.exception)
            log.warning("research.attempt_failed", job_id=self.record.id,
                        attempt=self.record.attempts, error=message)
            with trio.move_on_after(5), trio.CancelScope(shield=True):
                store = await self._store()
                await store.update(self.record.id, error=message,
                                   step=f"attempt {self.record.attempts} failed")

    # ----- the work --------------------------------------------------------------------------

    async def _load(self, store: JobStore) -> JobRecord | _Failure | None:
        """The job as this run starts it: a pending job is moved to attempt 1 (one guarded
        write); any other is reloaded from the store (a takeover, or a restart after a bug).
        None when it has finished (or vanished) meanwhile."""
        if self.record.status == "pending":
            now = time.time()
            event = JobEvent(job_id=self.record.id, at=now, step="started",
                             detail={"attempt": 1})
            if await self._stored("start", lambda: store.start(self.record.id, started_at=now,
                                                                event=event)):
                self._set(status="in_progress", attempts=1, started_at=now, step="started")
                if self.record.provider_handle is None:
                    # In progress from here (the first estimate reads the price map, which
                    # kept a new job pending past a quick wait under load), but nothing is
                    # asked of the provider until the spend is confirmed.
                    refused = await self._confirm_spend(self.record.model, self.record)
                    if refused is not None:
                        return refused
                return self.record
        stored = await self._stored("load", lambda: store.get(self.record.id))
        if stored is None or stored.finished:
            if stored is not None:
                self.record = stored
            return None
        self.record = stored
        steps = await self._stored("steps", lambda: store.steps(stored.id))
        self.steps = {step.name: step.value for step in steps}
        self.progress_attempt = max((step.attempt for step in steps), default=0)
        spent, searches = await self._stored("usage", lambda: self._spent(stored.id))
        self.usage = JobUsage.so_far(spent.calls, searches, spent.prompt_tokens,
                                     spent.completion_tokens, spent.known_usd,
                                     spent.unknown_calls)
        tries = self._tries(stored.attempts)
        if tries >= self.max_attempts:
            if stored.error is None:  # no attempt failed: each was cut off (a kill, a fence)
                return _Failure(f"gave up after {tries} attempts, each stopped before it "
                                "stored a step (the process running it was killed or lost "
                                "its lease): start it again")
            return _Failure(f"gave up after {tries} attempts; the last one failed with: "
                            f"{stored.error}")
        return await self._next_attempt(store, stored)

    def _tries(self, attempt: int) -> int:
        """How many attempts `attempt` is since the last one that completed a step: a job
        resumed after every kill, each run storing a step, is never given up on; one that keeps
        failing (or being killed) before its next step is, after `max_attempts`."""
        return attempt - self.progress_attempt

    async def _next_attempt(self, store: JobStore, stored: JobRecord) -> JobRecord | None:
        attempt = stored.attempts + 1
        started = stored.started_at if stored.started_at is not None else time.time()
        step = f"attempt {attempt}"
        event = JobEvent(job_id=stored.id, at=time.time(), step=step,
                         detail={"attempt": attempt, "last_error": stored.error})
        if not await self._stored("attempt", lambda: store.add_event(
                event, status="in_progress", attempts=attempt, started_at=started,
                step=step)):
            return None
        self._set(status="in_progress", attempts=attempt, started_at=started, step=step)
        return self.record

    async def _run(self) -> ResearchResult | _Failure | None:
        """The job's run here, as one span of the trace of the call that started the job, a run
        resumed after a restart too (its `traceparent` is stored with it)."""
        record = self.record
        attributes = {"ask_another.job.method": record.method,
                      "gen_ai.request.model": record.model,
                      "ask_another.job.resumed": record.status != "pending"}
        with tracing.span(f"research_job {record.method}", attributes,
                          parent=record.traceparent, job=record.id) as span:
            outcome = await self._attempts()
            if span is not None:
                span.set_attribute("ask_another.job.attempt", self.record.attempts)
                span.set_attribute("ask_another.job.outcome",
                                   "failed" if isinstance(outcome, _Failure)
                                   else "stopped" if outcome is None else "completed")
            return outcome

    async def _attempts(self) -> ResearchResult | _Failure | None:
        store = await self._store()
        if self.record.finished:
            return None
        record = await self._load(store)
        if record is None or isinstance(record, _Failure):
            return record
        method = JOB_METHODS.get(record.method)
        if method is None:
            return _Failure(f"unknown research method {record.method!r}")
        try:
            entry = self.services.model(record.model, record.entry)
        except AskAnotherError as exc:
            return _Failure(f"the model is no longer allowed: {exc}")
        self._notify(self._update())
        retry = False  # the last attempt failed here with a transient provider error
        while True:
            attempt = self.record.attempts
            tries = self._tries(attempt)
            # A job resumed after its last run stored a step starts at once (it waited for the
            # lease already); a retry, or a run after runs that completed nothing, waits.
            if attempt > 1 and (retry or tries > 1):
                delay = backoff(max(tries, 2), self.services.config.poll_seconds)
                self._report(f"waiting {delay:g} s before attempt {attempt}",
                             {"last_error": self.record.error})
                await trio.sleep(delay)
            log.info("research.run", job_id=record.id, model=entry.model, attempt=attempt,
                     resume=self.record.provider_handle is not None)
            ctx = JobContext(
                job_id=record.id, entry=entry, query=record.query, config=self.services.config,
                gateway=await self.services.gateway(), attempt=attempt,
                started_at=self.record.started_at or time.time(),
                handle=self.record.provider_handle, report=self._report,
                save_handle=self._save_handle, interaction=self._interaction(),
                steps=dict(self.steps), save_step=self._save_step,
                call_counts=self.call_counts, usage=self.usage,
                purpose=Purpose(tool="start_research", job_id=record.id,
                                user_id=self.record.user_id),
                tools=self.options.tools,
                depth=str(self.record.detail.get("depth") or "standard"),
                policy=await self._policy() if record.method == "agent" else None,
                detail=dict(self.record.detail), user_id=self.record.user_id,
                services=self.services,
            )
            ctx.check_budget = self._budget_check(ctx)
            try:
                return await method.run(ctx)
            except ResearchFailed as exc:
                return _Failure(str(exc), exc.report)
            except WAITS_FOR_SPACE as exc:
                # The database (unreachable, or its disk full), not the provider: wait for it,
                # then run this attempt again under the same number (a Gemini job polls its
                # saved interaction).
                log.warning("research.store_unavailable", job_id=record.id, attempt=attempt,
                            error=str(exc))
                await self._stored("wait", lambda: store.get(record.id))
                continue
            except ProviderUnreachable as exc:
                # Nothing listens at the URL: another attempt would only wait longer to say
                # so (`ask` says it at once too).
                return _Failure(str(exc))
            except TRANSIENT as exc:
                message = str(exc)
                log.warning("research.attempt_failed", job_id=record.id, attempt=attempt,
                            error=message)
                if tries >= self.max_attempts:
                    return _Failure(f"gave up after {tries} attempts; the last one failed "
                                    f"with: {message}")
                retry = True
                self.record.error = message
                failed = functools.partial(store.update, record.id, error=message,
                                           step=f"attempt {attempt} failed")
                if not await self._stored("attempt failed", failed):
                    return None
                if await self._next_attempt(store, self.record) is None:
                    return None
                self._notify(self._update())
            except AskAnotherError as exc:
                return _Failure(str(exc))
            finally:
                with trio.CancelScope(shield=True):  # a cancelled job's calls were still made
                    await self._record_usage(ctx)

    def _budget_check(self, ctx: JobContext) -> Callable[[], Awaitable[None]]:
        async def budget() -> None:
            await self._record_usage(ctx)
            await self._stored("budget", lambda: check_budget(
                self.services, None, f"research job {ctx.job_id}", self.record.user_id))
        return budget

    async def _spent(self, job_id: str) -> tuple[Spent, int]:
        return await spent_by_job(await self.services.database(), job_id)

    async def _store(self) -> JobStore:
        return job_store(await self.services.database())

    async def _stored(self, what: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """`fn()`, waiting for a database that cannot be reached (see the module docstring)."""
        return await until_stored(fn, patience=STORE_PATIENCE, what=f"job {what}",
                                  waits_for=WAITS_FOR_SPACE,
                                  job_id=self.record.id)

    async def _confirm_spend(self, model: str, stored: JobRecord) -> _Failure | None:
        """Above `ASK_ANOTHER_CONFIRM_USD`, a person confirms the job's estimate before anything
        is spent: a question of its own kind (``spend``, id `CONFIRM_SPEND`), answered like a
        permission (elicitation while start_research waits, `answer_permission` otherwise). An
        embedding host's Interaction is asked through its one permission callback instead, as
        the call `confirm_spend`. A denial or an expiry fails the job with nothing spent."""
        limit = self.services.config.confirm_usd
        estimate = stored_estimate(stored.detail)  # made once, when the job was started
        if estimate is None:  # a job stored before estimates were kept with it
            try:
                estimate = await estimate_research(
                    self.services, self.services.model(model, stored.entry), stored.query,
                    stored.method)
            except AskAnotherError:
                return None  # no estimate: nothing to confirm
        if not needs_confirmation(self.services, estimate):
            return None
        log.info("research.confirm_spend", job_id=stored.id, estimate_usd=estimate.known_usd)
        self._report(f"waiting for a person to confirm the estimated cost "
                     f"({estimate.describe()})")
        request = SpendRequest(estimated_cost=estimate.describe(), confirm_above_usd=limit,
                               model=_asks_whom(stored))
        decision: Decision
        if self.options.interaction is not None:
            decision = await self.options.interaction.request_permission(PermissionRequest(
                tool_call_id=CONFIRM_SPEND, tool="confirm_spend", server="ask-another",
                class_="effect", arguments={"estimated_cost": request.estimated_cost,
                                            "confirm_above_usd": f"{limit:.2f}",
                                            "model": model}))
        else:
            decision = await self.ref.call(AskSpend(request), timeout=None)
        if isinstance(decision, Allow):
            return None
        return _Failure(not_confirmed_text(self.services, estimate, decision))

    async def _record_usage(self, ctx: JobContext) -> None:
        """The usage ledger's rows for the calls reported to `ctx.usage` since the last time
        (a Gemini interaction's; every other call's row its gateway wrote, see `_paid`)."""
        purpose = Purpose(tool="start_research", job_id=ctx.job_id, user_id=self.record.user_id)
        for usage, search, call_id in ctx.usage.take_unrecorded():
            await record_call(self.services, "search" if search else "research",
                              "web search" if search else ctx.entry.model, usage, purpose,
                              call_id)

    def _interaction(self) -> Interaction:
        own = JobInteraction(self.ref)
        if self.options.interaction is None:
            return own
        return HostInteraction(self.options.interaction, own)

    def _report(self, step: str, detail: dict[str, Any] | None = None, **progress: Any) -> None:
        """`JobContext.report`: queue a timeline event for the actor (never blocks)."""
        try:
            self.ref.send(_Progress(step, {**(detail or {}), **progress}))
        except Exception:  # a full mailbox or an exiting actor: progress is best effort
            log.debug("research.progress_dropped", job_id=self.record.id, step=step)

    async def _save_handle(self, handle: str) -> None:
        # In memory first, so a cancel arriving during the write knows what to cancel remotely.
        self.record.provider_handle = handle
        store = await self._store()
        # Shielded: the provider runs (and bills) the work under this handle from now on; a
        # job stopped while the write waits for the database (the fence) must still leave it
        # stored, so whoever starts the job again resumes it instead of failing it.
        with trio.CancelScope(shield=True):
            await self._stored("handle", lambda: store.update(self.record.id,
                                                              provider_handle=handle))
            if self.record.status == "cancelled":
                # Cancelled while the provider was starting it (`_cancel` had no handle yet).
                log.info("research.cancelled", job_id=self.record.id,
                         remote=await self._cancel_remote(handle))

    async def _save_step(self, name: str, value: Any) -> None:
        """`JobContext.save_step`: one statement, durable before it returns; in memory first,
        so a later attempt in this run skips the step too."""
        value = _jsonable(value)
        self.steps.setdefault(name, value)
        self.progress_attempt = self.record.attempts
        store = await self._store()
        # Shielded like the handle: the step's provider calls were made and billed; a job
        # stopped while the write waits (a cancel, the fence) must not make them be made again.
        with trio.CancelScope(shield=True):
            await self._stored("step", lambda: store.save_step(
                self.record.id, name, value, attempt=self.record.attempts, at=time.time()))

    # ----- state changes (in the actor's loop only) ------------------------------------------

    async def _progress(self, step: str, detail: dict[str, Any]) -> None:
        # Progress is shown at once and written by a writer task, in batches: the actor's loop
        # never waits on the disk for it, so Status and Cancel stay fast under load. (State
        # changes — status, attempts, handle, result — are still written before they are shown.)
        if self.record.finished:
            return
        self.record.step = step
        if "usage" in detail:  # the job's usage so far, shown by check_research
            self.record.detail = {**self.record.detail, "usage": detail["usage"]}
        self.unwritten.append(JobEvent(job_id=self.record.id, at=time.time(), step=step,
                                       detail=_jsonable(detail)))
        self._write_soon()
        self._notify(self._update(detail))

    def _write_soon(self) -> None:
        if (self.writer is None and (self.unwritten or self.detail_changed)
                and not self.record.finished and not self.relinquished):
            self.writer = self.start_task(self._write_events)

    async def _write_events(self) -> None:
        # The live step and detail go with the events, so another process's check_research
        # shows what this job does and waits for.
        events, self.unwritten = self.unwritten, []
        detail = _jsonable(self.record.detail) if self.detail_changed else None
        self.detail_changed = False
        store = await self._store()
        await self._stored("progress", lambda: store.add_events(
            self.record.id, events, detail=detail, step=self.record.step,
            waiting_for=list(self.record.waiting_for)))

    def _relinquish(self) -> None:
        """Another process holds the lease now: stop, writing nothing (it writes from now)."""
        if self.record.finished:
            return
        self.relinquished = True
        log.warning("research.relinquished", job_id=self.record.id)
        self.work.cancel()
        self.questions.close_all()
        for caller in self.waiters:
            caller.reply(msgspec.structs.replace(self.record))
        self.waiters.clear()
        for channel in self.subscribers:
            channel.close()
        self.subscribers.clear()
        self.stop()

    async def _finish(self, status: Any, **changes: Any) -> None:
        if self.record.finished or self.relinquished:
            return
        store = await self._store()
        now = time.time()
        changes = {k: v for k, v in changes.items() if v is not None}
        if "detail" in changes:
            changes["detail"] = _jsonable(changes["detail"])
        event = JobEvent(job_id=self.record.id, at=now, step=status,
                         detail={"error": changes["error"]} if "error" in changes else {})
        if await self._stored("finish", lambda: store.finish(self.record.id, status,
                                                             ended_at=now, event=event,
                                                             **changes)):
            self._set(status=status, ended_at=now, **changes)
            log.info("research.finished", job_id=self.record.id, status=status,
                     elapsed=round(self.record.elapsed(now), 3))
        await self._settle()

    async def _cancel(self) -> CancelOutcome:
        if self.record.finished:
            return CancelOutcome(cancelled=False, record=msgspec.structs.replace(self.record))
        self.work.cancel()
        store = await self._store()
        now = time.time()
        event = JobEvent(job_id=self.record.id, at=now, step="cancelled")
        if not await self._stored("cancel", lambda: store.finish(
                self.record.id, "cancelled", ended_at=now, event=event, step="cancelled")):
            await self._settle()
            return CancelOutcome(cancelled=False, record=msgspec.structs.replace(self.record))
        self._set(status="cancelled", ended_at=now, step="cancelled")
        handle = self.record.provider_handle
        remote = None if handle is None else await self._cancel_remote(handle)
        log.info("research.cancelled", job_id=self.record.id, remote=remote)
        await self._settle()
        return CancelOutcome(cancelled=True, record=msgspec.structs.replace(self.record),
                             remote=remote)

    async def _cancel_remote(self, handle: str) -> str | None:
        """Stop the provider's side of a cancelled job; what happened, in words."""
        method = JOB_METHODS.get(self.record.method)
        if method is None or method.cancel_remote is None:
            return None
        try:
            entry = self.services.model(self.record.model, self.record.entry)
            return await method.cancel_remote(await self.services.gateway(), entry, handle)
        except AskAnotherError as exc:
            return f"the provider's side could not be cancelled: {exc}"

    # ----- agent jobs: questions, tool calls ------------------------------------------------

    async def _policy(self) -> Policy:
        """The configured policy with the standing answers of the job's user (read at each
        attempt, so an *always allow* given meanwhile counts from the next one)."""
        rules = await rules_of(await self.services.database(), self.record.user_id)
        return self.services.config.permissions.with_standing(
            {(r.tool, r.scope): r.rule for r in rules})

    def _ask(self, request: PermissionRequest | Choice | SpendRequest, call_id: str,
             caller: Caller) -> None:
        timeout = self.services.config.permission_timeout
        entry = self.questions.add(request, call_id, caller, timeout)
        entry.timer = self.start_task(_expire_after, call_id, timeout)
        log.info("research.question_open", job_id=self.record.id, kind=entry.question.kind,
                 tool_call_id=call_id)
        self._questions_changed()

    def _answer_permission(self, call_id: str, decision: Decision) -> Answered | NotWaiting:
        refusal = self.questions.refusal(self.record.id, call_id, "permission")
        if refusal is not None:
            return refusal
        how = "allowed" if decision == Allow() else "denied"
        self.questions.settle(call_id, decision, f"{how} by the user")
        self._questions_changed()
        return Answered(f"Tool call {call_id!r} of job {self.record.id} was {how}.")

    def _answer_choice(self, call_id: str, option_id: str) -> Answered | NotWaiting:
        refusal = self.questions.refusal(self.record.id, call_id, "choice")
        if refusal is not None:
            return refusal
        choice = self.questions.open[call_id].question.request
        ids = [o.id for o in choice.options] if isinstance(choice, Choice) else []
        if option_id not in ids:
            return NotWaiting(f"{option_id!r} is not an option of tool call {call_id!r}; pick one "
                              f"of {', '.join(repr(i) for i in ids)}. Nothing changed")
        self.questions.settle(call_id, option_id, f"answered with {option_id!r}")
        self._questions_changed()
        return Answered(f"Tool call {call_id!r} of job {self.record.id}: option {option_id!r} "
                        "was chosen.")

    def _cancel_call(self, call_id: str) -> Answered | NotWaiting:
        if call_id in self.questions.open:
            self.questions.settle(call_id, Deny("rejected"), "cancelled by the user")
            self._questions_changed()
            return Answered(f"Tool call {call_id!r} of job {self.record.id} was waiting for an "
                            "answer; it was cancelled and will not run. The job goes on.")
        state = self.tool_states.get(call_id, {}).get("status")
        handle = self.calls.get(call_id)
        if handle is not None and state == "in_progress":
            handle.cancel("cancelled by the user")
            return Answered(f"Tool call {call_id!r} of job {self.record.id} was cancelled; it "
                            "fails with 'cancelled by the user' and the job goes on.")
        if state is not None:
            return NotWaiting(f"tool call {call_id!r} of job {self.record.id} is not running "
                              f"(it is {state}); nothing was cancelled")
        known = ", ".join(repr(k) for k in self.tool_states) or "none yet"
        return NotWaiting(f"job {self.record.id} has no tool call {call_id!r} (its tool calls: "
                          f"{known}); nothing was cancelled")

    def _tool_updated(self, update: Any) -> None:
        state = {"tool_call_id": update.tool_call_id, "title": update.title,
                 "status": update.status}
        if update.current_step:
            state["current_step"] = update.current_step
        self.tool_states[update.tool_call_id] = state
        if update.status in ("completed", "failed"):
            self.calls.pop(update.tool_call_id, None)
        self.record.detail = {**self.record.detail, "tool_calls": list(self.tool_states.values())}
        self.detail_changed = True
        step = f"tool {update.title} ({update.tool_call_id}): {update.status.replace('_', ' ')}"
        if update.current_step:
            step += f": {update.current_step}"
        self._report(step, {"tool_call": state})

    def _questions_changed(self) -> None:
        self.record.waiting_for = self.questions.waiting()
        if self.record.waiting_for:
            first = self.record.waiting_for[0]
            match first.request:
                case PermissionRequest(tool=tool):
                    what = f"permission to run {tool}"
                case SpendRequest():
                    what = "a person to confirm the estimated cost"
                case _:
                    what = "an answer to a question"
            self.record.step = f"waiting for {what} (tool call {first.tool_call_id})"
        self.detail_changed = True
        self._write_soon()
        self._notify(self._update())

    async def _settle(self) -> None:
        """The job is over (here or in the store): answer waiters, close channels, exit."""
        self.questions.close_all()
        self.record.waiting_for = []
        if not self.record.finished:
            store = await self._store()
            stored = await self._stored("settle", lambda: store.get(self.record.id))
            if stored is not None:
                self.record = stored
        final = msgspec.structs.replace(self.record)
        for caller in self.waiters:
            caller.reply(final)
        self.waiters.clear()
        self._notify(self._update())
        for channel in self.subscribers:
            channel.close()
        self.subscribers.clear()
        self.stop()

    def _set(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self.record, key, value)

    def _update(self, detail: dict[str, Any] | None = None) -> JobUpdate:
        return JobUpdate(job_id=self.record.id, status=self.record.status, step=self.record.step,
                         elapsed=self.record.elapsed(time.time()), detail=detail or {},
                         waiting_for=tuple(self.record.waiting_for))

    def _notify(self, update: JobUpdate) -> None:
        for channel in list(self.subscribers):
            self._notify_one(channel, update)

    def _notify_one(self, channel: Any, update: JobUpdate) -> None:
        try:
            channel.send_nowait(update)
        except trio.WouldBlock:
            pass  # a slow subscriber misses an update; it can always ask for Status
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            if channel in self.subscribers:
                self.subscribers.remove(channel)


async def _expire_after(tool_call_id: str, seconds: float) -> Expired:
    await trio.sleep(seconds)
    return Expired(tool_call_id)


def _asks_whom(record: JobRecord) -> str:
    """Whom the job asks, as its spend question names it: its model, or a consensus's panel."""
    panel = record.detail.get("consensus")
    if isinstance(panel, dict) and isinstance(panel.get("models"), list):
        return "a consensus of " + ", ".join(str(m) for m in panel["models"])
    return record.model


def _describe(exc: BaseException) -> str:
    if isinstance(exc, AskAnotherError):
        return str(exc)
    return f"internal error ({type(exc).__name__}: {str(exc)[:200]})"


def _jsonable(value: Any) -> Any:
    """`value` with anything JSON cannot hold turned into text (details are stored as JSON)."""
    import json

    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=str))
