"""A server whose ASK_ANOTHER_HOME cannot be used still answers: `initialize`, and each tool call
with one line naming the path and the fix (it used to die before `initialize`, 7 tracebacks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from stdio_server import stdio_client_for
from tool_results import call

from ask_another.errors import FEEDBACK_POINTER

pytestmark = pytest.mark.slow  # starts a real server process


async def test_an_unusable_home_is_the_answer_to_every_tool_not_a_dead_server(tmp_path: Path):
    home = tmp_path / "a-file"
    home.write_text("not a directory")
    env = {"ASK_ANOTHER_HOME": str(home), "MODEL_GPT4": "openai/gpt-4o;sk-test-unused-123"}
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            assert f"NOT WORKING: ASK_ANOTHER_HOME {home} is not usable" in (
                client.instructions or "")
            for tool, arguments in [("list_models", {}), ("completion", {"model": "gpt4",
                                    "prompt": "hi"}), ("check_research", {})]:
                error, text = await call(client, tool, **arguments)
                assert error, (tool, text)
                assert f"ASK_ANOTHER_HOME {home} is not usable: it is a file" in text
                assert "set ASK_ANOTHER_HOME to a directory you can write to" in text
                assert FEEDBACK_POINTER not in text  # a setting to fix, not a bug
    assert "Traceback" not in log.read_text()
