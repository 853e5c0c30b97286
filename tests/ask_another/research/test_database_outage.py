"""Research jobs through an outage of their PostgreSQL database: two runtimes (two nodes' worth,
each its own owner, pools and heartbeat) on one real PostgreSQL server of this module's own,
Gemini jobs against the simulator, and the server stopped for 4 or 10 s while the jobs' provider
work ends, then started again on the same port.

Before: in 4 of 6 such runs the usage ledger lost or doubled rows (a row that fell in the outage
was dropped; a retried or taken-over attempt wrote it again), jobs failed "cannot reach the
database" or spent attempts on it, and a live node's jobs were taken over while it ran them.
Now every job completes, its provider call is one ledger row, a 4 s outage spends no attempt,
and a 10 s one (past the fence, research/lease.py) stops the jobs and resumes them on one node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest
import trio
from postgres_server import PostgresServer, own_server
from research_helpers import GEMINI_AGENT

from ask_another.config import Config
from ask_another.research.supervisor import JOB_OWNER, GetStatistics
from ask_another.runtime import open_runtime
from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # a PostgreSQL server of its own, stopped and started

JOBS_PER_NODE = 4


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[PostgresServer]:
    """A server of this module's own: stopping the session's would fail other tests' pools."""
    with own_server() as server:
        yield server


@pytest.mark.parametrize("outage", [4.0, 10.0])
async def test_jobs_ride_out_a_database_outage_with_every_call_billed_once(
    research_config: Callable[..., Config], sim: Simulator, own_postgres: PostgresServer,
    outage: float
):
    url = own_postgres.new_database()
    config = research_config(ASK_ANOTHER_DATABASE_URL=url, ASK_ANOTHER_LEASE_SECONDS="15",
                             ASK_ANOTHER_POLL_SECONDS="0.2")
    for _ in range(2 * JOBS_PER_NODE):
        sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])  # until ended below
    with trio.fail_after(120):
        async with open_runtime(config, prewarm_after=0) as one, \
                open_runtime(config, prewarm_after=0) as two:
            started = {}
            for node in (one, two):
                for n in range(JOBS_PER_NODE):
                    record = await node.jobs.start("gdr", f"question {n}")
                    started[record.id] = record.owner
            while len(sim.interactions) < len(started):  # noqa: ASYNC110 - no event to wait on
                await trio.sleep(0.05)

            await trio.to_thread.run_sync(own_postgres.down)
            # The provider's work ends while the database is away: each job's result, its
            # usage row and its final state all have to wait for it.
            for interaction_id in list(sim.interactions):
                sim.end_interaction(interaction_id)
            await trio.sleep(outage)
            await trio.to_thread.run_sync(own_postgres.up)

            finals = [await one.jobs.wait(job_id, 60) for job_id in started]
            fences = 0
            for node in (one, two):
                owner = node.registry.whereis(JOB_OWNER)
                assert owner is not None
                fences += (await owner.call(GetStatistics())).fences

    assert [f.status for f in finals] == ["completed"] * len(started), \
        [(f.id, f.status, f.method, f.provider_handle, f.error) for f in finals]
    assert len(sim.interactions) == len(started)  # no job created a second interaction
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT job_id, call_id, count(*) FROM usage WHERE kind = "
                            "'research' GROUP BY job_id, call_id ORDER BY job_id").fetchall()
    assert [job_id for job_id, _, _ in rows] == sorted(started)  # none lost...
    assert all(count == 1 for _, _, count in rows), rows  # ...and none doubled
    assert {call_id for _, call_id, _ in rows} == {
        f"gemini-interaction:{i}" for i in sim.interactions}
    # No attempt was spent on the database: a job's store errors waited for it. An attempt more
    # is a job the fence stopped and resumed (by its node, or the other after the lease).
    assert all(f.error is None for f in finals), [(f.id, f.error) for f in finals]
    assert all(f.attempts <= (2 if fences else 1) for f in finals), \
        [(f.id, f.attempts) for f in finals]
    if outage > 15 * 0.6:  # longer than the fence: renewed at most 9 s before it began
        assert fences >= 2  # both nodes stopped their jobs before their leases could lapse
