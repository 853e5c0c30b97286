"""`ResearchJobs`: the face of research jobs for the MCP tools and for embedding.

It holds no job state: it stores a new job (owned by this runtime: `Lease`, supervisor.py) and
asks the job supervisor to start it. Every other request goes to the job's actor, found in the
registry as ``("job", job_id)`` when the job runs in this process. A job running in another
process sharing the home is read from the store (its owner writes its live step there), and a
cancel or an answer for it is stored as a request its owner takes within `REQUEST_POLL` seconds
and answers (`JobStore.request` / `request_answer`); the answer says what the owner did, as if
the job ran here. A finished job is read from the store, which holds every state change.

A `ResearchJobs` acts for one user (`User`, users.py; the local user by default): the jobs it
starts are theirs, its listing shows theirs only, and a job of another user is answered as no
job (`UnknownJob`) by every method that takes a job id, before anything is asked of the job,
so an id never tells that it exists. An admin
(the local user is one) sees and acts on every job. With `ASK_ANOTHER_MAX_JOBS_PER_USER`, a
named user's start is refused with `LimitReached` while they have that many unfinished jobs
(counted in the store, so the limit holds across processes and nodes).

    jobs = runtime.jobs_for(user)
    record = await jobs.start("gdr", "What changed in ...?")
    final = await jobs.wait(record.id, timeout=300, on_progress=print_update)
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, get_args

import msgspec
import trio

from ask_another import tracing
from ask_another.calls import CallSettings
from ask_another.catalog import is_deep_research
from ask_another.config import ModelEntry, is_research_agent, no_chat_call
from ask_another.consensus import Consensus
from ask_another.errors import AskAnotherError, Hint, InvalidArgument, LimitReached
from ask_another.interaction.builtin import BUILTIN_NAMES
from ask_another.interaction.protocol import Interaction, valid
from ask_another.interaction.tools import Tool
from ask_another.interaction.types import Allow, Decision, Deny
from ask_another.research.job import (
    DEFAULT_MAX_ATTEMPTS,
    JobOptions,
    Services,
    job_name,
    running_actor,
)
from ask_another.research.lease import Lease
from ask_another.research.messages import (
    Answered,
    AwaitResult,
    Cancel,
    CancelOutcome,
    ChoiceAnswer,
    JobUpdate,
    NotWaiting,
    PermissionAnswer,
    Status,
    Subscribe,
)
from ask_another.research.methods import CONSENSUS_METHOD, DEPTHS, METHODS
from ask_another.research.supervisor import (
    JOB_OWNER,
    JOBS_SUPERVISOR,
    GetLease,
    JobStarted,
    job_spec,
)
from ask_another.spend.before import estimate_json, estimate_research
from ask_another.spend.budget import ceilings, check_budget
from ask_another.spend.estimate import Estimate
from ask_another.store.answers import answered, record_answer
from ask_another.store.jobs import JobEvent, JobRecord, JobStore, RequestKind, job_store
from ask_another.users import LOCAL_USER, User
from supervisors import (
    ActorExited,
    CallTimeout,
    DynamicSupervisorRef,
    MailboxFull,
    Registry,
    StartError,
)

__all__ = ["PROGRESS_EVERY", "REQUEST_WAIT", "ResearchJobs", "UnknownJob"]

PROGRESS_EVERY: Final = 5.0
"""Seconds between progress reports while waiting, when nothing else happened (MCP asks <= 10)."""

REQUEST_WAIT: Final = 10.0
"""Seconds a request for a job in another process waits for its owner's answer."""
DELIVERY_WAIT: Final = 40.0
"""Seconds to wait for the answer to a request the owner has taken (it acts within 30 s)."""
MOVES: Final = 3
"""How many owners a cancel follows, when the job moves (a lapsed lease) as it arrives."""
RESTART_WAIT: Final = 30.0
"""Seconds a cancel waits for a job of this process stopped by the fence to start again."""
STORE_POLL: Final = 0.25
"""Seconds between two reads of a job running in another process, while waiting on it."""
MAX_QUERY: Final = 100_000


