"""The research part of the supervision tree: the job supervisor and the job owner.

    research  (Supervisor, rest_for_one)
    ├── research.jobs      DynamicSupervisor: one transient `ResearchJob` child per job
    └── research.owner     `JobOwner`: this process's leases, the requests other processes
                           made for its jobs, and the takeover of jobs whose owner died

`research_spec(config, registry)` is the child spec the runtime adds under its root supervisor.
`rest_for_one`: if the job supervisor itself is ever restarted (its jobs die with it), the owner
runs again after it and takes its own jobs over, as after a server restart.

Several processes share one ASK_ANOTHER_HOME (every client session starts a server). A running
job belongs to exactly one of them, named by `Lease.owner` in the job's row with a lease expiry
(store/jobs.py, `JobStore`). `JobOwner` keeps this process's leases alive with one statement per
heartbeat (every `lease_seconds / 3`) for all its jobs, takes the requests stored for its jobs
every `REQUEST_POLL` seconds and delivers them to the job actors, writing back what they did, and
at start-up and every `lease_seconds / 2` takes over the jobs whose lease has expired: their
process died (kill -9, a crash, a sleeping machine). A takeover is one guarded UPDATE, so two
processes never both take a job; the winner resumes the job when its method can (a Gemini
interaction the provider holds, polled again from its saved id) or fails it with a reason saying
its owner stopped. Nothing is silently lost and nothing is re-run and billed twice.

Where a job goes when its process ends (docs/architecture.md, "Where a job lives") is this
owner's `Ownership`: `TakeOver` (the job host, `serve --http` nodes, an embedding program) takes
over released and expired jobs as above, the job host at every request poll; `HandOff` (a
per-session face: the stdio server, the people commands) takes over no other process's job,
since a process that lives for one tool call would be interrupted again at once and its step in
flight run twice, and makes sure the home's job host runs whenever it starts, holds or finds an
unfinished job (research/host.py), so the host takes its jobs when it ends.

Fencing (research/lease.py): when this owner has not renewed its leases for most of a lease (the
database cannot be reached), it stops every job running here, writing nothing, before another
node can take them over; the first renewal that goes through afterwards starts again those it
still holds (resumed, or failed with the reason: `FENCED`), and the others are another node's.

The job supervisor's restart intensity is high (`JOB_RESTARTS` per `JOB_RESTART_SECONDS`): it
is shared by all jobs, and a restart is for a bug only (retries are a loop inside the job, see
job.py), so the bound is there to stop a runaway loop, not to count provider errors.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec
import trio

from ask_another.errors import AskAnotherError
from ask_another.interaction.types import Decision, Deny
from ask_another.logs import get_logger
from ask_another.research.host import HostUnavailable
from ask_another.research.job import (
    DEFAULT_MAX_ATTEMPTS,
    JobOptions,
    ResearchJob,
    Services,
    job_name,
    running_actor,
)
from ask_another.research.lease import (
    REQUEST_POLL,
    HeartbeatStatistics,
    Lease,
    heartbeat,
    new_owner,
)
from ask_another.research.messages import (
    Answered,
    Cancel,
    CancelOutcome,
    ChoiceAnswer,
    NotWaiting,
    PermissionAnswer,
    Relinquish,
)
from ask_another.research.methods import JOB_METHODS
from ask_another.store.jobs import JobEvent, JobRecord, JobRequest, job_store
from supervisors import (
    Actor,
    ActorExited,
    Caller,
    ChildSpec,
    DynamicSupervisorRef,
    Start,
    TaskDone,
    TaskHandle,
    child_spec,
    dynamic_supervisor_spec,
    supervisor_spec,
)

__all__ = [
    "FENCED",
    "INTERRUPTED",
    "JOBS_SUPERVISOR",
    "JOB_OWNER",
    "JOB_RESTARTS",
    "JOB_RESTART_SECONDS",
    "OWNER_DIED",
    "GetLease",
    "GetStatistics",
    "HandOff",
    "JobOwner",
    "JobStarted",
    "Ownership",
    "TakeOver",
    "job_spec",
    "research_spec",
]

log = get_logger("ask_another.research")

JOBS_SUPERVISOR: Final = "research.jobs"
JOB_OWNER: Final = "research.owner"
JOB_RESTARTS: Final = 100_000
JOB_RESTART_SECONDS: Final = 10.0
INTERRUPTED: Final = "interrupted by a server restart"
"""Why a job that cannot resume was failed when no owner holds it: its server handed it back
as it stopped (SIGTERM, the end of a session), or it dates from before leases."""
OWNER_DIED: Final = ("the ask-another server running it stopped before it finished (its lease "
                     "expired)")
"""Why a job whose owner died and that cannot resume was failed (followed by who and why)."""
FENCED: Final = ("it was stopped while the database could not be reached, so that no other "
                 "node would run it at the same time")
"""Why a job stopped by the fence and that cannot resume was failed."""
JOB_MAILBOX: Final = 256
DELIVER_TIMEOUT: Final = 30.0


@dataclass(frozen=True, slots=True)
class GetLease:
    """Ask the `JobOwner` for this runtime's `Lease`."""


