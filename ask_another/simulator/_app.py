"""The simulator's HTTP face: a Starlette app that records each request and answers it.

Order of decision for a chat completion: a scripted step for the model, else an in-band
directive in the last user message, else the default deterministic answer.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import _openai, _responses
from ._directives import parse_directives, strip_directives
from ._interactions import Interactions, InteractionScript
from ._pipeline import pipeline_step
from ._steps import Drop, Fail, Malformed, Reply, Scripts, SimRequest, Slow, Step, ToolCalls

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_SEND_KEY = "ask_another.simulator.send"
_DEFAULT_INTERACTION = InteractionScript(statuses=("in_progress", "in_progress", "completed"))
_RESEARCH_WORDS = ("research", "sonar")
SEARCH_MODEL = "search"
"""The `SimRequest.model` of a web search: `sim.script("search", [Fail(503)])` fails the next."""


def search_hits(base_url: str, query: str, count: int) -> list[dict[str, str]]:
    """The simulated results of a web search for `query`: pages on the simulator itself."""
    slug = "-".join("".join(c if c.isalnum() else " " for c in query.lower()).split()[:8])
    topic = " ".join(query.split())[:80] or "the query"
    return [{"title": f"Simulated source {i} on {topic}",
             "url": f"{base_url}/sources/search/{slug or 'query'}/{i}",
             "content": f"A simulated page about {topic} (result {i}); it holds no real "
                        "information."} for i in range(1, count + 1)]


class SimulatorState:
    """Everything the simulator remembers; shared by the server thread and the test thread."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.base_url = ""
        self.scripts = Scripts()
        self.interactions = Interactions()
        self._lock = threading.Lock()
        self._requests: list[SimRequest] = []
        self._hangups: list[SimRequest] = []
        self._ids = itertools.count(1)

    def record(self, request: SimRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def requests(self) -> list[SimRequest]:
        with self._lock:
            return list(self._requests)

    def hung_up(self, request: SimRequest) -> None:
        with self._lock:
            self._hangups.append(request)

    def hangups(self) -> list[SimRequest]:
        with self._lock:
            return list(self._hangups)

    def next_id(self) -> int:
        return next(self._ids)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._hangups.clear()
        self.scripts.clear()
        self.interactions.clear()


def build_app(state: SimulatorState) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """The ASGI app. It keeps the server's own ``send`` in the scope so `Drop` can reach the
    connection and close it without a response, which plain ASGI cannot express."""

    async def chat_completions(request: Request) -> Response:
        return await completion_like(request, "chat")

    async def responses(request: Request) -> Response:
        return await completion_like(request, "responses")

    async def completion_like(request: Request, api: str) -> Response:
        sim_request = await _record(state, request)
        if sim_request is None:
            return _bad_json()
        step = state.scripts.next_for(sim_request)
        delay = state.latency
        if step is None:
            directives = parse_directives(sim_request.last_user_text)
            delay += directives.delay
            step = directives.step
            if isinstance(step, ToolCalls) and _last_role(sim_request) != "user":
                # The tool results are back: answer, so an agent loop ends.
                step = None
            if directives.errors:
                step = Fail(400, "bad simulator directive: " + "; ".join(directives.errors))
        if delay > 0 and not await _wait_for_client(state, request, sim_request, delay):
            return _NoResponse()
        step = step or _default_step(state, sim_request)
        while isinstance(step, Slow):
            if not await _wait_for_client(state, request, sim_request, step.seconds):
                return _NoResponse()
            step = step.then or _default_step(state, sim_request)
        return await _answer(state, request, sim_request, step, api)

    async def create_interaction(request: Request) -> Response:
        sim_request = await _record(state, request)
        if sim_request is None:
            return _bad_json()
        input_text = sim_request.last_user_text
        directives = parse_directives(input_text)
        delay = state.latency + directives.delay
        step = _interaction_step(state, sim_request)
        if step is None and directives.errors:
            step = Fail(400, "bad simulator directive: " + "; ".join(directives.errors))
        if step is None and not isinstance(directives.step, ToolCalls):
            step = directives.step
        if delay > 0:
            await asyncio.sleep(delay)
        step = await _settle(step)
        if step is not None:
            return await _answer(state, request, sim_request, step, "gemini")
        default = _DEFAULT_INTERACTION
        if directives.polls is not None or directives.end_status is not None:
            polls = max(0, directives.polls if directives.polls is not None else 2)
            end = directives.end_status or "completed"
            default = InteractionScript(statuses=("in_progress",) * polls + (end,))
        try:
            item = state.interactions.create(
                sim_request.model or "unknown-agent",
                strip_directives(input_text),
                default,
                state.base_url,
            )
        except ValueError as exc:
            return await _answer(state, request, sim_request, Fail(400, str(exc)), "gemini")
        if item.answer_when is not None:
            await asyncio.to_thread(item.answer_when.wait, 60)
        return JSONResponse(item.body(_legacy(sim_request)))

    async def get_interaction(request: Request) -> Response:
        interaction_id = request.path_params["interaction_id"]
        sim_request = await _record(state, request, state.interactions.agent_of(interaction_id))
        assert sim_request is not None  # a GET has no body to be malformed
        step = _interaction_step(state, sim_request)
        if state.latency > 0:
            await asyncio.sleep(state.latency)
        step = await _settle(step)
        if step is not None:
            return await _answer(state, request, sim_request, step, "gemini")
        item = state.interactions.poll(interaction_id)
        if item is None:
            return _not_found(interaction_id)
        return JSONResponse(item.body(_legacy(sim_request)))

    async def cancel_interaction(request: Request) -> Response:
        interaction_id = request.path_params["interaction_id"]
        sim_request = await _record(state, request, state.interactions.agent_of(interaction_id))
        step = _interaction_step(state, sim_request) if sim_request is not None else None
        if state.latency > 0:
            await asyncio.sleep(state.latency)
        step = await _settle(step)
        if step is not None and sim_request is not None:
            return await _answer(state, request, sim_request, step, "gemini")
        item = state.interactions.cancel(interaction_id)
        if item is None:
            return _not_found(interaction_id)
        return JSONResponse({"id": item.id, "status": item.status})

    async def source_page(request: Request) -> Response:
        # Cited URLs resolve to a small article, so read_article can be exercised offline.
        path = request.url.path
        return HTMLResponse(
            "<html><head><title>Simulated source</title></head><body><article>"
            f"<h1>Simulated source {path}</h1>"
            "<p>This page is served by the ask-another simulator. It stands in for a web page "
            "that a research report cites, so that reading a cited source works offline.</p>"
            "<p>It contains no real information.</p></article></body></html>"
        )

    async def search(request: Request) -> Response:
        # Tavily's wire format (POST {"query", "max_results"}) and SearXNG's (GET ?q=&format=json):
        # litellm.asearch with search_provider "tavily" or "searxng" and api_base=sim.url.
        if request.method == "GET":
            query = request.query_params.get("q", "")
            sim_request = await _record(state, request, SEARCH_MODEL)
            assert sim_request is not None
            wanted = 10
        else:
            sim_request = await _record(state, request, SEARCH_MODEL)
            if sim_request is None:
                return _bad_json()
            query = str(sim_request.json.get("query") or "")
            wanted = int(sim_request.json.get("max_results") or 5)
        step = await _settle(state.scripts.next_for(sim_request))
        if state.latency > 0:
            await asyncio.sleep(state.latency)
        if step is None:
            directives = parse_directives(query)
            step = directives.step if not isinstance(directives.step, ToolCalls) else None
        if step is not None:
            return await _answer(state, request, sim_request, step, "chat")
        hits = search_hits(state.base_url, strip_directives(query), min(wanted, 5))
        if request.method == "GET":
            return JSONResponse({"query": query, "number_of_results": len(hits), "results": [
                {**hit, "engine": "simulated", "engines": ["simulated"]} for hit in hits]})
        return JSONResponse({"query": query, "answer": None, "images": [], "results": [
            {**hit, "score": round(0.9 - 0.1 * i, 2)} for i, hit in enumerate(hits)],
            "response_time": 0.01})

    async def models(request: Request) -> Response:
        await _record(state, request)
        return JSONResponse({"object": "list", "data": []})

    starlette = Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/responses", responses, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1beta/interactions", create_interaction, methods=["POST"]),
            Route("/v1beta/interactions/{interaction_id}", get_interaction, methods=["GET"]),
            Route(
                "/v1beta/interactions/{interaction_id}/cancel",
                cancel_interaction,
                methods=["POST"],
            ),
            Route("/sources/{rest:path}", source_page, methods=["GET"]),
            Route("/search", search, methods=["GET", "POST"]),
        ]
    )

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[_SEND_KEY] = send
        await starlette(scope, receive, send)

    return app


