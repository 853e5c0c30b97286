"""Issue 16, item 9, through the real stdio server: a 429's Retry-After reaches the message, wrong
argument types are refused, prompts, system prompts and feedback have a configurable size cap, and
an answer the provider billed is returned (and said not stored) when the disk is full."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import Client
from mcp.client.stdio import stdio_client
from stdio_server import server_parameters, stdio_client_for
from tool_results import call

from ask_another.simulator import Fail, Reply, Simulator

KEY = "sk-test-ARGUMENTS-1b2c3d4e"


def env_for(sim: Simulator, home: Path, **extra: str) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home), "MODEL_SIM": f"openai/m1;{KEY};{sim.openai_base}",
            **extra}


async def test_retry_after_types_and_size_caps(sim: Simulator, tmp_path: Path):
    env = env_for(sim, tmp_path / "home", ASK_ANOTHER_MAX_PROMPT_CHARS="1000",
                  ASK_ANOTHER_MAX_FEEDBACK_CHARS="100")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            # The 429's Retry-After says when to try again.
            sim.script("m1", [Fail(429, "slow down", retry_after=7)])
            error, text = await call(client, "completion", model="sim", prompt="hi")
            assert error and "Rate limited" in text and "retry in 7 s" in text, text
            # Wrong types are refused, not coerced (true would be sent as temperature 1.0).
            for wrong in (True, "0.5", [1]):
                error, text = await call(client, "completion", model="sim", prompt="hi",
                                         temperature=wrong)
                assert error and "temperature" in text, (wrong, text)
            error, text = await call(client, "completion", model="sim", prompt="hi",
                                     timeout=True)
            assert error and "timeout" in text, text
            # Sizes: a clear error naming the setting that raises the cap.
            error, text = await call(client, "completion", model="sim", prompt="p" * 1001)
            assert error and "the prompt is 1,001 characters long, over the limit of 1,000" in text
            assert "ASK_ANOTHER_MAX_PROMPT_CHARS" in text, text
            error, text = await call(client, "completion", model="sim", prompt="hi",
                                     system="s" * 1001)
            assert error and "the system prompt is 1,001 characters" in text, text
            error, text = await call(client, "feedback", issue="f" * 101)
            assert error and "ASK_ANOTHER_MAX_FEEDBACK_CHARS" in text, text
            # Within the caps all of it works.
            sim.script("m1", [Reply("fine")])
            error, text = await call(client, "completion", model="sim", prompt="p" * 1000,
                                     system="s" * 1000, temperature=0.5)
            assert not error and text.startswith("fine"), text
            error, text = await call(client, "feedback", issue="f" * 100)
            assert not error, text
    # Only the 429 and the last call reached the provider.
    requests = sim.requests_for("m1")
    assert len(requests) == 2 and requests[1].json["temperature"] == 0.5


# The server with a file-size limit (RLIMIT_FSIZE): SQLite's writes past it fail the way a full
# disk makes them fail (Python ignores SIGXFSZ, so the write just errors).
LIMITED = ("import resource, runpy, sys; "
           "resource.setrlimit(resource.RLIMIT_FSIZE, ({0}, {0})); "
           "sys.argv = ['ask_another']; runpy.run_module('ask_another', run_name='__main__')")


async def test_a_billed_answer_is_returned_when_the_disk_is_full(sim: Simulator,
                                                                 tmp_path: Path):
    params = server_parameters(env_for(sim, tmp_path / "home",
                                       ASK_ANOTHER_MAX_PROMPT_CHARS="5000000"))
    params.command, params.args = sys.executable, ["-c", LIMITED.format(1_000_000)]
    sim.script("m1", [Reply("first answer"), Reply("the expensive answer")])
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), read_timeout_seconds=60) as client:
            error, text = await call(client, "completion", model="sim", prompt="small")
            assert not error, text
            conversation = text.rstrip().rsplit(": ", 1)[1]
            # 1.5 MB of prompt: the turn's write passes the file-size limit.
            error, text = await call(client, "completion", model="sim", prompt="x" * 1_500_000,
                                     conversation_id=conversation)
            assert not error, text
            assert text.startswith("the expensive answer"), text[:300]
            assert "This answer was NOT stored (the database" in text, text[-400:]
            assert f"conversation {conversation} goes on without this turn" in text, text[-400:]
    assert len(sim.requests_for("m1")) == 2
    assert "conversation.not_stored" in (tmp_path / "stderr.log").read_text()
