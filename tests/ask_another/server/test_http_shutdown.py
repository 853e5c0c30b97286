"""SIGTERM on a real `serve --http` process: calls in flight finish, the listener closes, the
process exits 0, and its running research jobs are handed back (lease released) so another
server on the same store takes them over at once."""

from __future__ import annotations

import re
import signal
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from http_server import http_client_for, http_server, wait_for_line
from tool_results import call, text_of

from ask_another.server.auth import TokensFile
from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # starts real server processes

GEMINI = "gemini/deep-research-pro-preview-12-2025"
GEMINI_AGENT = GEMINI.split("/", 1)[1]
FAKE_KEY = "sk-test-RESEARCH-9f8e7d"


def job_row(home: Path, job_id: str) -> tuple[str, str | None, float | None]:
    with sqlite3.connect(home / "ask-another.sqlite3") as conn:
        status, owner, lease = conn.execute(
            "SELECT status, owner, lease_expires FROM research_jobs WHERE id = ?",
            (job_id,)).fetchone()
    return status, owner, lease


async def until_row(home: Path, job_id: str, check: Any) -> tuple[str, str | None, float | None]:
    with trio.fail_after(30):
        while True:
            row = job_row(home, job_id)
            if check(row):
                return row
            await trio.sleep(0.05)


async def test_sigterm_lets_calls_finish_then_hands_running_jobs_back(sim: Simulator,
                                                                      tmp_path: Path):
    home = tmp_path / "home"
    env = {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_POLL_SECONDS": "0.05",
           "ASK_ANOTHER_CONFIRM_USD": "1000",  # a simulated Gemini task runs unconfirmed
           "ASK_ANOTHER_LEASE_SECONDS": "600",  # a lease that would outlive the test
           "ASK_ANOTHER_SHUTDOWN_SECONDS": "30",
           "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}",
           "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}"}
    token = TokensFile(home / "tokens.json").add("alice")
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])  # runs until cancelled

    async with http_server(env, tmp_path / "a.log") as server:
        # Legacy mode: the session also holds a GET event stream open, which must not hold
        # the shutdown up.
        async with http_client_for(server.url, token, "legacy") as client:
            error, text = await call(client, "start_research", model="gdr", query="long one",
                                     timeout=0)
            assert not error, text
            job_id = next(w for w in text.replace('"', " ").split() if w.startswith("r-"))
            # Running at the provider (in_progress) before the stop: under load the job could
            # still be pending when SIGTERM came, and was handed back as pending.
            _, owner_a, _ = await until_row(
                home, job_id, lambda r: r[0] == "in_progress" and r[1] is not None)

            answered: list[Any] = []

            async def slow_call() -> None:
                answered.append(await client.call_tool(
                    "completion", {"model": "sim", "prompt": "[[sim:delay=3]] take your time"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                with trio.fail_after(30):  # the provider has the request: the call is in flight
                    while True:
                        if sim.requests_for("m1"):
                            break
                        await trio.sleep(0.02)
                stopped_at = trio.current_time()
                server.signal(signal.SIGTERM)
            # The call in flight was answered in full.
            (result,) = answered
            assert not result.is_error, text_of(result)
            assert "answer to: take your time" in text_of(result)

        with trio.fail_after(25):
            code = await server.process.wait()
        assert code == 0, server.log()
        assert trio.current_time() - stopped_at < 20  # not the 30 s deadline: nothing was left

    log = server.log()
    assert "http.stopping" in log and "http.stopped" in log and "Traceback" not in log
    assert "research.released" in log
    # Handed back: still running at the provider, owned by no one.
    assert job_row(home, job_id) == ("in_progress", None, None)
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as http:
            await http.post(server.url)

    # Another server on the same store takes it over at start, without waiting for a lease to
    # expire, and polls the provider's interaction on.
    async with http_server(env, tmp_path / "b.log") as other:
        await wait_for_line(other.stderr, re.compile(r"research\.taken_over"),
                            other.process)
        _, owner_b, _ = job_row(home, job_id)
        assert owner_b is not None and owner_b != owner_a
        async with http_client_for(other.url, token) as client:
            error, text = await call(client, "cancel_research", job_id=job_id)
            assert not error and "was cancelled" in text, text


async def test_sigterm_while_the_worker_still_imports_litellm_exits_at_once(tmp_path: Path):
    # A worker that is slow to start (litellm's import on a busy machine), made slower here by
    # a sitecustomize that only the worker runs: shutdown waited for it to finish importing
    # before it read its closed stdin (10 s at most, then a kill), with nothing in flight.
    slow = tmp_path / "slow-worker"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import sys, time\n"
        "if 'ask_another.gateway._worker' in sys.orig_argv:\n"
        "    time.sleep(60)\n")
    home = tmp_path / "home"
    TokensFile(home / "tokens.json").add("alice")
    env = {"ASK_ANOTHER_HOME": str(home), "PYTHONPATH": str(slow)}
    async with http_server(env, tmp_path / "s.log") as server:
        await wait_for_line(server.stderr, re.compile(r"http\.listening"), server.process)
        began = trio.current_time()
        server.signal(signal.SIGTERM)
        with trio.fail_after(60):
            code = await server.process.wait()
        took = trio.current_time() - began
    assert code == 0, server.log()
    assert "http.stopping" in server.log() and "calls=0" in server.log()
    assert took < 8, f"exit took {took:.1f} s"
