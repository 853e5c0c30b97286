"""fastmcp 3 as a tasks client: a task that waits for a person pushes its question.

fastmcp 3's `ToolTask.result()` polls tasks/get until the task ends and calls tasks/result only
after that, so a job's question asked only through a pending tasks/result never reached its
elicitation handler: the task sat in input_required until the permission's 600 s timeout denied
it. The server now asks on the session that created the task (an elicitation carrying
``io.modelcontextprotocol/related-task``, as the 2025-11-25 revision allows) as soon as the job
waits; here the question reaches fastmcp's handler and the job completes.

fastmcp 3 (on the Python SDK 1.x) lives in a throwaway environment
(tests/support/throwaway_env.py); tests/clients/fastmcp_client.py is what it runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio
from loopback_pages import Page, PageServer
from pycache import PYCACHE
from stdio_server import REPO
from throwaway_env import throwaway_python

from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # builds an environment, starts a server and a client process

FASTMCP = "fastmcp==3.4.11"
FAKE_KEY = "sk-test-FASTMCP-3c2d1e"
ARTICLE = ("<html><body><article><h1>Tides</h1><p>" + "The moon pulls the sea. " * 40
           + "</p></article></body></html>").encode()


@pytest.fixture(scope="module")
def fastmcp_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return throwaway_python(tmp_path_factory, "fastmcp3", FASTMCP)


async def test_fastmcp_gets_the_question_of_a_task(fastmcp_python: Path, sim: Simulator,
                                                    tmp_path: Path, nursery: trio.Nursery):
    pages = await PageServer().start(nursery)
    url = pages.add("/tides", Page(ARTICLE))
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": url}, id="call-f")]),
                      Reply("The fastmcp report.")])
    settings = {"command": sys.executable, "args": ["-m", "ask_another"], "cwd": str(REPO),
                "wait": 60,
                "env": {"ASK_ANOTHER_HOME": str(tmp_path / "home"),
                        "PYTHONPYCACHEPREFIX": str(PYCACHE),
                        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                        "ASK_ANOTHER_POLL_SECONDS": "0.05", "ASK_ANOTHER_CONFIRM_USD": "1000",
                        "ASK_ANOTHER_TASK_POLL_SECONDS": "0.2",
                        "ASK_ANOTHER_PERMISSIONS": "read=ask",
                        "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
                        "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}"}}
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    with trio.fail_after(180):
        ran = await trio.run_process(
            ["timeout", "150", str(fastmcp_python),
             str(REPO / "tests" / "clients" / "fastmcp_client.py"),
             str(tmp_path / "settings.json")],
            capture_stdout=True, capture_stderr=True, check=False)
    assert ran.returncode == 0, ran.stderr.decode()[-4000:]
    seen = json.loads(ran.stdout.decode().strip().splitlines()[-1])
    assert "error" not in seen, seen
    assert len(seen["asked"]) == 1, seen
    assert "read_article" in seen["asked"][0]["message"]
    assert seen["asked"][0]["related"] == {"taskId": seen["task_id"]}
    assert json.loads(seen["text"])["report"] == "The fastmcp report."
    assert [r.target for r in pages.requests] == ["/tides"]  # read once, after the approval