@dataclass(frozen=True, slots=True)
class GetStatistics:
    """Ask the `JobOwner` for a copy of its `HeartbeatStatistics`."""


@dataclass(frozen=True, slots=True)
class JobStarted:
    """Told to the `JobOwner` (a cast) when a job has started in this runtime."""

    job_id: str


@dataclass(frozen=True, slots=True)
class TakeOver:
    """An owner that takes over the jobs other processes handed back or left with an expired
    lease: at start-up and every sweep (`lease / 2`), or with `prompt` (the job host) at every
    request poll, so a job a session handed back as it ended moves within a second."""

    prompt: bool = False


@dataclass(frozen=True, slots=True)
class HandOff:
    """A per-session face's owner: it takes over no other process's job, and whenever it starts,
    holds (at each renewal) or finds (at start-up and each sweep) an unfinished job it awaits
    `ensure_host` (research/host.py: the home's job host runs, started if not; it returns the
    host's pid; None: nothing is started, as `doctor`). Should no host be able to run here, it
    logs why and takes jobs over itself after all, as a `TakeOver` owner."""

    ensure_host: Callable[[], Awaitable[int]] | None


Ownership = TakeOver | HandOff


def job_spec(record: JobRecord, services: Services,
             max_attempts: int = DEFAULT_MAX_ATTEMPTS,
             options: JobOptions | None = None) -> ChildSpec:
    """The child spec of one job: transient (restarted only after a crash: a bug), registered by
    id."""
    return ChildSpec(
        id=record.id,
        start=Start(ResearchJob, (record, services, max_attempts, options),
                    name=job_name(record.id),
                    registry=services.registry, mailbox_size=JOB_MAILBOX),
        restart="transient",
        shutdown=5.0,
    )


def research_spec(services: Services, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                  lease: Lease | None = None, ownership: Ownership | None = None) -> ChildSpec:
    """The `research` subtree for the runtime's root supervisor (`lease`: this runtime's, made
    here unless given; `ownership`: `TakeOver()` unless given)."""
    registry = services.registry
    lease = lease if lease is not None else Lease(new_owner(), services.config.lease_seconds)
    return supervisor_spec(
        "research",
        [
            dynamic_supervisor_spec(JOBS_SUPERVISOR, max_restarts=JOB_RESTARTS,
                                    max_seconds=JOB_RESTART_SECONDS, name=JOBS_SUPERVISOR,
                                    registry=registry),
            child_spec(JobOwner, services, lease, max_attempts,
                       ownership if ownership is not None else TakeOver(), name=JOB_OWNER,
                       registry=registry),
        ],
        "rest_for_one",
        name="research",
        registry=registry,
    )


