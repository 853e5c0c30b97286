"""tests/support/deadlines.py: the one place a test's time limit is scaled for a busy machine."""

from __future__ import annotations

import pytest
from deadlines import generous


def test_a_limit_is_scaled_by_the_slowdown_ci_gives(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ASK_ANOTHER_TEST_SLOWDOWN", "3")
    assert generous(10) == 30


def test_a_limit_is_never_shortened_and_follows_the_load_otherwise(
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ASK_ANOTHER_TEST_SLOWDOWN", "0.5")
    assert generous(10) == 10
    monkeypatch.delenv("ASK_ANOTHER_TEST_SLOWDOWN")
    monkeypatch.setattr("os.getloadavg", lambda: (100.0, 0.0, 0.0))
    assert generous(10) == 100  # at most ten times
    monkeypatch.setattr("os.getloadavg", lambda: (0.1, 0.0, 0.0))
    assert generous(10) == 10
