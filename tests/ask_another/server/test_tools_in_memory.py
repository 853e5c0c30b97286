"""The MCP tools through an in-memory `mcp.Client`, in both protocol eras, against the simulator."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

import pytest
import trio
from mcp import Client
from tool_results import call, text_of

from ask_another.config import Config
from ask_another.errors import FEEDBACK_POINTER
from ask_another.server import build_server
from ask_another.simulator import Fail, Reply, SimRequest, Simulator, Slow, Step

ERAS = ["auto", "legacy"]  # auto picks 2026-07-28 in memory; legacy is the initialize handshake


@pytest.mark.parametrize("mode", ERAS)
async def test_tools_list_has_the_four_tools_with_descriptions_and_annotations(
    make_config: Callable[..., Config], mode: str
):
    async with Client(build_server(make_config()), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"list_models", "search_families", "search_models", "completion",
                              "feedback", "start_research", "check_research", "cancel_research",
                              "sequential_research_plan", "sequential_research_compile",
                              "read_article", "discuss", "answer_permission", "answer_choice",
                              "consensus", "usage"}
        assert "verify a model ID before" in tools["search_models"].description
        assert "Do not set temperature" in tools["completion"].description
        assert "safe to call at any time" in tools["feedback"].description
        fb = tools["feedback"].annotations
        assert fb is not None and fb.read_only_hint is True and fb.idempotent_hint is True
        schema = tools["completion"].input_schema
        assert schema["required"] == ["model", "prompt"]
        assert set(schema["properties"]) == {"model", "prompt", "system", "temperature", "timeout",
                                             "conversation_id"}


@pytest.mark.parametrize("mode", ERAS)
async def test_instructions_name_favourites_problems_and_feedback(
    make_config: Callable[..., Config], mode: str
):
    config = make_config(MODEL_BROKEN="no-slash;key")
    async with Client(build_server(config), mode=mode) as client:
        text = client.instructions or ""
    assert "search_families → search_models → completion" in text
    assert "'sim' or 'openai': openai/m1" in text
    assert "MODEL_BROKEN" in text
    assert "Call feedback before retrying" in text


@pytest.mark.parametrize("mode", ERAS)
async def test_completion_returns_the_answer_and_a_usage_line(
    make_config: Callable[..., Config], sim: Simulator, mode: str
):
    sim.script("m1", [Reply("Paris is the capital of France.", usage={"prompt_tokens": 11,
                                                                      "completion_tokens": 7})])
    async with Client(build_server(make_config(), prewarm_after=0), mode=mode) as client:
        error, text = await call(client, "completion", model="sim", prompt="Capital of France?",
                                 system="Be brief.")
    assert not error, text
    assert text.startswith("Paris is the capital of France.")
    assert "openai/m1" in text or "m1" in text
    assert "11 tokens in, 7 out" in text and "cost unknown" in text
    [request] = sim.requests_for("m1")
    assert request.messages[0] == {"role": "system", "content": "Be brief."}
    assert "temperature" not in request.json  # sent only when given


async def test_temperature_is_sent_when_given_and_checked(
    make_config: Callable[..., Config], sim: Simulator
):
    async with Client(build_server(make_config(), prewarm_after=0)) as client:
        error, _ = await call(client, "completion", model="sim", prompt="x", temperature=0.3)
        assert not error
        assert sim.requests_for("m1")[-1].json["temperature"] == 0.3
        error, text = await call(client, "completion", model="sim", prompt="x", temperature=2.5)
    assert error and "temperature must be between 0.0 and 2.0" in text
    assert FEEDBACK_POINTER not in text  # the caller's mistake: no bug report asked for
    assert len(sim.requests_for("m1")) == 1  # the bad call never reached the provider


@pytest.mark.parametrize(("step", "fragment"), [
    (Fail(429, "Rate limit reached for requests"), "Rate limited (openai/m1): Rate limit reached"),
    (Fail(500, "upstream exploded"), "unavailable (openai/m1): upstream exploded"),
    (Fail(401, "Incorrect API key provided"), "Authentication failed"),
    (Fail(400, "max_tokens is too large"), "refused the request (openai/m1): max_tokens"),
])
async def test_provider_errors_are_clear_tool_errors_keeping_the_provider_message(
    make_config: Callable[..., Config], sim: Simulator, step: Fail, fragment: str
):
    sim.script("m1", [step])
    async with Client(build_server(make_config(), prewarm_after=0)) as client:
        error, text = await call(client, "completion", model="sim", prompt="hello")
    assert error
    assert fragment in text
    assert FEEDBACK_POINTER not in text  # the provider's answer, not a bug of ours
    assert "Traceback" not in text


async def test_slow_answer_times_out_with_a_timeout_error(
    make_config: Callable[..., Config], sim: Simulator
):
    sim.script("m1", [Slow(5)])
    async with Client(build_server(make_config(), prewarm_after=0)) as client:
        start = trio.current_time()
        error, text = await call(client, "completion", model="sim", prompt="hi", timeout=0.5)
        elapsed = trio.current_time() - start
    assert error and "Timed out" in text and "0.5 seconds" in text
    assert elapsed < 3


async def test_unknown_and_ambiguous_models(make_config: Callable[..., Config], sim: Simulator):
    config = make_config(MODEL_SIM2=f"openai/m2;k;{sim.openai_base}")
    async with Client(build_server(config)) as client:
        error, text = await call(client, "completion", model="openai/m3", prompt="x")
        assert error and "Model not allowed: 'openai/m3'." in text
        assert "openai/m1" in text  # a similar allowed model is suggested
        error, text = await call(client, "completion", model="openai", prompt="x")
        assert error and "ambiguous" in text and "sim (openai/m1)" in text
    assert sim.requests == []


async def test_list_and_search_models(make_config: Callable[..., Config], sim: Simulator):
    config = make_config(MODEL_GPT4="openai/gpt-4o;k", MODEL_GEM="gemini/gemini-2.5-pro;k",
                         MODEL_JUNK="bad")
    async with Client(build_server(config, prewarm_after=0)) as client:
        error, text = await call(client, "list_models")
        assert not error
        assert "Allowed models (3)" in text
        assert "openai/gpt-4o (shorthand: gpt4): context 128,000 tokens" in text
        assert "$2.50 in / $10.00 out per million tokens" in text
        assert "gemini/gemini-2.5-pro (shorthand: gem, gemini)" in text
        assert "openai/m1 (shorthand: sim) [custom API base]: not in litellm's model map" in text
        assert "MODEL_JUNK" in text
        assert "Web search: none configured" in text

        error, text = await call(client, "search_families")
        assert "- gemini: 1 model(s): gemini/gemini-2.5-pro" in text
        assert "- openai: 2 model(s)" in text
        error, text = await call(client, "search_families", search="gem")
        assert "gemini" in text and "openai" not in text

        error, text = await call(client, "search_models", family="openai")
        assert "openai/gpt-4o" in text and "openai/m1" in text and "gemini" not in text
        error, text = await call(client, "search_models", search="4o")
        assert "openai/gpt-4o" in text and "openai/m1" not in text
        error, text = await call(client, "search_models", search="claude")
        assert not error and "No allowed model matches 'claude'" in text


async def test_feedback_is_stored_with_a_timestamp(make_config: Callable[..., Config]):
    config = make_config()
    async with Client(build_server(config)) as client:
        error, text = await call(client, "feedback", issue="search_models was confusing",
                                 tool_name="search_models")
        assert not error and text.startswith("Thank you: feedback #1 recorded at ")
        error, text = await call(client, "feedback", issue="   ")
        assert error and "feedback is empty" in text
    with sqlite3.connect(config.database_path) as conn:
        rows = conn.execute("SELECT issue, tool_name, created_at FROM feedback").fetchall()
    assert [(r[0], r[1]) for r in rows] == [("search_models was confusing", "search_models")]
    assert rows[0][2].startswith("20")


@pytest.mark.slow  # seconds of real provider latency
async def test_many_concurrent_completions_are_in_flight_at_once(
    make_config: Callable[..., Config], sim: Simulator
):
    """250 calls must all reach the provider while the first is still waiting for its answer:
    no mailbox serializes them and trio's 40-thread limit does not cap them."""
    hold = 4.0
    arrivals: list[float] = []

    def responder(request: SimRequest) -> Step:
        arrivals.append(time.monotonic())
        return Slow(hold, then=Reply(f"answer to {request.last_user_text}"))

    results: list[tuple[bool, str]] = []
    async with Client(build_server(make_config(), prewarm_after=0)) as client:
        await call(client, "list_models")  # litellm loaded
        sim.script("m1", responder)

        async def one(i: int) -> None:
            results.append(await call(client, "completion", model="sim", prompt=f"question {i}"))

        async with trio.open_nursery() as nursery:
            for i in range(250):
                nursery.start_soon(one, i)
    assert len(results) == 250 and not any(error for error, _ in results)
    assert {text.split("\n")[0] for _, text in results} == {
        f"answer to question {i}" for i in range(250)}
    # Every request arrived before the first one could have been answered.
    assert max(arrivals) - min(arrivals) < hold, max(arrivals) - min(arrivals)


