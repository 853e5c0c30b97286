"""The `ask-another` console script, run as a real subprocess against the simulator."""

from __future__ import annotations

import os
import pty
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio
from pycache import PYCACHE

from ask_another.config import Config
from ask_another.console_link import publish_console
from ask_another.gateway import SharedTransport, open_gateway
from ask_another.simulator import Fail, Reply, Simulator, Slow, ToolCalls
from ask_another.simulator import ToolCall as SimCall

pytestmark = pytest.mark.slow  # starts real server processes

REPO = Path(__file__).resolve().parents[2]


def run(args: list[str], env: dict[str, str], stdin: str = ""
        ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    return subprocess.run(
        [sys.executable, "-m", "ask_another", *args], cwd=REPO, capture_output=True, text=True,
        timeout=120, env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), **env}, input=stdin,
    )


def test_doctor_names_every_malformed_variable_and_fails(sim: Simulator, tmp_path: Path):
    done = run(["doctor"], {
        "ASK_ANOTHER_HOME": str(tmp_path),
        "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
        "MODEL_NOSLASH": "gpt-4o;k",
        "MODEL_BLANK": "",
        "ASK_ANOTHER_TIMEOUT": "never",
        "SEARCH_ENGINE": "bing-ish;k",
    })
    assert done.returncode == 1, done
    for variable in ("MODEL_NOSLASH", "MODEL_BLANK", "ASK_ANOTHER_TIMEOUT", "SEARCH_ENGINE"):
        assert f"PROBLEM: {variable}:" in done.stdout
    assert "openai/m1 (shorthand: sim, openai)" in done.stdout  # the good model is still checked
    assert "Traceback" not in done.stdout + done.stderr


def test_doctor_passes_a_good_configuration(sim: Simulator, tmp_path: Path):
    done = run(["doctor"], {"ASK_ANOTHER_HOME": str(tmp_path),
                            "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
                            "SEARCH_SIM": f"tavily;k;{sim.url}"})
    assert done.returncode == 0, done
    assert "configuration OK" in done.stdout
    assert "search: sim: tavily (SEARCH_SIM) — used by research turns" in done.stdout
    assert f"database: {tmp_path / 'ask-another.sqlite3'} (schema version" in done.stdout
    assert ("provider calls: one worker shared by the sessions on this home with this "
            "environment, not running now: the first call starts it (it imports litellm: not "
            "yet measured here)" in done.stdout)


async def test_doctor_names_the_shared_worker_that_runs_and_a_private_one(sim: Simulator,
                                                                          tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"}
    # A gateway of this process's own environment: the doctor's differs only in our settings,
    # which the worker's key leaves out, so it is the worker doctor's sessions would use.
    transport = SharedTransport(tmp_path, ["k"], log_level="INFO", idle_exit=900.0)
    entry = Config.from_env(env).models[0]
    async with open_gateway(transport, ["k"]) as gateway:
        await gateway.completion(entry, "start the worker")
        pid = gateway.statistics().worker_pid
        done = await trio.to_thread.run_sync(run, ["doctor"], env)
        # A session of another environment (a client's, not this terminal's) has its own.
        other = await trio.to_thread.run_sync(run, ["doctor"], env | {"HTTPS_PROXY": "x:1"})
    assert done.returncode == 0, done
    assert (f"provider calls: one worker shared by the sessions on this home with this "
            f"environment, running (pid {pid}, gateway/{transport.socket_path.name} in the "
            f"home)") in done.stdout
    assert "with this environment, not running now" in other.stdout
    # How long a first call waits, as the worker measured it on this machine: not "1-3 s".
    assert re.search(r"the first call starts it \(it imports litellm: \d+\.\d s at its last "
                     r"start on this machine\)", other.stdout), other.stdout
    assert f"; 1 more for other environments (pid {pid})" in other.stdout
    private = await trio.to_thread.run_sync(
        run, ["doctor"], env | {"ASK_ANOTHER_GATEWAY_SHARED": "0"})
    assert "provider calls: a worker process of each server's own" in private.stdout


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
                            "MODEL_GPT4": "openai/gpt-4o;k", "MODEL_BAD": "x",
                            "SEARCH_WEB": "tavily;tvly-k"})
    assert done.returncode == 0, done
    assert "Allowed models (1):" in done.stdout
    assert "Web search engines (1, through litellm):\n- web: tavily (SEARCH_WEB) — used by " \
        "research turns" in done.stdout
    assert "openai/gpt-4o (shorthand: gpt4, openai): context 128,000 tokens" in done.stdout
    assert "MODEL_BAD" in done.stdout



