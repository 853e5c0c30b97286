"""The job host (docs/architecture.md, "Where a job lives"): a job keeps running after the stdio
session that started it ends, in the one detached host of its home.

Real processes: stdio servers over the MCP SDK's client (which ends a session as clients do:
stdin closed, then the server's process group terminated 2 s later), the host they start, the
shared gateway worker, the simulator, the home's SQLite file. The jobs are Gemini interactions,
which resume on takeover today; `test_agent_and_sequential_jobs_outlive_their_session` is the
same for the local methods, which resume once steps are stored (issue 36, goal 2).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from mcp import Client
from processes import processes_with
from pycache import PYCACHE
from research_helpers import GEMINI_AGENT, research_env
from stdio_server import REPO, stdio_client_for
from tool_results import call, check_until, job_id_in

from ask_another.research.host import HostUnavailable, ensure_host, running_host
from ask_another.research.lease import owner_prefix
from ask_another.simulator import Reply, Simulator

pytestmark = pytest.mark.slow  # starts real server processes and the job host

HOST_LINGER = 3.0


def host_env(sim: Simulator, home: Path, lease: float = 30, **extra: str) -> dict[str, str]:
    """A session's environment: a long lease unless said (so a job that moves at once was
    handed back, not expired), a short linger, and a marker the session is found by."""
    return {**research_env(sim.url, home), "ASK_ANOTHER_LEASE_SECONDS": str(lease),
            "ASK_ANOTHER_HOST_LINGER": str(HOST_LINGER), **extra}


def stored(home: Path, job_id: str) -> tuple[str | None, str]:
    """(owner, status) of a job, read from the home's SQLite file as any process may."""
    with sqlite3.connect(home / "ask-another.sqlite3") as db:
        row = db.execute("SELECT owner, status FROM research_jobs WHERE id = ?",
                         (job_id,)).fetchone()
    assert row is not None, job_id
    return row[0], row[1]


async def until(condition: object, seconds: float = 60, what: str = "") -> None:
    """Wait (polling) until `condition()` is true; fail after `seconds`, naming `what`."""
    with trio.move_on_after(seconds):
        while True:
            if condition():  # type: ignore[operator]
                return
            await trio.sleep(0.05)
    raise AssertionError(f"not within {seconds:g} s: {what}")


def hosts_of(home: Path) -> list[int]:
    """The job host processes of `home` (their command line names it)."""
    needle = os.fsencode(str(home.absolute()))
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"ask_another.jobhost" in args and needle in args:
                found.append(int(entry.name))
    return found


def session_pid(marker: str) -> int:
    found = [pid for pid, cmdline in processes_with(f"ASK_ANOTHER_TEST_SESSION={marker}")
             if cmdline.split(b"\0")[1:3] == [b"-m", b"ask_another"]]  # not the host or worker
    assert len(found) == 1, found
    return found[0]


@asynccontextmanager
async def session(env: dict[str, str], log: Path) -> AsyncIterator[Client]:
    with log.open("a") as stderr:
        async with stdio_client_for(env, stderr) as client:
            yield client


async def start_gemini(client: Client, sim: Simulator, query: str) -> tuple[str, str]:
    """A Gemini job that runs until the test ends its interaction: (job id, interaction id)."""
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"], report=f"report of {query}")
    error, text = await call(client, "start_research", model="gdr", query=query, timeout=0)
    assert not error, text
    job_id = job_id_in(text)
    await check_until(client, job_id, "Gemini interaction in_progress")
    (interaction,) = [i for i in sim.interactions.values() if i.input_text == query]
    return job_id, interaction.id


def owned_by_host(home: Path, job_id: str) -> bool:
    pid = running_host(home)
    owner, _ = stored(home, job_id)
    return pid is not None and owner is not None and owner.startswith(owner_prefix(pid))


