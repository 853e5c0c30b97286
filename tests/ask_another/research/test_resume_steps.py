"""A job interrupted after some of its steps resumes from them (issue 36, goals 2 and 3), on
both store backends, for each method that keeps steps: sequential (plan, queries, summary,
report), agent (its rounds) and a consensus job (its seats).

The interruption is the owning runtime going away mid-job (closed while a step's call is in
flight: its call is cut off, as a kill cuts it) and another runtime on the same store taking
the job over. The resumed job's report equals the same job's undisturbed report (the simulator
is deterministic; timings and random ids aside), no stored step's calls are made again (each
completion carries its ledger id to the provider, which names the attempt and the step), and
the ledger's rows equal the calls the provider saw, those cut off marked unanswered.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from ask_another.config import Config
from ask_another.research import ResearchJobs
from ask_another.runtime import Runtime, open_runtime
from ask_another.simulator import Simulator, Slow
from ask_another.store.jobs import JobRecord, job_store

QUESTION = "How do tidal power plants store energy"
AGENT_QUERY = ('What does the article say? [[sim:tool=read_article '
               '{"url": "http://127.0.0.1:9/article"}]]')

Start = Callable[[ResearchJobs, str], Awaitable[JobRecord]]


def normal(report: str) -> str:
    """A report without what differs between two runs of one job: timings and random ids."""
    report = re.sub(r"\d+\.\d+ s\b", "T s", report)
    report = re.sub(r"\bc-[0-9a-f]{10}\b", "c-ID", report)
    report = re.sub(r"\b(plan|report)-[a-z0-9]+-[a-z0-9]+\b", r"\1-ID", report)
    return re.sub(r"\b[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\b", "UUID", report)


def calls_of(sim: Simulator, job_id: str) -> list[str]:
    """The ledger ids of the completions of `job_id` the provider received, in order."""
    prefix = f"job:{job_id}:"
    return [r.headers["x-ask-another-call"] for r in sim.requests
            if r.headers.get("x-ask-another-call", "").startswith(prefix)]


async def ledger_of(rt: Runtime, job_id: str) -> list[Any]:
    db = await rt.database()
    return await db.fetchall("SELECT call_id, answered FROM usage WHERE call_id LIKE ? "
                             "ORDER BY id", (f"job:{job_id}:%",))


async def sequential(jobs: ResearchJobs, query: str) -> JobRecord:
    return await jobs.start("sim", query, method="sequential")


async def agent(jobs: ResearchJobs, query: str) -> JobRecord:
    return await jobs.start("sim", query, method="agent")


async def consensus(jobs: ResearchJobs, query: str) -> JobRecord:
    return await jobs.start_consensus(["sim", "sim2"], query)


CASES = {
    # method: (start, query, the steps stored when the runtime goes away, slow the next call)
    "sequential": (sequential, QUESTION, 2, None),
    "agent": (agent, AGENT_QUERY, 2, None),
    "consensus": (consensus, QUESTION, 1, "m2"),  # seat m1 answered, m2 held
}


@pytest.mark.parametrize("method", sorted(CASES))
async def test_a_job_interrupted_after_some_steps_resumes_from_them_and_pays_once(
    method: str, research_config: Callable[..., Config], store_env: dict[str, str],
    sim: Simulator,
):
    start, query, after, slow = CASES[method]
    config = research_config(MODEL_SIM2=f"openai/m2;sk-test-2;{sim.openai_base}", **store_env)

    async with open_runtime(config, prewarm_after=0) as rt:  # the undisturbed run
        quiet = await rt.jobs.wait((await start(rt.jobs, query)).id, 60)
        assert quiet.status == "completed", quiet
        quiet_calls = calls_of(sim, quiet.id)

    sim.latency = 0.3  # each call takes a while, so the runtime goes mid-step
    if slow:
        sim.script(slow, [Slow(30)])  # held until the runtime goes; asked again after
    async with open_runtime(config, prewarm_after=0) as first:
        record = await start(first.jobs, query)
        store = job_store(await first.database())
        with trio.fail_after(60):
            while len(await store.steps(record.id)) < after:  # noqa: ASYNC110 - a store poll
                await trio.sleep(0.02)
        before = {s.name: s.attempt for s in await store.steps(record.id)}
        assert not (await store.get(record.id)).finished  # type: ignore[union-attr]
    sim.latency = 0.0

    async with open_runtime(config, prewarm_after=0) as second:  # takes the job over
        done = await second.jobs.wait(record.id, 60)
        assert done.status == "completed", done
        assert normal(done.report or "") == normal(quiet.report or ""), "\n".join(
            difflib.unified_diff(normal(quiet.report or "").splitlines(),
                                 normal(done.report or "").splitlines(), lineterm=""))
        steps = {s.name: s.attempt for s in await job_store(await second.database())
                 .steps(record.id)}
        assert before.items() <= steps.items()  # the first stored values were kept
        made = calls_of(sim, record.id)
        # No stored step's calls were made again: every call of a step comes from attempts
        # up to the one that stored it.
        for call_id in made:
            attempt, step = call_id.split(":")[2], call_id.split(":")[3]
            assert step not in before or int(attempt) <= before[step], (call_id, before)
        assert any(int(c.split(":")[2]) > 1 for c in made)  # it did resume
        # Every call the provider saw has exactly one row, none doubled; a row it did not see
        # is a call whose intent was written when the runtime went, before the request left:
        # unanswered, like the calls cut off.
        rows = {r["call_id"]: r["answered"] for r in await ledger_of(second, record.id)}
        assert len(set(made)) == len(made) and set(made) <= set(rows)
        assert all(not answered for call_id, answered in rows.items() if call_id not in made), (
            rows, made)
        # The calls that answered: at least the undisturbed job's (the steps in flight when
        # the runtime went ran again), and every one of them was seen by the provider.
        assert len([c for c, answered in rows.items() if answered]) >= len(quiet_calls)
        quiet_rows = {c for c, _ in (await ledger_of(second, quiet.id))}
        assert set(quiet_calls) == quiet_rows, (quiet_calls, quiet_rows)
