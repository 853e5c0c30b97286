"""Processes starting at the same instant on one fresh home all open it (issue 13).

Before the fix, the schema version was read before the write lock was taken: two processes both
read 0, and the second failed with "table ... already exists" or "database is locked".
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from first_start import first_starts

from ask_another.store import MIGRATIONS

pytestmark = pytest.mark.slow  # sixty processes, twenty at a time

PROCESSES = 20
HOMES = 3


def test_twenty_simultaneous_first_starts_on_a_fresh_home_all_succeed(tmp_path: Path):
    for round_ in range(HOMES):
        home = tmp_path / f"home-{round_}"
        db, go = home / "ask-another.sqlite3", tmp_path / f"go-{round_}"
        failures = first_starts(str(db), PROCESSES, go)
        assert failures == [], f"home {round_}: {len(failures)} of {PROCESSES} failed: {failures}"
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
