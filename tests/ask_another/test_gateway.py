"""The gateway against the simulator, on both transports: litellm on an asyncio thread in this
process, and litellm in the worker process. Each test runs once per transport."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence

import pytest
import trio
import trio.testing

from ask_another.config import Config, ModelEntry
from ask_another.errors import InvalidArgument, MalformedResponse, ProviderUnavailable
from ask_another.gateway import ProcessTransport, ThreadTransport, Transport, open_gateway
from ask_another.simulator import Drop, Malformed, Reply, Simulator, Slow, ToolCall, ToolCalls

KEY = "sk-test-gateway-0123456789"
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}

MakeTransport = Callable[[Sequence[str]], Transport]  # the `transport` fixture (conftest.py)


def entry(sim: Simulator, model: str = "openai/m1") -> ModelEntry:
    env = {"MODEL_X": f"{model};{KEY};{sim.openai_base}", "ASK_ANOTHER_HOME": "/tmp/unused"}
    return Config.from_env(env).models[0]


async def test_import_waits_for_the_first_call_when_asked_to(sim: Simulator,
                                                             transport: MakeTransport):
    async with open_gateway(transport([KEY]), [KEY], warm=False) as gateway:
        await trio.sleep(0.2)
        assert not gateway.statistics().ready
        result = await gateway.completion(entry(sim), "hi")
        assert gateway.statistics().ready
    assert result.text == "[simulated m1] answer to: hi"


async def test_cancelling_the_trio_caller_cancels_the_provider_call(sim: Simulator,
                                                                   transport: MakeTransport):
    sim.script("m1", [Reply("first"), Slow(30)])
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        await gateway.completion(entry(sim), "litellm is loaded")
        with trio.move_on_after(1.0):
            await gateway.completion(entry(sim), "wait forever")
        # The asyncio task (and with it the HTTP request) is gone, not left running for 30 s.
        with trio.fail_after(5):
            while gateway.statistics().in_flight:  # noqa: ASYNC110 - state in another thread
                await trio.sleep(0.02)
        assert len(sim.requests_for("m1")) == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_come_back_with_id_name_and_arguments(sim: Simulator, stream: bool,
                                                               transport: MakeTransport):
    sim.script("m1", [ToolCalls([ToolCall("get_weather", {"city": "Paris"}, id="call_sim_a")])])
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        result = await gateway.completion(entry(sim), "weather in Paris?", tools=[WEATHER_TOOL],
                                          stream=stream)
    [call] = result.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "call_sim_a", "get_weather", {"city": "Paris"})
    assert result.finish_reason == "tool_calls"
    assert sim.requests_for("m1")[0].json["tools"][0]["function"]["name"] == "get_weather"


async def test_streamed_deltas_arrive_in_order_and_add_up_to_the_text(sim: Simulator,
                                                                     transport: MakeTransport):
    sim.script("m1", [Reply("one two three four five six seven")])
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        result = await gateway.completion(entry(sim), "count", on_delta=on_delta)
    assert len(deltas) > 1
    assert "".join(deltas) == result.text == "one two three four five six seven"
    assert result.usage.prompt_tokens and result.usage.completion_tokens


async def test_citations_are_returned(sim: Simulator, transport: MakeTransport):
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        result = await gateway.completion(entry(sim, "openai/sim-research"), "what is new?")
    assert len(result.citations) == 2
    assert all(c.startswith(sim.url) for c in result.citations)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_perplexity_answer_keeps_its_sources_streamed_or_not(
        sim: Simulator, stream: bool, transport: MakeTransport):
    # litellm's response built from Perplexity's chunks drops their `citations`: `ask`, which
    # streams, printed "[1][2]" with no sources under it.
    async def ignore(_text: str) -> None:
        pass

    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        result = await gateway.completion(
            entry(sim, "perplexity/sonar-deep-research"), "what is new?", stream=stream,
            on_delta=ignore if stream else None)
    assert "[1][2]" in result.text
    assert len(result.citations) == 2 and all(c.startswith(sim.url) for c in result.citations)


async def test_malformed_and_dropped_answers_are_typed_errors(sim: Simulator,
                                                             transport: MakeTransport):
    sim.script("m1", [Malformed(), Drop()])
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        with pytest.raises(MalformedResponse):
            await gateway.completion(entry(sim), "a")
        with pytest.raises(ProviderUnavailable):
            await gateway.completion(entry(sim), "b")


@pytest.mark.parametrize("stream", [False, True])
async def test_known_model_reports_its_cost(sim: Simulator, stream: bool,
                                            transport: MakeTransport):
    sim.script("gpt-4o", [Reply("ok", usage={"prompt_tokens": 1000, "completion_tokens": 1000})])
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        result = await gateway.completion(entry(sim, "openai/gpt-4o"), "price?", stream=stream)
    # gpt-4o in litellm's bundled map: $2.50 and $10.00 per million tokens.
    assert result.usage.cost_usd == pytest.approx(0.0125)
    assert "$0.01" in result.usage.describe()  # to the cent (costs.py)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_is_the_answer_not_an_empty_one(sim: Simulator, stream: bool,
                                                        transport: MakeTransport):
    # OpenAI's chat API sends a refusal as the message's `refusal`, its content null: the
    # caller (ask, completion, a consensus) read an empty answer. The simulator has no refusal
    # step: `Malformed` sends the provider's body as it is (one SSE event when streamed).
    refusal = "I'm sorry, but I can't help with bypassing a safety interlock."
    if stream:
        body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
                "choices": [{"index": 0, "delta": {"role": "assistant", "refusal": refusal},
                             "finish_reason": "stop"}]}
    else:
        body = {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": None, "refusal": refusal}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 12, "total_tokens": 17}}
    sim.script("gpt-4o", [Malformed(body=json.dumps(body))])

    async def ignore(_text: str) -> None:
        pass

    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        result = await gateway.completion(entry(sim, "openai/gpt-4o"), "How do I bypass it?",
                                          stream=stream, on_delta=ignore if stream else None)
    assert result.text == refusal


async def test_an_unmapped_model_has_an_unknown_cost(sim: Simulator, transport: MakeTransport):
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        result = await gateway.completion(entry(sim), "price?")
    assert result.usage.cost_usd is None
    assert result.usage.prompt_tokens
    assert "cost unknown" in result.usage.describe()


async def test_gemini_interactions_create_poll_and_cancel(sim: Simulator,
                                                          transport: MakeTransport):
    gemini = Config.from_env({
        "MODEL_G": f"gemini/deep-research-pro-preview-12-2025;{KEY};{sim.gemini_base}",
        "ASK_ANOTHER_HOME": "/tmp/unused"}).models[0]
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        created = await gateway.interaction(gemini, "acreate", input="What changed?",
                                            agent="deep-research-pro-preview-12-2025",
                                            background=True)
        assert created.id and created.status == "in_progress"
        polled = await gateway.interaction(gemini, "aget", interaction_id=created.id)
        assert polled.id == created.id
        cancelled = await gateway.interaction(gemini, "acancel", interaction_id=created.id)
    assert cancelled.status == "cancelled"


async def test_a_completed_gemini_interaction_is_priced_by_litellm(sim: Simulator,
                                                                    transport: MakeTransport):
    # The provider reports tokens, not dollars: the demo's Gemini job read "cost unknown"
    # though litellm's map prices the agent ($2.00 in, $12.00 out per million tokens).
    agent = "deep-research-pro-preview-12-2025"
    gemini = Config.from_env({"MODEL_G": f"gemini/{agent};{KEY};{sim.gemini_base}",
                              "ASK_ANOTHER_HOME": "/tmp/unused"}).models[0]
    sim.script_interaction(agent, statuses=["in_progress", "completed"])
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        created = await gateway.interaction(gemini, "acreate", input="What changed?",
                                            agent=agent, background=True)
        assert created.id
        polled = await gateway.interaction(gemini, "aget", interaction_id=created.id)
    assert created.cost_usd is None  # no usage reported yet: nothing to price
    assert polled.status == "completed" and polled.usage
    tokens_in, tokens_out = polled.usage["total_input_tokens"], polled.usage["total_output_tokens"]
    assert polled.cost_usd == pytest.approx(tokens_in * 2e-6 + tokens_out * 12e-6)


async def test_a_completed_interaction_of_an_unpriced_agent_has_an_unknown_cost(
        sim: Simulator, transport: MakeTransport):
    # litellm's completion_cost prices a gemini/ model it has no entry for at $0.
    agent = "deep-research-sim-unpriced"
    gemini = Config.from_env({"MODEL_G": f"gemini/{agent};{KEY};{sim.gemini_base}",
                              "ASK_ANOTHER_HOME": "/tmp/unused"}).models[0]
    sim.script_interaction(agent, statuses=["completed"])
    async with open_gateway(transport([KEY]), [KEY]) as gateway:
        created = await gateway.interaction(gemini, "acreate", input="What changed?",
                                            agent=agent, background=True)
    assert created.status == "completed" and created.usage
    assert created.cost_usd is None


async def test_a_second_gateway_in_the_same_process_works(sim: Simulator,
                                                          transport: MakeTransport):
    for _ in range(2):
        async with open_gateway(transport([KEY]), [KEY]) as gateway:
            assert (await gateway.completion(entry(sim), "again")).text.endswith("again")


async def test_bad_arguments_are_refused_before_any_request(sim: Simulator,
                                                            transport: MakeTransport):
    async with open_gateway(transport([KEY]), [KEY], warm=False) as gateway:
        with pytest.raises(InvalidArgument):
            await gateway.completion(entry(sim), "x", temperature=3.0)
        with pytest.raises(InvalidArgument):
            await gateway.completion(entry(sim))
    assert sim.requests == []


@pytest.mark.parametrize(("before", "after"), [(0.005, 0.001), (0.0002, 0.0002)])
async def test_the_thread_transport_shortens_the_gil_switch_interval_and_never_lengthens_it(
        before: float, after: float):
    # litellm's thread shares the GIL with the trio loop; see gateway/_thread._share_the_gil.
    saved = sys.getswitchinterval()
    sys.setswitchinterval(before)
    try:
        async with open_gateway(ThreadTransport([KEY]), warm=False):
            await trio.testing.wait_all_tasks_blocked()  # serve() has started the thread
            assert sys.getswitchinterval() == pytest.approx(after)
    finally:
        sys.setswitchinterval(saved)


@pytest.mark.slow  # starts a worker process
async def test_the_process_transport_leaves_the_gil_switch_interval_alone(sim: Simulator):
    saved = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    try:
        async with open_gateway(ProcessTransport([KEY])) as gateway:
            await gateway.completion(entry(sim), "hi")
            assert sys.getswitchinterval() == pytest.approx(0.005)
    finally:
        sys.setswitchinterval(saved)


@pytest.mark.slow  # starts a worker process
def test_the_worker_process_imports_only_what_it_runs():
    # The worker starts at every server start and its imports come before litellm's (the first
    # completion waits for both): the package faces must not pull in the runtime, trio or the
    # actor runtime, which cost the worker about 0.08 s of CPU and 7 MiB.
    import subprocess

    code = ("import sys, ask_another.gateway._worker; "
            "print(sorted(m for m in ('trio', 'supervisors', 'ask_another.runtime', 'litellm', "
            "'opentelemetry.trace', 'opentelemetry.sdk') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"



@pytest.mark.slow  # imports litellm in a fresh process
def test_the_warm_up_runs_litellms_first_completion_without_sending_anything():
    # litellm's first completion imports more of litellm and builds its models' validators
    # (about 80 ms of CPU): the worker runs warm_up() with a mock answer before it says Ready,
    # so the first real call does not wait. The module below is one litellm imports only inside
    # its first completion; a fresh process, so no earlier test's completion has imported it.
    import subprocess

    code = ("import sys\n"
            "from ask_another.gateway import _litellm\n"
            "_litellm.warm_up(_litellm.load(quick=True))\n"
            "print('litellm.proxy.openai_files_endpoints.common_utils' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.stdout.strip() == "True"


def test_litellms_completion_prelude_runs_inline_and_its_errors_still_reach_the_caller(
    sim: Simulator,
):
    # acompletion hands completion() to the loop's executor only to get its coroutine back:
    # for a provider keyed by a header that prelude runs inline (no thread), and what it
    # raises is raised where acompletion awaits it, as from a thread.
    import asyncio

    from ask_another.gateway import _litellm

    litellm = _litellm.load()
    request = {"model": "openai/m1", "api_key": "sk-inline", "api_base": sim.openai_base,
               "max_retries": 0, "num_retries": 0}

    async def main() -> None:
        executor = _litellm.inline_prelude(litellm, asyncio.get_running_loop())
        result = await _litellm.complete(
            litellm, {**request, "messages": [{"role": "user", "content": "inline?"}]},
            "openai/m1", lambda text: None)
        assert result.text.endswith("inline?")
        assert executor.inline == 1  # the prelude ran here, not in a thread
        # Refused in the prelude itself (before any request), mapped by litellm as ever.
        with pytest.raises(litellm.APIConnectionError, match="Unsupported response_format"):
            await litellm.acompletion(**request, messages=[{"role": "user", "content": "x"}],
                                      response_format="nope")
        assert executor.inline == 2
        await _litellm.close_clients(litellm)

    asyncio.run(main())


def test_calls_past_litellms_pool_wait_before_litellm_per_destination_and_in_all():
    # Sized to litellm's aiohttp pool (500 a host, 1,000 in all), so aiohttp never queues a
    # request itself (it logged "connection pool saturated" for each one waiting over 1 s).
    import asyncio

    from ask_another.gateway import _litellm

    litellm = _litellm.load()
    sized = _litellm.connection_slots(litellm)
    constants = litellm.constants
    assert (sized.per_destination, sized._total._value) == (  # type: ignore[union-attr]
        constants.AIOHTTP_CONNECTOR_LIMIT_PER_HOST, constants.AIOHTTP_CONNECTOR_LIMIT)
    slots = _litellm.ConnectionSlots(per_destination=2, total=3)
    running: dict[str, int] = {"a": 0, "b": 0}
    most = {"a": 0, "b": 0, "all": 0}

    async def call(base: str) -> None:
        async with slots.held({"model": "openai/m1", "api_base": base}):
            running[base] += 1
            most[base] = max(most[base], running[base])
            most["all"] = max(most["all"], sum(running.values()))
            await asyncio.sleep(0.01)
            running[base] -= 1

    async def main() -> None:
        await asyncio.gather(*(call(base) for base in "aaaaabbbbb"))

    asyncio.run(main())
    assert most == {"a": 2, "b": 2, "all": 3}
