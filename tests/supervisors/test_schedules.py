"""Supervisor properties under a few hundred seeded trio schedules (bench/supervisors_schedules.py
runs 10,000): restarts against a reference model of OTP's supervisor, shutdown order, exit
propagation through links and monitors, and the call/timeout/cancel race. A failing example
names its seed; `uv run python -m bench.supervisors_schedules --seed N` replays it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.supervisors_schedules import ScheduleFailure, _Model, explore, run_seed


@settings(max_examples=200, deadline=None, derandomize=False)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_supervisor_properties_hold_under_seeded_schedules(seed: int) -> None:
    run_seed(seed)


def test_one_seed_replays_the_same_scenario_and_schedule() -> None:
    for seed in (1, 2, 3):
        assert run_seed(seed) == run_seed(seed)


def test_a_model_that_disagrees_with_otp_is_caught_with_its_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exploration is not vacuous: a model that restarts only the failed child whatever
    the strategy disagrees with the runtime within a few seeds, and the error names the seed."""
    exit_ = _Model.exit

    def one_for_one(self: _Model, cid: int, kind: str, now: float) -> None:
        self.strategy = "one_for_one"
        exit_(self, cid, kind, now)

    monkeypatch.setattr(_Model, "exit", one_for_one)
    with pytest.raises(ScheduleFailure, match=r"replay: .*--seed \d+"):
        explore(range(200))
