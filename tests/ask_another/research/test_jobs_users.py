"""Research jobs belong to the user who started them (`runtime.jobs_for(user)`), and a
named user's running jobs are limited: real actors, a real SQLite file, the simulator."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
from research_helpers import GEMINI_AGENT

from ask_another.config import Config
from ask_another.errors import LimitReached
from ask_another.interaction.types import ALLOW
from ask_another.research import UnknownJob
from ask_another.runtime import Runtime, open_runtime
from ask_another.simulator import Simulator
from ask_another.spend.budget import BudgetExceeded, check_budget
from ask_another.spend.estimate import Estimate, Line
from ask_another.store.jobs import job_store
from ask_another.store.usage import UsageRow, record_usage
from ask_another.users import LOCAL_USER, User

ALICE = User("alice", admin=False)
BOB = User("bob", admin=False)
ADMIN = User("root", admin=True)
TWENTY_CENTS = Estimate((Line("openai/m1", 0.20, "one call"),))


async def test_another_users_job_is_no_job_to_every_method_and_left_as_it_was(
    runtime: Runtime, sim: Simulator
):
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])  # runs until cancelled
    alice, bob = runtime.jobs_for(ALICE), runtime.jobs_for(BOB)
    record = await alice.start("gdr", "alice's question")
    assert record.user_id == "alice"
    stored = await job_store(await runtime.database()).get(record.id)
    assert stored is not None and stored.user_id == "alice"
    attempts = [
        bob.get(record.id),
        bob.wait(record.id, 0.1),
        bob.cancel(record.id),
        bob.cancel_call(record.id, "call-1"),
        bob.answer_permission(record.id, "call-1", ALLOW),
        bob.answer_choice(record.id, "call-1", "a"),
    ]
    # "Forbidden" told bob that the id exists: the answer is now the one for an id that does not.
    with pytest.raises(UnknownJob) as missing:
        await bob.get("r-0000000000")
    nothing = str(missing.value).replace("r-0000000000", record.id)
    for attempt in attempts:
        with pytest.raises(UnknownJob) as refused:
            await attempt
        assert str(refused.value) == nothing
    assert await bob.list() == []
    # Nothing bob did reached the job: it still runs (its interaction runs until cancelled, so
    # it reaches in_progress and stays there; on a loaded machine it may still be pending here).
    with trio.fail_after(30):
        while True:
            status = (await alice.get(record.id)).status
            if status != "pending":
                break
            await trio.sleep(0.01)
    assert status == "in_progress"
    assert [r.id for r in await alice.list()] == [record.id]
    # An admin, and the local user (an admin too), see and act on every job.
    admin = runtime.jobs_for(ADMIN)
    assert [r.id for r in await admin.list()] == [record.id]
    assert [r.id for r in await runtime.jobs.list()] == [record.id]
    assert (await admin.cancel(record.id)).cancelled


async def test_a_named_users_running_jobs_are_limited_and_the_error_says_by_what(
    research_config: Callable[..., Config], sim: Simulator
):
    config = research_config(ASK_ANOTHER_MAX_JOBS_PER_USER="2")
    async with open_runtime(config, prewarm_after=0) as runtime:
        for _ in range(6):
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])
        alice, bob = runtime.jobs_for(ALICE), runtime.jobs_for(BOB)
        first = await alice.start("gdr", "one")
        await alice.start("gdr", "two")
        with pytest.raises(LimitReached) as refused:
            await alice.start("gdr", "three")
        assert str(refused.value).startswith(
            "Limit reached: at most 2 jobs (research or consensus) running at once per user "
            "(ASK_ANOTHER_MAX_JOBS_PER_USER); you have 2 running")
        assert [r.query for r in await alice.list()] == ["two", "one"]  # nothing stored
        await bob.start("gdr", "bob's")  # his own count
        await alice.cancel(first.id)
        await alice.start("gdr", "three")  # one of hers finished
        # The local user (stdio) is never limited.
        for n in range(3):
            await runtime.jobs.start("gdr", f"local {n}")
        for record in await runtime.jobs.list():
            await runtime.jobs.cancel(record.id)


async def test_budget_ceilings_count_each_users_own_spend(
    research_config: Callable[..., Config],
):
    config = research_config(ASK_ANOTHER_BUDGET_DAY_USD="1.00")
    async with open_runtime(config, prewarm_after=0) as runtime:
        await record_usage(await runtime.database(), UsageRow(
            kind="completion", model="openai/m1", cost_usd=0.90, user_id="alice"))
        with pytest.raises(BudgetExceeded, match=r"per day per user; spent this day: \$0.90"):
            await check_budget(runtime.services, TWENTY_CENTS, "this completion", "alice")
        # bob spent nothing
        await check_budget(runtime.services, TWENTY_CENTS, "this completion", "bob")
        await check_budget(runtime.services, TWENTY_CENTS, "this completion", LOCAL_USER.id)


@pytest.mark.slow
async def test_a_burst_of_starts_all_start_or_meet_the_limit_never_a_full_mailbox(
    research_config: Callable[..., Config], sim: Simulator
):
    # More simultaneous starts than any actor's mailbox holds (the job owner's is 1,024): each
    # starts, or is refused by the per-user limit with its own message; none meets a full
    # mailbox (they did: the lease was asked of the owner's mailbox on every start).
    limit, burst = 1100, 1300
    config = research_config(ASK_ANOTHER_MAX_JOBS_PER_USER=str(limit),
                             ASK_ANOTHER_POLL_SECONDS="60")
    started: list[str] = []
    refused: list[str] = []
    failed: list[str] = []
    async with open_runtime(config, prewarm_after=0) as runtime:
        alice = runtime.jobs_for(ALICE)

        async def start(n: int) -> None:
            try:
                started.append((await alice.start("gdr", f"question {n}")).id)
            except LimitReached as exc:
                refused.append(str(exc))
            except Exception as exc:  # what the test counts
                failed.append(f"{type(exc).__name__}: {exc}")

        async with trio.open_nursery() as nursery:
            for n in range(burst):
                nursery.start_soon(start, n)
        assert failed == [], failed[:1]
        assert (len(started), len(refused)) == (limit, burst - limit)
        assert all(r.startswith(f"Limit reached: at most {limit} jobs (research") for r in refused)
