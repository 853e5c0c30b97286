"""Tracing off costs nothing (issue 43): with no tracer provider installed, our spans, the
``traceparent`` the worker's wire and a job's row carry, and the store's statement count touch no
OpenTelemetry context and make no span, even where the MCP SDK has made the client's trace
current on its no-op tracer (what it does with a ``_meta.traceparent``). (The OTLP protocol
setting, gRPC included: test_traces_grpc.py.)

In a fresh interpreter: a tracer provider is installed once per process, and another test of
this process (test_job_traces.py) installs the SDK's."""

from __future__ import annotations

import subprocess
import sys

import pytest

OFF = """
import contextlib
from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from ask_another import tracing
from ask_another.gateway._spans import provider_span

# What the MCP SDK's server span is with no provider: the client's context, current.
client = SpanContext(0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, is_remote=True,
                     trace_flags=TraceFlags(TraceFlags.SAMPLED))
context.attach(trace.set_span_in_context(NonRecordingSpan(client)))

def refuse(*args, **kwargs):
    raise AssertionError("tracing off called into OpenTelemetry's context or tracers")

for module, name in ((context, "attach"), (context, "detach"), (context, "get_current"),
                     (trace, "get_tracer"), (trace.ProxyTracerProvider, "get_tracer"),
                     (trace, "get_current_span")):
    setattr(module, name, refuse)

print("traceparent", tracing.traceparent())
with tracing.span("seat m", {"ask_another.seat.stance": "custom"}) as inner:
    tracing.count_statement()
    print("span", inner)
with tracing.span("research_job sequential", parent="00-" + "1" * 32 + "-" + "2" * 16 + "-01",
                  job="j1") as inner:
    print("job span", inner)
with provider_span("chat", "openai/m1", {}, tracing.traceparent()) as inner:
    print("provider span", inner)
"""


@pytest.mark.slow  # a fresh interpreter (a provider is installed once per process)
def test_tracing_off_touches_no_context_and_passes_no_trace_on() -> None:
    done = subprocess.run([sys.executable, "-c", OFF], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "traceparent None", "span None", "job span None", "provider span None"]
