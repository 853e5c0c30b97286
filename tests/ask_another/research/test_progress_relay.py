"""The progress relay of a call that waits for a job (`ResearchJobs.wait` with `on_progress`):
its heartbeat asks the job for its status, and a job too busy to answer in time must cost that
beat only, never the caller's call. At load 8, 200 jobs on one SQLite file kept a job's mailbox
behind its store writes past the 5 s call timeout, and every `start_research` that waited on
such a job failed with "Internal error (ExceptionGroup)"."""

from __future__ import annotations

from typing import Any

import trio

from ask_another.research.jobs import relay_progress
from ask_another.research.messages import JobUpdate, Status
from ask_another.store.jobs import JobRecord
from supervisors import Actor, Caller, spawn


class BusyJob(Actor):
    """Answers its first status call after 12 s (past the 5 s call timeout), then at once."""

    async def init(self) -> None:
        self.asked = 0

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        assert isinstance(msg, Status)
        self.asked += 1
        if self.asked == 1:
            await trio.sleep(12)
        return JobRecord(id="r-busy", model="m", query="q", created_at=0.0,
                         status="in_progress", step=f"step {self.asked}")


async def test_a_job_too_busy_for_one_heartbeat_costs_that_beat_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    updates: list[JobUpdate] = []

    async def on_progress(update: JobUpdate) -> None:
        updates.append(update)

    send, receive = trio.open_memory_channel[JobUpdate](8)
    async with trio.open_nursery() as nursery:
        ref = await spawn(nursery, BusyJob)
        async with trio.open_nursery() as relaying:
            relaying.start_soon(relay_progress, ref, receive, on_progress, 1.0)
            with trio.fail_after(60):
                while len(updates) < 2:  # noqa: ASYNC110 (MockClock: no real time passes)
                    await trio.sleep(0.5)
            send.close()  # the job ended: the relay returns
        await ref.stop()
    # The beats whose calls timed out (the first, and the second queued behind it) were
    # skipped; the relay went on and the beats after them arrived.
    assert [u.step for u in updates] == ["step 3", "step 4"]
