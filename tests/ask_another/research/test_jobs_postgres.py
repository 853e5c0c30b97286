"""Two runtimes (two nodes' worth: each its own owner, store pools and heartbeat) on one
PostgreSQL database, in one process, against the simulator: a job started on one is seen,
cancelled and its cancel answered from the other, within a second. The process-level test
(real servers, SIGKILL, takeover) is the two-node test's; this one pins the store protocol.
"""

from __future__ import annotations

from collections.abc import Callable

import trio
from deadlines import generous
from research_helpers import GEMINI_AGENT

from ask_another.config import Config
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