async def test_a_job_moves_to_the_host_within_a_second_when_its_session_ends_in_order(
        sim: Simulator, tmp_path: Path) -> None:
    """The MCP client's own end of a session: stdin closed, the process group terminated 2 s
    later. The session hands the job back and the host, started when the job started, takes
    it over long before the 30 s lease would expire, and completes it."""
    home = tmp_path / "home"
    async with session(host_env(sim, home), tmp_path / "session.log") as client:
        job_id, interaction_id = await start_gemini(client, sim, "outlive me")
        await until(lambda: running_host(home) is not None, what="the host started")
        host = running_host(home)
        owner, _ = stored(home, job_id)
        assert owner is not None and not owner.startswith(owner_prefix(host or 0))
    ended = trio.current_time()
    await until(lambda: owned_by_host(home, job_id), seconds=10, what="the host took the job")
    # Handed back and claimed at the host's next look, not at the lease's end (30 s).
    assert trio.current_time() - ended < 10
    assert "research.released" in (tmp_path / "session.log").read_text()
    # The host never imports litellm (the home's shared worker does: test_gateway_shared.py):
    # litellm's import maps tiktoken's extension, which the host's memory must not show. Read
    # while the host runs the job: once it ends, the host lingers only HOST_LINGER seconds.
    assert b"_tiktoken" not in Path(f"/proc/{host}/maps").read_bytes()  # noqa: ASYNC240
    sim.end_interaction(interaction_id)
    await until(lambda: stored(home, job_id)[1] == "completed", what="the job completed")
    # A later session reads the report the host wrote.
    async with session(host_env(sim, home), tmp_path / "later.log") as client:
        done = json.loads(await check_until(client, job_id, '"completed"'))
        assert done["report"] == "report of outlive me"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_a_signal_to_the_session_hands_its_job_to_the_host(
        sim: Simulator, tmp_path: Path, signum: signal.Signals) -> None:
    """SIGTERM or SIGHUP to the session while its stdin is still open (a client that
    terminates its server, a closed terminal): it ends in order, as at the end of stdin."""
    home = tmp_path / "home"
    env = host_env(sim, home, ASK_ANOTHER_TEST_SESSION="signalled")
    with trio.move_on_after(60):
        async with session(env, tmp_path / "session.log") as client:
            job_id, interaction_id = await start_gemini(client, sim, "signal me")
            await until(lambda: running_host(home) is not None, what="the host started")
            pid = session_pid("signalled")
            os.kill(pid, signum)
            await until(lambda: not Path(f"/proc/{pid}").exists()
                        or b"Z" in Path(f"/proc/{pid}/stat").read_bytes().split(b")")[-1][:3],
                        seconds=10, what="the session exited")
            await until(lambda: owned_by_host(home, job_id), seconds=10,
                        what="the host took the job")
            sim.end_interaction(interaction_id)
            await until(lambda: stored(home, job_id)[1] == "completed", what="completed")
    assert "research.released" in (tmp_path / "session.log").read_text()
    assert f"signal={signum.name}" in (tmp_path / "session.log").read_text()


