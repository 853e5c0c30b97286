"""The simulator driven by litellm itself: what litellm makes of each answer it gives.

litellm's async API needs asyncio, so these are plain sync tests calling the sync API.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

from ask_another.simulator import (
    Drop,
    Fail,
    Malformed,
    Reply,
    SimRequest,
    Simulator,
    Slow,
    ToolCall,
    ToolCalls,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_article",
            "description": "Read a web page",
            "parameters": {
                "type": "object",
                "properties": {"url": {"type": "string"}},
                "required": ["url"],
            },
        },
    }
]


def ask(litellm: ModuleType, sim: Simulator, prompt: str, **kwargs: Any) -> Any:
    kwargs.setdefault("model", "openai/sim-model")
    kwargs.setdefault("max_retries", 0)
    return litellm.completion(
        api_base=sim.openai_base,
        api_key="sk-simulated-key",
        messages=[{"role": "user", "content": prompt}],
        **kwargs,
    )


def test_default_answer_names_the_model_and_echoes_the_question(
    litellm: ModuleType, sim: Simulator
) -> None:
    response = ask(litellm, sim, "What is the capital of France?")
    assert response.choices[0].message.content == (
        "[simulated sim-model] answer to: What is the capital of France?"
    )
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0
    assert response.usage.total_tokens == (
        response.usage.prompt_tokens + response.usage.completion_tokens
    )
    [request] = sim.requests
    assert request.path == "/v1/chat/completions"
    assert request.model == "sim-model"
    assert request.api_key == "sk-simulated-key"
    assert request.headers["authorization"] == "Bearer sk-simulated-key"


def test_default_answer_quotes_at_most_200_characters(litellm: ModuleType, sim: Simulator) -> None:
    prompt = "x" * 500
    content = ask(litellm, sim, prompt).choices[0].message.content
    assert content == "[simulated sim-model] answer to: " + "x" * 200


def test_streamed_default_answer_arrives_in_several_chunks_with_usage(
    litellm: ModuleType, sim: Simulator
) -> None:
    prompt = "Tell me about the history of the printing press in Europe"
    stream = ask(litellm, sim, prompt, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) >= 3
    assert "".join(pieces) == f"[simulated sim-model] answer to: {prompt}"
    usages = [getattr(c, "usage", None) for c in chunks if getattr(c, "usage", None)]
    assert usages and usages[-1].completion_tokens > 0
    assert sim.requests[0].json["stream"] is True


def test_scripted_steps_are_consumed_in_order_then_default_resumes(
    litellm: ModuleType, sim: Simulator
) -> None:
    sim.script("sim-model", [Reply("first"), Reply("second", usage={"prompt_tokens": 7})])
    assert ask(litellm, sim, "a").choices[0].message.content == "first"
    second = ask(litellm, sim, "b")
    assert second.choices[0].message.content == "second"
    assert second.usage.prompt_tokens == 7
    assert ask(litellm, sim, "c").choices[0].message.content.startswith("[simulated sim-model]")
    assert sim.pending("sim-model") == 0


def test_scripts_are_per_model(litellm: ModuleType, sim: Simulator) -> None:
    sim.script("other", [Reply("for other")])
    assert ask(litellm, sim, "a").choices[0].message.content.startswith("[simulated")
    assert ask(litellm, sim, "a", model="openai/other").choices[0].message.content == "for other"


def test_responder_sees_the_request(litellm: ModuleType, sim: Simulator) -> None:
    def responder(request: SimRequest) -> Reply:
        return Reply(f"you said {request.last_user_text!r}")

    sim.script("sim-model", responder)
    assert ask(litellm, sim, "one").choices[0].message.content == "you said 'one'"
    assert ask(litellm, sim, "two").choices[0].message.content == "you said 'two'"


def test_scripted_tool_calls_then_the_replayed_tool_result_reaches_the_provider(
    litellm: ModuleType, sim: Simulator
) -> None:
    sim.script(
        "sim-model",
        [ToolCalls([ToolCall("read_article", {"url": "https://example.com/a"}, id="call_abc")])],
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read it"}]
    first = litellm.completion(
        model="openai/sim-model",
        api_base=sim.openai_base,
        api_key="k",
        messages=messages,
        tools=TOOLS,
    )
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    [call] = message.tool_calls
    assert call.id == "call_abc"
    assert call.function.name == "read_article"
    assert json.loads(call.function.arguments) == {"url": "https://example.com/a"}

    messages.append(message.model_dump())
    messages.append({"role": "tool", "tool_call_id": "call_abc", "content": "the article text"})
    second = litellm.completion(
        model="openai/sim-model",
        api_base=sim.openai_base,
        api_key="k",
        messages=messages,
        tools=TOOLS,
    )
    assert second.choices[0].message.content == (
        "[simulated sim-model] answer using 1 tool result(s): the article text"
    )
    replayed = sim.requests[-1].json["messages"]
    assert replayed[-1] == {
        "role": "tool",
        "tool_call_id": "call_abc",
        "content": "the article text",
    }
    assert replayed[-2]["tool_calls"][0]["id"] == "call_abc"
    assert sim.requests[-1].json["tools"][0]["function"]["name"] == "read_article"


def test_streamed_tool_calls_are_reassembled_from_argument_fragments(
    litellm: ModuleType, sim: Simulator
) -> None:
    arguments = {"url": "https://example.com/a-rather-long-path/for-fragments", "n": 3}
    sim.script(
        "sim-model",
        [
            ToolCalls(
                [ToolCall("read_article", arguments), ToolCall("ask_user", '{"q": "sure?"}')],
                text="Let me look.",
            )
        ],
    )
    chunks = list(ask(litellm, sim, "go", stream=True, tools=TOOLS))
    fragments = [
        tc.function.arguments
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
        for tc in c.choices[0].delta.tool_calls
        if tc.function.arguments
    ]
    assert len(fragments) > 2  # the arguments really were split
    message = litellm.stream_chunk_builder(chunks).choices[0].message
    assert message.content == "Let me look."
    first, second = message.tool_calls
    assert (first.function.name, json.loads(first.function.arguments)) == (
        "read_article",
        arguments,
    )
    assert (second.function.name, second.function.arguments) == ("ask_user", '{"q": "sure?"}')
    assert first.id != second.id


def test_429_is_a_rate_limit_error_with_the_provider_message(
    litellm: ModuleType, sim: Simulator
) -> None:
    sim.script("sim-model", [Fail(429, "Rate limit reached for sim-model")])
    with pytest.raises(litellm.RateLimitError, match="Rate limit reached for sim-model"):
        ask(litellm, sim, "hi")


def test_litellm_retries_by_default_so_each_attempt_consumes_a_step(
    litellm: ModuleType, sim: Simulator
) -> None:
    # Without max_retries=0 the OpenAI client litellm uses retries twice: a gateway that does
    # its own retrying must turn that off. The last attempt here succeeds.
    sim.script("sim-model", [Fail(503, "overloaded"), Fail(429, "slow down"), Reply("third time")])
    response = litellm.completion(
        model="openai/sim-model",
        api_base=sim.openai_base,
        api_key="k",
        messages=[{"role": "user", "content": "hi"}],
    )
    assert response.choices[0].message.content == "third time"
    assert len(sim.requests) == 3


@pytest.mark.parametrize(
    ("status", "error_name"),
    [
        (401, "AuthenticationError"),
        (500, "InternalServerError"),
        (503, "ServiceUnavailableError"),
    ],
)
def test_http_errors_map_to_litellm_exceptions(
    litellm: ModuleType, sim: Simulator, status: int, error_name: str
) -> None:
    sim.script("sim-model", [Fail(status, f"simulated {status}")])
    with pytest.raises(getattr(litellm, error_name), match=f"simulated {status}"):
        ask(litellm, sim, "hi")


def test_dropped_connection_is_a_connection_error(litellm: ModuleType, sim: Simulator) -> None:
    sim.script("sim-model", [Drop()])
    with pytest.raises(litellm.InternalServerError, match="Connection error"):
        ask(litellm, sim, "hi")
    # The server is unharmed.
    assert ask(litellm, sim, "again").choices[0].message.content.endswith("again")


def test_malformed_body_is_an_error_not_an_answer(litellm: ModuleType, sim: Simulator) -> None:
    # litellm reports an unparsable 200 as an InternalServerError quoting the JSON error.
    sim.script("sim-model", [Malformed()])
    with pytest.raises(litellm.InternalServerError, match="Expecting value"):
        ask(litellm, sim, "hi")


def test_slow_step_trips_the_client_timeout(litellm: ModuleType, sim: Simulator) -> None:
    sim.script("sim-model", [Slow(3.0, then=Reply("too late"))])
    with pytest.raises(litellm.Timeout):
        ask(litellm, sim, "hi", timeout=0.3)


def test_directives_steer_a_simulator_without_the_python_api(
    litellm: ModuleType, sim: Simulator
) -> None:
    with pytest.raises(litellm.RateLimitError, match="busy"):
        ask(litellm, sim, "hello [[sim:fail=429 busy]]")
    with pytest.raises(litellm.InternalServerError, match="Connection error"):
        ask(litellm, sim, "[[sim:drop]] hello")
    with pytest.raises(litellm.InternalServerError, match="Expecting value"):
        ask(litellm, sim, "[[sim:malformed]]")
    content = ask(litellm, sim, "[[sim:delay=0.01]] plain question").choices[0].message.content
    assert content == "[simulated sim-model] answer to: plain question"


def test_tool_directive_asks_once_then_answers_from_the_result(
    litellm: ModuleType, sim: Simulator
) -> None:
    prompt = 'Read it [[sim:tool=read_article {"url": "https://example.com/x"}]]'
    first = ask(litellm, sim, prompt, tools=TOOLS).choices[0].message
    [call] = first.tool_calls
    assert json.loads(call.function.arguments) == {"url": "https://example.com/x"}
    second = litellm.completion(
        model="openai/sim-model",
        api_base=sim.openai_base,
        api_key="k",
        messages=[
            {"role": "user", "content": prompt},
            first.model_dump(),
            {"role": "tool", "tool_call_id": call.id, "content": "page text"},
        ],
        tools=TOOLS,
    )
    assert second.choices[0].message.tool_calls is None
    assert "page text" in second.choices[0].message.content


def test_bad_directive_is_a_clear_400(litellm: ModuleType, sim: Simulator) -> None:
    with pytest.raises(litellm.BadRequestError, match=r"\[\[sim:delay=soon\]\]"):
        ask(litellm, sim, "[[sim:delay=soon]]")


def test_perplexity_deep_research_citations_reach_the_response(
    litellm: ModuleType, sim: Simulator
) -> None:
    urls = ["https://example.org/one", "https://example.org/two"]
    sim.script("sonar-deep-research", [Reply("Findings [1] and [2].", citations=urls)])
    response = ask(litellm, sim, "research", model="perplexity/sonar-deep-research")
    assert response.choices[0].message.content == "Findings [1] and [2]."
    assert response.citations == urls
    assert [r["url"] for r in response.search_results] == urls
    request = sim.requests[-1]
    assert request.path == "/v1/chat/completions"
    assert request.model == "sonar-deep-research"
    assert request.headers["x-pplx-integration"] == "litellm"


def test_unscripted_research_models_cite_simulated_sources(
    litellm: ModuleType, sim: Simulator
) -> None:
    response = ask(litellm, sim, "research", model="perplexity/sonar-deep-research")
    assert len(response.citations) == 2
    assert all(url.startswith(sim.url + "/sources/") for url in response.citations)


def test_openai_deep_research_goes_through_the_responses_api_with_annotations(
    litellm: ModuleType, sim: Simulator
) -> None:
    urls = ["https://example.org/one"]
    sim.script("o3-deep-research", [Reply("A finding [1].", citations=urls)])
    response = ask(litellm, sim, "research", model="openai/o3-deep-research")
    assert sim.requests[-1].path == "/v1/responses"
    message = response.choices[0].message
    assert message.content == "A finding [1]."
    [annotation] = message.annotations
    assert annotation["url"] == "https://example.org/one"
    assert message.content[annotation["start_index"] : annotation["end_index"]] == "[1]"
    assert response.usage.completion_tokens > 0


def test_responses_api_streams_text_and_tool_calls(litellm: ModuleType, sim: Simulator) -> None:
    chunks = list(ask(litellm, sim, "stream me", model="openai/responses/m2", stream=True))
    text = litellm.stream_chunk_builder(chunks).choices[0].message.content
    assert text == "[simulated m2] answer to: stream me"

    sim.script("m2", [ToolCalls([ToolCall("read_article", {"url": "u"})])])
    chunks = list(ask(litellm, sim, "go", model="openai/responses/m2", stream=True, tools=TOOLS))
    [call] = litellm.stream_chunk_builder(chunks).choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "read_article",
        {"url": "u"},
    )


def test_responses_api_tool_loop(litellm: ModuleType, sim: Simulator) -> None:
    sim.script("m2", [ToolCalls([ToolCall("read_article", {"url": "u"})])])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    first = litellm.completion(
        model="openai/responses/m2",
        api_base=sim.openai_base,
        api_key="k",
        messages=messages,
        tools=TOOLS,
    )
    [call] = first.choices[0].message.tool_calls
    assert call.id.startswith("call_sim")
    messages += [
        first.choices[0].message.model_dump(),
        {"role": "tool", "tool_call_id": call.id, "content": "body of u"},
    ]
    second = litellm.completion(
        model="openai/responses/m2",
        api_base=sim.openai_base,
        api_key="k",
        messages=messages,
        tools=TOOLS,
    )
    assert second.choices[0].message.content.endswith("body of u")
    outputs = [i for i in sim.requests[-1].json["input"] if i.get("type") == "function_call_output"]
    assert outputs[0]["call_id"] == call.id
