"""The OTLP protocol setting (issue 43; docs/server.md, "Traces"): `OTEL_EXPORTER_OTLP_PROTOCOL`
(or its `_TRACES_` form) chooses the transport as the SDK's own configuration does, so a
collector's gRPC port (4317) gets gRPC, not OTLP/HTTP it cannot read; without the `otlp-grpc`
extra, or with a protocol no exporter speaks, one warning says what to do. And the real path:
`ask-another ask` with gRPC settings is one trace at a gRPC OTLP receiver on 127.0.0.1 that this
test runs: the command's span, and below it its provider call's, made in the gateway worker."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from pycache import PYCACHE

from ask_another import tracing
from ask_another.simulator import Reply, Simulator

REPO = Path(__file__).resolve().parents[2]
ENDPOINT = "http://127.0.0.1:4317"


def exporter_for(monkeypatch: pytest.MonkeyPatch, **settings: str) -> Any:
    """The exporter `otlp` gives with these settings, and the warnings it logged."""
    for name in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, **settings}
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # the exporters read the endpoint themselves
    with structlog.testing.capture_logs() as logged:
        exporter = tracing._exporter("otlp", env)
    if exporter is not None:
        exporter.shutdown()
    return exporter, [e for e in logged if e["log_level"] == "warning"]


def test_grpc_protocol_exports_over_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter, warnings = exporter_for(monkeypatch, OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    assert isinstance(exporter, GrpcSpanExporter) and warnings == []
    # The traces' own setting wins over the general one, as in the SDK.
    exporter, _ = exporter_for(monkeypatch, OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                               OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc")
    assert isinstance(exporter, GrpcSpanExporter)


def test_http_protobuf_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter, warnings = exporter_for(monkeypatch)
    assert isinstance(exporter, HttpSpanExporter) and warnings == []
    exporter, warnings = exporter_for(monkeypatch, OTEL_EXPORTER_OTLP_PROTOCOL=" HTTP/Protobuf ")
    assert isinstance(exporter, HttpSpanExporter) and warnings == []


def test_http_json_is_said_to_go_as_protobuf(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter, warnings = exporter_for(monkeypatch, OTEL_EXPORTER_OTLP_PROTOCOL="http/json")
    assert isinstance(exporter, HttpSpanExporter)
    (warning,) = warnings
    assert "protobuf only" in warning["reason"], warning


def test_an_unknown_protocol_is_one_warning_and_no_exporter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    exporter, warnings = exporter_for(monkeypatch, OTEL_EXPORTER_OTLP_PROTOCOL="thrift")
    assert exporter is None
    (warning,) = warnings
    assert warning["protocol"] == "thrift" and "grpc, http/protobuf or http/json" in \
        warning["reason"], warning


def test_grpc_without_the_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # As where opentelemetry-exporter-otlp-proto-grpc is not installed: its import fails.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
                        None)
    exporter, warnings = exporter_for(monkeypatch, OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    assert exporter is None
    (warning,) = warnings
    assert "'ask-another[otlp-grpc]'" in warning["reason"], warning


@dataclass(frozen=True)
class Received:
    name: str
    trace_id: str
    span_id: str
    parent: str
    attributes: dict[str, Any]
    service: str


def test_doctor_says_where_traces_go_without_the_credential_in_the_endpoint() -> None:
    assert tracing.describe({}) == (
        'traces: off (OTEL_EXPORTER_OTLP_ENDPOINT turns them on; docs/server.md, "Traces")', [])
    line, problems = tracing.describe({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
                                       "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert (line, problems) == (f"traces: OTLP grpc to {ENDPOINT}", [])
    line, problems = tracing.describe({
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://team:s3cr3t@otel.example:4318/v1/traces",
        "OTEL_TRACES_EXPORTER": "otlp,console"})
    assert line == ("traces: OTLP http/protobuf to https://otel.example:4318/v1/traces, "
                    "console (JSON on stderr)") and problems == []


def test_doctor_names_what_sends_no_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    _, problems = tracing.describe({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
                                    "OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"})
    assert problems == ["OTEL_EXPORTER_OTLP_PROTOCOL='thrift': OTEL_EXPORTER_OTLP_PROTOCOL is "
                        "one of grpc, http/protobuf or http/json"]
    _, problems = tracing.describe({"OTEL_TRACES_EXPORTER": "zipkin_nope"})
    assert len(problems) == 1 and "'zipkin_nope'" in problems[0]
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
                        None)
    _, problems = tracing.describe({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
                                    "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert len(problems) == 1 and "'ask-another[otlp-grpc]'" in problems[0]


@pytest.mark.slow  # runs the real command
def test_doctor_prints_a_traces_problem_and_fails(sim: Simulator, tmp_path: Path) -> None:
    done = ask_another(["doctor"], tmp_path, sim, OTEL_EXPORTER_OTLP_ENDPOINT=ENDPOINT,
                       OTEL_EXPORTER_OTLP_PROTOCOL="http/thrift")
    assert done.returncode == 1, done
    assert f"traces: OTLP http/thrift to {ENDPOINT}" in done.stdout
    assert "PROBLEM: OTEL_EXPORTER_OTLP_PROTOCOL='http/thrift'" in done.stdout


def ask_another(args: list[str], home: Path, sim: Simulator, **settings: str
                ) -> subprocess.CompletedProcess[str]:
    """The real command, on its own home and the simulator, with these OTEL_* settings only."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("MODEL_", "ASK_ANOTHER_", "OTEL_"))}
    return subprocess.run(
        [sys.executable, "-m", "ask_another", *args], cwd=REPO, capture_output=True, text=True,
        timeout=120, env={**clean, "PYTHONPYCACHEPREFIX": str(PYCACHE),
                          "ASK_ANOTHER_HOME": str(home),
                          "MODEL_SIM": f"openai/m1;k;{sim.openai_base}", **settings})


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP gRPC trace receiver: every span exported to it."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.received = threading.Condition()

    def Export(self, request: ExportTraceServiceRequest, context: Any
               ) -> ExportTraceServiceResponse:
        with self.received:
            for resource_spans in request.resource_spans:
                service = next((a.value.string_value for a in resource_spans.resource.attributes
                                if a.key == "service.name"), "")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        attributes = {a.key: getattr(a.value, a.value.WhichOneof("value"))
                                      for a in span.attributes if a.value.WhichOneof("value")}
                        self.spans.append(Received(
                            span.name, span.trace_id.hex(), span.span_id.hex(),
                            span.parent_span_id.hex(), attributes, service))
            self.received.notify_all()
        return ExportTraceServiceResponse()


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, int]]:
    running = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(running, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield running, port
    server.stop(grace=None)


@pytest.mark.slow  # runs the real command and its gateway worker
def test_a_provider_call_is_one_span_at_a_grpc_collector(
        sim: Simulator, receiver: tuple[Receiver, int], tmp_path: Path) -> None:
    collector, port = receiver
    sim.script("m1", [Reply("Forty-two.")])
    done = ask_another(
        ["ask", "sim", "What is the answer?"], tmp_path, sim,
        # A private worker: gone with the command, and its spans flushed as it exits.
        ASK_ANOTHER_GATEWAY_SHARED="0", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_BSP_SCHEDULE_DELAY="50")
    assert done.returncode == 0 and done.stdout == "Forty-two.\n", done
    assert "tracing." not in done.stderr, done.stderr  # no warning: the exporter is installed
    with collector.received:
        # The worker flushes as it exits, which may be just after the command has.
        assert collector.received.wait_for(lambda: {"ask-another ask", "chat openai/m1"} <= {
            s.name for s in collector.spans}, timeout=60), collector.spans
        (command,) = [s for s in collector.spans if s.name == "ask-another ask"]
        (chat,) = [s for s in collector.spans if s.name == "chat openai/m1"]
    assert command.parent == "" and command.service == chat.service == "ask-another"
    assert (chat.trace_id, chat.parent) == (command.trace_id, command.span_id)
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "openai/m1"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0
