"""The research tools over the real thing: `python -m ask_another` on stdio, an `mcp.Client`, the
loopback simulator. Each test starts real server processes (seconds each, for litellm's import),
so each runs a whole session of scenarios in order.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import trio
from mcp import Client
from processes import processes_with
from research_helpers import GEMINI_AGENT, research_env
from stdio_server import stdio_client_for
from tool_results import call, text_of

from ask_another.errors import FEEDBACK_POINTER
from ask_another.research import OWNER_DIED
from ask_another.simulator import Reply, Simulator

pytestmark = pytest.mark.slow  # starts real server processes


def job_id_in(text: str) -> str:
    for word in text.replace("'", " ").replace("(", " ").split():
        if word.startswith("r-") and len(word) == 12:
            return word
    raise AssertionError(f"no job id in {text!r}")


async def wait_until_done(client: Client, job_id: str, seconds: float = 30) -> str:
    with trio.fail_after(seconds):
        while True:
            error, text = await call(client, "check_research", job_id=job_id)
            assert not error, text
            if "is in progress" not in text and "is pending" not in text:
                return text
            await trio.sleep(0.1)


async def test_research_session(sim: Simulator, tmp_path: Path):
    env = research_env(sim.url, tmp_path / "home")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert {"start_research", "check_research", "cancel_research"} <= set(tools)
            assert "this session ends, the job keeps running" in (client.instructions or "")

            # 1. Completes within the timeout, with progress notifications on the way.
            sim.script_interaction(GEMINI_AGENT, statuses=["queued", "in_progress", "completed"],
                                   report="The answer is 42 [1].",
                                   citations=["http://example.test/42"])
            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                progress.append((done, total, message))

            result = await client.call_tool("start_research", {"model": "gdr", "query": "Q?",
                                                               "timeout": 60},
                                            progress_callback=on_progress)
            assert not result.is_error, text_of(result)
            body = json.loads(text_of(result))
            assert body["report"] == "The answer is 42 [1]."
            assert [c["url"] for c in body["citations"]] == ["http://example.test/42"]
            assert body["model"] == "gemini/deep-research-pro-preview-12-2025"
            assert body["elapsed_seconds"] >= 0 and body["status"] == "completed"
            first_job = body["job_id"]
            assert progress and all(total == 60 for _, total, _ in progress)
            assert any("Gemini interaction" in (m or "") for _, _, m in progress)

            # 2. A timeout leaves the job in the background; check_research gets it later.
            # (8 polls, ~2.5 s at a 0.05 s first interval growing by half: a 0.2 s timeout
            # leaves it running; 15 took ~44 s of the job's own polls.)
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"] * 8 + ["completed"])
            error, text = await call(client, "start_research", model="gdr", query="slow one",
                                     timeout=0.2)
            assert not error and "keeps running after this session ends" in text, text
            slow_job = job_id_in(text)
            done = await wait_until_done(client, slow_job)
            assert json.loads(done)["status"] == "completed"

            # 3. The client cancelling the call leaves the job running.
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"] * 10 + ["completed"])
            with trio.move_on_after(0.5):
                await client.call_tool("start_research", {"model": "gdr",
                                                          "query": "interrupted wait"})
            error, table = await call(client, "check_research")
            assert not error
            row = next(line for line in table.splitlines() if "interrupted wait" in line)
            assert "in_progress" in row or "pending" in row
            interrupted_job = row.split("|")[1].strip()
            assert json.loads(await wait_until_done(client, interrupted_job))["status"] == \
                "completed"

            # 4. Cancel during Gemini polling cancels the interaction at the provider.
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])
            error, text = await call(client, "start_research", model="gdr", query="forever",
                                     timeout=0.3)
            forever = job_id_in(text)
            error, text = await call(client, "cancel_research", job_id=forever)
            assert not error and "was cancelled" in text and "cancelled on the provider" in text
            remote = [i for i in sim.interactions.values() if i.input_text == "forever"]
            assert remote[0].cancel_called and remote[0].status == "cancelled"
            error, text = await call(client, "cancel_research", job_id=forever)
            assert not error and "already finished (cancelled)" in text

            # 5. Cancel versus a result arriving late: the cancelled state stays.
            error, text = await call(client, "start_research", model="pplx",
                                     query="late answer [[sim:delay=0.6]]", timeout=0)
            late = job_id_in(text)
            error, text = await call(client, "cancel_research", job_id=late)
            assert "was cancelled" in text
            assert "request in flight to the provider was aborted" in text
            await trio.sleep(1.0)
            error, text = await call(client, "check_research", job_id=late)
            assert "is cancelled" in text
            # ... and a cancel after completion keeps the result.
            error, text = await call(client, "cancel_research", job_id=first_job)
            assert "already finished (completed)" in text
            error, text = await call(client, "check_research", job_id=first_job)
            assert json.loads(text)["report"] == "The answer is 42 [1]."

            # 6. A job that keeps failing is restarted within the bound, then fails.
            before = len(sim.requests_for("sonar-deep-research"))
            error, text = await call(client, "start_research", model="pplx",
                                     query="[[sim:fail=429 daily quota used up]] q", timeout=30)
            assert error and "daily quota used up" in text and "3 attempts" in text, text
            assert FEEDBACK_POINTER not in text  # a quota, not a bug
            assert len(sim.requests_for("sonar-deep-research")) - before == 3

            # 7. Long reports are paged.
            sim.script("sonar-deep-research", [Reply("x" * 2500 + "END")])
            error, text = await call(client, "start_research", model="pplx", query="long",
                                     timeout=30)
            long_job = json.loads(text)["job_id"]
            error, text = await call(client, "check_research", job_id=long_job, max_chars=1000)
            page = json.loads(text)
            assert len(page["report"]) == 1000 and "offset=1000" in page["note"]
            error, text = await call(client, "check_research", job_id=long_job, offset=2000,
                                     max_chars=1000)
            assert json.loads(text)["report"].endswith("END")
            assert "note" not in json.loads(text)

            # 8. The table lists every job, newest first; clear errors for bad requests.
            error, table = await call(client, "check_research")
            ids = [line.split("|")[1].strip() for line in table.splitlines()[2:]]
            assert ids[0] == long_job and ids[-1] == first_job and len(ids) == 7
            error, text = await call(client, "check_research", job_id="r-0000000000")
            assert error and "No research job" in text and FEEDBACK_POINTER not in text
            error, text = await call(client, "cancel_research", job_id="r-0000000000")
            assert error and "No research job" in text
            error, text = await call(client, "start_research", model="nope", query="q")
            assert error and "Model not allowed" in text
            error, text = await call(client, "start_research", model="pplx", query="q",
                                     timeout=-1)
            assert error and "timeout" in text
    assert "sk-test-RESEARCH" not in (tmp_path / "stderr.log").read_text()


async def test_two_hundred_jobs_through_the_tools(sim: Simulator, tmp_path: Path):
    env = research_env(sim.url, tmp_path / "home")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            answers: dict[int, str] = {}

            async def one(n: int) -> None:
                error, text = await call(client, "start_research", model="pplx",
                                         query=f"question {n} of many", timeout=120)
                assert not error, text
                answers[n] = json.loads(text)["report"]

            async with trio.open_nursery() as nursery:
                for n in range(200):
                    nursery.start_soon(one, n)
            assert len(answers) == 200
            for n, report in answers.items():
                assert f"question {n} of many" in report


def _server_pids(home: Path, *, worker: bool = False) -> list[int]:
    """Processes whose environment holds this test's ASK_ANOTHER_HOME: our server, or (`worker`)
    its gateway worker, which inherits the server's environment."""
    return [pid for pid, cmdline in processes_with(f"ASK_ANOTHER_HOME={home}")
            if (b"gateway._worker" in cmdline) == worker
            and b"-m\0ask_another.jobhost\0" not in cmdline]  # nor the job host's


