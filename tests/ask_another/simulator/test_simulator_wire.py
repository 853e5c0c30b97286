"""The simulator's wire format checked byte by byte with httpx, plus serving and shutdown."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
import trio

import ask_another.simulator as simulator_package
from ask_another.simulator import (
    Drop,
    Fail,
    Malformed,
    Reply,
    Simulator,
    ToolCall,
    ToolCalls,
)

CHAT = {"model": "m1", "messages": [{"role": "user", "content": "hello"}]}


def post(sim: Simulator, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{sim.openai_base}/chat/completions", json=body, timeout=10, **kwargs)


def test_kept_alive_connections_do_not_wait_for_delayed_acks(sim: Simulator) -> None:
    # Without TCP_NODELAY each request after the first on a kept-alive connection waited 40 ms
    # (the client's delayed ACK) for its body: every one of them, so even the fastest of 20 took
    # 40 ms, where they take about 1 ms. The fastest, not the total: a loaded machine stretches
    # some requests, never all of them by 40 ms.
    with httpx.Client(timeout=10) as http:
        http.post(f"{sim.openai_base}/chat/completions", json=CHAT)  # opens the connection
        took = []
        for _ in range(20):
            start = time.perf_counter()
            assert http.post(f"{sim.openai_base}/chat/completions", json=CHAT).status_code == 200
            took.append(time.perf_counter() - start)
        assert min(took) < 0.03


def sse_payloads(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


def test_urls_point_at_the_bound_port(sim: Simulator) -> None:
    assert sim.url.startswith("http://127.0.0.1:")
    assert int(sim.url.rsplit(":", 1)[1]) > 0
    assert sim.openai_base == sim.url + "/v1"
    assert sim.gemini_base == sim.url


def test_json_completion_shape(sim: Simulator) -> None:
    response = post(sim, CHAT)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "m1"
    [choice] = body["choices"]
    assert choice["message"] == {
        "role": "assistant",
        "content": "[simulated m1] answer to: hello",
    }
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_sse_stream_shape_with_usage(sim: Simulator) -> None:
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
    response = post(sim, body)
    assert response.headers["content-type"].startswith("text/event-stream")
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "[simulated m1] answer to: hello"
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_stream_without_include_usage_has_no_usage_chunk(sim: Simulator) -> None:
    chunks = [json.loads(p) for p in sse_payloads(post(sim, {**CHAT, "stream": True}).text)[:-1]]
    assert all(c["choices"] for c in chunks)
    assert all("usage" not in c for c in chunks)


def test_streamed_tool_call_arguments_come_in_fragments(sim: Simulator) -> None:
    arguments = {"url": "https://example.com/some/long/path", "max_chars": 2000}
    sim.script("m1", [ToolCalls([ToolCall("read_article", arguments, id="call_x")])])
    chunks = [json.loads(p) for p in sse_payloads(post(sim, {**CHAT, "stream": True}).text)[:-1]]
    deltas = [
        tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", []) if c["choices"]
    ]
    assert deltas[0]["id"] == "call_x" and deltas[0]["function"]["name"] == "read_article"
    fragments = [d["function"]["arguments"] for d in deltas[1:]]
    assert len(fragments) >= 2 and all(fragments)
    assert json.loads("".join(fragments)) == arguments
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_429_carries_retry_after_and_the_openai_error_envelope(sim: Simulator) -> None:
    sim.script("m1", [Fail(429, "Too many requests", retry_after=2)])
    response = post(sim, CHAT)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json() == {
        "error": {
            "message": "Too many requests",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }


def test_custom_error_type(sim: Simulator) -> None:
    sim.script("m1", [Fail(400, "context too long", error_type="context_length_exceeded")])
    assert post(sim, CHAT).json()["error"]["type"] == "context_length_exceeded"


def test_drop_sends_no_byte(sim: Simulator) -> None:
    sim.script("m1", [Drop()])
    with pytest.raises(httpx.RemoteProtocolError, match="without sending"):
        post(sim, CHAT)
    assert post(sim, CHAT).status_code == 200


def test_malformed_variants(sim: Simulator) -> None:
    sim.script("m1", [Malformed(), Malformed('{"unexpected": true}')])
    first = post(sim, CHAT)
    assert first.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        first.json()
    assert post(sim, CHAT).json() == {"unexpected": True}


def test_invalid_json_body_is_a_400(sim: Simulator) -> None:
    response = httpx.post(f"{sim.openai_base}/chat/completions", content=b"{nope", timeout=10)
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]
    assert sim.requests[-1].json == {}


def test_citations_as_perplexity_and_as_openai_annotations(sim: Simulator) -> None:
    sim.script("m1", [Reply("See [1].", citations=["https://a.example/x"])] * 2)
    openai_style = post(sim, CHAT).json()
    [annotation] = openai_style["choices"][0]["message"]["annotations"]
    assert annotation["type"] == "url_citation"
    assert annotation["url_citation"]["url"] == "https://a.example/x"
    assert (annotation["url_citation"]["start_index"], annotation["url_citation"]["end_index"]) == (
        4,
        7,
    )
    assert openai_style["citations"] == ["https://a.example/x"]
    perplexity_style = post(sim, CHAT, headers={"X-Pplx-Integration": "litellm"}).json()
    assert "annotations" not in perplexity_style["choices"][0]["message"]
    assert perplexity_style["search_results"][0]["url"] == "https://a.example/x"


def test_cited_sources_serve_an_article(sim: Simulator) -> None:
    response = httpx.get(f"{sim.url}/sources/completion-1/1", timeout=10)
    assert response.status_code == 200
    assert "<article>" in response.text and "simulator" in response.text


def test_requests_record_and_clear(sim: Simulator) -> None:
    post(sim, CHAT, headers={"Authorization": "Bearer sk-abc"})
    [request] = sim.requests
    assert (request.method, request.path, request.model) == ("POST", "/v1/chat/completions", "m1")
    assert request.api_key == "sk-abc"
    assert request.last_user_text == "hello"
    sim.script("m1", [Reply("queued")])
    sim.clear()
    assert sim.requests == []
    assert sim.pending("m1") == 0


def test_steps_must_be_steps(sim: Simulator) -> None:
    with pytest.raises(TypeError, match="not a simulator step"):
        sim.script("m1", ["just a string"])  # type: ignore[list-item]


async def raw_post(port: int, body: dict[str, Any]) -> bytes:
    """One HTTP/1.1 request on its own connection, read to EOF.

    A raw socket rather than httpx: httpx's pool under trio takes about 9 s to get 400
    concurrent new connections through here (aiohttp under asyncio: 1 s), which would measure
    the client, not the simulator.
    """
    payload = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(head + payload)
        received = bytearray()
        while chunk := await stream.receive_some(65536):
            received += chunk
    return bytes(received)


async def test_hundreds_of_concurrent_requests_wait_in_parallel(sim: Simulator) -> None:
    # A fixed latency per request: 500 at once must finish in about one latency, not 500.
    sim.latency = 0.5
    count = 500
    port = int(sim.url.rsplit(":", 1)[1])
    answers: dict[int, bytes] = {}

    async def one(n: int) -> None:
        body = {"model": "m1", "messages": [{"role": "user", "content": f"q{n}"}]}
        answers[n] = await raw_post(port, body)

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for n in range(count):
            nursery.start_soon(one, n)
    elapsed = trio.current_time() - start
    assert sorted(answers) == list(range(count))
    for n, raw in answers.items():
        assert raw.startswith(b"HTTP/1.1 200"), raw[:100]
        assert raw.endswith(f'answer to: q{n}"}}}}'.encode()) or f'q{n}"'.encode() in raw
    # Serially this would take 250 s; here it takes about 1 s (2 shared cores, client in-process).
    assert elapsed < 5.0, f"{count} requests with 0.5 s latency took {elapsed:.2f} s"


def test_shutdown_is_clean_and_frees_the_port() -> None:
    with Simulator.running() as sim:
        url = sim.url
        assert post(sim, CHAT).status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=2)


@pytest.mark.slow  # starts the simulator as a process
def test_child_process_serves_and_stops() -> None:
    with Simulator.process(latency=0.0) as urls:
        response = httpx.post(f"{urls.openai_base}/chat/completions", json=CHAT, timeout=10)
        assert response.json()["choices"][0]["message"]["content"] == (
            "[simulated m1] answer to: hello"
        )
        failing = {"model": "m1", "messages": [{"role": "user", "content": "[[sim:fail=503]]"}]}
        assert httpx.post(f"{urls.openai_base}/chat/completions", json=failing).status_code == 503
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{urls.openai_base}/chat/completions", json=CHAT, timeout=2)


@pytest.mark.slow  # starts a process
def test_module_entry_point_logs_json_on_stderr_and_nothing_on_stdout() -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "ask_another.simulator", "--latency", "0.01"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stderr is not None
        event = json.loads(child.stderr.readline())
        assert event["event"] == "simulator.listening"
        assert "simulated" in event["note"]
        assert event["openai_base"] == event["url"] + "/v1"
        assert httpx.post(f"{event['openai_base']}/chat/completions", json=CHAT).status_code == 200
    finally:
        child.terminate()
        stdout, _ = child.communicate(timeout=10)
    assert child.returncode == 0
    assert stdout == b""


@pytest.mark.slow  # starts a process
def test_module_entry_point_rejects_negative_latency() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ask_another.simulator", "--latency", "-1"],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert b"--latency must be 0 or more" in result.stderr


def test_public_names_are_complete_and_sorted() -> None:
    exported = simulator_package.__all__
    assert exported == sorted(exported)
    public = {
        name
        for name, value in vars(simulator_package).items()
        if not name.startswith("_")
        and getattr(value, "__module__", "").startswith("ask_another.simulator.")
    }
    assert public <= set(exported)


def test_help_shows_the_base_urls_and_the_directives(capsys: pytest.CaptureFixture[str]) -> None:
    from ask_another.simulator.__main__ import main

    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    for piece in ("http://127.0.0.1:PORT/v1", "MODEL_SIM=", "[[sim:fail=429]]", "[[sim:delay=",
                  "[[sim:drop]]", "[[sim:malformed]]", "[[sim:tool=", "[[sim:polls=N]]"):
        assert piece in shown
