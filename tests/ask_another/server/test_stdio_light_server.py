"""The server process never imports litellm: every provider call goes to its gateway worker.

A real `python -m ask_another` over stdio (under tests/support/modules_probe.py, which reports the
process's own `sys.modules` on request), the loopback simulator, and a session that lists models,
completes, streams, runs and cancels Gemini deep research; then the worker's idle exit and its
restart on the next call, seen from outside through /proc.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import trio
from modules_probe import modules_of, probed_pid
from stdio_server import stdio_client_for
from tool_results import text_of

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # starts real server processes

FAKE_KEY = "sk-test-LIGHT-3c9e51d0aa"
GEMINI = "gemini/deep-research-pro-preview-12-2025"


def _top_level(modules: set[str]) -> set[str]:
    return {name.split(".", 1)[0] for name in modules}


def _workers(parent: int) -> list[int]:
    """The gateway worker processes whose parent is `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"ask_another.gateway._worker" in cmdline:
            found.append(int(entry.name))
    return found


async def _until(condition: object, seconds: float = 30) -> None:
    with trio.fail_after(seconds):
        while not condition():  # type: ignore[operator]  # noqa: ASYNC110 - other processes
            await trio.sleep(0.05)


async def test_litellm_stays_out_of_the_server_process(sim: Simulator, tmp_path: Path):
    home = tmp_path / "home"
    listing_file = tmp_path / "modules.txt"
    env = {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_POLL_SECONDS": "0.05",
        "ASK_ANOTHER_GATEWAY_IDLE": "2",
        "ASK_ANOTHER_TEST_MODULES_FILE": str(listing_file),
        "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}",
        "MODEL_GPT4": f"openai/gpt-4o;{FAKE_KEY};{sim.openai_base}",
        "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}",
        "ASK_ANOTHER_CONFIRM_USD": "1000",  # no spend confirmation for simulated jobs
    }
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr, probe=True) as client:
            await client.list_tools()
            server = probed_pid(f"ASK_ANOTHER_HOME={home}")
            # The worker starts with the server, warm for the first call.
            await _until(lambda: _workers(server))

            listing = text_of(await client.call_tool("list_models", {}))
            assert "openai/gpt-4o (shorthand: gpt4) [custom API base]: context 128,000" in listing
            answer = await client.call_tool("completion", {"model": "sim", "prompt": "hi"})
            assert text_of(answer).startswith("[simulated m1] answer to: hi")
            streamed = await client.call_tool("completion", {"model": "gpt4", "prompt": "s"},
                                              progress_callback=_ignore)
            assert not streamed.is_error and sim.requests_for("gpt-4o")[-1].stream

            sim.script_interaction(GEMINI.split("/", 1)[1],
                                   statuses=["in_progress", "completed"], report="Report.")
            research = await client.call_tool("start_research", {"model": "gdr", "query": "Q?",
                                                                 "timeout": 60})
            assert json.loads(text_of(research))["report"] == "Report."
            sim.script_interaction(GEMINI.split("/", 1)[1], statuses=["in_progress"] * 1000)
            started = await client.call_tool("start_research", {"model": "gdr", "query": "long",
                                                                "timeout": 0.5})
            found = re.search(r"job_id='([^']+)'", text_of(started))
            assert found, text_of(started)
            job = found.group(1)
            cancelled = await client.call_tool("cancel_research", {"job_id": job})
            assert not cancelled.is_error, text_of(cancelled)
            await _until(lambda: any(i.cancel_called for i in sim.interactions.values()))

            imported = _top_level(await trio.to_thread.run_sync(modules_of, server,
                                                                listing_file))
            assert "ask_another" in imported and "mcp" in imported  # the list is real
            assert "litellm" not in imported
            assert "openai" not in imported  # litellm's own SDK dependency

            # Idle for ASK_ANOTHER_GATEWAY_IDLE seconds: the worker exits ...
            [first] = _workers(server)
            await _until(lambda: not _workers(server))
            # ... and the next call starts a new one.
            again = await client.call_tool("completion", {"model": "sim", "prompt": "again"})
            assert text_of(again).startswith("[simulated m1] answer to: again")
            [second] = _workers(server)
            assert second != first
            imported = _top_level(await trio.to_thread.run_sync(modules_of, server,
                                                                listing_file))
            assert "litellm" not in imported


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    pass
