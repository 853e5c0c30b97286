"""The OpenAI Agents SDK (openai-agents) as a client, with its defaults, over stdio.

Its `MCPServerStdio` gives every request `client_session_timeout_seconds`, 5 s by default; a
start_research that waited its old 90 s default got "Request 'tools/call' timed out" and no job
id, while the job ran on. The SDK asks for no progress, so the call now answers within
`QUIET_WAIT` (3 s) with the job id. And each tool's input schema converts to a strict function
tool (`convert_schemas_to_strict=True`, the SDK's own `ensure_strict_json_schema`), which an
agent on OpenAI's structured tool calls needs.

openai-agents lives in a throwaway environment (tests/support/throwaway_env.py), like the other
clients we did not write; tests/clients/openai_agents_client.py is what it runs.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import trio
from pycache import PYCACHE
from stdio_server import REPO
from throwaway_env import throwaway_python

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # builds an environment, starts a server and a client process

AGENTS = "openai-agents==0.24.0"
GEMINI = "gemini/deep-research-pro-preview-12-2025"
FAKE_KEY = "sk-test-AGENTS-41b7e2"


@pytest.fixture(scope="module")
def agents_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return throwaway_python(tmp_path_factory, "openai-agents", AGENTS)


async def test_openai_agents_gets_a_job_id_within_its_default_timeout(
        agents_python: Path, sim: Simulator, tmp_path: Path):
    sim.script_interaction(GEMINI.split("/", 1)[1], statuses=["in_progress"] * 10_000)
    settings = {"command": sys.executable, "args": ["-m", "ask_another"], "cwd": str(REPO),
                "env": {"ASK_ANOTHER_HOME": str(tmp_path / "home"),
                        "PYTHONPYCACHEPREFIX": str(PYCACHE),
                        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                        "ASK_ANOTHER_POLL_SECONDS": "0.05", "ASK_ANOTHER_CONFIRM_USD": "1000",
                        "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}"}}
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    with trio.fail_after(180):
        ran = await trio.run_process(
            ["timeout", "150", str(agents_python),
             str(REPO / "tests" / "clients" / "openai_agents_client.py"),
             str(tmp_path / "settings.json")],
            capture_stdout=True, capture_stderr=True, check=False)
    assert ran.returncode == 0, ran.stderr.decode()[-4000:]
    seen = json.loads(ran.stdout.decode().strip().splitlines()[-1])
    assert seen["timeout"] == 5  # the SDK's default, left alone
    assert "error" not in seen["start"], seen
    assert not seen["start"]["is_error"], seen
    text = seen["start"]["text"]
    assert re.search(r"job_id='r-[0-9a-z]+'", text), text
    assert "keeps running after this session ends" in text
    # Every tool converts to a strict function tool (it fell back to non-strict for
    # list_models, consensus and sequential_research_compile).
    assert seen["not_strict"] == [], seen["not_strict"]
    assert seen["tools"] >= 10