def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_doctor_with_an_unusable_home_says_so_in_one_line_without_tracebacks(tmp_path: Path):
    home = tmp_path / "a-file"
    home.write_text("not a directory")
    done = run(["doctor"], {"ASK_ANOTHER_HOME": str(home), "MODEL_GPT4": "openai/gpt-4o;k"})
    assert done.returncode == 1, done
    (problem,) = [line for line in done.stdout.splitlines() if line.startswith("PROBLEM")]
    assert str(home) in problem and "is a file" in problem
    assert "set ASK_ANOTHER_HOME to a directory you can write to" in problem
    assert done.stderr == ""  # no log lines, no tracebacks


def test_doctor_prints_each_problem_once_and_names_a_refused_url(tmp_path: Path):
    base = f"http://127.0.0.1:{closed_port()}/v1"
    done = run(["doctor"], {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{base}",
                            "MODEL_BAD": "x"})
    assert done.returncode == 1, done
    output = done.stdout + done.stderr
    assert output.count("MODEL_BAD") == 1
    assert f"PROBLEM: MODEL_SIM: cannot connect to {base} (connection refused)" in done.stdout
    assert done.stderr == ""


def test_doctor_reports_a_malformed_database_url_once_without_a_traceback(tmp_path: Path):
    # An unclosed `[` made urlsplit raise while the password was read for scrubbing: a
    # traceback; other malformed URLs were a PROBLEM twice (the config's and the store's).
    for url in ("postgresql://team:s3cret-PW@[db/ask", "mysql://team:s3cret-PW@db/ask"):
        done = run(["doctor"], {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_GPT4": "openai/gpt-4o;k",
                                "ASK_ANOTHER_DATABASE_URL": url})
        assert done.returncode == 1, done
        problems = [line for line in done.stdout.splitlines() if line.startswith("PROBLEM")]
        assert len(problems) == 1 and "ASK_ANOTHER_DATABASE_URL" in problems[0], done.stdout
        assert "Traceback" not in done.stderr and "s3cret-PW" not in done.stdout + done.stderr


def test_doctor_checks_the_tokens_file_serve_http_would_read(tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_GPT4": "openai/gpt-4o;k"}
    assert run(["token", "add", "alice"], env).returncode == 0
    done = run(["doctor"], env)
    assert done.returncode == 0, done
    assert f"tokens (serve --http): 1 user(s) in {tmp_path / 'tokens.json'}" in done.stdout
    # A file serve --http refuses to start with said "configuration OK".
    (tmp_path / "tokens.json").write_text("{not json")
    done = run(["doctor"], env)
    assert done.returncode == 1, done
    assert f"PROBLEM: {tmp_path / 'tokens.json'} is not an ask-another tokens file" in done.stdout
    missing = tmp_path / "team" / "tokens.json"
    done = run(["doctor"], {**env, "ASK_ANOTHER_TOKENS_FILE": str(missing)})
    assert f"PROBLEM: ASK_ANOTHER_TOKENS_FILE names {missing}, which does not exist" in done.stdout


def test_ask_speaks_to_a_person_of_commands_not_tools(tmp_path: Path):
    base = f"http://127.0.0.1:{closed_port()}/v1"
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{base}"}
    done = run(["ask", "nosuch", "hello"], env)
    assert done.returncode == 1
    assert "Run `ask-another models` to see the allowed models" in done.stderr
    # A mistyped model is no bug: no request to report one.
    assert "ask-another feedback" not in done.stderr
    assert "list_models" not in done.stderr and "feedback tool" not in done.stderr

    done = run(["ask", "sim", "hello"], env)
    assert done.returncode == 1
    (line,) = [ln for ln in done.stderr.splitlines()
               if not ln.startswith("… ")]  # one line besides the progress: no log line
    assert line.startswith("The provider could not be reached (openai/m1)")
    assert f"tried {base}" in line and "status=500" not in line


def test_feedback_from_the_terminal_is_stored(tmp_path: Path):
    done = run(["feedback", "the spinner is too fast"], {"ASK_ANOTHER_HOME": str(tmp_path)})
    assert done.returncode == 0, done
    assert "feedback #1 recorded" in done.stdout
    with sqlite3.connect(tmp_path / "ask-another.sqlite3") as db:
        assert db.execute("SELECT issue FROM feedback").fetchall() == [("the spinner is too fast",)]


def test_help_carries_the_reference_a_wheel_has_no_docs_for():
    done = run(["--help"], {})
    assert done.returncode == 0
    for variable in ("MODEL_<NAME>", "ASK_ANOTHER_HOME", "ASK_ANOTHER_LOG_LEVEL",
                     "ASK_ANOTHER_RESEARCH_DEADLINE", "ask-another demo",
                     # a team service's settings too (they were missing)
                     "ASK_ANOTHER_DATABASE_URL", "ASK_ANOTHER_PUBLIC_URL",
                     "ASK_ANOTHER_OAUTH_ISSUER", "ASK_ANOTHER_RATE_PER_MINUTE",
                     "ASK_ANOTHER_MAX_JOBS_PER_USER", "ASK_ANOTHER_LEASE_SECONDS"):
        assert variable in done.stdout
    assert "See docs/server.md" not in done.stdout


def test_serving_started_by_hand_on_a_tty_says_it_is_an_mcp_server(tmp_path: Path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "ask_another"], cwd=REPO, stdin=terminal, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), "ASK_ANOTHER_HOME": str(tmp_path)})
    os.close(terminal)
    try:
        assert child.stderr is not None
        hello = "".join(child.stderr.readline() for _ in range(5))
        assert "ask-another is an MCP server" in hello and "waiting on stdin" in hello
        assert "ask-another demo" in hello
        os.write(controller, b"\x04")  # Ctrl-D: end of input ends the session
        _, rest = child.communicate(timeout=60)
    finally:
        child.kill()
        os.close(controller)
    assert "[info" not in rest  # no internal log lines for a person


