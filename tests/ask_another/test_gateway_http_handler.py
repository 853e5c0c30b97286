"""The worker's OpenAI-compatible calls go through litellm's own HTTP handler
(`_litellm.own_http_handler`), and read exactly as they did through the OpenAI SDK's client:
the same answer, and for each failure the same error class and message (which decide the exit
code, the retry and what a person reads). The handler gives a rate limit's whole JSON body,
aiohttp's text for a refused or dropped connection, its own wrapping of an unreadable body, and
took a stream of unreadable events for an empty answer; `classify_failure()` and
`_reject_unreadable_events()` make those read as the SDK's."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from ask_another.simulator import Simulator

pytestmark = pytest.mark.slow  # a fresh process importing litellm

# In a fresh process, as in the worker: `own_http_handler` changes litellm for the process.
# litellm reads the switch per call, so each case runs through both clients in turn.
BOTH_CLIENTS = """
import asyncio, json, os, sys
from ask_another.gateway import _litellm

litellm = _litellm.load(quick=True)
_litellm.warm_up(litellm)
_litellm.lighten(litellm)
on = _litellm.own_http_handler(litellm)
base, refused = sys.argv[1], sys.argv[2]
CASES = {
    "answer": ("What is 2+2?", base),
    "rate limit": ("[[sim:fail=429 quota exhausted]] hi", base),
    "server error": ("[[sim:fail=500 The server had an error]] hi", base),
    "bad request": ("[[sim:fail=400 no such parameter]] hi", base),
    "unreadable": ("[[sim:malformed]] hi", base),
    "dropped": ("[[sim:drop]] hi", base),
    "refused": ("hi", refused),
}

async def one(prompt, api_base, stream):
    kwargs = {"model": "openai/m1", "api_base": api_base, "api_key": "sk-handler",
              "max_retries": 0, "num_retries": 0, "timeout": 30,
              "messages": [{"role": "user", "content": prompt}]}
    if stream:
        kwargs |= {"stream": True, "stream_options": {"include_usage": True}}
    pieces = []
    try:
        result = await _litellm.complete(litellm, kwargs, "openai/m1", pieces.append)
    except Exception as exc:
        kind, text, status = _litellm.classify_failure(litellm, exc)
        return ["failed", kind.__name__, text]
    return ["answer", result.text, "".join(pieces), result.finish_reason,
            result.usage.prompt_tokens, result.usage.completion_tokens]

async def main():
    out = {"on": on, "read": {}}
    for client in ("sdk", "handler"):
        os.environ[_litellm.OWN_HTTP_HANDLER_ENV] = "true" if client == "handler" else "false"
        for name, (prompt, api_base) in CASES.items():
            for stream in (False, True):
                out["read"][f"{client} {name}{' streamed' if stream else ''}"] = await one(
                    prompt, api_base, stream)
    await _litellm.close_clients(litellm)
    print(json.dumps(out))

asyncio.run(main())
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(script: str, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                                            **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_the_handler_reads_every_answer_and_failure_as_the_sdks_client(sim: Simulator):
    refused = f"http://127.0.0.1:{_closed_port()}/v1"
    out = _run(BOTH_CLIENTS, sim.openai_base, refused)
    assert out["on"] is True
    read = out["read"]
    assert isinstance(read, dict)
    expected = {
        # The simulator's 429 says `Retry-After: 0`: read from the headers of either client.
        "rate limit": ["failed", "RateLimited",
                       "quota exhausted (the provider asks to retry in 0 s)"],
        "server error": ["failed", "ProviderUnavailable", "The server had an error"],
        "bad request": ["failed", "BadRequest", "no such parameter"],
        "unreadable": ["failed", "MalformedResponse",
                       "Expecting value: line 1 column 1 (char 0)"],
        "dropped": ["failed", "ProviderUnavailable", "Connection error."],
        "refused": ["failed", "ProviderUnreachable", "Connection error."],
    }
    for name, failure in expected.items():
        for streamed in ("", " streamed"):
            assert read[f"sdk {name}{streamed}"] == failure, (name, streamed)  # as it always read
            assert read[f"handler {name}{streamed}"] == failure, (name, streamed)
    for streamed in ("", " streamed"):
        answer = read[f"handler answer{streamed}"]
        assert answer == read[f"sdk answer{streamed}"]
        assert answer[0] == "answer" and answer[1].startswith("[simulated m1] answer to: What is")
    assert read["handler answer streamed"][2] == read["handler answer streamed"][1]  # delivered


EXPLICIT = """
import json
from ask_another.gateway import _litellm

litellm = _litellm.load(quick=True)
print(json.dumps({"on": _litellm.own_http_handler(litellm),
                  "strict": _litellm._reject_unreadable_events()}))
"""


def test_an_explicit_setting_of_the_switch_is_kept():
    # `false` keeps the OpenAI SDK's client; the method patched for the handler is where this
    # litellm has it (an upgrade that renames it fails here, not silently).
    assert _run(EXPLICIT, env={"EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER": "false"}) == {
        "on": False, "strict": True}
    assert _run(EXPLICIT)["on"] is True
