"""A consensus whose estimate is above ASK_ANOTHER_CONFIRM_USD, through the real stdio server:
asked by elicitation in both protocol eras (allowed, denied, declined, expired), and for a
client without elicitation refused with the estimate until it calls again with
confirm_spend=true. Whenever it is not confirmed the simulator sees no request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.types import ElicitResult
from stdio_server import stdio_client_for
from tool_results import call

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # starts real server processes

KEY = "sk-test-CONFIRM-CONSENSUS-1f2e3d"
PANEL = {"models": ["gpt4", "mini"], "prompt": "Is this worth it?"}


def env(sim: Simulator, home: Path, **extra: str) -> dict[str, str]:
    # Both priced in litellm's map; a panel of two short calls is about $0.01, so a threshold
    # of $0.001 puts it above.
    return {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_CONFIRM_USD": "0.001",
            "MODEL_GPT4": f"openai/gpt-4o;{KEY};{sim.openai_base}",
            "MODEL_MINI": f"openai/gpt-4o-mini;{KEY};{sim.openai_base}", **extra}


def completions(sim: Simulator) -> int:
    return sum(1 for r in sim.requests if r.path.endswith("/chat/completions"))


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 input-required; handshake
async def test_elicited_allowed_denied_declined_expired(sim: Simulator, tmp_path: Path,
                                                        mode: str):
    replies: list[tuple[float, ElicitResult]] = [
        (0.0, ElicitResult(action="accept", content={"decision": "allow"})),
        (0.0, ElicitResult(action="accept", content={"decision": "deny"})),
        (0.0, ElicitResult(action="decline")),
        # Answered after ASK_ANOTHER_PERMISSION_TIMEOUT: too late, whatever the answer.
        (1.5, ElicitResult(action="accept", content={"decision": "allow"})),
        (0.0, ElicitResult(action="accept", content={"decision": "deny"})),
    ]
    asked: list[str] = []

    async def on_elicit(_ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        delay, reply = replies[len(asked) - 1]
        await trio.sleep(delay)  # the person takes this long (past the 0.5 s timeout)
        return reply

    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env(sim, tmp_path / "home",
                                        ASK_ANOTHER_PERMISSION_TIMEOUT="0.5"), stderr,
                                    mode=mode, elicitation_callback=on_elicit) as client:
            error, text = await call(client, "consensus", **PANEL)
            assert not error, text
            assert "Consensus of 2 models (2 answered)" in text
            assert len(asked) == 1 and "estimated at about $0.0" in asked[0]
            assert "ASK_ANOTHER_CONFIRM_USD=$0.00" in asked[0] and "gpt4, mini" in asked[0]
            assert completions(sim) == 2

            for why in ["it was not confirmed", "it was not confirmed",
                        "nobody confirmed it in time"]:
                error, text = await call(client, "consensus", **PANEL)
                assert error, text
                assert "This consensus was not started: its estimated cost (about $0.0" in text
                assert f"{why}; nothing was spent" in text, text
                assert completions(sim) == 2  # nothing was asked of any provider
            assert len(asked) == 4
            # confirm_spend=true does not skip the question when the user can be asked.
            error, text = await call(client, "consensus", **PANEL, confirm_spend=True)
            assert error and "it was not confirmed; nothing was spent" in text, text
            assert len(asked) == 5 and completions(sim) == 2


async def test_without_elicitation_confirm_spend(sim: Simulator, tmp_path: Path):
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env(sim, tmp_path / "home"), stderr) as client:
            error, text = await call(client, "consensus", **PANEL)
            assert error, text
            assert "Not started: this consensus is estimated at about $0.0" in text
            assert "cannot ask the user to confirm it (no elicitation)" in text
            assert "call consensus again with the same arguments and confirm_spend=true" in text
            assert completions(sim) == 0

            error, text = await call(client, "consensus", **PANEL, confirm_spend=True)
            assert not error, text
            assert "Consensus of 2 models (2 answered)" in text
            assert completions(sim) == 2


async def test_below_the_threshold_nobody_is_asked(sim: Simulator, tmp_path: Path):
    asked: list[str] = []

    async def on_elicit(_ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="decline")

    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env(sim, tmp_path / "home", ASK_ANOTHER_CONFIRM_USD="1"),
                                    stderr, elicitation_callback=on_elicit) as client:
            error, text = await call(client, "consensus", **PANEL)
            assert not error, text
            assert asked == [] and completions(sim) == 2
