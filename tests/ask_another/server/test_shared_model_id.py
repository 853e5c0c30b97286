"""Two `MODEL_*` variables with one model id (issue 16, item 6), through the real stdio server: a
shorthand keeps meaning its own variable (its key) in a conversation's later turns and in a
research job, instead of the stored id turning "ambiguous"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stdio_server import stdio_client_for
from tool_results import call

from ask_another.simulator import Reply, Simulator

pytestmark = pytest.mark.slow  # starts real server processes

WORK_KEY = "sk-work-1111aaaa2222"
HOME_KEY = "sk-home-3333bbbb4444"


def conversation_id_of(text: str) -> str:
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("conversation_id: c-"), text
    return last.split(": ", 1)[1]


async def test_a_shorthand_keeps_its_own_entry_when_two_share_a_model_id(sim: Simulator,
                                                                          tmp_path: Path):
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"),
           "MODEL_WORK": f"openai/ok;{WORK_KEY};{sim.openai_base}",
           "MODEL_HOME": f"openai/ok;{HOME_KEY};{sim.openai_base}",
           "ASK_ANOTHER_POLL_SECONDS": "0.05"}
    sim.script("ok", lambda request: Reply(f"answer {len(request.messages)}"))
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            error, first = await call(client, "completion", model="work", prompt="one")
            assert not error, first
            conversation = conversation_id_of(first)
            error, second = await call(client, "completion", model="work", prompt="two",
                                       conversation_id=conversation)
            assert not error, second
            assert second.startswith("answer 3") and conversation_id_of(second) == conversation
            # The other variable's shorthand may not continue it: another key, another account.
            error, other = await call(client, "completion", model="home", prompt="three",
                                      conversation_id=conversation)
            assert error and "is with work, not home" in other, other
            # A research job keeps its variable through the job actor's own lookup.
            error, text = await call(client, "start_research", model="home", query="Q?",
                                     method="agent", timeout=30)
            assert not error, text
            body = json.loads(text)
            assert body["status"] == "completed", body
    keys = [r.api_key for r in sim.requests_for("ok")]
    assert keys[:2] == [WORK_KEY, WORK_KEY]
    assert keys[2:] and set(keys[2:]) == {HOME_KEY}
