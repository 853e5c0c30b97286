"""A newcomer's mistakes at the terminal, each answered by one line a person can act on.

Run as real `ask-another` subprocesses against the simulator, as a person meets them: a mistyped
model or an empty query to `research`, a misspelled provider, a malformed `MODEL_*` beside good
ones, an unusable home, a provider nobody listens for, a deep-research agent asked for a chat
call, and a consensus whose synthesiser is also on its panel.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from processes import processes_with
from pycache import PYCACHE

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # starts real CLI processes

REPO = Path(__file__).resolve().parents[2]
GDR = "gemini/deep-research-pro-preview-12-2025"


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    return subprocess.run(
        [sys.executable, "-m", "ask_another", *args], cwd=REPO, capture_output=True, text=True,
        timeout=120, env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), **env},
        stdin=subprocess.DEVNULL,
    )


def said(done: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr's lines besides the progress lines (`… `)."""
    return [line for line in done.stderr.splitlines() if not line.startswith("… ")]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_research_mistakes_are_one_line_each(sim: Simulator, tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
           "MODEL_GDR": f"{GDR};k;{sim.gemini_base}"}
    cases = [
        (["research", "simm", "Why are there tides?"], "Model not allowed: 'simm'."),
        (["research", "sim", "   "], "the research query is empty"),
        (["research", "gdr", "tides", "--method", "sequential"],
         f"method 'sequential' makes chat calls: {GDR} is a deep-research agent, and this kind "
         "of model takes no chat call"),
    ]
    for args, expected in cases:
        done = run(args, env)
        assert done.returncode == 1, done
        (line,) = said(done)  # one line, no traceback
        assert line.startswith(expected), line
        assert "ask-another feedback" not in line  # a mistake, not a bug to report
    assert "(`ask-another research MODEL QUERY`)" in line  # the command, not the tool
    assert sim.requests_for("m1") == []