async def test_cancelling_a_call_aborts_the_provider_request(
    make_config: Callable[..., Config], sim: Simulator
):
    sim.script("m1", [Slow(30)])
    async with Client(build_server(make_config(), prewarm_after=0)) as client:
        await call(client, "list_models")  # litellm loaded
        with trio.move_on_after(1.0):
            await call(client, "completion", model="sim", prompt="never mind")
        # The server is still healthy and answers the next call at once.
        error, text = await call(client, "completion", model="sim", prompt="next")
    assert not error and "answer to: next" in text


async def test_completion_streams_progress_when_the_caller_asks(
    make_config: Callable[..., Config], sim: Simulator
):
    """Legacy era only in memory: the SDK's in-process 2026 dispatcher delivers progress without
    a token in the request meta, so the tool cannot tell it was asked (stdio covers both eras)."""
    sim.script("m1", [Reply("The answer arrives in several pieces over SSE.")])
    pieces: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pieces.append(message or "")

    async with Client(build_server(make_config(), prewarm_after=0), mode="legacy") as client:
        result = await client.call_tool("completion", {"model": "sim", "prompt": "stream it"},
                                        progress_callback=on_progress)
    assert not result.is_error
    assert text_of(result).startswith("The answer arrives in several pieces over SSE.")
    assert len(pieces) > 1 and "".join(pieces) == "The answer arrives in several pieces over SSE."
    assert sim.requests_for("m1")[-1].stream


async def test_a_misspelled_provider_is_named_by_list_models_and_refused_by_completion(
    make_config: Callable[..., Config], sim: Simulator
):
    # list_models listed MODEL_GPT4="opanai/..." as fine, and completion answered with
    # litellm's raw "LLM Provider NOT provided ... E.g. For 'Huggingface'" text.
    config = make_config(MODEL_GPT4=f"opanai/gpt-4o;k;{sim.openai_base}")
    misspelled = ("MODEL_GPT4: litellm knows no provider 'opanai'. Did you mean 'openai' "
                  "(openai/gpt-4o)?")
    async with Client(build_server(config, prewarm_after=None)) as client:
        listing = text_of(await client.call_tool("list_models", {}))
        error, text = await call(client, "completion", model="gpt4", prompt="Is 1 prime?")
    assert f"Models whose every call would fail (fix the variable):\n- {misspelled}" in listing
    assert error and text.endswith(misspelled), text
    assert "Huggingface" not in text and sim.requests == []