async def _record(
    state: SimulatorState, request: Request, model: str | None = None
) -> SimRequest | None:
    raw = await request.body()
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        body = None
    headers = {k.lower(): v for k, v in request.headers.items()}
    json_body = body if isinstance(body, dict) else {}
    model = model or json_body.get("model") or json_body.get("agent")
    sim_request = SimRequest(
        method=request.method,
        path=request.url.path,
        model=model if isinstance(model, str) else None,
        json=json_body,
        headers=headers,
    )
    state.record(sim_request)
    return sim_request if isinstance(body, dict) else None


async def _wait_for_client(state: SimulatorState, request: Request, sim_request: SimRequest,
                           seconds: float) -> bool:
    """Sleep `seconds`, unless the client hangs up first: then record the hang-up (`hangups`)
    and return False. The body has been read, so the next ASGI message is the disconnect."""
    sleeper = asyncio.ensure_future(asyncio.sleep(seconds))
    listener = asyncio.ensure_future(request.receive())
    try:
        while True:
            done, _ = await asyncio.wait({sleeper, listener},
                                         return_when=asyncio.FIRST_COMPLETED)
            if sleeper in done:
                return True
            if listener.result().get("type") == "http.disconnect":
                state.hung_up(sim_request)
                return False
            listener = asyncio.ensure_future(request.receive())
    finally:
        for task in (sleeper, listener):
            task.cancel()