def test_research_against_an_unreachable_provider_fails_at_once(tmp_path: Path):
    base = f"http://127.0.0.1:{closed_port()}/v1"
    done = run(["research", "sim", "Why are there tides?"],
               {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{base}"})
    assert done.returncode == 1, done
    # No template plan, no retried queries, no summary of nothing: the URL tried, at once.
    assert "template planner" not in done.stderr and "attempt 2" not in done.stderr
    assert "executive summary" not in done.stderr
    assert said(done)[-1].endswith(
        f"failed: The provider could not be reached (openai/m1): Connection error. "
        f"(tried {base}).")


def test_an_unusable_home_reads_the_same_from_every_command(tmp_path: Path):
    home = tmp_path / "a-file"
    home.write_text("not a directory")
    env = {"ASK_ANOTHER_HOME": str(home), "MODEL_GPT4": "openai/gpt-4o;k"}
    sentence = (f"ASK_ANOTHER_HOME {home} is not usable: it is a file, not a directory; set "
                "ASK_ANOTHER_HOME to a directory you can write to (or unset it for the default).")
    doctor = run(["doctor"], env)
    assert f"PROBLEM: {sentence}" in doctor.stdout.splitlines()
    for args in (["ask", "gpt4", "hi"], ["usage"], ["research", "gpt4", "tides"],
                 ["feedback", "hello"], ["token", "add", "alice"], ["token", "list"]):
        done = run(args, env)
        assert done.returncode == 1, done
        assert said(done) == [sentence], (args, done.stderr)


def test_a_malformed_model_variable_is_named_on_stderr_by_every_command(sim: Simulator,
                                                                       tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
           "MODEL_X": "gpt-4o"}
    # Both missing parts at once: the provider before the model and the key after it.
    both = ("MODEL_X: missing the provider before the model ('openai/gpt-4o' for an OpenAI model, "
            "not 'gpt-4o') "
            "and ';api-key' after it")
    for args in (["ask", "sim", "hi"], ["models"], ["usage"], ["feedback", "fine"],
                 ["token", "list"]):
        done = run(args, env)
        assert done.returncode == 0, done
        (line,) = [line for line in done.stderr.splitlines() if "MODEL_X" in line]
        assert line.startswith(f"ask-another: {both}"), (args, line)
        assert "`ask-another doctor`" in line
    doctor = run(["doctor"], env)
    assert f"PROBLEM: {both}" in doctor.stdout and doctor.stderr == ""


def test_doctor_names_a_misspelled_provider_and_the_closest_one(sim: Simulator, tmp_path: Path):
    done = run(["doctor"], {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_GPT4": "opanai/gpt-4o;k",
                            "MODEL_LOCAL": f"ollama_chat/llama3;;{sim.url}",
                            "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"})
    assert done.returncode == 1, done
    problems = [line for line in done.stdout.splitlines() if line.startswith("PROBLEM")]
    assert problems == ["PROBLEM: MODEL_GPT4: litellm knows no provider 'opanai'. Did you mean "
                        "'openai' (openai/gpt-4o)?"]


def test_only_what_may_be_a_bug_asks_for_feedback(sim: Simulator, tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"}
    for args in (["ask", "nosuch", "hi"], ["ask", "sim", "hi", "--temperature", "9"]):
        done = run(args, env)
        assert done.returncode == 1, done
        assert "ask-another feedback" not in done.stderr and "bug" not in done.stderr
    done = run(["ask", "sim", "[[sim:malformed]] hi"], env)  # an answer we could not read
    assert done.returncode == 1, done
    assert 'record it with `ask-another feedback "what happened"`' in done.stderr
    done = run(["feedback", "the spinner is too fast"], env)
    assert done.returncode == 0, done
    assert "nothing is sent anywhere" in done.stdout and "tracker" not in done.stdout


def test_a_consensus_names_each_model_once_and_refuses_a_research_agent(sim: Simulator,
                                                                       tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
           "MODEL_B": f"openai/m2;k;{sim.openai_base}", "MODEL_GDR": f"{GDR};k;{sim.gemini_base}"}
    done = run(["ask", "sim,b", "Is 1 prime?", "--synthesize", "sim"], env)
    assert done.returncode == 0, done
    # The synthesiser is on the panel too: two estimate lines, one model, named once.
    assert ("Estimated before it started: unknown (no price for openai/m1, openai/m2 in "
            "litellm's price map)") in done.stdout
    done = run(["ask", "sim,gdr", "Is 1 prime?"], env)
    assert done.returncode == 0, done  # one model answered
    assert (f"failed: {GDR} is a deep-research agent, and this kind of model takes no chat "
            "call") in done.stdout
    assert sim.requests_for(GDR.split("/", 1)[1]) == []


def test_a_mistake_the_configuration_shows_is_answered_without_starting_a_worker(
        sim: Simulator, tmp_path: Path):
    # `ask sin ...` started the gateway worker (litellm's import, seconds) before it said
    # "Model not allowed", then waited for it; a misspelled provider got litellm's raw "LLM
    # Provider NOT provided ... E.g. For 'Huggingface'" text from the worker.
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
           "MODEL_GPT4": f"opanai/gpt-4o;k;{sim.openai_base}"}
    misspelled = ("MODEL_GPT4: litellm knows no provider 'opanai'. Did you mean 'openai' "
                  "(openai/gpt-4o)?")
    cases = [
        (["ask", "sin", "Is 1 prime?"], "Model not allowed: 'sin'."),
        (["ask", "sim", "  "], "the prompt is empty"),
        (["ask", "gpt4", "Is 1 prime?"], misspelled),
        (["ask", "gpt4,sim", "Is 1 prime?"], misspelled),
        (["research", "gpt4", "tides"], misspelled),
    ]
    for args, expected in cases:
        done = run(args, env)
        assert done.returncode == 1, done
        (line,) = said(done)
        assert line.startswith(expected), (args, line)
        assert "Huggingface" not in done.stderr
    assert not (tmp_path / "gateway").exists() or not list((tmp_path / "gateway").glob("*.pid"))
    assert processes_with(f"ASK_ANOTHER_HOME={tmp_path}") == []  # no worker was started
    assert sim.requests == []


def test_models_names_a_misspelled_provider_as_doctor_does(sim: Simulator, tmp_path: Path):
    done = run(["models"], {"ASK_ANOTHER_HOME": str(tmp_path),
                            "MODEL_GPT4": "opanai/gpt-4o;k",
                            "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"})
    assert done.returncode == 0, done
    assert ("Models whose every call would fail (fix the variable):\n- MODEL_GPT4: litellm "
            "knows no provider 'opanai'. Did you mean 'openai' (openai/gpt-4o)?") in done.stdout


def test_serve_http_on_a_port_in_use_names_port(tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path)}
    assert run(["token", "add", "alice"], env).returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(["serve", "--http", "--port", str(port)], env)
    assert done.returncode == 1, done
    assert said(done)[-1] == (f"cannot listen on 127.0.0.1:{port}: Address already in use; "
                              "use --port N for another port, or --port 0 for any free one.")
    assert "Traceback" not in done.stderr


def test_a_key_pasted_with_a_space_is_noted_by_doctor_and_sent_without_it(sim: Simulator,
                                                                          tmp_path: Path):
    # OPENAI_API_KEY=" sk-..." (read by litellm for a MODEL_ variable with no key) went out as
    # "Bearer  sk-..." and doctor said the configuration was OK; a key pasted in two pieces
    # went out as it was.
    home = {"ASK_ANOTHER_HOME": str(tmp_path), "ASK_ANOTHER_GATEWAY_SHARED": "0"}
    env = {**home, "MODEL_SIM": f"openai/m1;;{sim.openai_base}",
           "MODEL_PADDED": f"openai/m2; sk-padded-0123 ;{sim.openai_base}",
           "OPENAI_API_KEY": " sk-from-the-environment-0123\n"}
    doctor = run(["doctor"], env)
    assert doctor.returncode == 0, doctor
    notes = [line for line in doctor.stdout.splitlines() if line.startswith("note: ")]
    assert "note: OPENAI_API_KEY has spaces around it (as pasted?); it is sent without" in notes
    assert ("note: MODEL_PADDED: the API key has spaces around it (as pasted?); it is sent "
            "without") in notes
    assert "0123" not in doctor.stdout + doctor.stderr  # no key, in no part
    done = run(["ask", "sim", "Is 1 prime?"], env)
    assert done.returncode == 0, done
    assert [r.headers.get("authorization") for r in sim.requests_for("m1")] == [
        "Bearer sk-from-the-environment-0123"]

    pieces = run(["doctor"], {**home, "MODEL_SIM": f"openai/m1;sk-pasted in-two;{sim.openai_base}"})
    assert pieces.returncode == 1, pieces
    assert ("PROBLEM: MODEL_SIM: the API key has a space inside it; provider keys have none, so "
            "the provider would refuse it (was it pasted in two pieces?)") in pieces.stdout
    assert "two" not in pieces.stdout.replace("two pieces", "")
