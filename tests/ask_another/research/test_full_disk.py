"""A research job on a home whose filesystem fills up (issue 42 item 8), on a real small
filesystem: a 4 MB tmpfs mounted for the test (root only; skipped with the reason elsewhere).

A process (`python -c SCRIPT`: a runtime on the home, litellm in it) starts a sequential job
against the simulator, waits until the job's first call has left (its ledger intent is in the
store), then fills the filesystem to ENOSPC and holds it full for `HOLD` seconds before freeing
it. Before the fix each write of the job failed with a plain `StoreError`, its actor crashed and
its supervisor restarted it at once: 689 restarts and 3,460 log lines in 8 s, the storm the issue
measured. Now the job's writes and its calls' ledger rows wait for space (store/outage.py,
`WAITS_FOR_SPACE`): while the disk is full the job neither crashes nor fails and logs the cause
once; a new job is refused at once with words a person can act on; once space returns the job
completes in its first attempt and every call the provider received has its answered row.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pycache import PYCACHE

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # mounts a filesystem and starts a process

REPO = Path(__file__).resolve().parents[3]
HOLD = 4.0
"""Seconds the filesystem stays full: the fault's length, not a wait for anything."""

SCRIPT = r"""
import json, os, sqlite3, sys, time
from pathlib import Path

import trio

from ask_another.errors import error_text
from ask_another.runtime import open_runtime

disk, hold = Path(sys.argv[1]), float(sys.argv[2])
database = disk / "home" / "ask-another.sqlite3"


def intents() -> int:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT COUNT(*) FROM usage WHERE call_id LIKE 'job:%'").fetchone()[0]


def fill() -> None:
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:  # ENOSPC: the filesystem is full
        pass
    finally:
        os.close(fd)


async def main() -> None:
    async with open_runtime(prewarm_after=0, gateway_process=False) as rt:
        await rt.complete("sim", "warm up")
        job = await rt.jobs.start("sim", "how do tidal plants store energy",
                                  method="sequential", depth="shallow")
        while intents() == 0:  # the job's first call is on its way to the provider
            await trio.sleep(0.01)
        fill()
        print("disk.full", file=sys.stderr, flush=True)
        try:
            await rt.jobs.start("sim", "a second job", method="sequential")
            refused = None
        except Exception as exc:
            refused = error_text(exc)
        await trio.sleep(hold)
        os.unlink(disk / "filler")
        print("disk.space_back", file=sys.stderr, flush=True)
        with trio.fail_after(300):
            while not (record := await rt.jobs.get(job.id)).finished:
                await trio.sleep(0.05)
        print(json.dumps({"id": job.id, "status": record.status, "error": record.error,
                          "attempts": record.attempts, "report": record.report,
                          "refused": refused}))


trio.run(main)
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs mounted at a directory of the test's own, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem (mount -t tmpfs) needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs",
                              str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 4 MB tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_job_waits_out_a_full_disk_without_restarts_and_completes_when_space_returns(
        small_disk: Path):
    with Simulator.running(latency=0.5) as sim:
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
        env = {**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE),
               "ASK_ANOTHER_HOME": str(small_disk / "home"),
               "ASK_ANOTHER_CONFIRM_USD": "1000", "ASK_ANOTHER_POLL_SECONDS": "0.05",
               "MODEL_SIM": f"openai/m1;sk-disk-1;{sim.openai_base}"}
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(small_disk), str(HOLD)],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        calls = [r.headers["x-ask-another-call"] for r in sim.requests
                 if r.headers.get("x-ask-another-call", "").startswith("job:")]
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout)
    log = done.stderr
    full = log[log.index("disk.full"):log.index("disk.space_back")]

    # While the disk was full: no crash, no restart, the cause said once, no storm of lines.
    assert "actor.crashed" not in log and "crash (" not in log, full[-3000:]
    assert full.count("store.waiting") >= 1, full
    assert len(full.splitlines()) <= 12, full[-3000:]
    # A job started meanwhile is refused at once, in words that say what to do.
    assert result["refused"] is not None
    assert "is full" in result["refused"] and "free space" in result["refused"], result
    assert "Traceback" not in result["refused"]

    # Space back: the job completed in its first attempt, its calls each paid and recorded once.
    assert result["status"] == "completed" and result["attempts"] == 1, result
    assert result["error"] is None and result["report"], result
    with sqlite3.connect(small_disk / "home" / "ask-another.sqlite3") as conn:
        rows = dict(conn.execute("SELECT call_id, answered FROM usage WHERE job_id = ?",
                                 (result["id"],)).fetchall())
    assert calls and len(calls) == len(set(calls)), calls
    assert sorted(rows) == sorted(calls), (rows, calls)
    assert all(rows.values()), rows
