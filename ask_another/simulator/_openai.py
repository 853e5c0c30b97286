"""The OpenAI chat completions wire format, as the simulator writes it (JSON and SSE).

Perplexity speaks the same format with top-level ``citations`` and ``search_results``; OpenAI's
search models put ``url_citation`` annotations on the message instead. Both are produced from
a `Reply` with citations, choosing by whether the caller is litellm's Perplexity client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from ._steps import Fail, Reply, SimRequest, ToolCalls

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
    503: "server_error",
}
_ERROR_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


def error_body(fail: Fail) -> dict[str, Any]:
    return {
        "error": {
            "message": fail.message,
            "type": fail.error_type or _ERROR_TYPES.get(fail.status, "api_error"),
            "param": None,
            "code": _ERROR_CODES.get(fail.status),
        }
    }


def error_headers(fail: Fail) -> dict[str, str]:
    if fail.status == 429:
        seconds = fail.retry_after
        return {"retry-after": str(int(seconds)) if seconds == int(seconds) else str(seconds)}
    return {}


def estimate_tokens(text: str) -> int:
    # About four characters a token, like OpenAI's rule of thumb; never zero for real text.
    return max(1, (len(text) + 3) // 4) if text else 0


def usage_for(request: SimRequest, output_text: str, override: Any = None) -> dict[str, int]:
    prompt = sum(estimate_tokens(json.dumps(m.get("content"))) + 4 for m in request.messages)
    completion = estimate_tokens(output_text)
    if override:
        prompt = int(override.get("prompt_tokens", prompt))
        completion = int(override.get("completion_tokens", completion))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _is_perplexity(request: SimRequest) -> bool:
    return request.headers.get("x-pplx-integration") is not None


def _annotations(text: str, citations: list[str]) -> list[dict[str, Any]]:
    annotations = []
    for number, url in enumerate(citations, start=1):
        marker = f"[{number}]"
        start = text.find(marker)
        start, end = (start, start + len(marker)) if start >= 0 else (0, 0)
        annotations.append(
            {
                "type": "url_citation",
                "url_citation": {
                    "url": url,
                    "title": f"Simulated source {number}",
                    "start_index": start,
                    "end_index": end,
                },
            }
        )
    return annotations


def _citation_fields(request: SimRequest, citations: list[str] | None) -> dict[str, Any]:
    if not citations:
        return {}
    return {
        "citations": citations,
        "search_results": [
            {"title": f"Simulated source {n}", "url": url, "date": None}
            for n, url in enumerate(citations, start=1)
        ],
    }


def _tool_call_json(calls: ToolCalls, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id or f"call_sim{start}_{i}",
            "type": "function",
            "function": {"name": call.name, "arguments": arguments_text(call.arguments)},
        }
        for i, call in enumerate(calls.calls)
    ]


def arguments_text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def completion(
    request: SimRequest, step: Reply | ToolCalls, completion_id: str, call_base: int
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant"}
    extra: dict[str, Any] = {}
    if isinstance(step, Reply):
        text = step.text
        message["content"] = text
        finish = "stop"
        if step.citations and not _is_perplexity(request):
            message["annotations"] = _annotations(text, step.citations)
        extra = _citation_fields(request, step.citations)
        usage = usage_for(request, text, step.usage)
    else:
        text = step.text
        message["content"] = text or None
        message["tool_calls"] = _tool_call_json(step, call_base)
        finish = "tool_calls"
        usage = usage_for(request, text + json.dumps(message["tool_calls"]))
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model or "simulated",
        "system_fingerprint": "fp_simulated",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
        **extra,
    }


def split_text(text: str, pieces: int = 4) -> list[str]:
    """Cut text into a few pieces on word boundaries (more pieces for longer text)."""
    if not text:
        return []
    words = text.split(" ")
    pieces = max(1, min(len(words), max(pieces, len(words) // 8)))
    size = -(-len(words) // pieces)
    chunks = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
    # Keep the spaces between chunks so the concatenation is the original text.
    return [c + " " for c in chunks[:-1]] + [chunks[-1]]


def stream_events(
    request: SimRequest, step: Reply | ToolCalls, completion_id: str, call_base: int
) -> Iterator[str]:
    """The SSE ``data:`` payloads of a streamed completion, ending with ``[DONE]``."""
    created = int(time.time())
    model = request.model or "simulated"
    citations = step.citations if isinstance(step, Reply) else None
    extra = _citation_fields(request, citations)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return json.dumps(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_simulated",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
                **extra,
            }
        )

    yield chunk({"role": "assistant", "content": ""})
    for piece in split_text(step.text):
        yield chunk({"content": piece})
    if isinstance(step, ToolCalls):
        for index, call in enumerate(_tool_call_json(step, call_base)):
            arguments = call["function"]["arguments"]
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            # Arguments arrive in fragments, as real providers send them.
            step_size = max(1, -(-len(arguments) // 3))
            for start in range(0, len(arguments), step_size):
                fragment = arguments[start : start + step_size]
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
        finish = "tool_calls"
        usage = usage_for(request, step.text + json.dumps(_tool_call_json(step, call_base)))
    else:
        finish = "stop"
        if citations and not _is_perplexity(request):
            annotations = _annotations(step.text, citations)
            yield chunk({"annotations": annotations})
        usage = usage_for(request, step.text, step.usage)
    yield chunk({}, finish)
    options = request.json.get("stream_options") or {}
    if isinstance(options, dict) and options.get("include_usage"):
        yield json.dumps(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
    yield "[DONE]"
