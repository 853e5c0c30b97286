"""Research jobs from asyncio: waited on with progress, a permission answered by the host's own
code, a job whose Interaction is the host's, and the runtime handing its jobs on when the
asyncio program ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from aio_helpers import AsyncioUI, note_tool
from asyncio_runs import RunAsyncio

import ask_another.aio
from ask_another import ALLOW, Config, JobUpdate
from ask_another.simulator import Reply, Simulator, ToolCalls
from ask_another.simulator import ToolCall as SimCall


def test_a_job_waited_on_with_progress_and_a_permission_answered_from_asyncio(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    notes: list[str] = []
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "a"}, id="p1")]),
                      Reply("The report.")])

    async def main() -> tuple[str, str | None, str, list[str]]:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            record = await rt.jobs.start("sim", "note it", "agent",
                                         tools=[note_tool(notes, [])])
            updates: asyncio.Queue[JobUpdate] = asyncio.Queue()

            async def on_progress(update: JobUpdate) -> None:
                await updates.put(update)

            waiting = asyncio.create_task(rt.jobs.wait(record.id, 60, on_progress,
                                                       progress_every=0.2))
            while not (update := await updates.get()).waiting_for:
                pass
            question = update.waiting_for[0]
            answer = await rt.jobs.answer_permission(record.id, question.tool_call_id, ALLOW)
            final = await waiting
            return final.status, final.report, answer, [u.status for u in updates._queue]

    status, report, answer, _ = run(main)
    assert (status, report) == ("completed", "The report.")
    assert "allowed" in answer
    assert notes == ["a"]


def test_a_job_asks_the_hosts_asyncio_interaction(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    notes: list[str] = []
    where: list[tuple[str, bool]] = []
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "from job"}, id="j1")]),
                      Reply("The report.")])
    ui = AsyncioUI(where)

    async def main() -> str:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            record = await rt.jobs.start("sim", "research and note", "agent",
                                         tools=[note_tool(notes, where)], interaction=ui)
            return (await rt.jobs.wait(record.id, 60)).status

    assert run(main) == "completed"
    assert ("permission", "write_note") in ui.events
    assert where == [("request_permission", True), ("tool", True)]
    assert notes == ["from job"]


def test_the_program_ending_closes_the_runtime_in_order_and_hands_its_jobs_on(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    """asyncio.run cancels the task still holding the runtime open when main returns: the
    runtime closes as after a SIGTERM (the waiting job released for another process), and the
    loop closes without a stray callback from trio."""
    sim.script("m1", [ToolCalls([SimCall("write_note", {"text": "a"}, id="p1")]),
                      Reply("The report.")])
    config = make_config()
    seen: dict[str, str | None] = {}

    async def holds_it_open(opened: asyncio.Event) -> None:
        async with ask_another.aio.open_runtime(config) as rt:
            record = await rt.jobs.start("sim", "note it", "agent", tools=[note_tool([], [])])
            seen["job"] = record.id
            seen["first owner"] = rt.trio.lease.owner if rt.trio.lease else None

            async def on_progress(update: JobUpdate) -> None:
                if update.waiting_for:
                    opened.set()

            await rt.jobs.wait(record.id, 60, on_progress, progress_every=0.2)

    async def main() -> None:
        opened = asyncio.Event()
        asyncio.create_task(holds_it_open(opened))  # noqa: RUF006 - asyncio.run ends it
        await opened.wait()

    run(main)

    async def later() -> ask_another.JobRecord:
        async with ask_another.aio.open_runtime(config) as rt:
            seen["owner"] = rt.trio.lease.owner if rt.trio.lease else None
            return await rt.jobs.get(seen["job"] or "")

    record = run(later)
    # Released at the close (`research.released`; the next runtime then deals with it as with a
    # job a stopped server handed back), not still held by the runtime that was open, as the
    # lease of a runtime dropped without closing would be for ASK_ANOTHER_LEASE_SECONDS.
    assert seen["first owner"] is not None and seen["first owner"] != seen["owner"]
    assert record.owner in (None, seen["owner"])


def test_a_choice_answered_and_a_job_cancelled_from_asyncio(
    run: RunAsyncio, make_config: Callable[..., Config], sim: Simulator
):
    options = [{"id": "deep", "label": "Go deep"}, {"id": "short", "label": "Keep it short"}]
    sim.script("m1", [ToolCalls([SimCall("ask_user", {"prompt": "How deep?", "options": options},
                                         id="q1")]),
                      Reply("A short report."),
                      ToolCalls([SimCall("write_note", {"text": "b"}, id="p2")])])

    async def waiting(rt: ask_another.aio.Runtime, job_id: str) -> str:
        asked = asyncio.Event()

        async def on_progress(update: JobUpdate) -> None:
            if update.waiting_for:
                asked.set()

        wait = asyncio.create_task(rt.jobs.wait(job_id, 60, on_progress, progress_every=0.2))
        await asked.wait()
        wait.cancel()  # cancelling a wait leaves the job running
        with contextlib.suppress(asyncio.CancelledError):
            await wait
        return (await rt.jobs.get(job_id)).waiting_for[0].kind

    async def main() -> tuple[str, str, str | None, str, bool, str]:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            first = await rt.jobs.start("sim", "research", "agent")
            kind = await waiting(rt, first.id)
            answer = await rt.jobs.answer_choice(first.id, "q1", "short")
            final = await rt.jobs.wait(first.id, 60)
            second = await rt.jobs.start("sim", "note it", "agent",
                                         tools=[note_tool([], [])])
            await waiting(rt, second.id)
            outcome = await rt.jobs.cancel(second.id)
            return (kind, answer, final.report, final.status, outcome.cancelled,
                    outcome.record.status)

    kind, answer, report, status, cancelled, cancelled_status = run(main)
    assert kind == "choice" and "short" in answer
    assert (status, report) == ("completed", "A short report.")
    told = [m["content"] for m in sim.requests_for("m1")[1].messages if m["role"] == "tool"]
    assert '"option_id": "short"' in told[0]
    assert cancelled and cancelled_status == "cancelled"
