"""Whose jobs a runtime takes over (docs/architecture.md, "Where a job lives"), in process on one
SQLite home: a per-session face (the stdio server, a people command) takes over no other
process's job, whatever its state; the job host and an embedding program take a job handed
back (owner NULL) as before. Before the job host, a per-session runtime took every released
job at its start-up, only to be interrupted again when its one-call session ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio
from research_helpers import GEMINI

from ask_another.config import Config
from ask_another.runtime import open_runtime
from ask_another.simulator import Simulator
from ask_another.store.jobs import JobRecord, job_store

GEMINI_AGENT = GEMINI.split("/", 1)[1]


async def released_gemini_job(config: Config, sim: Simulator) -> str:
    """A Gemini job in progress that its (stopped) process handed back: resumable."""
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress", "completed"],
                           report="the host's report")
    async with open_runtime(config, prewarm_after=None) as runtime:
        record = await runtime.jobs.start("gdr", "handed back")
        with trio.fail_after(120):  # the first provider call imports litellm here, under load
            while (await runtime.jobs.get(record.id)).provider_handle is None:  # noqa: ASYNC110
                await trio.sleep(0.01)
    return record.id  # the runtime's close released it


async def owner_of(config: Config, job_id: str) -> tuple[str | None, str]:
    async with open_runtime(config, prewarm_after=None, per_session=True,
                            start_host=False) as runtime:
        stored = await job_store(await runtime.database()).get(job_id)
    assert isinstance(stored, JobRecord)
    return stored.owner, stored.status


async def test_a_per_session_runtime_takes_over_no_released_job_a_host_does(
        research_config: Callable[..., Config], sim: Simulator) -> None:
    config = research_config(ASK_ANOTHER_LEASE_SECONDS="0.3")  # a sweep every 0.15 s
    job_id = await released_gemini_job(config, sim)
    assert await owner_of(config, job_id) == (None, "in_progress")

    # A session's runtime, through its start-up and several sweeps: the job stays handed back.
    async with open_runtime(config, prewarm_after=None, per_session=True,
                            start_host=False) as runtime:
        store = job_store(await runtime.database())
        began = time.monotonic()
        while time.monotonic() - began < 1.0:  # about six sweeps of its owner
            stored = await store.get(job_id)
            assert stored is not None and stored.owner is None, stored
            await trio.sleep(0.05)

    # The job host's runtime claims it at its start and completes it.
    async with open_runtime(config, prewarm_after=None, job_host=True) as runtime:
        with trio.fail_after(30):
            done = await runtime.jobs.wait(job_id, 30)
        assert done.status == "completed" and done.report == "the host's report"
