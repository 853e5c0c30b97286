"""The research part of the supervision tree: the job supervisor and the start-up recovery.

    research  (Supervisor, rest_for_one)
    ├── research.jobs      DynamicSupervisor: one transient `ResearchJob` child per job
    └── research.recovery  `JobRecovery`: at start, deals with every unfinished job in the store

`research_spec(config, registry)` is the child spec the runtime adds under its root supervisor.
`rest_for_one`: if the job supervisor itself is ever restarted (its jobs die with it), the
recovery runs again after it and picks the jobs up, exactly as after a server restart.

The job supervisor's restart intensity is deliberately high (`JOB_RESTARTS` per
`JOB_RESTART_SECONDS`): it is shared by all jobs, and 200 jobs hitting one rate limit at once
must not make it give up and take every job down. Each job's own retries are bounded by its
attempt count, kept in the store (job.py), and spaced by a backoff, so the supervisor-wide bound
only has to catch a runaway loop.

Recovery (in `JobRecovery.init`, so the runtime is not open for tool calls before it is done):
every job in the store that is not finished and has no live actor is either resumed (its method
says it can be: a Gemini interaction with a saved id is polled again) or marked failed with
"interrupted by a server restart". Nothing is silently lost and nothing is re-run and billed
twice.
"""

from __future__ import annotations

import time
from typing import Final

from ask_another.config import Config
from ask_another.logs import get_logger
from ask_another.research.job import (
    DEFAULT_MAX_ATTEMPTS,
    FirstRun,
    JobOptions,
    ResearchJob,
    Services,
    job_name,
)
from ask_another.research.providers import METHODS
from ask_another.store.jobs import JobEvent, JobRecord, finish_job, unfinished_jobs
from supervisors import (
    Actor,
    ChildSpec,
    DynamicSupervisorRef,
    Registry,
    Start,
    child_spec,
    dynamic_supervisor_spec,
    supervisor_spec,
)

__all__ = [
    "INTERRUPTED",
    "JOBS_SUPERVISOR",
    "JOB_RESTARTS",
    "JOB_RESTART_SECONDS",
    "JobRecovery",
    "job_spec",
    "research_spec",
]

log = get_logger("ask_another.research")

JOBS_SUPERVISOR: Final = "research.jobs"
JOB_RESTARTS: Final = 100_000
JOB_RESTART_SECONDS: Final = 10.0
INTERRUPTED: Final = "interrupted by a server restart"
JOB_MAILBOX: Final = 256


def job_spec(record: JobRecord, services: Services,
             max_attempts: int = DEFAULT_MAX_ATTEMPTS,
             options: JobOptions | None = None) -> ChildSpec:
    """The child spec of one job: transient (restarted only after a crash), registered by id."""
    return ChildSpec(
        id=record.id,
        start=Start(ResearchJob, (FirstRun(record), services, max_attempts, options),
                    name=job_name(record.id),
                    registry=services.registry, mailbox_size=JOB_MAILBOX),
        restart="transient",
        shutdown=5.0,
    )


def research_spec(config: Config, registry: Registry,
                  max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> ChildSpec:
    """The `research` subtree for the runtime's root supervisor."""
    services = Services(config, registry)
    return supervisor_spec(
        "research",
        [
            dynamic_supervisor_spec(JOBS_SUPERVISOR, max_restarts=JOB_RESTARTS,
                                    max_seconds=JOB_RESTART_SECONDS, name=JOBS_SUPERVISOR,
                                    registry=registry),
            child_spec(JobRecovery, services, max_attempts, name="research.recovery",
                       registry=registry),
        ],
        "rest_for_one",
        name="research",
        registry=registry,
    )


class JobRecovery(Actor):
    """Resumes or fails the unfinished jobs found in the store, then idles."""

    async def init(self, services: Services, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> None:
        supervisor = services.registry.whereis(JOBS_SUPERVISOR)
        assert isinstance(supervisor, DynamicSupervisorRef)
        db = await services.database()
        resumed = failed = 0
        for record in await unfinished_jobs(db):
            if services.registry.whereis(job_name(record.id)) is not None:
                continue  # alive: only this actor restarted
            method = METHODS.get(record.method)
            if method is not None and method.resumable(record):
                await supervisor.start_child(job_spec(record, services, max_attempts))
                resumed += 1
                continue
            now = time.time()
            reason = INTERRUPTED
            if record.status == "pending":
                reason += " before it started"
            await finish_job(db, record.id, "failed", ended_at=now, step="failed", error=reason,
                             event=JobEvent(job_id=record.id, at=now, step="failed",
                                            detail={"error": reason}))
            failed += 1
        if resumed or failed:
            log.info("research.recovered", resumed=resumed, failed=failed)
