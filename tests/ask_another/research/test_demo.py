"""`ask-another demo` on a machine with no API keys: the README's first command."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from pycache import PYCACHE
from stdio_server import REPO

pytestmark = pytest.mark.slow  # starts real server processes


def test_demo_runs_the_whole_stack_against_the_simulator_and_exits_0():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    # The user's own settings stay out of the demo: a search engine that would be used first
    # (by name), a provider key litellm would read.
    env["SEARCH_AAA"] = "tavily;tvly-users-own;http://127.0.0.1:9"
    env["OPENAI_API_KEY"] = "sk-users-own"
    done = subprocess.run([sys.executable, "-m", "ask_another", "demo"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "SIMULATED provider" in out
    for step in ("list_models", "completion", "start_research", "check_research",
                 "cancel_research"):
        assert f"── {step}" in out
    assert "[simulated sim-chat] answer to: Is 1729" in out
    assert "· progress" in out and "completed in" in out
    assert "continues in the background" in out
    assert "| job_id | model | status |" in out
    assert "SEARCH_AAA" not in out and "Web search engines (1," in out
    assert "the simulator saw the cancel" in out and "is cancelled" in out
    # The local pipeline with an ordinary model finishes with a cited report and its usage.
    assert "planned 3 queries in 2 phases (the model)" in out
    assert "Search the web completed" in out
    assert "completed in" in out and "with 9 citations; usage: 11 provider calls (3 web " \
        "searches)" in out
    assert "(for: How do SQLite and PostgreSQL differ" in out
    # Dollars to the cent from a cent up, two figures below, and a priced Gemini agent priced
    # (it read "$0.024000 + 8 calls of unknown price" and "cost unknown"; costs.py).
    assert re.search(r"\(3 web searches\), [\d,]+ tokens in, [\d,]+ out, \$0\.02 \+ 8 calls "
                     r"of unknown price\n", out)
    gemini = re.search(r"with 2 citations; usage: 1 provider call, [\d,]+ tokens in, [\d,]+ "
                       r"out, (.+)", out)
    assert gemini and re.fullmatch(r"\$0\.000\d\d?", gemini[1]), gemini and gemini[1]
    assert "Estimated cost before it started: about $1.22." in out