def test_ask_several_models_prints_them_side_by_side(sim: Simulator, tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
           "MODEL_TWO": f"openai/m2;k;{sim.openai_base}"}
    sim.script("m2", [Fail(429, "quota exhausted")])
    done = run(["ask", "sim,two", "Is it right?", "--stance", "sim=against"], env)
    assert done.returncode == 0, done
    assert done.stdout.startswith("Consensus of 2 models (1 answered, 1 failed)")
    assert "openai/m1 (stance: against)" in done.stdout
    assert "[simulated m1] answer to: Is it right?" in done.stdout
    assert "openai/m2 · " in done.stdout and "failed: Rate limited: quota exhausted" in done.stdout
    assert "conversation_id: c-" in done.stdout
    assert "[1/2]" in done.stderr and "[2/2]" in done.stderr
    assert sim.requests_for("m1")[0].messages[0]["content"].startswith("Take the critical side")

    done = run(["ask", "sim,two", "x", "--stance", "nonsense"], env)
    assert done.returncode == 2 and "MODEL=STANCE" in done.stderr
    done = run(["ask", "sim,nope", "x"], env)
    assert done.returncode == 1 and "Model not allowed: 'nope'" in done.stderr


def test_ask_several_models_above_the_confirm_threshold_asks_at_the_terminal(
        sim: Simulator, tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "ASK_ANOTHER_CONFIRM_USD": "0.001",
           "MODEL_GPT4": f"openai/gpt-4o;k;{sim.openai_base}",  # priced: about $0.01 each
           "MODEL_MINI": f"openai/gpt-4o-mini;k;{sim.openai_base}"}
    done = run(["ask", "gpt4,mini", "Worth it?"], env, stdin="n\n")
    assert done.returncode == 1, done
    assert "Confirm the consensus's estimated cost, about $0.0" in done.stderr
    assert "it was not confirmed; nothing was spent" in done.stderr
    assert sim.requests == []
    done = run(["ask", "gpt4,mini", "Worth it?"], env, stdin="y\n")
    assert done.returncode == 0, done
    assert done.stdout.startswith("Consensus of 2 models (2 answered)")


def test_ask_shows_a_progress_line_then_the_answer_off_a_terminal(sim: Simulator, tmp_path: Path):
    sim.script("m1", [Slow(1.5)])
    done = run(["ask", "sim", "slow one"], {"ASK_ANOTHER_HOME": str(tmp_path),
                                           "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"})
    assert done.returncode == 0, done
    assert done.stdout == "[simulated m1] answer to: slow one\n"
    assert done.stderr.startswith("… asking sim (0 s)\n")  # a plain line: no spinner in a pipe
    assert "\r" not in done.stderr


def test_ask_says_on_the_terminal_that_it_starts_the_model_worker(sim: Simulator,
                                                                  tmp_path: Path):
    # The first call waits for the worker's litellm import (9-20 s on a busy machine) with
    # nothing on screen but "asking sim".
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"}
    done = run(["ask", "sim", "first"], env)
    assert done.returncode == 0, done
    assert "… starting the model worker (it imports litellm), then asking sim (" in done.stderr
    done = run(["ask", "sim", "second"], env)  # the worker runs: connected at once
    assert done.returncode == 0, done
    assert "starting the model worker" not in done.stderr