class JobOwner(Actor):
    """This runtime's leases: takes over expired jobs at start-up, then runs the heartbeat
    (renewals, requests from other processes, later takeovers) in a task it owns."""

    async def init(self, services: Services, lease: Lease,
                   max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                   ownership: Ownership | None = None) -> None:
        self.services = services
        self.lease = lease
        self.max_attempts = max_attempts
        self.ownership: Ownership = ownership if ownership is not None else TakeOver()
        self.store = job_store(await services.database())
        self.statistics = HeartbeatStatistics()
        self.fenced: set[str] = set()  # jobs stopped by the fence, to start again after it
        self.fencing = False  # between the fence and the renewal that ends it
        self.ensuring: TaskHandle | None = None  # making sure the job host runs, while it does
        self.ensure_again = False
        self.host: int | None = None  # the job host's pid, as last seen
        # Start-up recovery, before the runtime serves a tool call: jobs whose owner died (or
        # this owner's own, when the job supervisor was restarted).
        await self._take_over(await self.store.expired(lease.wall()), at_start=True)
        if isinstance(self.ownership, HandOff) and await self.store.unfinished():
            self._ensure_host()  # jobs of other sessions, running or left: the host's to take
        self.beat = self.start_task(self._heartbeat)

    async def _heartbeat(self) -> None:
        prompt = isinstance(self.ownership, TakeOver) and self.ownership.prompt
        await heartbeat(self.store, self.lease, on_renewed=self._renewed,
                        on_requests=self._requests, on_expired=self._take_over,
                        on_fenced=self._fence, on_unfenced=self._unfence,
                        slow_is_away=self.store.db.dialect == "postgres",
                        sweep_every=REQUEST_POLL if prompt else None,
                        statistics=self.statistics)

    # ----- the job host (a per-session face's owner) ----------------------------------------

    def _ensure_host(self) -> None:
        """Make sure the home's job host runs, in a task (one at a time: starts asked for
        meanwhile are folded into one more look)."""
        if not isinstance(self.ownership, HandOff) or self.ownership.ensure_host is None:
            return
        if self.ensuring is not None:
            self.ensure_again = True
            return
        self.ensuring = self.start_task(self._ensuring, self.ownership.ensure_host)

    async def _ensuring(self, ensure_host: Callable[[], Awaitable[int]]) -> None:
        try:
            while True:
                self.ensure_again = False
                try:
                    host = await ensure_host()
                except (HostUnavailable, OSError) as exc:
                    log.warning("research.host_unavailable", reason=str(exc),
                                owner=self.lease.owner,
                                using="this process takes jobs over itself")
                    self.ownership = TakeOver()
                    return
                if host != self.host:
                    log.info("research.job_host", pid=host, owner=self.lease.owner)
                    self.host = host
                if not self.ensure_again:
                    return
        finally:
            self.ensuring = None

    async def handle_cast(self, msg: Any) -> None:
        if isinstance(msg, JobStarted):
            self._ensure_host()
            return
        await super().handle_cast(msg)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if isinstance(msg, GetLease):
            return self.lease
        if isinstance(msg, GetStatistics):
            return dataclasses.replace(self.statistics)
        return await super().handle_call(msg, caller)

    async def handle_info(self, msg: Any) -> None:
        if isinstance(msg, TaskDone) and msg.task is not self.beat:
            return  # a delivered request, or a look at the job host
        await super().handle_info(msg)

    # ----- takeover --------------------------------------------------------------------------

    async def _take_over(self, records: list[JobRecord], at_start: bool = False) -> None:
        registry = self.services.registry
        supervisor = registry.whereis(JOBS_SUPERVISOR)
        assert isinstance(supervisor, DynamicSupervisorRef)
        resumed = failed = left = 0
        for record in records:
            if registry.whereis(job_name(record.id)) is not None:
                # Ours and alive: our own renewals failed for a while. Take the lease back.
                await self.store.claim(record.id, self.lease.owner, self.lease.until(),
                                       self.lease.wall())
                continue
            if isinstance(self.ownership, HandOff) and record.owner != self.lease.owner:
                left += 1  # another process's: the job host's to take (ours, after a fence,
                continue   # or an actor that stopped here, are restarted here as before)
            if not await self.store.claim(record.id, self.lease.owner, self.lease.until(),
                                          self.lease.wall()):
                continue  # another process took it first, or it finished meanwhile
            method = JOB_METHODS.get(record.method)
            mine = msgspec.structs.replace(record, owner=self.lease.owner,
                                           lease_expires=self.lease.until())
            reason = self._reason(record)
            self.fenced.discard(record.id)
            if method is not None and method.resumable(record):
                log.info("research.taken_over", job_id=record.id, previous_owner=record.owner,
                         owner=self.lease.owner)
                await supervisor.start_child(job_spec(mine, self.services, self.max_attempts))
                resumed += 1
                continue
            now = time.time()
            await self.store.finish(record.id, "failed", ended_at=now, step="failed",
                                    error=reason, event=JobEvent(job_id=record.id, at=now,
                                                                 step="failed",
                                                                 detail={"error": reason}))
            failed += 1
        if resumed or failed:
            log.info("research.recovered", resumed=resumed, failed=failed, at_start=at_start)
        if left:
            self._ensure_host()

    def _reason(self, record: JobRecord) -> str:
        if record.owner is None:
            reason = INTERRUPTED  # a job from before leases were kept
        elif record.id in self.fenced:
            reason = FENCED
        elif record.owner == self.lease.owner:
            reason = "its job actor stopped in this process before it finished"
        else:
            reason = f"{OWNER_DIED}: process {record.owner}"
        if record.status == "pending":
            return reason + ", before it started"
        return reason + "; its work cannot be resumed without running it (and billing it) again"

    async def _fence(self) -> None:
        """The leases are about to lapse unrenewed: stop every job running here, writing
        nothing (a write could not reach the database anyway), so that a node taking them over
        never runs one beside us."""
        self.fencing = True
        for name in self.services.registry.names():
            if isinstance(name, tuple) and len(name) == 2 and name[0] == "job":
                ref = self.services.registry.whereis(name)
                if ref is not None:
                    self.fenced.add(name[1])
                    log.warning("research.job_fenced", job_id=name[1], owner=self.lease.owner)
                    ref.send(Relinquish())

    async def _unfence(self, held: set[str]) -> None:
        """After the fence, a renewal went through in time: the stopped jobs still ours start
        again (resumed, or failed with the reason); the others are another node's now."""
        self.fencing = False
        await self._restart_fenced(held)

    async def _restart_fenced(self, held: set[str]) -> None:
        """Start again the fenced jobs that `held` (a renewal's) still names and whose actor has
        exited; one still exiting (its last write waits for the database) is started at a
        later renewal."""
        registry = self.services.registry
        self.fenced &= held
        records = []
        for job_id in sorted(self.fenced):
            if registry.whereis(job_name(job_id)) is not None:
                continue  # still stopping: the next renewal starts it
            stored = await self.store.get(job_id)
            if stored is not None and not stored.finished:
                records.append(stored)
            else:
                self.fenced.discard(job_id)
        if records:
            await self._take_over(records)

    async def _renewed(self, held: set[str]) -> None:
        """After a renewal: a job running here whose lease another process holds now (our beats
        failed for longer than a lease) stops here, without writing anything; after a fence,
        the jobs it stopped start again as their actors exit."""
        if self.fenced and not self.fencing:
            await self._restart_fenced(held)
        if held:
            self._ensure_host()  # the host ran when these started: a kill -9 may have ended it
        for name in self.services.registry.names():
            if not (isinstance(name, tuple) and len(name) == 2 and name[0] == "job"):
                continue
            job_id = name[1]
            if job_id in held:
                continue
            stored = await self.store.get(job_id)
            if stored is None or stored.finished or stored.owner == self.lease.owner:
                continue  # finished (its actor is exiting), or started after the renewal
            ref = self.services.registry.whereis(name)
            if ref is not None:
                log.warning("research.lease_lost", job_id=job_id, owner=self.lease.owner,
                            now_owned_by=stored.owner)
                ref.send(Relinquish())

    # ----- requests from other processes ------------------------------------------------------

    async def _requests(self, requests: list[JobRequest]) -> None:
        for request in requests:
            self.start_task(self._deliver, request)

    async def _deliver(self, request: JobRequest) -> None:
        answer = await self._act(request)
        await self.store.answer_request(request.id, answer, self.lease.wall())
        log.info("research.request_answered", job_id=request.job_id, kind=request.kind,
                 request_id=request.id, ok=answer.get("ok"))

    async def _act(self, request: JobRequest) -> dict[str, Any]:
        match request.kind:
            case "cancel":
                message: Any = Cancel()
            case "cancel_call":
                message = Cancel(request.tool_call_id)
            case "permission":
                message = PermissionAnswer(request.tool_call_id or "", _decision(request.value))
            case _:
                message = ChoiceAnswer(request.tool_call_id or "", request.value or "")
        reply: Any = None
        # A job stopped by the fence (or restarting) is waited for: answering "not running"
        # would leave a cancelled job running once it starts again (CI, load 8).
        with trio.move_on_after(DELIVER_TIMEOUT):
            while (ref := await running_actor(self.services.registry, self.store,
                                              request.job_id, self.lease.owner)) is not None:
                try:
                    reply = await ref.call(message, timeout=DELIVER_TIMEOUT)
                    break
                except ActorExited:
                    pass  # it ended, or the fence stopped it, just now: look again
                except AskAnotherError as exc:
                    return {"ok": False, "message": exc.fact, "hint": exc.hint}
        match reply:
            case CancelOutcome(cancelled=cancelled, remote=remote):
                return {"ok": True, "cancelled": cancelled, "remote": remote}
            case Answered(message=text):
                return {"ok": True, "message": text}
            case NotWaiting(message=text, hint=hint):
                return {"ok": False, "message": text, "hint": hint}
        stored = await self.store.get(request.job_id)
        if stored is not None and not stored.finished:
            if stored.owner != self.lease.owner:
                # Another process took the job over (our lease lapsed) after the request was
                # stored for us: the requester asks the new owner (ResearchJobs.cancel).
                return {"ok": False, "moved": True, "message": (
                    f"job {request.job_id} moved to another ask-another process as the request "
                    "arrived. Nothing changed; try again")}
            return {"ok": False, "message": (
                f"job {request.job_id} did not answer in its process ({self.lease.owner}) "
                f"within {DELIVER_TIMEOUT:g} s (stopped until its database answers in time, or "
                "busy). Nothing changed; try again shortly")}
        # The job ended here just before the request was delivered.
        status = stored.status if stored is not None else "unknown"
        if request.kind == "cancel":
            return {"ok": True, "cancelled": False, "remote": None}
        return {"ok": False, "message": f"job {request.job_id} is {status} and waits for "
                                        "nothing. This changes nothing"}


def _decision(value: str | None) -> Decision:
    """A stored permission answer's `Decision` (JSON, as `ResearchJobs` wrote it); a value that
    is not one denies."""
    try:
        return msgspec.json.decode(value or "", type=Decision)
    except msgspec.DecodeError:
        return Deny("rejected")
