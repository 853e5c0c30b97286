"""The real thing: `python -m ask_another` over stdio, an `mcp.Client`, and the loopback simulator.

Each test starts one server process (litellm's import makes that take seconds), so each runs a
whole session of scenarios in order: JSON and SSE answers, 429, 500, a malformed body, a slow
answer (timeout) and a dropped connection, in both protocol eras.
"""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
from stdio_server import stdio_client_for
from tool_results import text_of

from ask_another.errors import FEEDBACK_POINTER
from ask_another.simulator import Reply, Simulator

pytestmark = pytest.mark.slow  # starts real server processes

FAKE_KEY = "sk-test-NEVER-SHOW-7d1e4c9a2b"


def server_env(sim: Simulator, home: Path) -> dict[str, str]:
    return {
        "ASK_ANOTHER_HOME": str(home),
        "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}",
        "MODEL_GPT4": f"openai/gpt-4o;{FAKE_KEY};{sim.openai_base}",
        "MODEL_BROKEN": "not a model",
    }


@pytest.mark.parametrize(("mode", "era"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_stdio_session_in_each_protocol_era(sim: Simulator, tmp_path: Path, mode: str,
                                                  era: str):
    stderr_path = tmp_path / "stderr.log"
    with socket.socket() as s:  # a port nobody listens on once it is closed
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    env = {**server_env(sim, tmp_path / "home"), "MODEL_DOWN": f"openai/m9;{FAKE_KEY};{down}"}
    with stderr_path.open("w") as stderr:
        async with stdio_client_for(env, stderr, mode) as client:
            assert client.protocol_version == era

            # initialize / tools/list are answered before litellm has even been imported.
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {"list_models", "search_families", "search_models", "completion",
                             "feedback", "start_research", "check_research", "cancel_research",
                             "sequential_research_plan", "sequential_research_compile",
                             "read_article", "discuss", "answer_permission", "answer_choice",
                             "consensus", "usage"}
            assert "gateway.ready" not in stderr_path.read_text()
            assert "MODEL_BROKEN" in (client.instructions or "")

            async def ask(prompt: str, **extra: Any) -> tuple[bool, str]:
                result = await client.call_tool(
                    "completion", {"model": "sim", "prompt": prompt, **extra})
                return bool(result.is_error), text_of(result)

            listing = text_of(await client.call_tool("list_models", {}))
            assert "openai/gpt-4o (shorthand: gpt4) [custom API base]: context 128,000" in listing
            assert "MODEL_BROKEN" in listing

            # JSON answer.
            error, text = await ask("What is 2+2?")
            assert not error and text.startswith("[simulated m1] answer to: What is 2+2?")
            assert "tokens in" in text

            # SSE answer, streamed to the client as progress messages.
            sim.script("m1", [Reply("Streamed over SSE, piece by piece, to the client.")])
            pieces: list[str] = []

            async def on_progress(progress: float, total: float | None, message: str | None
                                  ) -> None:
                pieces.append(message or "")

            result = await client.call_tool("completion", {"model": "sim", "prompt": "stream"},
                                            progress_callback=on_progress)
            assert text_of(result).startswith("Streamed over SSE, piece by piece, to the client.")
            assert sim.requests_for("m1")[-1].stream
            assert "".join(pieces) == "Streamed over SSE, piece by piece, to the client."

            # Failures, steered in-band so they cross the process boundary as a client's would.
            # Only the answer we could not read may be a bug of ours: only it asks for a report.
            cases = [
                ("[[sim:fail=429 Too many requests, slow down]] hi",
                 "Rate limited (openai/m1): Too many requests, slow down", False),
                ("[[sim:fail=500 The server had an error]] hi",
                 "The provider is unavailable (openai/m1): The server had an error", False),
                ("[[sim:malformed]] hi", "could not be read (openai/m1)", True),
                ("[[sim:drop]] hi", "The provider is unavailable (openai/m1)", False),
            ]
            for prompt, expected, bug in cases:
                error, text = await ask(prompt)
                assert error, (prompt, text)
                assert expected in text, (prompt, text)
                assert text.endswith(FEEDBACK_POINTER) == bug, (prompt, text)
                assert "Traceback" not in text

            # Nobody listening: the error names the URL tried, and no HTTP status is made up.
            result = await client.call_tool("completion", {"model": "down", "prompt": "hi"})
            assert result.is_error
            assert (f"The provider could not be reached (openai/m9): Connection error. "
                    f"(tried {down})") in text_of(result)

            start = trio.current_time()
            error, text = await ask("[[sim:delay=5]] slow", timeout=0.5)
            assert error and "Timed out waiting for an answer (openai/m1)" in text
            assert trio.current_time() - start < 3

            # Still healthy after all that.
            error, text = await ask("still there?")
            assert not error and "answer to: still there?" in text

            feedback = await client.call_tool("feedback", {"issue": "stdio works",
                                                           "tool_name": "completion"})
            assert "recorded" in text_of(feedback)

    log = stderr_path.read_text()
    assert "MODEL_BROKEN" in log  # the start-up error names the malformed variable
    # At the default level a start says what matters, not one line per supervised child.
    assert "supervisor.child_started" not in log
    (refused,) = [line for line in log.splitlines()
                  if "gateway.call_failed" in line and "openai/m9" in line]
    assert "ProviderUnreachable" in refused and "status=500" not in refused
    with sqlite3.connect(tmp_path / "home" / "ask-another.sqlite3") as conn:
        assert conn.execute("SELECT issue FROM feedback").fetchall() == [("stdio works",)]