def test_ask_does_not_say_it_starts_a_worker_that_runs_but_is_slow_to_answer(
        sim: Simulator, tmp_path: Path):
    # On a busy machine a running worker can take longer than 0.3 s to answer a connection;
    # `ask` said "starting the model worker" then, which it was not (test_cli flaked on it).
    from ask_another.gateway import home_workers

    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"}
    assert run(["ask", "sim", "first"], env).returncode == 0  # starts the home's worker
    (worker,) = home_workers(tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    os.kill(worker.pid, signal.SIGSTOP)  # running, and answering nothing
    try:
        asking = subprocess.Popen(
            [sys.executable, "-m", "ask_another", "ask", "sim", "second"], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), **env})
        assert asking.stderr is not None
        said = asking.stderr.readline()  # its first status line: it is asking
        assert said.startswith("… asking sim"), said
        # Long past the moment the old code decided (0.3 s after it asked for the gateway),
        # the worker still stopped; nothing this code says may depend on it.
        time.sleep(2)
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    out, err = asking.communicate(timeout=120)
    assert asking.returncode == 0, err
    assert "second" in out and "starting the model worker" not in said + err, said + err


def test_research_prints_each_reference_once(sim: Simulator, tmp_path: Path):
    # The local pipeline's report ends with its References; the command listed them again.
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
           "SEARCH_SIM": f"tavily;k;{sim.url}", "ASK_ANOTHER_CONFIRM_USD": "100"}
    done = run(["research", "sim", "SQLite or PostgreSQL for analytics?", "--depth", "shallow"],
               env)
    assert done.returncode == 0, done
    urls = re.findall(r"https?://[^\s)>\]]+", done.stdout)
    assert urls, done.stdout
    for url in set(urls):
        assert done.stdout.count(url) == 1, (url, done.stdout)


def test_ask_on_a_terminal_draws_a_spinner_and_erases_it(sim: Simulator, tmp_path: Path):
    sim.script("m1", [Slow(1.0)])
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "ask_another", "ask", "sim", "spin"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=terminal, text=True,
        env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), "ASK_ANOTHER_HOME": str(tmp_path),
             "MODEL_SIM": f"openai/m1;k;{sim.openai_base}"})
    os.close(terminal)
    drawn = b""
    try:
        out, _ = child.communicate(timeout=120)
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        child.kill()
        os.close(controller)
    assert child.returncode == 0
    assert out == "[simulated m1] answer to: spin\n"
    screen = drawn.decode()
    assert "\r⠋ asking sim · 0 s" in screen or "asking sim · " in screen
    assert "\r\x1b[K" in screen  # erased before the answer


def test_research_agent_asks_permission_and_questions_at_the_terminal(
        sim: Simulator, tmp_path: Path):
    options = [{"id": "short", "label": "A short report"}, {"id": "long", "label": "A long one"}]
    sim.script("m1", [
        ToolCalls([SimCall("read_article", {"url": "http://example.test/a"}, id="c1")]),
        ToolCalls([SimCall("ask_user", {"prompt": "How long?", "options": options}, id="c2")]),
        Reply("The final report."),
    ])
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    # An `ask-another console` runs on the home (this process stands in for it: the file it
    # writes while it runs): each question also names its approval page there.
    with publish_console(tmp_path, "http://127.0.0.1:9/console"):
        done = subprocess.run(
            [sys.executable, "-m", "ask_another", "research", "sim", "Tides?", "--method",
             "agent"], cwd=REPO, input="n\n2\n", capture_output=True, text=True, timeout=120,
            env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), "ASK_ANOTHER_HOME": str(tmp_path),
                 "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
                 "ASK_ANOTHER_PERMISSIONS": "read=ask"})
    assert done.returncode == 0, done
    assert done.stdout == "The final report.\n"
    assert "wants to run read_article(url='http://example.test/a') [read]. Allow it? [y/N]" in (
        done.stderr)
    assert "The research agent asks: How long?" in done.stderr
    job = re.search(r"research job (r-[0-9a-f]{10})", done.stderr).group(1)  # type: ignore[union-attr]
    for call_id in ("c1", "c2"):
        assert ("(You can also answer it in the console: http://127.0.0.1:9/console/approvals/"
                f"{job}/{call_id})\n") in done.stderr
    assert "research job r-" in done.stderr and "completed in" in done.stderr
    assert "· 3 provider calls, " in done.stderr  # the agent's usage: its three model calls
    results = [m["content"] for m in sim.requests_for("m1")[-1].messages if m["role"] == "tool"]
    assert "was denied" in results[0]
    assert '"option_id": "long"' in results[1]
    # Both answers are audited as the terminal's (they were not: only the console's and the
    # MCP tools' were).
    with sqlite3.connect(tmp_path / "ask-another.sqlite3") as db:
        rows = db.execute("SELECT principal, face, tool_call_id, tool, answer FROM job_answers "
                          "WHERE job_id = ? ORDER BY id", (job,)).fetchall()
    assert rows == [(None, "terminal", "c1", "read_article", "deny"),
                    (None, "terminal", "c2", "ask_user", "option:long")]