async def test_kill_9_then_restart_resumes_every_job_and_keeps_results(
    sim: Simulator, tmp_path: Path
):
    home = tmp_path / "home"
    # A private worker: the killed server's own, which exits when its stdin closes (a shared
    # worker stays for the other sessions, and cancels the killed server's calls instead).
    env = research_env(sim.url, home) | {"ASK_ANOTHER_GATEWAY_SHARED": "0"}
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"] * 14 + ["completed"],
                           report="resumed report")
    with (tmp_path / "stderr1.log").open("w") as stderr:
        try:
            async with stdio_client_for(env, stderr) as client:
                _, text = await call(client, "start_research", model="pplx",
                                         query="finished before the crash", timeout=30)
                done_job = json.loads(text)["job_id"]
                _, text = await call(client, "start_research", model="gdr",
                                         query="gemini in flight", timeout=0.5)
                gemini_job = job_id_in(text)
                _, text = await call(client, "start_research", model="pplx",
                                         query="completion in flight [[sim:delay=30]]",
                                         timeout=0.3)
                pplx_job = job_id_in(text)
                # Kill only once both jobs are truly in flight (under load, the 0.3-0.5 s
                # timeouts above say nothing about how far they got): the Gemini interaction
                # has been polled, so its id is stored, and the completion reached the provider.
                with trio.fail_after(30):
                    while not (_polled(sim, "gemini in flight") and any(  # noqa: ASYNC110
                            "completion in flight" in str(r.messages)
                            for r in sim.requests_for("sonar-deep-research"))):
                        await trio.sleep(0.05)
                pids = _server_pids(home)
                assert len(pids) == 1
                workers = _server_pids(home, worker=True)
                assert len(workers) == 1  # the completion is in it
                os.kill(pids[0], signal.SIGKILL)
                with trio.fail_after(10):
                    while _server_pids(home):  # noqa: ASYNC110 - another process
                        await trio.sleep(0.05)
                raise _Killed
        except BaseException as exc:  # the client's context fails in its own way: ours first
            if not _contains(exc, _Killed):
                raise
    # The orphaned gateway worker sees its stdin close and exits on its own (the job host,
    # which takes the jobs over, has a worker of its own).
    with trio.fail_after(10):
        while set(workers) & set(_server_pids(home, worker=True)):  # noqa: ASYNC110
            await trio.sleep(0.1)
    polls_before = next(iter(i for i in sim.interactions.values()
                             if i.input_text == "gemini in flight")).polls
    with (tmp_path / "stderr2.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            _, table = await call(client, "check_research")
            assert all(job in table for job in (done_job, gemini_job, pplx_job))
            _, text = await call(client, "check_research", job_id=done_job)
            assert "finished before the crash" in json.loads(text)["report"]
            # Taken over once the killed server's lease expires (ASK_ANOTHER_LEASE_SECONDS=3).
            # The long completion in flight at the kill is asked again (it resumes; its
            # question holds the simulator's 30 s delay again).
            text = await wait_until_done(client, pplx_job, 120)
            assert OWNER_DIED not in text and json.loads(text)["status"] == "completed", text
            resumed = json.loads(await wait_until_done(client, gemini_job))
            assert resumed["report"] == "resumed report"
    (interaction,) = [i for i in sim.interactions.values() if i.input_text == "gemini in flight"]
    assert interaction.polls > polls_before  # polling continued on the same interaction
    assert len([i for i in sim.interactions.values() if i.input_text == "gemini in flight"]) == 1


def _polled(sim: Simulator, input_text: str) -> bool:
    return any(i.polls > 0 for i in sim.interactions.values() if i.input_text == input_text)


class _Killed(Exception):
    pass


def _contains(exc: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(exc, kind):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_contains(e, kind) for e in exc.exceptions)
    return False
