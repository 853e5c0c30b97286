"""The span of one provider call, opened where the call is made (the worker process, or the
thread transport's loop) as a child of the ``traceparent`` the caller sent with it.

Its attributes are the OpenTelemetry GenAI semantic conventions' (`gen_ai.operation.name`,
`gen_ai.request.model`, `gen_ai.provider.name` and the older `gen_ai.system`,
`gen_ai.usage.input_tokens` / `output_tokens`, `gen_ai.response.finish_reasons`) and our price of
the call in dollars (`ask_another.cost_usd`). The messages and the answer are added
(`gen_ai.input.messages`, `gen_ai.output.messages`, scrubbed of every key this process knows)
only when the operator opted in (`tracing.capture_content`); the call's keyword arguments, which
hold its key, never are. No litellm here.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ask_another import tracing
from ask_another.gateway._results import CompletionResult, SearchResult, Usage
from ask_another.logs import scrub_answer

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["completed", "provider_span", "searched"]


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


def provider_span(operation: str, model: str, kwargs: dict[str, Any],
                  traceparent: str | None) -> contextlib.AbstractContextManager[Span | None]:
    """The span of one call: `operation` is ``chat``, ``search`` or an interactions call
    (``acreate``, ``aget``, ``acancel``); `model` the model (a search: its engine). Without a
    caller's trace (the caller's tracing is off) the call is not traced: the shared no-op."""
    if traceparent is None:
        return contextlib.nullcontext()
    return _provider_span(operation, model, kwargs, traceparent)


@contextlib.contextmanager
def _provider_span(operation: str, model: str, kwargs: dict[str, Any],
                   traceparent: str) -> Iterator[Span | None]:
    provider = _provider(model)
    name = "chat" if operation == "chat" else "invoke_agent" if operation == "acreate" \
        else operation
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": name, "gen_ai.request.model": model,
        "gen_ai.provider.name": provider, "gen_ai.system": provider,
    }
    for key, attribute in (("temperature", "gen_ai.request.temperature"),
                           ("max_tokens", "gen_ai.request.max_tokens")):
        if isinstance(kwargs.get(key), int | float):
            attributes[attribute] = kwargs[key]
    if operation == "search":
        attributes["ask_another.search.max_results"] = kwargs.get("max_results", 0)
    with tracing.span(f"{name} {model}", attributes, parent=traceparent, client=True) as span:
        if span is not None and span.is_recording() and tracing.capture_content():
            content: Any = kwargs.get("messages", kwargs.get("query", kwargs.get("input")))
            if content is not None:
                span.set_attribute("gen_ai.input.messages", _json(content))
        yield span


def _json(value: Any) -> str:
    return scrub_answer(json.dumps(value, default=str, ensure_ascii=False))


def _usage(span: Span, usage: Usage) -> None:
    if usage.prompt_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
    if usage.completion_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    if usage.cost_usd is not None:
        span.set_attribute("ask_another.cost_usd", usage.cost_usd)


def completed(span: Span | None, result: CompletionResult) -> None:
    """The answer's model, usage and cost on the call's span (its text only if opted in)."""
    if span is None or not span.is_recording():
        return
    span.set_attribute("gen_ai.response.model", result.model)
    if result.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [result.finish_reason])
    _usage(span, result.usage)
    if tracing.capture_content():
        parts: list[dict[str, Any]] = [{"type": "text", "content": result.text}]
        parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
                  for c in result.tool_calls]
        span.set_attribute("gen_ai.output.messages",
                           _json([{"role": "assistant", "parts": parts}]))


def searched(span: Span | None, result: SearchResult) -> None:
    """A search's hits and cost on its span."""
    if span is None or not span.is_recording():
        return
    span.set_attribute("ask_another.search.hits", len(result.hits))
    _usage(span, result.usage)
