"""A simulated LLM provider on 127.0.0.1, for tests, ``ask-another demo`` and the benchmarks.

**This is a simulation.** Nothing it answers comes from a real model: every default answer
starts with ``[simulated <model>]``. It speaks real HTTP in the wire formats litellm uses, so
the code under test runs exactly as it would against a provider.

Starting it
-----------
In the same process (a background thread with its own asyncio loop; works from plain code and
from trio tests, which should call litellm's *sync* API)::

    from ask_another.simulator import Simulator, Reply, Fail

    with Simulator.running(latency=0.0) as sim:
        sim.url           # http://127.0.0.1:PORT
        sim.openai_base   # http://127.0.0.1:PORT/v1
        sim.gemini_base   # http://127.0.0.1:PORT  (api_base for litellm.interactions)
        litellm.completion(model="openai/m1", api_base=sim.openai_base, api_key="k",
                           messages=[{"role": "user", "content": "hi"}])

For ask-another itself: ``MODEL_SIM="openai/m1;any-key;<openai_base>"``; a deep-research
model: ``MODEL_PPLX="perplexity/sonar-deep-research;any-key;<openai_base>"``; a Gemini agent:
``MODEL_GDR="gemini/deep-research-pro-preview-12-2025;any-key;<gemini_base>"``.

In a child process, for benchmarks (steer it with directives only)::

    with Simulator.process(latency=0.2) as urls:
        urls.url, urls.openai_base, urls.gemini_base

Standalone: ``python -m ask_another.simulator [--port N] [--latency S]`` logs a
``simulator.listening`` JSON event with the URLs on stderr and serves until Ctrl-C / SIGTERM.

It binds its socket itself (port 0 by default, so the port is known at once), with a listen
backlog of 4096 and no concurrency limit: a thousand concurrent requests with a fixed latency
all wait in parallel.

Endpoints
---------
- ``POST /v1/chat/completions`` (also ``/chat/completions``): OpenAI chat completions, JSON or
  SSE when ``stream`` is true (several ``chat.completion.chunk`` events, then
  ``data: [DONE]``; with ``stream_options.include_usage`` a last chunk with empty ``choices``
  and the usage). litellm's ``openai/<name>`` and ``perplexity/<name>`` models with
  ``api_base=openai_base`` both arrive here; the body's ``model`` is ``<name>``.
- ``POST /v1/responses`` (also ``/responses``): the OpenAI Responses API, JSON or SSE
  (``response.created`` ... ``response.output_text.delta`` ... ``response.completed``). litellm
  sends ``completion`` calls here for models whose map entry has mode ``responses``, notably
  ``openai/o3-deep-research`` and ``openai/o4-mini-deep-research`` (which refuse ``tools``), and
  for ``openai/responses/<name>``. Citations become ``url_citation`` annotations, which litellm
  puts on ``message.annotations`` (``url``, ``title``, ``start_index``, ``end_index``).
- ``POST /v1beta/interactions``, ``GET /v1beta/interactions/{id}``,
  ``POST /v1beta/interactions/{id}/cancel``: the Gemini interactions API as litellm calls it
  with ``api_base=gemini_base`` (Api-Revision 2026-05-20: results in ``steps``; a request
  sending an older Api-Revision gets the legacy ``outputs`` instead).
- ``GET /sources/...``: a small HTML article, the target of every simulated citation, so
  reading a cited source works offline.
- ``POST /search`` (Tavily's wire format: ``{"query", "max_results"}`` in, ``{"results":
  [{"title", "url", "content", "score"}]}`` out) and ``GET /search?q=...&format=json``
  (SearXNG's): web search as ``litellm.asearch(search_provider="tavily" | "searxng",
  api_base=sim.url)`` calls it; results are pages under ``/sources/search/``. Recorded with
  model ``"search"``, so ``sim.script("search", [Fail(503)])`` fails the next search and
  ``sim.requests_for("search")`` lists them.

Retries: litellm's OpenAI client retries 429, 5xx and dropped connections twice by default,
each retry consuming a scripted step; pass ``max_retries=0`` to see one failure once.

Default behaviour (nothing scripted)
------------------------------------
- A completion answers ``[simulated <model>] answer to: <first 200 chars of the last user
  message>`` (directives removed), with usage of about four characters per token.
- If the last message is a tool result, it answers ``[simulated <model>] answer using N tool
  result(s): ...`` quoting the start of each result, so an agent loop ends.
- A model whose name contains ``research`` or ``sonar`` also cites two simulated sources
  (``[1][2]`` in the text).
- The local research pipeline's prompts (a system message opening "You are the planner of a
  research pipeline" or "You are one researcher in a research pipeline") get a valid plan, a
  ``search_web`` call when that tool is offered, then a JSON answer filling the listed fields and
  citing the search results (see ``_pipeline.py``).
- An interaction is ``in_progress`` when created and on the first poll, ``completed`` on the
  second, with a deterministic report citing two simulated sources.

Citations on the wire: a completion with citations carries Perplexity's top-level
``citations`` (URLs) and ``search_results`` (title, url); unless the caller is litellm's
Perplexity client (it sends ``X-Pplx-Integration``), the message also gets OpenAI
``url_citation`` annotations. litellm's Perplexity client turns ``[n]`` markers into
annotations itself and exposes ``response.citations``. A completed interaction's report is
the text content of its ``model_output`` step; each citation is an annotation
``{"type": "url_citation", "url", "title", "source", "start_index", "end_index"}``.

Scripting (Python API)
----------------------
``sim.script(model, [steps...])`` queues steps for requests whose body ``model`` is `model`;
each request consumes one, in order; afterwards the default resumes. ``sim.script(model, fn)``
installs a responder ``fn(request: SimRequest) -> step`` for concurrent callers. Steps:

- ``Reply(text, citations=None, usage=None)``: `usage` overrides ``prompt_tokens`` /
  ``completion_tokens``.
- ``ToolCalls([ToolCall(name, arguments, id=None)], text="")``: finish_reason ``tool_calls``
  (default ids ``call_sim<n>_<i>``);
  streamed, the arguments arrive as fragments across several chunks. `arguments` may be a dict
  or a raw string (e.g. invalid JSON).
- ``Fail(status, message, error_type=None, retry_after=0)``: the OpenAI error envelope
  ``{"error": {"message", "type", "param", "code"}}``; a 429 sends ``Retry-After``.
- ``Slow(seconds, then=step)``: wait, then answer (default answer if `then` is None).
- ``Drop()``: close the connection without sending a byte.
- ``Malformed(body="this is {not json")``: 200 with a body that is not a completion.

``sim.script_interaction(agent, statuses=[...], report=..., citations=[...], error=...)``
scripts the next interaction for `agent`: the create answer has the first status, each poll
moves one on (the last stays). Any of queued, in_progress, requires_action, completed, failed,
cancelled, incomplete, budget_exceeded. A cancel before a terminal status makes it cancelled.
``sim.end_interaction(id, status="completed")`` ends a running interaction at its next poll
(with ``statuses=["in_progress"]`` it runs until the test says so, whoever polls it).

``sim.script(agent, [Fail(...), Drop(), Slow(...)])`` also applies to interactions: each
request about that agent (create, poll or cancel) consumes one step first; a failed poll does
not advance the interaction. Errors there use Google's envelope
``{"error": {"code", "message", "status"}}``.

Inspecting: ``sim.requests`` (every `SimRequest`: method, path, model, json, headers, plus
``api_key``, ``messages``, ``last_user_text``, ``stream``), ``sim.requests_for(model)``,
``sim.interactions`` (id -> `SimInteraction` copy: status, polls, cancel_called, cancelled,
agent, input_text, report, citations),
``sim.hangups`` (completion requests whose client closed the connection while the answer was
still being waited for: how a test sees that a cancel reached the provider),
``sim.pending(model)``, ``sim.clear()``; ``sim.latency`` can be changed while running.

In-band directives
------------------
Markers in the last user message (or an interaction's input) steer a simulator that runs in
another process, e.g. behind an MCP server under test or in the demo. A scripted step for the
model wins over them; they are removed from the text the default answer echoes.

- ``[[sim:fail=429]]`` or ``[[sim:fail=503 upstream overloaded]]``: answer with that error.
- ``[[sim:delay=0.5]]``: wait that many extra seconds first.
- ``[[sim:drop]]``: close the connection without a response.
- ``[[sim:malformed]]``: answer 200 with a body that is not JSON.
- ``[[sim:tool=read_article {"url": "http://..."}]]``: ask for that tool call (repeatable for
  several calls) while the last message is the user's; once tool results are back, answer.
- Interactions only: ``[[sim:polls=N]]`` (in_progress for N polls, then the end status) and
  ``[[sim:status=failed]]`` (the end status: completed by default; also requires_action,
  incomplete, budget_exceeded).

A malformed directive gets a 400 naming it.
"""

from __future__ import annotations

from ._interactions import SimInteraction
from ._server import Simulator, SimulatorURLs
from ._steps import (
    Drop,
    Fail,
    Malformed,
    Reply,
    Responder,
    SimRequest,
    Slow,
    Step,
    ToolCall,
    ToolCalls,
)

__all__ = [
    "Drop",
    "Fail",
    "Malformed",
    "Reply",
    "Responder",
    "SimInteraction",
    "SimRequest",
    "Simulator",
    "SimulatorURLs",
    "Slow",
    "Step",
    "ToolCall",
    "ToolCalls",
]
