"""The kill soak's short form (issue 36; the long form is `python -m bench soak`): 8 jobs of
every method (sequential, agent, consensus) on one SQLite home while the process running them
is killed with SIGKILL again and again (4 times at least), each next process taking the jobs
over: all complete, each report equal to the same job's undisturbed report, no completed step
run again, every call the provider received one ledger row, none doubled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pycache import PYCACHE

pytestmark = pytest.mark.slow  # starts and kills processes, minutes of real time

REPO = Path(__file__).resolve().parents[3]


def test_eight_jobs_through_four_sigkills_complete_as_undisturbed_and_pay_each_call_once():
    done = subprocess.run([sys.executable, "-m", "bench.soak", "--jobs", "8", "--pace", "1.5",
                           "--burst", "1", "--min-kills", "4"], cwd=REPO,
                          capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "PYTHONPYCACHEPREFIX": str(PYCACHE)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert figures["kills"] >= 4, figures
    assert figures["completed"] == figures["reports_equal"] == 8, figures["unequal"] or figures
    assert figures["completed_steps_rerun"] == 0, figures
    assert figures["doubles"] == 0 and figures["calls_without_row"] == 0, figures
    # Three kinds of row: answered (each a call the provider saw), calls cut off by a kill
    # (sent, unanswered) and intents never sent (unanswered, no call).
    assert figures["answered_rows_not_called"] == 0, figures
    assert figures["calls"] == figures["answered_rows"] + figures["calls_cut_off"], figures
    assert figures["ledger_rows"] == figures["calls"] + figures["intents_never_sent"], figures
    assert figures["steps_resumed"] > 0, figures