def _interaction_step(state: SimulatorState, request: SimRequest) -> Step | None:
    """A scripted step for an interaction request (only failures, drops and delays apply)."""
    step = state.scripts.next_for(request)
    return None if isinstance(step, Reply | ToolCalls) else step


async def _settle(step: Step | None) -> Step | None:
    """Wait out `Slow` steps; what remains is a failure to send, or None to answer normally."""
    while isinstance(step, Slow):
        await asyncio.sleep(step.seconds)
        step = step.then
    return None if isinstance(step, Reply | ToolCalls) else step


def _bad_json() -> Response:
    return JSONResponse(
        _openai.error_body(Fail(400, "We could not parse the JSON body of your request.")),
        status_code=400,
    )


_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _google_error(fail: Fail) -> dict[str, Any]:
    """Google's error envelope, which the Gemini API uses instead of OpenAI's."""
    status = fail.error_type or _GOOGLE_STATUS.get(fail.status, "UNKNOWN")
    return {"error": {"code": fail.status, "message": fail.message, "status": status}}


def _not_found(interaction_id: str) -> Response:
    return JSONResponse(
        {
            "error": {
                "code": 404,
                "message": f"Interaction {interaction_id} not found",
                "status": "NOT_FOUND",
            }
        },
        status_code=404,
    )


def _legacy(request: SimRequest | None) -> bool:
    # Only a client that asks for the older revision gets the older shape (``outputs``).
    revision = request.headers.get("api-revision") if request is not None else None
    return revision is not None and revision < "2026-05-20"


def _last_role(request: SimRequest) -> str | None:
    turns = request.turns
    return turns[-1][0] if turns else None


def _default_step(state: SimulatorState, request: SimRequest) -> Step:
    model = request.model or "simulated"
    pipeline = pipeline_step(request, model, state.base_url)
    if pipeline is not None:
        return pipeline
    if _last_role(request) == "tool":
        results = [text[:100] for role, text in request.turns if role == "tool"]
        return Reply(
            f"[simulated {model}] answer using {len(results)} tool result(s): "
            + " | ".join(results)
        )
    question = strip_directives(request.last_user_text)[:200]
    text = f"[simulated {model}] answer to: {question}"
    if any(word in model.lower() for word in _RESEARCH_WORDS):
        n = state.next_id()
        citations = [f"{state.base_url}/sources/completion-{n}/{i}" for i in (1, 2)]
        return Reply(text + " [1][2]", citations=citations)
    return Reply(text)


async def _answer(
    state: SimulatorState, request: Request, sim_request: SimRequest, step: Step, api: str
) -> Response:
    while isinstance(step, Slow):
        await asyncio.sleep(step.seconds)
        step = step.then or _default_step(state, sim_request)
    match step:
        case Fail() if api == "gemini":
            return JSONResponse(
                _google_error(step), status_code=step.status, headers=_openai.error_headers(step)
            )
        case Fail():
            return JSONResponse(
                _openai.error_body(step),
                status_code=step.status,
                headers=_openai.error_headers(step),
            )
        case Drop():
            if await _drop(request):
                return _NoResponse()
            # The server gave no way to abort the connection: fail it halfway instead.
            raise ConnectionAbortedError("simulated dropped connection")
        case Malformed():
            if sim_request.stream:
                return Response(f"data: {step.body}\n\n", media_type="text/event-stream")
            return Response(step.body, media_type="application/json")
        case Reply() | ToolCalls() if api == "responses":
            response_id = f"resp_sim{state.next_id()}"
            call_base = state.next_id()
            if sim_request.stream:
                return _event_stream(_named_sse(
                    _responses.stream_events(sim_request, step, response_id, call_base)))
            return JSONResponse(_responses.response(sim_request, step, response_id, call_base))
        case Reply() | ToolCalls():
            completion_id = f"chatcmpl-sim{state.next_id()}"
            call_base = state.next_id()
            if sim_request.stream:
                return _event_stream(_sse(
                    _openai.stream_events(sim_request, step, completion_id, call_base)))
            return JSONResponse(_openai.completion(sim_request, step, completion_id, call_base))
    raise TypeError(f"not a simulator step: {step!r}")


def _event_stream(chunks: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(chunks, media_type="text/event-stream",
                             headers={"cache-control": "no-cache"})


async def _sse(events: Any) -> AsyncIterator[bytes]:
    for event in events:
        yield f"data: {event}\n\n".encode()
        # Let each chunk go out on its own, as a real provider's would.
        await asyncio.sleep(0)


async def _named_sse(events: Any) -> AsyncIterator[bytes]:
    for name, data in events:
        yield f"event: {name}\ndata: {data}\n\n".encode()
        await asyncio.sleep(0)


async def _drop(request: Request) -> bool:
    send = request.scope.get(_SEND_KEY)
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        return False
    transport.abort()
    # Let the server see the connection is gone, so it does not answer with a 500 of its own.
    for _ in range(3):
        await asyncio.sleep(0)
    return True


class _NoResponse(Response):
    """Sends nothing: the connection was already aborted."""

    def __init__(self) -> None:
        super().__init__()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        return None
