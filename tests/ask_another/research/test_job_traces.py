"""A research job's spans (issue 43, goals 1-2), recorded in this process by the SDK's in-memory
exporter: the job's run is a child of the call that started it, its steps and provider calls
(the thread transport here; the worker process in test_traces_collector.py) and its search and
reading are below it with the GenAI conventions' attributes and our cost, and its store
statements are counts. No attribute carries a key, the prompt or the answer unless the operator
opts in (goal 3); a job taken over by another runtime continues the trace it was started in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio
from key_needles import LONG_KEY, leaks
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from ask_another import tracing
from ask_another.config import Config
from ask_another.runtime import open_runtime
from ask_another.simulator import Reply, Simulator, Slow, ToolCall, ToolCalls
from ask_another.store.jobs import job_store

QUESTION = "Which moon of Saturn hides a salty ocean beneath its ice"
ANSWER = "Enceladus vents plumes of brine from its south pole tiger stripes."
MODEL = "gpt-4o-mini"  # priced in litellm's map: its calls have a cost


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span ended while the test runs (the SDK's provider, installed once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    yield exporter
    processor.shutdown()  # later spans (other tests') are dropped by the stopped exporter


def agent_config(sim: Simulator, home: Any) -> Config:
    """The agent's turn: a search, a reading, the answer."""
    page = f"{sim.url}/sources/search/saturn/1"
    sim.script(MODEL, [
        ToolCalls([ToolCall("search_web", {"query": QUESTION})]),
        ToolCalls([ToolCall("read_article", {"url": page})]),
        Reply(ANSWER),
    ])
    return config_for(sim, home)


def config_for(sim: Simulator, home: Any, **extra: str) -> Config:
    return Config.from_env({
        "ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_GATEWAY_PROCESS": "0",
        "ASK_ANOTHER_POLL_SECONDS": "0.05", "ASK_ANOTHER_CONFIRM_USD": "1000",
        "MODEL_SIM": f"openai/{MODEL};{LONG_KEY};{sim.openai_base}",
        "SEARCH_SIM": f"tavily;{LONG_KEY};{sim.url}",
        "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
        "ASK_ANOTHER_PERMISSIONS": "read=allow,internal=allow,after_internal=allow",
        **extra,
    })


