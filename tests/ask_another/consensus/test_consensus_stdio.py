"""`consensus` through the real stdio server: five simulator models of different latencies (one
failing, one timing out), stances, synthesis, progress, continuing the thread, and a cancel
that hangs up every request in flight (the simulator sees the hang-ups)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from stdio_server import stdio_client_for
from tool_results import call, text_of

from ask_another.consensus import STANCES
from ask_another.simulator import Fail, SimRequest, Simulator, Slow, Step

pytestmark = pytest.mark.slow  # starts real server processes

FAKE_KEY = "sk-test-NEVER-SHOW-7d1e4c9a2b"
PANEL = ["fast", "mid", "slow", "broken", "stuck"]


def server_env(sim: Simulator, home: Path) -> dict[str, str]:
    env = {"ASK_ANOTHER_HOME": str(home)}
    for name in [*PANEL, "judge", "other"]:
        env[f"MODEL_{name.upper()}"] = f"openai/{name};{FAKE_KEY};{sim.openai_base}"
    return env


def after(seconds: float) -> Callable[[SimRequest], Step]:
    return lambda _: Slow(seconds)


def latencies(sim: Simulator) -> None:
    sim.script("fast", after(0.05))
    sim.script("mid", after(0.3))
    sim.script("slow", after(0.6))
    sim.script("broken", lambda _: Fail(503, "upstream overloaded\nretry later"))
    sim.script("stuck", after(30))


async def wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    with trio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 - polls the simulator in its own thread
            await trio.sleep(0.02)


async def test_consensus_session(sim: Simulator, tmp_path: Path):
    latencies(sim)
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(server_env(sim, tmp_path / "home"), stderr) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "consensus" in tools
            # litellm loaded in the gateway's worker process: the timings below are the calls'.
            error, _ = await call(client, "completion", model="other", prompt="warm up")
            assert not error

            # Five models at once: partial results, stances, synthesis, progress as each ends.
            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(done: float, total: float | None, message: str | None
                                  ) -> None:
                progress.append((done, total, message))

            started = time.monotonic()
            result = await client.call_tool("consensus", {
                "models": PANEL, "prompt": "Is P equal to NP?", "system": "Be brief.",
                "stances": {"fast": "for", "mid": "against", "slow": "argue like a pirate"},
                "synthesize": "judge", "timeout": 2,
            }, progress_callback=on_progress)
            wall = time.monotonic() - started
            text = text_of(result)
            assert not result.is_error, text
            assert text.startswith("Consensus of 5 models (3 answered, 1 failed, 1 timed out)"), \
                text
            for name in ("fast", "mid", "slow"):
                assert f"[simulated {name}] answer to: Is P equal to NP?" in text
            assert "openai/broken · " in text and "failed: The provider is unavailable: " \
                "upstream overloaded retry later" in text
            assert "openai/stuck · " in text and "timed out: Timed out" in text
            assert "openai/fast (stance: for)" in text
            assert "## Synthesis by openai/judge" in text
            assert "conversation_id: c-" in text
            # Bounded by the slowest call (the 2 s timeout), not the sum of the latencies.
            assert wall < 2 + 0.6 + 2, wall
            # One progress notification per model, as each ended: fastest first.
            assert [p[0] for p in progress] == [1, 2, 3, 4, 5]
            assert {p[1] for p in progress} == {5}
            order = [str(p[2]).split(" ")[0] for p in progress]
            assert order.index("openai/fast") < order.index("openai/mid") < \
                order.index("openai/slow") < order.index("openai/stuck")

            # Stances reach the prompts, after the system prompt; the others get none.
            def system_of(model: str) -> str:
                messages = sim.requests_for(model)[0].messages
                return str(messages[0]["content"]) if messages[0]["role"] == "system" else ""

            assert system_of("fast") == "Be brief.\n\n" + STANCES["for"]
            assert system_of("mid") == "Be brief.\n\n" + STANCES["against"]
            assert system_of("slow").endswith("Your stance for this question: argue like a "
                                              "pirate")
            assert system_of("broken") == "Be brief."
            # The synthesizer saw every reply, and the failures' reasons.
            synthesis = sim.requests_for("judge")[0].last_user_text
            for name in ("fast", "mid", "slow"):
                assert f"[openai/{name}" in synthesis
                assert f"[simulated {name}] answer to: Is P equal to NP?" in synthesis
            assert "(failed: The provider is unavailable" in synthesis
            assert "(timed out: " in synthesis
            assert "Agreements" in synthesis and "Single-model claims" in synthesis

            # Continuing the thread: every model sees the panel's earlier replies.
            conversation = text.rsplit("conversation_id: ", 1)[1].strip()
            sim.clear()
            error, again = await call(client, "consensus", models=["fast", "mid"],
                                      prompt="And P vs PSPACE?", conversation_id=conversation)
            assert not error, again
            history = sim.requests_for("mid")[0].messages
            assert history[0] == {"role": "system", "content": "Be brief."}
            assert history[1] == {"role": "user", "content": "Is P equal to NP?"}
            assert "[simulated slow] answer to: Is P equal to NP?" in history[2]["content"]
            assert history[-1] == {"role": "user", "content": "And P vs PSPACE?"}
            # ... and a panel model can take it further alone (completion, or discuss).
            error, alone = await call(client, "completion", model="mid", prompt="Summarize.",
                                      conversation_id=conversation)
            assert not error, alone
            assert len(sim.requests_for("mid")[-1].messages) == 6
            error, refused = await call(client, "completion", model="other", prompt="Hi.",
                                        conversation_id=conversation)
            assert error and "other" in refused

            # Bad input: one-line errors, no traceback.
            error, message = await call(client, "consensus", models=["fast"], prompt="x")
            assert error and "needs 2 to 8 models, got 1" in message
            error, message = await call(client, "consensus", models=["fast", "openai/fast"],
                                        prompt="x")
            assert error and "named twice" in message
            error, message = await call(client, "consensus", models=["fast", "mid"], prompt="x",
                                        stances={"slow": "for"})
            assert error and "not on the panel" in message

            # Cancelling the call hangs up every request in flight.
            sim.clear()
            for name in PANEL:
                sim.script(name, after(30))

            async def held() -> None:
                await call(client, "consensus", models=PANEL, prompt="hold on")

            with trio.move_on_after(10) as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(held)
                    await wait_until(lambda: len(sim.requests) == len(PANEL))
                    nursery.cancel_scope.cancel()
            assert not scope.cancelled_caught
            await wait_until(lambda: len(sim.hangups) == len(PANEL))
            assert sorted(r.model or "" for r in sim.hangups) == sorted(PANEL)
            # The server is still healthy.
            sim.clear()
            error, text = await call(client, "consensus", models=["fast", "mid"], prompt="ok?")
            assert not error and "2 answered" in text


async def test_a_consensus_thread_keeps_its_model_entries(sim: Simulator, tmp_path: Path):
    # Regression: a consensus thread stored no MODEL_* names, so another variable holding the
    # same model id (another key or base) could take the thread further.
    home = tmp_path / "home"
    env = {"ASK_ANOTHER_HOME": str(home),
           "MODEL_FAST": f"openai/fast;{FAKE_KEY};{sim.openai_base}",
           "MODEL_ALSOFAST": f"openai/fast;sk-test-OTHER-KEY-99;{sim.openai_base}",
           "MODEL_MID": f"openai/mid;{FAKE_KEY};{sim.openai_base}",
           "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1"}  # the simulator's pages, for discuss
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            error, text = await call(client, "consensus", models=["fast", "mid"], prompt="Hi?")
            assert not error, text
            conversation = text.rsplit("conversation_id: ", 1)[1].strip()
            with sqlite3.connect(home / "ask-another.sqlite3") as conn:
                entry = conn.execute("SELECT entry FROM conversations WHERE id = ?",
                                     (conversation,)).fetchone()[0]
            assert entry == "MODEL_FAST,MODEL_MID"
            error, refused = await call(client, "completion", model="alsofast", prompt="Go on.",
                                        conversation_id=conversation)
            assert error and "alsofast" in refused, refused
            error, text = await call(client, "completion", model="fast", prompt="Go on.",
                                     conversation_id=conversation)
            assert not error, text
            # A consensus as the first step of a discussion: discuss an article in the thread.
            error, text = await call(client, "discuss", model="mid",
                                     url=f"{sim.url}/sources/search/tides/1",
                                     prompt="Does this article change your answer?",
                                     conversation_id=conversation)
            assert not error, text
            sent = sim.requests_for("mid")[-1].messages
            assert sent[0] == {"role": "user", "content": "Hi?"}
            assert "[openai/fast]\n[simulated fast]" in sent[1]["content"]
            assert sent[-1]["content"] == "Does this article change your answer?"
