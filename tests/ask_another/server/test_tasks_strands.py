"""A real agent framework's tasks client: strands-agents' `MCPClient` (2026-07-28,
`io.modelcontextprotocol/tasks`) against a real `serve --http`.

strands-agents needs mcp < 2.2 and this project mcp 2.3, so it cannot live in the project's
environment: the test builds a throwaway one (tests/support/throwaway_env.py, `STRANDS`
pinned) and runs tests/strands/tasks_client.py with its Python.

What strands does on its own, as an agent host would: every tool call becomes a task (the
server declares the extension), polled with tasks/get to its result, the agent job's approval
answered from `inputRequests` by its elicitation callback through tasks/update; and the
lifecycle by hand (submit, get, cancel), the cancel reaching the provider.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from http_server import http_server
from loopback_pages import Page, PageServer
from stdio_server import REPO
from throwaway_env import throwaway_python

from ask_another.server.auth import TokensFile
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # builds an environment, starts a server and a client process

STRANDS = "strands-agents==1.62.0"
GEMINI = "gemini/deep-research-pro-preview-12-2025"
GEMINI_AGENT = GEMINI.split("/", 1)[1]
FAKE_KEY = "sk-test-TASKS-STRANDS-6d5c4b"
ARTICLE = ("<html><body><article><h1>Tides</h1><p>" + "The moon pulls the sea. " * 40
           + "</p></article></body></html>").encode()


@pytest.fixture(scope="module")
def strands_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a throwaway environment holding `STRANDS`."""
    return throwaway_python(tmp_path_factory, "strands", STRANDS)


async def test_strands_agents_drives_tasks(strands_python: Path, sim: Simulator, tmp_path: Path,
                                           nursery: trio.Nursery):
    pages = await PageServer().start(nursery)
    token = TokensFile(tmp_path / "tokens.json").add("alice")
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"),
           "ASK_ANOTHER_TOKENS_FILE": str(tmp_path / "tokens.json"),
           "ASK_ANOTHER_POLL_SECONDS": "0.05", "ASK_ANOTHER_CONFIRM_USD": "1000",
           "ASK_ANOTHER_RATE_PER_MINUTE": "0", "ASK_ANOTHER_TASK_POLL_SECONDS": "0.1",
           "ASK_ANOTHER_PERMISSIONS": "read=ask", "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
           "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}",
           "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}",
           "MODEL_FAST": f"openai/fast;{FAKE_KEY};{sim.openai_base}",
           "MODEL_MID": f"openai/mid;{FAKE_KEY};{sim.openai_base}"}
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"] * 4 + ["completed"])
    sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])  # "strands forever"
    sim.script("fast", [Reply("Fast says yes.")])
    sim.script("mid", [Reply("Mid says no.")])
    url = pages.add("/tides", Page(ARTICLE))
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": url}, id="call-s")]),
                      Reply("The strands report.")])
    async with http_server(env, tmp_path / "server.log") as server:
        with trio.fail_after(180):  # `timeout` ends a hung client with what it said so far
            ran = await trio.run_process(
                ["timeout", "150", str(strands_python),
                 str(REPO / "tests" / "strands" / "tasks_client.py"), server.url, token],
                capture_stdout=True, capture_stderr=True, check=False)
        assert ran.returncode == 0, ran.stderr.decode()[-4000:]
    seen = json.loads(ran.stdout.decode().strip().splitlines()[-1])
    assert seen["protocolVersion"] == "2026-07-28"
    assert seen["research"]["status"] == "success", seen
    assert json.loads(seen["research"]["text"])["report"].startswith(
        "# [simulated deep-research")
    assert seen["consensus"]["status"] == "success"
    assert seen["consensus"]["text"].startswith("Consensus of 2 models (2 answered)")
    assert "Fast says yes." in seen["consensus"]["text"]
    assert json.loads(seen["agent"]["text"])["report"] == "The strands report."
    assert len(seen["asked"]) == 1 and "read_article" in seen["asked"][0]
    assert [r.target for r in pages.requests] == ["/tides"]  # read once, after the approval
    assert seen["submitted"]["type"] == "MCPCreateTaskResult"
    assert seen["submitted"]["status"] == "working"
    assert seen["read"]["status"] == "working", seen["read"]
    assert seen["read"]["statusMessage"].startswith("Gemini interaction"), seen["read"]
    assert seen["afterCancel"] == "cancelled"
    remote = [i for i in sim.interactions.values() if i.input_text == "strands forever"]
    assert remote and remote[0].cancel_called
    logged = (tmp_path / "server.log").read_text()
    # Every call went the task way (strands chose it), none the ordinary way.
    assert logged.count("tasks.created") == 4, logged.count("tasks.created")
    assert FAKE_KEY not in logged and token not in logged
