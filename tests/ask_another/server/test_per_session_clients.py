"""Real clients that open a stdio session per tool call or per run (issue 36): a research job
outlives each session, in the home's job host.

- langchain-mcp-adapters by its documented default (`MultiServerMCPClient(...).get_tools()`):
  every call is a new `ask-another` process, closed as the MCP SDK closes one (stdin, then the
  process group terminated 2 s later). A job started in one call is completed, with its
  report, when check_research asks 15 s later in another.
- The OpenAI Agents SDK with each run in `async with MCPServerStdio(...)`: an agent job waiting
  for a person survives the block; the next run answers it and the job completes.

Both clients live in a throwaway environment built with uv from the package registry (pinned:
`CLIENTS`; they bring their own mcp 1.x), running tests/clients/per_session_client.py; without
uv or the registry the tests are skipped, saying which. The agent and sequential jobs resume on
the host from their stored steps (docs/research.md, "Surviving restarts").
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from pycache import PYCACHE
from stdio_server import REPO
from tool_results import job_id_in

from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # builds an environment, starts servers, the host, clients

CLIENTS = ("langchain-mcp-adapters==0.3.2", "openai-agents==0.24.0")
GEMINI = "gemini/deep-research-pro-preview-12-2025"
GEMINI_AGENT = GEMINI.split("/", 1)[1]
FAKE_KEY = "sk-test-PER-SESSION-4e3d2c"


@pytest.fixture(scope="module")
def clients_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a throwaway environment holding `CLIENTS` (skips when it cannot be built:
    no uv, or no registry)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH: cannot build the clients' own environment")
    venv = tmp_path_factory.mktemp("clients") / "venv"
    made = subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)],
                          capture_output=True, text=True, timeout=120, check=False)
    if made.returncode != 0:
        pytest.skip(f"uv venv failed: {made.stderr.strip().splitlines()[-1:]}")
    python = venv / "bin" / "python"
    installed = subprocess.run([uv, "pip", "install", "-q", "-p", str(python), *CLIENTS],
                               capture_output=True, text=True, timeout=600, check=False)
    if installed.returncode != 0:
        last = (installed.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"{', '.join(CLIENTS)} could not be installed from the registry: {last}")
    return python


def server_json(sim: Simulator, home: Path, **extra: str) -> str:
    """The stdio server each session runs, as the clients are given it."""
    env = {"ASK_ANOTHER_HOME": str(home), "PYTHONPYCACHEPREFIX": str(PYCACHE),
           "ASK_ANOTHER_POLL_SECONDS": "0.05", "ASK_ANOTHER_CONFIRM_USD": "1000",
           "ASK_ANOTHER_HOST_LINGER": "5", "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
           "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}",
           "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}", **extra}
    return json.dumps({"command": sys.executable, "args": ["-m", "ask_another"], "env": env,
                       "cwd": str(REPO)})


def stored_status(home: Path, job_id: str) -> str:
    with sqlite3.connect(home / "ask-another.sqlite3") as db:
        (status,) = db.execute("SELECT status FROM research_jobs WHERE id = ?",
                               (job_id,)).fetchone()
    return str(status)


async def client(python: Path, *args: str) -> dict[str, Any]:
    """One step of a scenario in its own client process: its JSON answer."""
    with trio.fail_after(180):
        ran = await trio.run_process(
            ["timeout", "150", str(python), str(REPO / "tests" / "clients" /
                                                "per_session_client.py"), *args],
            capture_stdout=True, capture_stderr=True, check=False)
    assert ran.returncode == 0, ran.stderr.decode()[-4000:]
    answer: dict[str, Any] = json.loads(ran.stdout.decode().strip().splitlines()[-1])
    return answer


async def test_langchain_per_call_sessions_a_gemini_job_completes_after_its_session(
        clients_python: Path, sim: Simulator, tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = server_json(sim, home)
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"], report="per-call report")
    started = await client(clients_python, "langchain-start", server, "gdr", "auto",
                           "per-call tides")
    job_id = job_id_in(started["text"])
    assert "keeps running after this session ends" in started["text"], started
    # Its session is gone; the provider finishes while only the host can be polling.
    with trio.fail_after(60):
        while not (created := [i for i in sim.interactions.values()  # noqa: ASYNC110
                               if i.input_text == "per-call tides"]):
            await trio.sleep(0.05)
    sim.end_interaction(created[0].id)
    await trio.sleep(15)  # the scenario: the next call comes 15 s later
    # Completed before any other session ran (before the host, the job waited for the next
    # session to take it over, and a session of one call handed it back at once).
    assert stored_status(home, job_id) == "completed"
    checked = await client(clients_python, "langchain-check", server, job_id)
    done = json.loads(checked["text"])
    assert done["status"] == "completed" and done["report"] == "per-call report", checked


@pytest.mark.parametrize("method", ["agent", "sequential"])
async def test_langchain_per_call_sessions_local_jobs_complete_after_their_session(
        clients_python: Path, sim: Simulator, tmp_path: Path, method: str) -> None:
    home = tmp_path / "home"
    server = server_json(sim, home)
    if method == "agent":
        sim.script("m1", [Reply("the agent's per-call report")])
    # The model's first answer takes 3 s: the job is in flight when its session closes.
    started = await client(clients_python, "langchain-start", server, "sim", method,
                           "per-call question [[sim:delay=3]]")
    job_id = job_id_in(started["text"])
    await trio.sleep(15)
    checked = await client(clients_python, "langchain-check", server, job_id)
    done = json.loads(checked["text"])
    assert done["status"] == "completed" and done["report"], checked


async def test_agents_sdk_per_run_a_job_waiting_for_a_person_survives_the_block(
        clients_python: Path, sim: Simulator, tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = server_json(sim, home, ASK_ANOTHER_PERMISSIONS="read=ask")
    url = "http://127.0.0.1:9/article"  # refused at once once allowed: its failure is fine
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": url}, id="call-run")]),
                      Reply("the report after the person said yes")])
    started = await client(clients_python, "agents-start", server, "sim", "agent",
                           "ask me first")
    job_id = job_id_in(started["text"])
    # The block closed with the job waiting for permission; the next run answers it.
    answered = await client(clients_python, "agents-answer", server, job_id)
    assert "call-run" in answered["answered"], answered
    done = json.loads(answered["text"])
    assert done["status"] == "completed"
    assert done["report"] == "the report after the person said yes"
