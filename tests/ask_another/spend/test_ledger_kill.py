"""A process killed with SIGKILL during a provider call leaves the call in the usage ledger,
marked unanswered (issue 42 item 7): the row is written before the call. Before, it was written
after the answer, and a node killed mid-call left 3-10 billed calls per kill with no row."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from pycache import PYCACHE

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # starts the CLI

REPO = Path(__file__).resolve().parents[3]


async def test_a_call_cut_off_by_sigkill_stays_in_the_ledger_as_unanswered(sim: Simulator,
                                                                          tmp_path: Path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    env = {**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), "ASK_ANOTHER_HOME": str(tmp_path),
           "ASK_ANOTHER_GATEWAY_PROCESS": "0",  # litellm in the process killed: no worker left
           "MODEL_SIM": f"openai/m1;sk-test-KILL;{sim.openai_base}"}
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "ask_another", "ask", "sim", "[[sim:delay=120]] slow question"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with trio.fail_after(60):  # the provider holds the call
            while not sim.requests_for("m1"):  # noqa: ASYNC110 - the simulator has no event
                await trio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    with sqlite3.connect(tmp_path / "ask-another.sqlite3") as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM usage")]
    assert len(rows) == 1, rows  # before: none
    (row,) = rows
    assert {k: row[k] for k in ("kind", "model", "tool", "answered", "prompt_tokens",
                                "cost_usd")} == {
        "kind": "completion", "model": "openai/m1", "tool": "ask", "answered": 0,
        "prompt_tokens": None, "cost_usd": None}
    call_id = row["call_id"]
    # The provider saw the call under the ledger's id.
    (request,) = sim.requests_for("m1")
    assert request.headers.get("x-ask-another-call") == call_id