async def ended(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    """The spans recorded so far, once one named `name` has ended (the job's span ends just
    after the job's result is stored)."""
    with trio.fail_after(30):
        while not any(s.name == name for s in exporter.get_finished_spans()):  # noqa: ASYNC110
            await trio.sleep(0.01)
    return list(exporter.get_finished_spans())


def of_trace(found: list[ReadableSpan], trace_id: int) -> list[ReadableSpan]:
    return [s for s in found if s.context is not None and s.context.trace_id == trace_id]


def ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


async def run_agent_job(config: Config) -> tuple[str, Any]:
    tracer = trace.get_tracer("test")
    async with open_runtime(config, prewarm_after=0) as runtime:
        with tracer.start_as_current_span("tools/call start_research") as root:
            job = await runtime.jobs.start("sim", QUESTION, "agent")
        final = await runtime.jobs.wait(job.id, 60)
    assert final.status == "completed", final.error
    return final.report or "", (root, job)


async def test_an_agent_job_is_one_trace_from_the_call_to_each_provider_call(
        spans: InMemorySpanExporter, sim: Simulator, tmp_path: Any) -> None:
    _report, (root, job) = await run_agent_job(agent_config(sim, tmp_path))
    context = root.get_span_context()
    assert (job.traceparent or "").startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
    found = of_trace(await ended(spans, "research_job agent"), context.trace_id)
    by_id = {s.context.span_id: s for s in found if s.context is not None}
    (run,) = [s for s in found if s.name == "research_job agent"]
    assert run.parent is not None and run.parent.span_id == context.span_id
    attributes = dict(run.attributes or {})
    assert attributes[tracing.JOB_ID] == job.id
    assert attributes["ask_another.job.outcome"] == "completed"
    assert attributes[tracing.STATEMENTS] > 0  # its store statements, as a count

    turns = sorted(s.name for s in found if s.name.startswith("step turn:"))
    assert turns == ["step turn:1", "step turn:2", "step turn:3"]
    chats = [s for s in found if s.name == f"chat openai/{MODEL}"]
    assert len(chats) == 3
    for chat in chats:
        assert chat.kind == SpanKind.CLIENT
        assert ancestors(chat, by_id)[1:] == ["research_job agent", "tools/call start_research"]
        assert ancestors(chat, by_id)[0].startswith("step turn:")
        values = dict(chat.attributes or {})
        assert values["gen_ai.operation.name"] == "chat"
        assert values["gen_ai.request.model"] == f"openai/{MODEL}"
        assert values["gen_ai.provider.name"] == values["gen_ai.system"] == "openai"
        assert values["gen_ai.usage.input_tokens"] > 0
        assert values["gen_ai.usage.output_tokens"] > 0
        assert values["ask_another.cost_usd"] > 0
        assert values[tracing.JOB_ID] == job.id  # the thread's span is in the job's context
    # Every span of ours in the job carries its id: steps, the search and the reading.
    (search,) = [s for s in found if s.name == "web_search"]
    (read,) = [s for s in found if s.name == "read_article"]
    assert dict(search.attributes or {})["ask_another.search.hits"] > 0
    assert dict(read.attributes or {})["ask_another.article.success"] is True
    assert dict(read.attributes or {})["server.address"] == "127.0.0.1"
    for span in found:
        if span.name.startswith(("step ", "web_search", "read_article", "search ")):
            assert dict(span.attributes or {})[tracing.JOB_ID] == job.id, span.name
    (priced,) = [s for s in found if s.name == "search tavily"]
    assert dict(priced.attributes or {})["ask_another.cost_usd"] == 0.008
    assert ancestors(priced, by_id)[0] == "web_search"


def exported_values(found: list[ReadableSpan]) -> list[tuple[str, str, str]]:
    values = []
    for span in found:
        for key, value in (span.attributes or {}).items():
            values.append((span.name, key, str(value)))
        for event in span.events:
            for key, value in (event.attributes or {}).items():
                values.append((span.name, f"{event.name}.{key}", str(value)))
        values.append((span.name, "status", str(span.status.description)))
    return values


async def test_no_span_attribute_carries_a_key_the_prompt_or_the_answer(
        spans: InMemorySpanExporter, sim: Simulator, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tracing.CAPTURE_CONTENT, raising=False)
    report, _ = await run_agent_job(agent_config(sim, tmp_path))
    found = await ended(spans, "research_job agent")
    assert len(found) > 10
    for name, key, value in exported_values(found):
        assert not leaks(value), (name, key, leaks(value))
        for needle in (QUESTION, ANSWER, report[:40], "saturn/1"):
            assert needle not in value, (name, key, needle)


async def test_with_content_capture_the_messages_are_there_and_still_no_key(
        spans: InMemorySpanExporter, sim: Simulator, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tracing.CAPTURE_CONTENT, "true")
    await run_agent_job(agent_config(sim, tmp_path))
    found = await ended(spans, "research_job agent")
    values = exported_values(found)
    for name, key, value in values:
        assert not leaks(value), (name, key, leaks(value))
    inputs = [v for _n, k, v in values if k == "gen_ai.input.messages"]
    outputs = [v for _n, k, v in values if k == "gen_ai.output.messages"]
    assert any(QUESTION in v for v in inputs) and any(ANSWER in v for v in outputs)
    assert any(k == "url.full" for _n, k, _v in values)


async def test_a_job_taken_over_by_another_runtime_continues_its_trace(
        spans: InMemorySpanExporter, sim: Simulator, tmp_path: Any,
        store_env: dict[str, str]) -> None:
    # On both backends: the trace context is a column of research_jobs (migration 16).
    config = config_for(sim, tmp_path, **store_env)
    sim.script(MODEL, [Slow(30), Reply(ANSWER)])  # the first runtime goes while one is held
    tracer = trace.get_tracer("test")
    async with open_runtime(config, prewarm_after=0) as first:
        with tracer.start_as_current_span("tools/call start_research") as root:
            job = await first.jobs.start("sim", "Say it plainly", "agent")
        with trio.fail_after(30):
            while not sim.requests:  # noqa: ASYNC110 - the held call has reached the provider
                await trio.sleep(0.01)
        stored = await job_store(await first.database()).get(job.id)
        assert stored is not None and stored.traceparent == job.traceparent is not None
    async with open_runtime(config, prewarm_after=0) as second:
        final = await second.jobs.wait(job.id, 60)
    assert final.status == "completed", final.error
    runs = [s for s in await ended(spans, "research_job agent")
            if s.name == "research_job agent" and s.attributes
            and s.attributes.get(tracing.JOB_ID) == job.id]
    with trio.fail_after(30):
        while len(runs) < 2:
            await trio.sleep(0.01)
            runs = [s for s in spans.get_finished_spans()
                    if s.name == "research_job agent" and s.attributes
                    and s.attributes.get(tracing.JOB_ID) == job.id]
    context = root.get_span_context()
    for run in runs:  # the first run and the resumed one: both children of the starting call
        assert run.context is not None and run.context.trace_id == context.trace_id
        assert run.parent is not None and run.parent.span_id == context.span_id
    assert sorted(bool((r.attributes or {})["ask_another.job.resumed"]) for r in runs) == [
        False, True]


@pytest.mark.parametrize(("environ", "exporters"), [
    ({}, []),
    ({"OTEL_SERVICE_NAME": "x"}, []),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ["otlp"]),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, ["otlp"]),
    ({"OTEL_TRACES_EXPORTER": "console, otlp"}, ["console", "otlp"]),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, []),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, []),
])
def test_traces_are_wanted_only_when_the_otel_settings_ask(
        environ: dict[str, str], exporters: list[str]) -> None:
    assert tracing._exporter_names(environ) == exporters
    assert tracing.wanted(environ) is bool(exporters)
    if not exporters:
        assert tracing.configure(environ) is False


def test_outside_any_trace_there_is_no_traceparent_and_spans_cost_nothing(
        spans: InMemorySpanExporter) -> None:
    assert tracing.traceparent() is None
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("outer") as outer:
        with tracing.span("inner") as inner:
            assert inner is not None and inner.is_recording()
            tracing.count_statement()
            tracing.count_statement()
            assert tracing.traceparent() is not None
    (recorded,) = [s for s in spans.get_finished_spans() if s.name == "inner"]
    assert recorded.parent is not None
    assert recorded.parent.span_id == outer.get_span_context().span_id
    assert dict(recorded.attributes or {}) == {tracing.STATEMENTS: 2}


def test_an_exception_marks_the_span_by_its_type_only(spans: InMemorySpanExporter) -> None:
    with pytest.raises(ValueError, match="the prompt"), tracing.span("failing"):
        raise ValueError(f"the prompt was {QUESTION}")
    (failed,) = [s for s in spans.get_finished_spans() if s.name == "failing"]
    assert dict(failed.attributes or {}) == {"error.type": "ValueError"}
    assert not failed.events and QUESTION not in str(failed.status.description)