def test_usage_reports_what_ask_spent_by_model_and_tool(sim: Simulator, tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path), "MODEL_SIM": f"openai/m1;k;{sim.openai_base}",
           "MODEL_GPT4": f"openai/gpt-4o;k;{sim.openai_base}"}
    done = run(["usage"], env)
    assert done.returncode == 0 and "No provider calls recorded for this month" in done.stdout
    assert run(["ask", "sim", "one"], env).returncode == 0
    assert run(["ask", "gpt4", "two"], env).returncode == 0
    done = run(["usage", "7d"], {**env, "ASK_ANOTHER_BUDGET_MONTH_USD": "20"})
    assert done.returncode == 0, done
    assert done.stdout.startswith("Usage for the last 7 days (UTC): $")
    assert "+ 1 call of unknown price over 2 provider calls" in done.stdout
    assert "  openai/m1: cost unknown · 1 call" in done.stdout
    assert "  ask: $" in done.stdout
    assert "Ceiling ASK_ANOTHER_BUDGET_MONTH_USD: $20.00 per month" in done.stdout
    done = run(["usage", "forever"], env)
    assert done.returncode == 1 and "unknown period 'forever'" in done.stderr


def test_research_above_the_confirmation_threshold_asks_at_the_terminal(
        sim: Simulator, tmp_path: Path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    env = {**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), "ASK_ANOTHER_HOME": str(tmp_path),
           "ASK_ANOTHER_POLL_SECONDS": "0.05",
           # Priced in litellm's map: one task is estimated at about $1.22, above $1.00.
           "MODEL_GDR": f"gemini/deep-research-pro-preview-12-2025;k;{sim.url}"}
    done = subprocess.run([sys.executable, "-m", "ask_another", "research", "gdr", "Deny me"],
                          cwd=REPO, input="n\n", capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 1, done
    assert "Confirm the research job's estimated cost, about $1." in done.stderr
    assert "it was not confirmed; nothing was spent" in done.stderr
    assert not sim.interactions
    done = subprocess.run([sys.executable, "-m", "ask_another", "research", "gdr", "Allow me"],
                          cwd=REPO, input="y\n", capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done
    assert len(sim.interactions) == 1
    # Regression: the command line started a job whose estimate crossed a ceiling (only the
    # tool checked it); now every face is refused before the job is stored.
    done = subprocess.run([sys.executable, "-m", "ask_another", "research", "gdr", "Too dear"],
                          cwd=REPO, input="y\n", capture_output=True, text=True, timeout=120,
                          env={**env, "ASK_ANOTHER_BUDGET_DAY_USD": "1.00"})
    assert done.returncode == 1, done
    assert "would cross the budget ceiling ASK_ANOTHER_BUDGET_DAY_USD=$1.00" in done.stderr
    assert "this research job is estimated at about $1." in done.stderr
    assert len(sim.interactions) == 1


def test_ctrl_c_during_research_cancels_the_job(sim: Simulator, tmp_path: Path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL_", "ASK_ANOTHER_"))}
    env = {**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE), "ASK_ANOTHER_HOME": str(tmp_path),
           "ASK_ANOTHER_POLL_SECONDS": "0.05", "ASK_ANOTHER_CONFIRM_USD": "100",
           "MODEL_GDR": f"gemini/deep-research-pro-preview-12-2025;k;{sim.url}"}
    child = subprocess.Popen(
        [sys.executable, "-m", "ask_another", "research", "gdr", "long [[sim:polls=100000]]"],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert child.stderr is not None
        for line in child.stderr:  # wait until the provider has the interaction
            if "Gemini interaction in_progress" in line:
                break
        child.send_signal(signal.SIGINT)
        _, rest = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130, rest
    assert "cancelled" in rest
    (interaction,) = sim.interactions.values()
    assert interaction.cancel_called