async def test_a_killed_sessions_job_is_taken_by_the_host_when_its_lease_expires(
        sim: Simulator, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = host_env(sim, home, lease=3, ASK_ANOTHER_TEST_SESSION="killed")
    killed = False
    try:
        async with session(env, tmp_path / "session.log") as client:
            job_id, interaction_id = await start_gemini(client, sim, "kill me")
            await until(lambda: running_host(home) is not None, what="the host started")
            killed = True
            os.kill(session_pid("killed"), signal.SIGKILL)
            # Nothing was handed back: the job is the dead session's until its lease expires.
            assert not owned_by_host(home, job_id)
            await until(lambda: owned_by_host(home, job_id), seconds=30,
                        what="the host took the job after its lease")
            sim.end_interaction(interaction_id)
            await until(lambda: stored(home, job_id)[1] == "completed", what="completed")
    except BaseException:  # the client's pipe breaks with the kill: expected then only
        if not killed:
            raise
    assert "research.released" not in (tmp_path / "session.log").read_text()


async def test_the_host_leaves_by_itself_once_idle_and_a_second_session_finds_it(
        sim: Simulator, tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with (session(host_env(sim, home), tmp_path / "a.log") as a,
                session(host_env(sim, home), tmp_path / "b.log") as b):
        first, first_interaction = await start_gemini(a, sim, "first")
        await until(lambda: running_host(home) is not None, what="the host started")
        host = running_host(home)
        second, second_interaction = await start_gemini(b, sim, "second")
        # The second session found the host (it looked as its job started): one host.
        await until(lambda: f"pid={host}" in (tmp_path / "b.log").read_text(),
                    what="the second session found the host")
        assert "research.host_started" not in (tmp_path / "b.log").read_text()
        assert hosts_of(home) == [host]
        assert running_host(home) == host
        sim.end_interaction(first_interaction)
        sim.end_interaction(second_interaction)
        await check_until(a, first, '"completed"')
        await check_until(b, second, '"completed"')
    # No unfinished job: the host leaves after its linger, by itself.
    await until(lambda: not hosts_of(home), seconds=HOST_LINGER + 30, what="the host left")
    assert running_host(home) is None
    assert not (home / "jobs" / "host.pid").exists()
    log = (home / "jobs" / "host.log").read_text()
    assert "jobhost.idle" in log


async def test_the_hosts_files_are_this_users_only_and_a_shared_directory_is_refused(
        sim: Simulator, tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with session(host_env(sim, home), tmp_path / "session.log") as client:
        job_id, interaction_id = await start_gemini(client, sim, "private")
        await until(lambda: running_host(home) is not None, what="the host started")
        jobs = home / "jobs"
        assert stat.S_IMODE(jobs.stat().st_mode) == 0o700
        for name in ("host.lock", "host.pid", "host.log"):
            assert stat.S_IMODE((jobs / name).stat().st_mode) == 0o600, name
        sim.end_interaction(interaction_id)
        await check_until(client, job_id, '"completed"')
    # A jobs/ directory others may write in could hold their process's pid file: refused.
    other = tmp_path / "other"
    (other / "jobs").mkdir(parents=True, mode=0o700)
    os.chmod(other, 0o700)
    os.chmod(other / "jobs", 0o777)
    with pytest.raises(HostUnavailable, match="can be written by other users"):
        ensure_host(other, os.environ)
    assert not hosts_of(other)


async def test_where_no_host_can_run_the_session_says_why_and_runs_its_jobs_itself(
        sim: Simulator, tmp_path: Path) -> None:
    """A jobs/ directory others may write in: no host is started (its pid file could be
    theirs), the session logs why, and takes jobs over itself as before the host."""
    home = tmp_path / "home"
    (home / "jobs").mkdir(parents=True, mode=0o700)
    os.chmod(home, 0o700)
    os.chmod(home / "jobs", 0o777)
    async with session(host_env(sim, home), tmp_path / "session.log") as client:
        job_id, interaction_id = await start_gemini(client, sim, "no host here")
        await until(lambda: "research.host_unavailable" in
                    (tmp_path / "session.log").read_text(), what="the session said why")
        sim.end_interaction(interaction_id)
        await check_until(client, job_id, '"completed"')
    assert "can be written by other users" in (tmp_path / "session.log").read_text()
    assert not hosts_of(home)


def doctor(env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    return subprocess.run([sys.executable, "-m", "ask_another", "doctor", *options], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), **env})


async def test_doctor_lists_the_host_and_its_jobs_and_names_them_before_stopping_it(
        sim: Simulator, tmp_path: Path) -> None:
    """doctor shows the host with the job it took over from a session that ended; --stop-workers
    names that job first, then stops the host, which hands it back; the next session's start
    finds it, starts a host again, and the job resumes there and completes."""
    home = tmp_path / "home"
    env = host_env(sim, home)
    async with session(env, tmp_path / "a.log") as client:
        job_id, interaction_id = await start_gemini(client, sim, "doctor me")
    await until(lambda: owned_by_host(home, job_id), seconds=10, what="the host took the job")
    host = running_host(home)

    listed = await trio.to_thread.run_sync(doctor, env)
    (line,) = [line for line in listed.stdout.splitlines() if line.startswith("job host:")]
    assert line.startswith(f"job host: pid {host}, running 1 job(s): {job_id};"), line

    stopped = await trio.to_thread.run_sync(doctor, env, "--stop-workers")
    assert re.search(rf"stopping the job host \(pid {host}\) interrupts 1 job\(s\): {job_id}; "
                     r"they resume from their last step at the next start", stopped.stdout), \
        stopped.stdout
    assert f"stopped: job host pid {host}" in stopped.stdout
    assert "job host: not running" in stopped.stdout  # doctor itself starts none
    assert not hosts_of(home)
    assert stored(home, job_id) == (None, "in_progress")  # handed back, not failed

    async with session(env, tmp_path / "b.log") as client:
        await until(lambda: owned_by_host(home, job_id), seconds=30,
                    what="a new host took the job")
        assert running_host(home) != host
        sim.end_interaction(interaction_id)
        done = json.loads(await check_until(client, job_id, '"completed"'))
        assert done["report"] == "report of doctor me"


async def test_agent_and_sequential_jobs_outlive_their_session(
        sim: Simulator, tmp_path: Path) -> None:
    home = tmp_path / "home"
    sim.script("m1", [Reply("the agent's report")])
    async with session(host_env(sim, home), tmp_path / "session.log") as client:
        # Each model's first answer takes 3 s: both jobs are in flight as the session ends.
        error, text = await call(client, "start_research", model="sim", method="agent",
                                 query="agent job [[sim:delay=3]]", timeout=0)
        assert not error, text
        agent = job_id_in(text)
        error, text = await call(client, "start_research", model="sim", method="sequential",
                                 query="sequential job [[sim:delay=3]]", depth="shallow",
                                 timeout=0)
        assert not error, text
        sequential = job_id_in(text)
    for job_id in (agent, sequential):
        await until(lambda job_id=job_id: stored(home, job_id)[1] in ("completed", "failed"),
                    seconds=120, what=f"{job_id} ended")
        assert stored(home, job_id)[1] == "completed"
