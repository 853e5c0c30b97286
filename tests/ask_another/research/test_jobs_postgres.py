"""Two runtimes (two nodes' worth: each its own owner, store pools and heartbeat) on one
PostgreSQL database, in one process, against the simulator: a job started on one is seen,
cancelled and its cancel answered from the other, within a second. The process-level test
(real servers, SIGKILL, takeover) is the two-node test's; this one pins the store protocol.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
import trio
from deadlines import generous
from research_helpers import GEMINI_AGENT

from ask_another.config import Config
from ask_another.research.job import job_name
from ask_another.research.lease import FENCE
from ask_another.research.messages import CancelOutcome
from ask_another.runtime import open_runtime
from ask_another.simulator import Simulator


async def test_a_cancel_given_on_one_node_reaches_the_owner_node_within_a_second(
    research_config: Callable[..., Config], sim: Simulator, postgres_url: str
):
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])  # runs until cancelled
    config = research_config(ASK_ANOTHER_DATABASE_URL=postgres_url)
    async with open_runtime(config, prewarm_after=0) as one, \
            open_runtime(config, prewarm_after=0) as two:
        owner_one = await one.jobs.lease()
        owner_two = await two.jobs.lease()
        assert owner_one.owner != owner_two.owner
        record = await one.jobs.start("gdr", "a question for node one")
        seen = await two.jobs.get(record.id)  # from the shared store
        assert seen.owner == owner_one.owner and not seen.finished
        # The interaction runs at the provider and its owner knows its id (a cancel before
        # that is another test's: test_jobs_runtime's cancel while the provider starts it).
        with trio.fail_after(generous(20)):
            while (await two.jobs.get(record.id)).provider_handle is None:  # noqa: ASYNC110
                await trio.sleep(0.01)
        began = trio.current_time()
        outcome = await two.jobs.cancel(record.id)
        took = trio.current_time() - began
        assert outcome.cancelled, outcome
        assert took < generous(1.0), f"the cancel took {took:.2f} s to reach its owner and back"
        final = await one.jobs.wait(record.id, 10)
        assert final.status == "cancelled"
        (interaction,) = sim.interactions.values()
        assert interaction.cancelled  # the owner stopped it at the provider


HELD_RENEWAL = ("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                "'UPDATE research_jobs SET lease_expires%%' AND clock_timestamp() - query_start "
                "> %s * interval '1 second'")
"""A lease renewal waiting on a row lock for longer than the given seconds."""


async def rows(conn: psycopg.Connection, sql: str, *params: object) -> list[tuple[object, ...]]:
    return await trio.to_thread.run_sync(lambda: conn.execute(sql, params).fetchall())


@pytest.mark.parametrize("asked_on", ["the other node", "the owner node"])
async def test_a_cancel_of_a_job_the_fence_stopped_waits_for_its_restart_and_cancels_it_there(
    research_config: Callable[..., Config], sim: Simulator, postgres_url: str, asked_on: str
):
    """The owner's renewal is held by a row lock, so its fence stops the job (its actor gone,
    the job still its own in the store), and the lock is let go once that renewal is late, so
    it ends no fence: the next one does. A cancel given meanwhile waits for the job to start
    again and cancels it there, on the provider too. Before: from the other node, the request
    was taken as the late renewal returned and answered "cancelled: False" while the job went
    on running (CI's whole suite at load 8); on the owner node, the job was cancelled in the
    store only, and its Gemini interaction ran on at the provider, unseen."""
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])  # runs until cancelled
    config = research_config(ASK_ANOTHER_DATABASE_URL=postgres_url)
    async with open_runtime(config, prewarm_after=0) as one, \
            open_runtime(config, prewarm_after=0) as two:
        await one.jobs.lease()
        await two.jobs.lease()
        record = await one.jobs.start("gdr", "a question for node one")
        with trio.fail_after(generous(20)):
            while (await two.jobs.get(record.id)).provider_handle is None:  # noqa: ASYNC110
                await trio.sleep(0.01)
        asker = two if asked_on == "the other node" else one
        # A transaction holding the job's row as an UPDATE does (not FOR UPDATE: that would
        # also hold the request's insert, whose foreign key shares the row's key lock).
        lock = psycopg.connect(postgres_url)
        watch = psycopg.connect(postgres_url, autocommit=True)  # a fresh view of the sessions
        try:
            await trio.to_thread.run_sync(lock.execute, "SELECT id FROM research_jobs WHERE "
                                          "id = %s FOR NO KEY UPDATE", (record.id,))
            with trio.fail_after(generous(20)):
                while one.jobs.registry.whereis(job_name(record.id)) is not None:  # noqa: ASYNC110
                    await trio.sleep(0.01)  # fenced: its renewal waits on the lock
            outcome: list[CancelOutcome] = []

            async def cancel() -> None:
                outcome.append(await asker.jobs.cancel(record.id))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel)
                if asker is two:
                    with trio.fail_after(generous(20)):
                        while not await rows(lock, "SELECT 1 FROM research_requests WHERE "  # noqa: ASYNC110
                                             "job_id = %s", record.id):
                            await trio.sleep(0.01)  # stored for its owner, not yet taken
                # Let go once the held renewal is late (past FENCE of the lease since it
                # began): it ends no fence, and a request is taken in the same beat.
                late = FENCE * config.lease_seconds + 0.2
                with trio.fail_after(generous(20)):
                    while not await rows(watch, HELD_RENEWAL, late):  # noqa: ASYNC110
                        await trio.sleep(0.05)
                await trio.to_thread.run_sync(lock.rollback)
        finally:
            await trio.to_thread.run_sync(lock.close)
            await trio.to_thread.run_sync(watch.close)
        (done,) = outcome
        assert done.cancelled, done
        assert done.remote is not None and "cancelled on the provider" in done.remote, done
        final = await one.jobs.wait(record.id, generous(10))
        assert final.status == "cancelled"
        (interaction,) = sim.interactions.values()
        assert interaction.cancelled