class UnknownJob(AskAnotherError):
    """No research job has this id."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__(f"No research job has the id {job_id!r}.", hint="list_jobs")


ProgressFn = Callable[[JobUpdate], Awaitable[None]]


class ResearchJobs:
    """Start, inspect, wait for and cancel research jobs (see the module docstring)."""

    def __init__(self, services: Services, user: User = LOCAL_USER, *,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, lease: Lease | None = None) -> None:
        self.services = services
        self.user = user
        self.max_attempts = max_attempts
        self._lease = lease

    def _allowed(self, record: JobRecord) -> JobRecord:
        """`record`, if this face's user may see it; raises `UnknownJob` otherwise: another
        user's job and no job get one answer, so an id tells nobody that it exists."""
        if not self.user.can_see(record.user_id):
            raise UnknownJob(record.id)
        return record

    async def _check(self, job_id: str) -> None:
        """Refuse (`UnknownJob`) a job of another user before anything is asked of it; an admin
        is never refused, so this reads nothing for them."""
        if not self.user.admin:
            self._allowed(await self._stored(job_id))

    @property
    def registry(self) -> Registry:
        return self.services.registry

    async def lease(self) -> Lease:
        """This runtime's lease (owner id and duration): fixed for the runtime's life, so it is
        asked of its `JobOwner` only when the runtime did not hand it over (a burst of thousands
        of starts would otherwise overflow the owner's mailbox)."""
        if self._lease is not None:
            return self._lease
        owner = self.registry.whereis(JOB_OWNER)
        if owner is None:
            raise AskAnotherError("the research job owner is restarting; try again shortly")
        lease: Lease = await owner.call(GetLease())
        return lease

    async def start(self, model: str, query: str, method: str = "auto", *,
                    interaction: Interaction | None = None,
                    tools: Iterable[Tool] = (), depth: str = "standard") -> JobRecord:
        """Store a new job and start its actor; returns the job as stored (pending).

        `method`: a name in `METHODS` ("provider", "agent", "sequential") or "auto": "provider"
        for deep-research models, "sequential" (the local pipeline) for every other model. For
        an agent job, `interaction` (an embedding host's) answers its permission requests and
        choices instead of `answer_permission` / `answer_choice`, and `tools` are offered next
        to the built-in ones. `depth` (shallow, standard, deep): how many queries the local
        pipeline plans.
        Raises `ModelNotAllowed` / `AmbiguousModel` or `InvalidArgument` for a bad request,
        `BudgetExceeded` when its estimate would cross a budget ceiling, and `LimitReached` when
        a named user already has `ASK_ANOTHER_MAX_JOBS_PER_USER` unfinished jobs.
        """
        entry = self.services.config.resolve(model)
        if method == "auto":
            method = "provider" if is_deep_research(entry.model) else "sequential"
        if method not in METHODS:
            raise InvalidArgument(f"unknown research method {method!r}; use auto or one of "
                                  f"{', '.join(sorted(METHODS))}")
        if method != "provider" and is_research_agent(entry.model):
            # The sequential pipeline and the agent make chat calls: refused before anything
            # is stored, instead of a job that fails with the provider's bare "Not Found".
            raise InvalidArgument(f"method {method!r} makes chat calls: "
                                  f"{no_chat_call(entry.model)}", hint="run_research")
        if depth not in DEPTHS:
            raise InvalidArgument(f"unknown research depth {depth!r}; use one of "
                                  f"{', '.join(DEPTHS)}")
        tools = tuple(tools)
        if (interaction is not None or tools) and method != "agent":
            raise InvalidArgument(f"an interaction and tools apply to method 'agent' only, not "
                                  f"{method!r}")
        if interaction is not None and not valid(interaction):
            raise InvalidArgument("interaction does not implement the Interaction protocol")
        names = [t.name for t in tools]
        clash = sorted({n for n in names if names.count(n) > 1 or n in BUILTIN_NAMES})
        if clash:
            raise InvalidArgument(f"tool names must be unique and not shadow a built-in tool: "
                                  f"{', '.join(clash)}")
        query = query.strip()
        if not query:
            raise InvalidArgument("the research query is empty")
        if len(query) > MAX_QUERY:
            raise InvalidArgument(f"the research query is {len(query)} characters long; at "
                                  f"most {MAX_QUERY} are allowed")
        # Estimated once, here, with the entry resolved above: refused before anything is
        # stored when it would cross a budget ceiling, whichever face starts it (the tool, the
        # command line, the library); stored with the job, which asks a person to confirm it
        # above ASK_ANOTHER_CONFIRM_USD, and stated by start_research.
        estimate = await estimate_research(self.services, entry, query, method)
        if ceilings(self.services):
            await check_budget(self.services, estimate, "this research job", self.user.id)
        async with self.services.starting:  # a burst queues here (services.py)
            return await self._store_and_start(entry, query, method, {"depth": depth},
                                               JobOptions(interaction, tools), estimate)

    async def start_consensus(self, models: Sequence[str], prompt: str, *,
                              system: str | None = None,
                              stances: Mapping[str, str] | None = None,
                              synthesize: str | None = None, conversation_id: str | None = None,
                              temperature: float | None = None, timeout: float | None = None,  # noqa: ASYNC109 - per model call
                              ) -> JobRecord:
        """Store a consensus as a job (method "consensus", research/methods/consensus.py) and
        start it; returns the job as stored (pending). The arguments are `Consensus.ask`'s,
        validated here the same way (and refused the same way) before anything is stored; the
        job asks a person to confirm the panel's estimate above ASK_ANOTHER_CONFIRM_USD, as a
        research job does. Its report, once completed, is the consensus tool's answer."""
        CallSettings(temperature, timeout)  # InvalidArgument for a value out of range
        consensus = Consensus(self.services, self.user)
        estimate = await consensus.estimate(models, prompt, system=system, stances=stances,
                                            synthesize=synthesize,
                                            conversation_id=conversation_id)
        if ceilings(self.services):
            await check_budget(self.services, estimate, "this consensus", self.user.id)
        panel = [seat.entry.model for seat in consensus.seats(models, stances)]
        arguments = {"models": panel, "system": system, "stances": dict(stances or {}),
                     "synthesize": synthesize, "conversation_id": conversation_id,
                     "temperature": temperature, "timeout": timeout, "admin": self.user.admin}
        entry = self.services.config.resolve(panel[0])
        async with self.services.starting:
            return await self._store_and_start(entry, prompt.strip(), CONSENSUS_METHOD,
                                               {"consensus": arguments}, JobOptions(), estimate)

    async def _store_and_start(self, entry: ModelEntry, query: str, method: str,
                               detail: dict[str, Any], options: JobOptions, estimate: Estimate
                               ) -> JobRecord:
        lease = await self.lease()
        taken = lease.wall()
        record = JobRecord(id=_new_id(), model=entry.model, query=query, method=method,
                           created_at=time.time(), entry=entry.variable,
                           detail={**detail, "estimate": estimate_json(estimate)},
                           owner=lease.owner,
                           lease_expires=taken + lease.seconds, user_id=self.user.id,
                           traceparent=tracing.traceparent())
        store = await self._store()
        limit = self.services.config.max_jobs_per_user
        limited = limit > 0 and not self.user.local
        if not await store.insert(record, taken, max_running=limit if limited else None):
            running = await store.running(self.user.id)
            raise LimitReached(
                f"Limit reached: at most {limit} job{'s' if limit != 1 else ''} (research or "
                "consensus) running at once per user "
                f"(ASK_ANOTHER_MAX_JOBS_PER_USER); you have {running} running",
                hint="free_a_job")
        try:
            await self._start_child(record, options)
        except (StartError, AskAnotherError) as exc:
            now = time.time()
            reason = f"the job could not be started: {exc}"
            await store.finish(record.id, "failed", ended_at=now, error=reason,
                               event=JobEvent(job_id=record.id, at=now, step="failed"))
            raise AskAnotherError(reason) from None
        owner = self.registry.whereis(JOB_OWNER)
        # A per-session face's owner makes sure the job host runs; if its mailbox is full (a
        # burst of starts), its next renewal does.
        with contextlib.suppress(MailboxFull, ActorExited):
            if owner is not None:
                owner.cast(JobStarted(record.id))
        return record

    async def _start_child(self, record: JobRecord, options: JobOptions | None = None) -> None:
        supervisor = self.registry.whereis(JOBS_SUPERVISOR)
        if not isinstance(supervisor, DynamicSupervisorRef):
            raise AskAnotherError("the research job supervisor is restarting; try again shortly")
        spec = job_spec(record, self.services, self.max_attempts, options)
        delay = 0.001
        while True:
            try:
                await supervisor.start_child(spec)
                return
            except MailboxFull:
                # Hundreds of starts at once: wait for the supervisor to catch up.
                await trio.sleep(delay)
                delay = min(delay * 2, 0.1)

    async def get(self, job_id: str) -> JobRecord:
        """The job's current record: from its actor while it runs, else from the store."""
        ref = self.registry.whereis(job_name(job_id))
        if ref is not None:
            try:
                record: JobRecord = await ref.call(Status())
                return self._allowed(record)
            except (ActorExited, CallTimeout):
                pass  # it just finished (or crashed), or is busy: the store has its state
        return self._allowed(await self._stored(job_id))

    async def list(self, limit: int = 200) -> list[JobRecord]:
        """Every job of this face's user (an admin: every job), newest first (reports left
        out)."""
        return await (await self._store()).recent(limit, self.user)

    async def cancel(self, job_id: str) -> CancelOutcome:
        """Cancel a job; the outcome says whether it was still running and what was stopped.

        A job running in another process is cancelled by its owner (a stored request)."""
        await self._check(job_id)
        for _ in range(MOVES):
            ref = self.registry.whereis(job_name(job_id))
            if ref is not None:
                try:
                    outcome: CancelOutcome = await ref.call(Cancel(), timeout=30)
                    return outcome
                except ActorExited:
                    pass  # it finished just now: the store says how
            record = await self._stored(job_id)
            if record.finished:
                return CancelOutcome(cancelled=False, record=record)
            ours = (await self.lease()).owner
            if record.owner == ours:
                # No actor here: cancelled in the store only, a Gemini job the fence stopped
                # would leave its interaction running at the provider, unseen, once the fence
                # ended. Its actor is waited for instead.
                with trio.move_on_after(RESTART_WAIT):
                    await running_actor(self.registry, await self._store(), job_id, ours)
                    continue  # its actor is back, or the job ended or moved: look again
            if record.owner is None or record.owner == ours:
                break
            answer = await self._request(record, "cancel")
            if answer.get("moved"):
                # Its owner's lease lapsed and another process (perhaps this one) took it
                # over as the request arrived: ask whoever holds it now.
                continue
            if not answer.get("ok"):
                raise AskAnotherError(str(answer.get("message")), hint=_hint(answer))
            return CancelOutcome(cancelled=bool(answer.get("cancelled")),
                                 record=await self._stored(job_id), remote=answer.get("remote"))
        else:
            raise AskAnotherError(f"job {job_id} moved between ask-another processes {MOVES} "
                                  "times while it was being cancelled. Nothing changed; try "
                                  "again", hint="check_job")
        # Ours (or from before leases) with no actor: cancel it in the store.
        now = time.time()
        cancelled = await (await self._store()).finish(
            job_id, "cancelled", ended_at=now, step="cancelled",
            event=JobEvent(job_id=job_id, at=now, step="cancelled"))
        return CancelOutcome(cancelled=cancelled, record=await self._stored(job_id))

    async def _request(self, record: JobRecord, kind: RequestKind,
                       tool_call_id: str | None = None, value: str | None = None
                       ) -> dict[str, Any]:
        """Store a request for the job's owner in another process and wait for its answer."""
        store = await self._store()
        request_id = await store.request(record.id, kind, tool_call_id, value, now=time.time())
        with trio.move_on_after(REQUEST_WAIT):
            while True:
                answer = await store.request_answer(request_id)
                if answer is not None:
                    return answer
                await trio.sleep(0.05)
        if await store.withdraw_request(request_id):
            stored = await self._stored(record.id)
            if stored.finished:
                if kind == "cancel":
                    return {"ok": True, "cancelled": False, "remote": None}
                return {"ok": False, "message": f"job {record.id} is {stored.status} and "
                                                "waits for nothing. This changes nothing"}
            raise AskAnotherError(
                f"job {record.id} runs in another ask-another process ({stored.owner}), which "
                f"did not take the request within {REQUEST_WAIT:g} s; if that process has "
                "stopped, the job is taken over once its lease expires. Nothing changed; try "
                "again shortly")
        # Taken just now: its answer is on the way.
        with trio.move_on_after(DELIVERY_WAIT):
            while True:
                answer = await store.request_answer(request_id)
                if answer is not None:
                    return answer
                await trio.sleep(0.05)  # another process writes it: nothing here to wait on
        raise AskAnotherError(
            f"job {record.id} runs in another ask-another process, which took the request but "
            f"did not say what it did within {DELIVERY_WAIT:g} s", hint="check_job")

    async def cancel_call(self, job_id: str, tool_call_id: str) -> str:
        """Cancel one tool call of a running agent job (the job goes on); returns what happened.

        A running call fails with "cancelled by the user"; a call waiting for permission is
        denied. Raises `AskAnotherError` when there is no such call to cancel.
        """
        return await self._answer(job_id, Cancel(tool_call_id), "cancel a tool call of")

    async def answer_permission(self, job_id: str, tool_call_id: str, decision: Decision, *,
                                face: str = "library", answer: str | None = None,
                                rule: str | None = None) -> str:
        """Answer a permission request of an agent job, or a job's spend confirmation, with a
        `Decision` (`Allow()` or `Deny()`).

        Returns what the job did; raises `InvalidArgument` for anything but a `Decision`, and
        `AskAnotherError` (changing nothing) for a late, repeated or unknown answer. An answer
        the job took is audited (store/answers.py) as this face's user's, given through `face`
        (``console``, ``mcp``, ``terminal``, ``elicitation``, ``task``; ``library`` for an
        embedding's own call), as `answer` (default ``allow`` / ``deny``), with the denial's
        message as its reason and `rule`, the standing rule the answer made, if any.
        """
        if not isinstance(decision, Allow | Deny):
            raise InvalidArgument(f"decision must be a Decision, Allow() or Deny(), not "
                                  f"{decision!r}; nothing changed")
        tool = await self._asked_tool(job_id, tool_call_id)
        said = await self._answer(job_id, PermissionAnswer(tool_call_id, decision),
                                  "answer a permission request of")
        reason = decision.message if isinstance(decision, Deny) else None
        await self._audit(job_id, face, tool_call_id, tool,
                          answer or ("allow" if isinstance(decision, Allow) else "deny"),
                          reason, rule)
        return said

    async def answer_choice(self, job_id: str, tool_call_id: str, option_id: str, *,
                            face: str = "library") -> str:
        """Answer an ask_user question of an agent job with the chosen option's id (see
        `answer_permission` for the failures and the audit)."""
        said = await self._answer(job_id, ChoiceAnswer(tool_call_id, option_id),
                                  "answer a question of")
        await self._audit(job_id, face, tool_call_id, "ask_user", f"option:{option_id}")
        return said

    async def _asked_tool(self, job_id: str, tool_call_id: str) -> str:
        """The tool whose call `tool_call_id` of the job waits (``confirm_spend`` for a spend
        confirmation), as the audit names it; read before the answer settles it."""
        for question in (await self.get(job_id)).waiting_for:
            if question.tool_call_id == tool_call_id:
                if question.kind == "spend":
                    return "confirm_spend"
                return str(getattr(question.request, "tool", "") or "ask_user")
        return ""  # not waiting: the answer is refused, and nothing is audited

    async def _audit(self, job_id: str, face: str, tool_call_id: str, tool: str, answer: str,
                     reason: str | None = None, rule: str | None = None) -> None:
        await record_answer(await self.services.database(), answered(
            job_id, self.user, face, tool_call_id, tool, answer, reason, rule))

    async def _answer(self, job_id: str, message: Any, what: str) -> str:
        await self._check(job_id)
        ref = self.registry.whereis(job_name(job_id))
        reply: Any = None
        if ref is not None:
            try:
                reply = await ref.call(message)
            except ActorExited:
                ref = None
        if ref is None:
            record = await self._stored(job_id)
            if not record.finished and record.owner is not None and \
                    record.owner != (await self.lease()).owner:
                kind, value = _request_of(message)
                answer = await self._request(record, kind, message.tool_call_id, value)
                if not answer.get("ok"):
                    raise AskAnotherError(str(answer.get("message")), hint=_hint(answer))
                return str(answer.get("message"))
            raise AskAnotherError(f"Cannot {what} job {job_id}: it is {record.status} and "
                                  "waits for nothing. This changes nothing")
        if isinstance(reply, NotWaiting):
            raise reply.error()
        assert isinstance(reply, Answered)
        return reply.message

    async def _store(self) -> JobStore:
        return job_store(await self.services.database())

    async def _stored(self, job_id: str) -> JobRecord:
        found = await (await self._store()).get(job_id)
        if found is None:
            raise UnknownJob(job_id)
        return found

    async def wait(self, job_id: str, timeout: float, on_progress: ProgressFn | None = None,  # noqa: ASYNC109
                   progress_every: float = PROGRESS_EVERY) -> JobRecord:
        """Wait up to `timeout` seconds for the job to finish; return its record either way.

        With `on_progress`, every update the job reports is passed on, and at least every
        `progress_every` seconds the current state. Cancelling the wait leaves the job running.
        """
        await self._check(job_id)
        deadline = trio.current_time() + timeout
        shown: tuple[str, str | None] | None = None
        last_shown = trio.current_time()
        while True:
            ref = self.registry.whereis(job_name(job_id))
            if ref is None:
                # Running in another process (or between a crash and its restart here): its
                # owner writes its step to the store; read it there.
                record = await self._stored(job_id)
                if record.finished or trio.current_time() >= deadline:
                    return record
                now = trio.current_time()
                if on_progress is not None and ((record.status, record.step) != shown
                                                or now - last_shown >= progress_every):
                    shown, last_shown = (record.status, record.step), now
                    await on_progress(JobUpdate(
                        job_id=record.id, status=record.status, step=record.step,
                        elapsed=record.elapsed(time.time()),
                        waiting_for=tuple(record.waiting_for)))
                await trio.sleep(min(STORE_POLL, max(0.0, deadline - trio.current_time())))
                continue
            if on_progress is None:
                # Nothing to relay: no channel, no nursery, only the call (the common case of
                # many waiting callers, so it stays small).
                with trio.move_on_at(deadline):
                    try:
                        done: JobRecord = await ref.call(AwaitResult(), timeout=None)
                        if done.finished:
                            return done
                        # Relinquished unfinished (the fence, or another process took it):
                        # it goes on here again or elsewhere; look again.
                    except ActorExited:
                        pass  # crashed and restarting, or finished: look again
                if trio.current_time() < deadline:
                    # `call` raises ActorExited without a checkpoint: yield before looking again.
                    await trio.sleep(0.01)
                    continue
                return await self.get(job_id)
            send, receive = trio.open_memory_channel[JobUpdate](64)
            with send:
                final: JobRecord | None = None
                exited = False
                async with trio.open_nursery() as nursery:
                    # Bounded by the caller's deadline, not the call's default 5 s: a job writes
                    # its state changes before it reads its mailbox again, and 200 jobs on one
                    # SQLite file at load 10 kept such a write past 5 s.
                    subscribed = False
                    with trio.move_on_at(deadline):
                        try:
                            await ref.call(Subscribe(send), timeout=None)
                            subscribed = True
                        except ActorExited:
                            continue  # finished or crashed just now: look again
                    if not subscribed:
                        return await self.get(job_id)
                    nursery.start_soon(relay_progress, ref, receive, on_progress,
                                       progress_every)
                    with trio.move_on_at(deadline):
                        try:
                            final = await ref.call(AwaitResult(), timeout=None)
                        except ActorExited:
                            exited = True  # crashed and restarting, or finished: look again
                    nursery.cancel_scope.cancel()
            if final is not None and final.finished:
                return final
            if final is None and not exited:
                return await self.get(job_id)
            if final is not None and trio.current_time() >= deadline:
                return final
            await trio.sleep(0.01)  # relinquished unfinished, or exited: look again


