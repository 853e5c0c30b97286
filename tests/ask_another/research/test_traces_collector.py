"""A research job as one trace at a real collector (issue 43, "Tests against a real collector
path"): the real stdio server (and its gateway worker process) with the standard `OTEL_*`
settings, the SDK's OTLP/HTTP exporter sending to a small OTLP receiver on 127.0.0.1 that this
test runs, the protobuf decoded with opentelemetry-proto's classes. The tree: the MCP SDK's
request span, the job's run below it, its steps, and each provider call's span, made in the
worker process, below the step that made it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio
from deadlines import generous
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from processes import processes_with
from research_helpers import research_env
from stdio_server import stdio_client_for
from tool_results import text_of

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # starts the real server and its worker

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@dataclass(frozen=True)
class Received:
    name: str
    trace_id: str
    span_id: str
    parent: str
    attributes: dict[str, Any]
    pid: int | None  # the exporting process (the process resource detector's process.pid)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class Collector:
    """An OTLP/HTTP trace receiver on 127.0.0.1: every span of every export request."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                collector.add(request, self.path)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, request: ExportTraceServiceRequest, path: str) -> None:
        assert path == "/v1/traces", path
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(Received(
                        name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent=span.parent_span_id.hex(),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        pid=resource.get("process.pid")))
                    assert resource.get("service.name") == "ask-another", resource
        with self.lock:
            self.spans.extend(found)

    def named(self, name: str) -> list[Received]:
        with self.lock:
            return [s for s in self.spans if s.name == name]


@pytest.fixture
def collector() -> Iterator[Collector]:
    running = Collector()
    thread = threading.Thread(target=running.server.serve_forever, daemon=True)
    thread.start()
    yield running
    running.server.shutdown()
    running.server.server_close()
    thread.join()


async def test_a_research_job_is_one_trace_from_the_mcp_request_to_the_workers_calls(
        sim: Simulator, collector: Collector, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {
        **research_env(sim.url, home),
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "process",
        # A private worker, gone (and flushed) with the server; the job host, started for the
        # session's unfinished job, leaves a second after it has none.
        "ASK_ANOTHER_GATEWAY_SHARED": "0",
        "ASK_ANOTHER_HOST_LINGER": "1",
    }
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr) as client:
            # The client's trace is also the current context here: where another test of this
            # process has installed an SDK tracer provider, the MCP client makes its own span
            # (a child of ours) and sends that instead of `_meta`'s.
            token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(SpanContext(
                int(TRACE_ID, 16), int(CLIENT_SPAN, 16), is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED)))))
            try:
                result = await client.call_tool(
                    "start_research",
                    {"model": "sim", "query": "How do tidal power plants store energy",
                     "method": "sequential", "timeout": 120},
                    meta={"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"})
            finally:
                otel_context.detach(token)
            assert not result.is_error, text_of(result)
            # On a busy machine the call may answer before the job ends: the job must end in
            # this session (one run, one `research_job` span), not in the job host after it.
            job_id = json.loads(text_of(result))["job_id"]
            with trio.fail_after(generous(120)):
                while True:  # a client polls; nothing here to wait on instead
                    checked = await client.call_tool("check_research", {"job_id": job_id})
                    if json.loads(text_of(checked))["status"] == "completed":
                        break
                    await trio.sleep(0.1)
    # Each process flushes its spans as it exits (the server and its worker, just now).
    with trio.fail_after(generous(60)):
        while not (collector.named("tools/call start_research")  # noqa: ASYNC110
                   and collector.named("research_job sequential")
                   and collector.named("chat openai/m1")):
            await trio.sleep(0.05)

    (request,) = collector.named("tools/call start_research")
    assert request.trace_id == TRACE_ID  # the client's trace
    client_traced = isinstance(trace.get_tracer_provider(), TracerProvider)
    assert request.parent == CLIENT_SPAN or (client_traced and request.parent is not None)
    (run,) = collector.named("research_job sequential")
    assert (run.trace_id, run.parent) == (TRACE_ID, request.span_id)
    job_id = run.attributes["ask_another.job.id"]
    assert run.attributes["ask_another.job.outcome"] == "completed"
    assert run.attributes["ask_another.store.statements"] > 0

    with collector.lock:
        ours = {s.span_id: s for s in collector.spans if s.trace_id == TRACE_ID}
    steps = [s for s in ours.values() if s.name.startswith("step ")]
    assert {"step plan", "step report"} <= {s.name for s in steps}
    assert any(s.name.startswith("step query:") for s in steps)
    for step in steps:
        assert step.attributes["ask_another.job.id"] == job_id
        chain = []
        at = step
        while at.parent in ours:
            at = ours[at.parent]
            chain.append(at.name)
        assert chain[-2:] == ["research_job sequential", "tools/call start_research"], chain

    chats = collector.named("chat openai/m1")
    assert all(chat.trace_id == TRACE_ID for chat in chats)
    for chat in chats:  # made in the worker process, below the step of the server that asked
        parent = ours[chat.parent]
        assert parent.name.startswith("step "), parent.name
        assert chat.pid is not None and chat.pid != run.pid
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "openai/m1"
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert {ours[chat.parent].name for chat in chats} >= {"step plan"}

    with trio.fail_after(generous(60)):  # the job host leaves too
        while processes_with(f"ASK_ANOTHER_HOME={home}"):  # noqa: ASYNC110
            await trio.sleep(0.1)
