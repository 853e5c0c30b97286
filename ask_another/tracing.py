"""OpenTelemetry traces: configured from the standard `OTEL_*` environment, or not at all.

`configure()` installs the SDK's tracer provider when the environment asks for an exporter
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_TRACES_EXPORTER`
other than ``none``); everything else is the SDK's own reading of the environment (the endpoint,
headers and timeout by the OTLP exporter, `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` by
`Resource.create`, the sampler, the batch processor's delays). Without those settings nothing is
imported or installed, and until some tracer provider is installed (ours, or an embedding
host's) tracing is off: `span()` hands out one shared no-op context manager, `traceparent()` is
None (so no context crosses the worker's wire or is stored with a job, even where the MCP SDK
continues a client's trace on its no-op tracer) and `count_statement()` reads one global. Off
touches no context, makes no span object and calls into the API only to ask whether a provider
is installed (`_tracer()`); bench/tracing.py measures it against the code with tracing stubbed
out.
Each process of ours calls it once at its start: the `ask-another` commands, the job host and the
gateway worker, so a trace crosses them as one. An embedding host that installed its own provider
keeps it.

`span(name, attributes, parent=...)` is the one way our code opens a span: no exception text is
recorded (a provider's message may quote a prompt), only its type as ``error.type``; with
`parent`, a stored or wired ``traceparent``, the span continues that trace (a job resumed after
a restart, a provider call in the worker). Store statements run inside it are counted onto it
(``ask_another.store.statements``) rather than traced each (`count_statement`, called by the
store). `traceparent()` is the W3C header of the current span, what a job stores and the worker's
wire carries. Prompts and answers go into attributes only where `capture_content()` (the GenAI
conventions' `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`) says the operator asked;
keys never do (docs/server.md, "Traces").
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from ask_another.logs import get_logger

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "CAPTURE_CONTENT",
    "DEFAULT_SERVICE",
    "JOB_ID",
    "STATEMENTS",
    "capture_content",
    "configure",
    "count_statement",
    "describe",
    "span",
    "traceparent",
    "wanted",
]

DEFAULT_SERVICE: Final = "ask-another"
"""The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` gives one."""
CAPTURE_CONTENT: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
STATEMENTS: Final = "ask_another.store.statements"
JOB_ID: Final = "ask_another.job.id"
_TRACER: Final = "ask_another"
_API: Final = "opentelemetry.trace"

log = get_logger("ask_another.tracing")

# The statements counter of the innermost span of ours that is recording: a list of one int,
# shared by the tasks the span's code starts (trio copies the context into each), so their
# statements count onto the span that encloses them.
_statements: ContextVar[list[int] | None] = ContextVar("ask_another_statements", default=None)
# The research job whose run encloses the current span: each span of ours inside it carries the
# job's id (`JOB_ID`), as the conventions' attributes do for the call they describe.
_job: ContextVar[str | None] = ContextVar("ask_another_job", default=None)
_UNKNOWN: Final = object()
# Our tracer, from the first call that finds a tracer provider installed (`_tracer()`).
_installed: Tracer | None = None


def _exporter_names(environ: Mapping[str, str]) -> list[str]:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    raw = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not raw:
        endpoint = (environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                    or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
        return ["otlp"] if endpoint else []
    names = [name.strip() for name in raw.split(",") if name.strip()]
    return [] if "none" in names else names


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces to be exported (see the module docstring)."""
    return bool(_exporter_names(os.environ if environ is None else environ))


def capture_content(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the operator opted in to prompts and answers in span attributes."""
    value = (os.environ if environ is None else environ).get(CAPTURE_CONTENT, "")
    return value.strip().lower() == "true"


def configure(environ: Mapping[str, str] | None = None) -> bool:
    """Install the SDK's tracer provider if the environment asks for traces; True when spans
    are exported (by ours, or by a provider the embedding host installed before)."""
    environ = os.environ if environ is None else environ
    names = _exporter_names(environ)
    if not names:
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return True
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
    provider = TracerProvider(resource=resource)  # flushed and shut down at exit
    exporters = [exporter for name in dict.fromkeys(names)
                 if (exporter := _exporter(name, environ)) is not None]
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return bool(exporters)


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter | None:
    if name == "otlp":  # the transport `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` names, as the SDK's
        chosen = _otlp_exporter(environ)
        if chosen is None:
            return None
        name = chosen
    if name == "otlp_proto_http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # OTEL_EXPORTER_OTLP_* read by the exporter itself
    if name == "otlp_proto_grpc":
        grpc_exporter = _grpc_exporter()
        if grpc_exporter is None:
            log.warning("tracing.exporter_not_installed", exporter=name,
                        reason=f"{_GRPC_MISSING}: its spans are dropped")
            return None
        return grpc_exporter()
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)  # stdout is the stdio server's protocol
    from importlib.metadata import entry_points

    found = entry_points(group="opentelemetry_traces_exporter", name=name)
    if not found:
        log.warning("tracing.unknown_exporter", exporter=name,
                    reason="OTEL_TRACES_EXPORTER names an exporter no installed package "
                           "provides (otlp and console are built in): its spans are dropped")
        return None
    exporter: SpanExporter = next(iter(found)).load()()
    return exporter


def _otlp_exporter(environ: Mapping[str, str]) -> str | None:
    """The exporter `otlp` means: the protocol setting's (http/protobuf unless it says grpc)."""
    protocol = _protocol(environ)
    if protocol == "grpc":
        return "otlp_proto_grpc"
    if protocol == "http/json":
        log.warning("tracing.protocol_unsupported", protocol=protocol, reason=_JSON_AS_PROTOBUF)
        return "otlp_proto_http"
    if protocol != "http/protobuf":
        log.warning("tracing.protocol_unknown", protocol=protocol,
                    reason=f"{_UNKNOWN_PROTOCOL}: its spans are dropped")
        return None
    return "otlp_proto_http"


_GRPC_MISSING: Final = ("OTLP over gRPC needs the otlp-grpc extra: install "
                        "'ask-another[otlp-grpc]' (or set OTEL_EXPORTER_OTLP_PROTOCOL="
                        "http/protobuf and a collector's HTTP port, 4318)")
_UNKNOWN_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_PROTOCOL is one of grpc, http/protobuf or http/json"
# The Python SDK has no JSON exporter; every OTLP/HTTP receiver takes the binary form.
_JSON_AS_PROTOBUF: Final = ("the OpenTelemetry Python SDK exports OTLP/HTTP as protobuf only: "
                            "spans go to the same endpoint as http/protobuf")


def _protocol(environ: Mapping[str, str]) -> str:
    return (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()


def _grpc_exporter() -> type[SpanExporter] | None:
    """The SDK's OTLP/gRPC exporter, where the `otlp-grpc` extra installed it."""
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    except ImportError:
        return None
    return OTLPSpanExporter


def describe(environ: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """doctor's line on traces, and what in their settings sends no spans (nothing is set up)."""
    environ = os.environ if environ is None else environ
    names = _exporter_names(environ)
    if not names:
        return ("traces: off (OTEL_EXPORTER_OTLP_ENDPOINT turns them on; docs/server.md, "
                "\"Traces\")"), []
    parts: list[str] = []
    problems: list[str] = []
    for name in dict.fromkeys(names):
        if name in ("otlp", "otlp_proto_http", "otlp_proto_grpc"):
            protocol = {"otlp": _protocol(environ), "otlp_proto_http": "http/protobuf",
                        "otlp_proto_grpc": "grpc"}[name]
            endpoint = (environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
            parts.append(f"OTLP {protocol} to {_without_userinfo(endpoint)}" if endpoint
                         else f"OTLP {protocol} to the SDK's default endpoint")
            if protocol == "grpc" and _grpc_exporter() is None:
                problems.append(_GRPC_MISSING)
            elif protocol == "http/json":
                parts[-1] += f" (sent as http/protobuf: {_JSON_AS_PROTOBUF.split(':')[0]})"
            elif protocol not in ("grpc", "http/protobuf"):
                problems.append(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: {_UNKNOWN_PROTOCOL}")
        elif name == "console":
            parts.append("console (JSON on stderr)")
        else:
            from importlib.metadata import entry_points

            parts.append(name)
            if not entry_points(group="opentelemetry_traces_exporter", name=name):
                problems.append(f"OTEL_TRACES_EXPORTER names {name!r}, an exporter no "
                                "installed package provides (otlp and console are built in)")
    return f"traces: {', '.join(parts)}", problems


def _without_userinfo(url: str) -> str:
    """An endpoint as doctor prints it: a `user:password@` in it is a credential."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if "@" not in parts.netloc:
        return url.strip()
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


def _tracer() -> Tracer | None:
    """Our tracer once a tracer provider is installed, else None: tracing is off. The API keeps
    the installed provider in a module global, None until one is set; that is read directly
    because `get_tracer_provider()` tests `os.environ` on each call (about 2 us, more than the
    rest of the off path together), and only through it if a later API renames the global. A
    provider, once set, stays (the API refuses a second), so the tracer is kept for the
    process."""
    global _installed
    if _installed is not None:
        return _installed
    api = sys.modules.get(_API)
    if api is None:  # nothing imported the API: no provider can be installed
        return None
    provider: Any = getattr(api, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None:
        return None
    if provider is _UNKNOWN:
        provider = api.get_tracer_provider()
    if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)):
        return None
    _installed = provider.get_tracer(_TRACER)
    return _installed


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, or None outside any trace or with tracing
    off (a context the MCP SDK's no-op span carries is not ours to pass on then)."""
    if _tracer() is None:
        return None
    from opentelemetry.trace import get_current_span

    context = get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


_OFF: Final[contextlib.nullcontext[None]] = contextlib.nullcontext()
"""What `span()` returns with tracing off: reusable, it enters as None and does nothing."""


def span(name: str, attributes: Mapping[str, Any] | None = None, *,
         parent: str | None = None, client: bool = False,
         job: str | None = None) -> contextlib.AbstractContextManager[Span | None]:
    """A span of ours around the block, current inside it (see the module docstring): a child of
    the current span, or of `parent` (a ``traceparent``) when given; `client` for a call to a
    provider; `job` for a research job's run, whose id every span of ours inside it carries. An
    exception is marked on it by type only, and propagates. None with tracing off: nothing to
    record, nothing imported, no context attached."""
    tracer = _tracer()
    if tracer is None:
        return _OFF
    return _span(tracer, name, attributes, parent, client, job)


@contextlib.contextmanager
def _span(tracer: Tracer, name: str, attributes: Mapping[str, Any] | None,
          parent: str | None, client: bool, job: str | None) -> Iterator[Span | None]:
    from opentelemetry.trace import SpanKind, StatusCode

    context = None
    if parent is not None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        context = TraceContextTextMapPropagator().extract({"traceparent": parent})
    with tracer.start_as_current_span(
            name, context=context, kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
            attributes=dict(attributes) if attributes else None, record_exception=False,
            set_status_on_exception=False) as current:
        if not current.is_recording():
            yield current
            return
        if (job_id := job or _job.get()) is not None:
            current.set_attribute(JOB_ID, job_id)
        counted = [0]
        token = _statements.set(counted)
        job_token = _job.set(job) if job is not None else None
        try:
            yield current
        except Exception as exc:
            current.set_attribute("error.type", type(exc).__qualname__)
            current.set_status(StatusCode.ERROR)
            raise
        finally:
            if job_token is not None:
                _job.reset(job_token)
            _statements.reset(token)
            if counted[0]:
                current.set_attribute(STATEMENTS, counted[0])


def count_statement() -> None:
    """One store statement, counted onto the enclosing span of ours (if one is recording)."""
    if _installed is None:  # off: no span of ours can be counting
        return
    counted = _statements.get()
    if counted is not None:
        counted[0] += 1
