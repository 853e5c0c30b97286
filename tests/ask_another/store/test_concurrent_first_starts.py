"""Processes starting at the same instant on one fresh home all open it (issue 13).

Before the fix, the schema version was read before the write lock was taken: two processes both
read 0, and the second failed with "table ... already exists" or "database is locked".
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from ask_another.store import MIGRATIONS

HELPER = Path(__file__).with_name("first_start.py")
PROCESSES = 20
HOMES = 3


def test_twenty_simultaneous_first_starts_on_a_fresh_home_all_succeed(tmp_path: Path):
    for round_ in range(HOMES):
        home = tmp_path / f"home-{round_}"
        db, go = home / "ask-another.sqlite3", tmp_path / f"go-{round_}"
        procs = [subprocess.Popen([sys.executable, str(HELPER), str(db), str(go)],
                                  stderr=subprocess.PIPE, text=True)
                 for _ in range(PROCESSES)]
        go.touch()
        failures = []
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                failures.append(err.strip().splitlines()[-1] if err.strip() else "no output")
        assert failures == [], f"home {round_}: {len(failures)} of {PROCESSES} failed: {failures}"
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
