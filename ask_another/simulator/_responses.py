"""The OpenAI Responses API wire format (``POST /v1/responses``), JSON and SSE.

litellm sends ``litellm.completion`` for models whose map entry has mode ``responses`` (for
example ``openai/o3-deep-research`` and ``openai/o4-mini-deep-research``) to this API instead of
chat completions, and converts the answer back to a chat completion.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from ._openai import arguments_text, split_text, usage_for
from ._steps import Reply, SimRequest, ToolCalls


def _usage(request: SimRequest, step: Reply | ToolCalls) -> dict[str, Any]:
    if isinstance(step, Reply):
        usage = usage_for(request, step.text, step.usage)
    else:
        usage = usage_for(request, step.text + json.dumps([c.arguments for c in step.calls]))
    # Responses usage counts the prompt from `input`, which usage_for cannot see.
    prompt = usage["prompt_tokens"] or max(1, len(json.dumps(request.json.get("input"))) // 4)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + usage["completion_tokens"],
    }


def _annotations(text: str, citations: list[str] | None) -> list[dict[str, Any]]:
    annotations = []
    for number, url in enumerate(citations or [], start=1):
        marker = f"[{number}]"
        start = text.find(marker)
        start, end = (start, start + len(marker)) if start >= 0 else (0, 0)
        annotations.append(
            {
                "type": "url_citation",
                "url": url,
                "title": f"Simulated source {number}",
                "start_index": start,
                "end_index": end,
            }
        )
    return annotations


def _items(step: Reply | ToolCalls, response_id: str, call_base: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if step.text:
        citations = step.citations if isinstance(step, Reply) else None
        items.append(
            {
                "type": "message",
                "id": f"msg_{response_id}",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": step.text,
                        "annotations": _annotations(step.text, citations),
                        "logprobs": [],
                    }
                ],
            }
        )
    if isinstance(step, ToolCalls):
        for i, call in enumerate(step.calls):
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{response_id}_{i}",
                    "call_id": call.id or f"call_sim{call_base}_{i}",
                    "name": call.name,
                    "arguments": arguments_text(call.arguments),
                    "status": "completed",
                }
            )
    return items


def response(
    request: SimRequest,
    step: Reply | ToolCalls,
    response_id: str,
    call_base: int,
    status: str = "completed",
    output: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ``response`` object."""
    body = request.json
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": request.model or "simulated",
        "output": _items(step, response_id, call_base) if output is None else output,
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": _usage(request, step) if status == "completed" else None,
        "metadata": {},
    }


def stream_events(
    request: SimRequest, step: Reply | ToolCalls, response_id: str, call_base: int
) -> Iterator[tuple[str, str]]:
    """(event name, JSON data) pairs of a streamed response, from created to completed."""
    sequence = 0

    def event(kind: str, **fields: Any) -> tuple[str, str]:
        nonlocal sequence
        sequence += 1
        return kind, json.dumps({"type": kind, "sequence_number": sequence, **fields})

    started = response(request, step, response_id, call_base, status="in_progress", output=[])
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    for index, item in enumerate(_items(step, response_id, call_base)):
        if item["type"] == "message":
            part = item["content"][0]
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            # Every event of the message's one text part names the item, its index and the part.
            at = {"item_id": item["id"], "output_index": index, "content_index": 0}
            yield event("response.content_part.added", **at, part=empty_part)
            for piece in split_text(part["text"]):
                yield event("response.output_text.delta", **at, delta=piece, logprobs=[])
            for number, annotation in enumerate(part["annotations"]):
                yield event("response.output_text.annotation.added", **at,
                            annotation_index=number, annotation=annotation)
            yield event("response.output_text.done", **at, text=part["text"], logprobs=[])
            yield event("response.content_part.done", **at, part=part)
        else:
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            arguments = item["arguments"]
            size = max(1, -(-len(arguments) // 3))
            for start in range(0, len(arguments), size):
                yield event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=arguments[start : start + size],
                )
            yield event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=arguments,
            )
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response(request, step, response_id, call_base))
