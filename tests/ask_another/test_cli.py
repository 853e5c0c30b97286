"""The `ask-another` console script, run as a real subprocess against the simulator."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ask_another.simulator import Fail, Reply, Simulator

pytestmark = pytest.mark.slow  # starts real server processes

REPO = Path(__file__).resolve().parents[2]
PYCACHE = Path(tempfile.gettempdir()) / "ask-another-test-pycache"


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    return subprocess.run(
        [sys.executable, "-m", "ask_another", *args], cwd=REPO, capture_output=True, text=True,
        timeout=120, env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), **env},
    )


def test_doctor_names_every_malformed_variable_and_fails(sim: Simulator, tmp_path: Path):
    done = run(["doctor"], {
        "ASK_ANOTHER_HOME": str(tmp_path),
        "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
        "MODEL_NOSLASH": "gpt-4o;k",
        "MODEL_BLANK": "",
        "ASK_ANOTHER_TIMEOUT": "never",
    })
    assert done.returncode == 1, done
    for variable in ("MODEL_NOSLASH", "MODEL_BLANK", "ASK_ANOTHER_TIMEOUT"):
        assert f"PROBLEM: {variable}:" in done.stdout
    assert "openai/m1 (shorthand: sim, openai)" in done.stdout  # the good model is still checked
    assert "Traceback" not in done.stdout + done.stderr


def test_doctor_passes_a_good_configuration(sim: Simulator, tmp_path: Path):
    done = run(["doctor"], {"ASK_ANOTHER_HOME": str(tmp_path),
                            "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"})
    assert done.returncode == 0, done
    assert "configuration OK" in done.stdout
    assert f"database: {tmp_path / 'ask-another.sqlite3'} (schema version" in done.stdout


def test_ask_prints_the_answer_on_stdout_and_errors_on_stderr(sim: Simulator, tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"}
    sim.script("m1", [Reply("Forty-two."), Fail(429, "quota exhausted")])
    done = run(["ask", "sim", "What is the answer?", "--system", "Be terse."], env)
    assert done.returncode == 0, done
    assert done.stdout == "Forty-two.\n"
    assert "m1" in done.stderr and "tokens in" in done.stderr
    assert sim.requests_for("m1")[0].messages[0]["content"] == "Be terse."

    done = run(["ask", "sim", "again"], env)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "Rate limited (openai/m1): quota exhausted" in done.stderr

    done = run(["ask", "gpt5", "hello"], env)
    assert done.returncode == 1 and "Model not allowed: 'gpt5'" in done.stderr


def test_models_lists_the_allowlist(sim: Simulator, tmp_path: Path):
    done = run(["models"], {"ASK_ANOTHER_HOME": str(tmp_path),
                            "MODEL_GPT4": "openai/gpt-4o;k", "MODEL_BAD": "x"})
    assert done.returncode == 0, done
    assert "Allowed models (1):" in done.stdout
    assert "openai/gpt-4o (shorthand: gpt4, openai): context 128,000 tokens" in done.stdout
    assert "MODEL_BAD" in done.stdout

