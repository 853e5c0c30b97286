"""Confirmation above ASK_ANOTHER_CONFIRM_USD through the real stdio server: a research job whose
estimate is above it waits for a person (elicitation while start_research waits, answer_permission
otherwise); allowed, it runs; denied or expired, the provider is never asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.types import ElicitResult
from stdio_server import stdio_client_for
from tool_results import call, check_until

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # starts real server processes

KEY = "sk-test-CONFIRM-7a6b5c4d"
# Priced in litellm's map: one task is estimated at about $1.22, above the default $1.00.
GEMINI = "gemini/deep-research-pro-preview-12-2025"


def env(sim: Simulator, home: Path, **extra: str) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_POLL_SECONDS": "0.05",
            "MODEL_GDR": f"{GEMINI};{KEY};{sim.url}", **extra}


def created(sim: Simulator, query: str) -> bool:
    return any(query in i.input_text for i in sim.interactions.values())


def job_in(text: str) -> str:
    return text.split("Research job ", 1)[1].split(" ", 1)[0]


async def started(client: Client, query: str) -> str:
    """Start a Gemini research job in the background (timeout 0); its id."""
    error, text = await call(client, "start_research", model="gdr", query=query, timeout=0)
    assert not error, text
    return job_in(text)


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 input-required; handshake
async def test_confirmed_by_elicitation_allowed_and_denied(sim: Simulator, tmp_path: Path,
                                                           mode: str):
    answers = iter(["allow", "deny"])
    asked: list[str] = []

    async def on_elicit(_ctx: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": next(answers)})

    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env(sim, tmp_path / "home"), stderr, mode=mode,
                                    elicitation_callback=on_elicit) as client:
            error, text = await call(client, "start_research", model="gdr", query="Q one",
                                     timeout=60)
            assert not error, text
            body = json.loads(text)
            assert body["status"] == "completed" and body["estimated_cost"].startswith("about $1.")
            assert "ASK_ANOTHER_CONFIRM_USD" in asked[0] and "about $1." in asked[0]
            assert created(sim, "Q one")

            error, text = await call(client, "start_research", model="gdr", query="Q two",
                                     timeout=60)
            assert error and "not started" in text and "it was not confirmed" in text, text
            assert "nothing was spent" in text and "ASK_ANOTHER_CONFIRM_USD=$1.00" in text
            assert not created(sim, "Q two")


async def test_confirmed_by_answer_permission_denied_expired_allowed(sim: Simulator,
                                                                     tmp_path: Path):
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env(sim, tmp_path / "home",
                                        ASK_ANOTHER_PERMISSION_TIMEOUT="1"), stderr) as client:
            # Denied.
            job = await started(client, "Q deny")
            waiting = await check_until(client, job, "confirmation of its estimated cost")
            assert "tool_call_id 'confirm-spend'" in waiting and "about $1." in waiting
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="confirm-spend", decision="deny")
            assert not error, text
            failed = await check_until(client, job, "failed")
            assert "it was not confirmed; nothing was spent" in failed
            assert not created(sim, "Q deny")

            # Expired: nobody answered within ASK_ANOTHER_PERMISSION_TIMEOUT.
            job = await started(client, "Q expire")
            failed = await check_until(client, job, "failed")
            assert "nobody confirmed it in time; nothing was spent" in failed
            assert not created(sim, "Q expire")

            # Allowed.
            job = await started(client, "Q allow")
            await check_until(client, job, "confirmation of its estimated cost")
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="confirm-spend", decision="allow")
            assert not error, text
            await check_until(client, job, '"status": "completed"')
            assert created(sim, "Q allow")

        # Above the threshold only: with ASK_ANOTHER_CONFIRM_USD=5 the job just runs.
        async with stdio_client_for(env(sim, tmp_path / "home", ASK_ANOTHER_CONFIRM_USD="5"),
                                    stderr) as client:
            error, text = await call(client, "start_research", model="gdr", query="Q cheap",
                                     timeout=60)
            assert not error and json.loads(text)["status"] == "completed", text


async def test_without_elicitation_start_research_answers_at_once(sim: Simulator,
                                                                 tmp_path: Path):
    # Regression: a client without elicitation (Gemini CLI) used to wait out the whole start
    # wait (90 s by default) while the job waited for an answer_permission it could not give
    # from inside that call.
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env(sim, tmp_path / "home"), stderr) as client:
            with trio.fail_after(30):
                error, text = await call(client, "start_research", model="gdr",
                                         query="Q gemini cli")
            assert not error, text
            assert "has not started: its estimated cost, about $1." in text
            assert "above ASK_ANOTHER_CONFIRM_USD=$1.00" in text
            assert "Nothing has been spent" in text
            job = job_in(text)
            assert (f"answer_permission(job_id='{job}', tool_call_id='confirm-spend', "
                    "decision='allow')") in text
            assert not created(sim, "Q gemini cli")
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="confirm-spend", decision="allow")
            assert not error, text
            await check_until(client, job, '"status": "completed"')
            assert created(sim, "Q gemini cli")