async def relay_progress(ref: Any, receive: trio.MemoryReceiveChannel[JobUpdate],
                         on_progress: ProgressFn, every: float) -> None:
    """Pass the job's updates to `on_progress`, and its status every `every` seconds when it
    sends none (a heartbeat, so a client's progress-based timeout keeps resetting)."""
    while True:
        update: JobUpdate | None = None
        with trio.move_on_after(every):
            try:
                update = await receive.receive()
            except trio.EndOfChannel:
                return
        if update is None:
            try:
                record: JobRecord = await ref.call(Status())
            except ActorExited:
                return
            except CallTimeout:
                # The job is busy (its mailbox behind store writes: 200 jobs on one SQLite file
                # at load 8 kept one over 5 s). A heartbeat is not worth failing the caller's
                # call for: skip this beat.
                continue
            update = JobUpdate(job_id=record.id, status=record.status, step=record.step,
                               elapsed=record.elapsed(time.time()),
                               waiting_for=tuple(record.waiting_for))
        await on_progress(update)


def _hint(answer: dict[str, Any]) -> Hint | None:
    # The next step another process's owner gave its refusal (stored as JSON, so checked).
    hint = answer.get("hint")
    return hint if hint in get_args(Hint) else None


def _request_of(message: Any) -> tuple[RequestKind, str | None]:
    match message:
        case PermissionAnswer(decision=decision):
            return "permission", msgspec.json.encode(decision).decode()
        case ChoiceAnswer(option_id=option_id):
            return "choice", option_id
    return "cancel_call", None


def _new_id() -> str:
    return "r-" + secrets.token_hex(5)
