"""The one place that talks to litellm: a long-lived asyncio loop in a thread, bridged to trio.

litellm's async API needs asyncio, and its import costs seconds. The `Gateway` starts one daemon
thread that imports litellm (with `LITELLM_LOCAL_MODEL_COST_MAP=True`, so nothing is fetched) and
then runs an asyncio event loop for as long as the gateway is open. Every provider call is a
coroutine submitted to that loop, so hundreds of calls can be in flight at once without a thread
each (trio's thread limiter is 40).

The bridge: a call returns its result to trio through `TrioToken.run_sync_soon`, and streamed
chunks travel the same way, one at a time, to the caller's `on_delta`. When the trio caller is
cancelled (a client cancels the tool call, a timeout fires), the asyncio task is cancelled too, so
the HTTP request is aborted rather than left running.

`GatewayActor` owns a gateway under the runtime's supervisor: it starts the thread in `init`,
starts the import after a delay, hands out the `Gateway` (`call(GetGateway())`) and closes it in
`terminate`. Calls do not pass through its mailbox: they go straight to the handle, so hundreds
run at once.

Provider failures become typed `ProviderError`s (errors.py) whose messages keep the provider's
own text with every API key scrubbed out. The trio loop never waits on the import: only calls that
need litellm await `ready()`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import email.utils
import gc
import inspect
import math
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from ask_another.config import ModelEntry, SearchEntry
from ask_another.errors import (
    AskAnotherError,
    AuthenticationFailed,
    BadRequest,
    InvalidArgument,
    MalformedResponse,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from ask_another.logs import (
    StreamScrubber,
    get_logger,
    quiet_litellm_loggers,
    scrub_answer,
    scrub_provider_text,
    silence_litellm,
)
from supervisors import Actor, Caller, ExitReason

__all__ = [
    "CompletionResult",
    "Gateway",
    "GatewayActor",
    "GatewayStatistics",
    "GetGateway",
    "SearchHit",
    "SearchResult",
    "ToolCall",
    "Usage",
    "open_gateway",
]

if TYPE_CHECKING:
    from ask_another.gateway_worker import GatewayWorker

log = get_logger("ask_another.gateway")
T = TypeVar("T")
Deliver = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the provider sent it


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None  # None when litellm does not know the model's price

    def describe(self) -> str:
        """A short usage line for people: tokens in/out, and the cost when known."""
        parts = []
        if self.prompt_tokens is not None or self.completion_tokens is not None:
            parts.append(f"{self.prompt_tokens or 0} tokens in, {self.completion_tokens or 0} out")
        if self.cost_usd is not None:
            parts.append(f"${self.cost_usd:.6f}")
        else:
            parts.append("cost unknown")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class CompletionResult:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    tool_calls: tuple[ToolCall, ...] = ()
    citations: tuple[str, ...] = ()
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str = ""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One web search through litellm's search API: the hits, and what the search cost."""

    query: str
    provider: str
    hits: tuple[SearchHit, ...] = ()
    usage: Usage = field(default_factory=Usage)


SWITCH_INTERVAL = 0.001
"""Seconds a thread may hold the GIL while another waits for it (Python's default: 0.005)."""


def _share_the_gil() -> None:
    """Shorten the interpreter's GIL switch interval to `SWITCH_INTERVAL` (never lengthen it).

    The gateway's thread and the trio loop share one GIL, and litellm spends milliseconds of
    CPU on every request (cost calculation, logging, response objects: ~5 ms per Gemini poll
    here). The trio loop gives the GIL up at every system call (each `epoll_wait`, each thread
    hop) and then waits for it up to the switch interval each time, so with litellm busy every
    scheduler pass costs it a full interval, and a request a person is waiting for (a
    `check_research` while a thousand jobs poll) takes hundreds of milliseconds. At 1 ms the
    loop gets the GIL back five times sooner: `python -m bench research` measured a
    check_research p99 of 30-46 ms against 276-518 ms at the default. Process-wide, so set
    only when the gateway starts and only ever shortened: an application that chose a
    shorter interval keeps it.
    """
    if sys.getswitchinterval() > SWITCH_INTERVAL:
        sys.setswitchinterval(SWITCH_INTERVAL)


@dataclass(frozen=True, slots=True)
class GatewayStatistics:
    ready: bool
    in_flight: int
    worker_pid: int | None = None  # the worker process, while one runs


class Gateway:
    """Owns the asyncio thread that runs litellm. Made by `open_gateway()`; use `completion()`.

    Calls are independent: they are never serialized through one queue, so many can be in flight.
    """

    def __init__(self, secrets: Sequence[str] = (), *, worker: bool = False,
                 log_level: str = "WARNING") -> None:
        self._secrets = list(secrets)
        # With a worker process, completions run there (gateway_worker.py); the thread stays for
        # what needs litellm in this process (the model catalog, research providers' own calls).
        self._worker: GatewayWorker | None = None
        if worker:
            from ask_another.gateway_worker import GatewayWorker

            self._worker = GatewayWorker(self._secrets, log_level)
        self._token: trio.lowlevel.TrioToken | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._litellm: ModuleType | None = None
        self._import_error: BaseException | None = None
        self._ready = trio.Event()
        self._stopped = threading.Event()
        self._go = threading.Event()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._in_flight = 0

    # ----- lifecycle -------------------------------------------------------------------------

    def start(self, start_import: bool = True) -> None:
        """Start the thread (returns at once). litellm imports in the background, at once or,
        with `start_import=False`, at `begin_import()` or the first call that needs it.
        """
        if start_import:
            self.begin_import()
        if self._thread is not None:
            return
        self._token = trio.lowlevel.current_trio_token()
        # Must be set before the import: litellm fetches its cost map from the network otherwise.
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        _share_the_gil()
        # A daemon thread: a process that quits while litellm is still importing must not hang.
        self._thread = threading.Thread(target=self._thread_main, name="ask-another-gateway",
                                        daemon=True)
        self._thread.start()

    def begin_import(self) -> None:
        """Let the thread import litellm now, and start the worker process if there is one
        (idempotent, never blocks). The thread's litellm serves what needs it in this process
        (the model catalog, research providers' own calls), so both start together: a first
        `list_models` or research job does not wait for an import either."""
        self._go.set()
        if self._worker is not None:
            self._worker.begin()

    async def serve_worker(self) -> None:
        """Run the worker process (from `begin_import()` or the first completion) until the
        gateway closes; raises if it dies on its own. Run by `GatewayActor` or `open_gateway`."""
        if self._worker is not None:
            await self._worker.serve()

    @property
    def is_ready(self) -> bool:
        """litellm is loaded where completions run (the worker process, or this process)."""
        if self._worker is not None:
            return self._worker.is_ready
        return self._ready.is_set()

    @property
    def closed(self) -> bool:
        return self._closing

    async def ready(self) -> ModuleType:
        """Wait until litellm is imported in this process; return the module. Raises if the
        import failed."""
        self._go.set()
        await self._ready.wait()
        if self._litellm is None:
            raise ProviderUnavailable(f"litellm could not be loaded: {self._import_error!r}")
        return self._litellm

    async def aclose(self) -> None:
        """Cancel calls still in flight, close litellm's HTTP clients, stop the loop.

        Does not wait for an import still in progress (the daemon thread finishes it alone).
        """
        if self._worker is not None:
            await self._worker.aclose()
        if self._thread is None or self._closing:
            return
        self._closing = True
        self._go.set()  # a thread still waiting to import wakes up, sees _closing and leaves
        loop = self._loop
        if self._ready.is_set() and loop is not None and self._litellm is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
            with trio.move_on_after(10), trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._stopped.wait, abandon_on_cancel=True)

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._go.wait()
        if self._closing:
            loop.close()
            self._stopped.set()
            return
        try:
            quiet_litellm_loggers()
            import litellm

            silence_litellm(litellm)
            # litellm leaves about a million long-lived objects behind its import; without this
            # every full collection walks them all and pauses the whole process (trio loop
            # included) for 100-800 ms under load. Frozen objects are never collected, which is
            # right for module-level state that lives as long as the process.
            gc.freeze()
            self._litellm = litellm
        except BaseException as exc:  # reported to callers by ready()
            self._import_error = exc
        self._notify(self._ready.set)
        if self._litellm is None or self._closing:
            loop.close()
            self._stopped.set()
            return
        log.info("gateway.ready")
        try:
            loop.run_forever()
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(self._close_clients())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
            self._stopped.set()

    async def _close_clients(self) -> None:
        from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

        with contextlib.suppress(Exception):
            await close_litellm_async_clients()
        cache = getattr(self._litellm, "in_memory_llm_clients_cache", None)
        # litellm's helper closes only async clients; the cache is process-wide, so it may also
        # hold sync clients (litellm's sync API, used by embedders and tests). Close those too:
        # dropping them open leaves their sockets to the garbage collector.
        for handler in list(getattr(cache, "cache_dict", {}).values()):
            client = getattr(handler, "_client", None) or getattr(handler, "client", None)
            for target in (handler, client):
                close = getattr(target, "close", None)
                if close is not None and not inspect.iscoroutinefunction(close):
                    with contextlib.suppress(Exception):
                        close()
        # The cached clients are bound to this loop, which is about to close: drop them so a later
        # gateway in the same process builds fresh ones on its own loop.
        with contextlib.suppress(Exception):
            cache.flush_cache()  # type: ignore[union-attr]

    def _notify(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the trio loop, soon; silently dropped once trio has finished."""
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(fn, *args)

    # ----- the bridge ------------------------------------------------------------------------

    async def run(
        self,
        fn: Callable[[ModuleType, Deliver], Awaitable[T]],
        on_item: Callable[[Any], Awaitable[None]] | None = None,
    ) -> T:
        """Run `fn(litellm, deliver)` on the asyncio loop and return its result to trio.

        `deliver(item)` (called on the asyncio side) hands `item` to `await on_item(item)` on the
        trio side, in order. Cancelling the trio caller cancels the asyncio task. Exceptions from
        `fn` are re-raised here as they are (see `completion()` for the mapping to our errors).
        """
        litellm = await self.ready()
        if self._closing or self._loop is None:
            raise ProviderUnavailable("the gateway is shut down")
        send, recv = trio.open_memory_channel[Any](math.inf)

        def put(item: Any) -> None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                send.send_nowait(item)

        def deliver(item: Any) -> None:
            self._notify(put, item)

        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(
            self._tracked(fn(litellm, deliver)), self._loop
        )
        future.add_done_callback(lambda _: self._notify(send.close))
        try:
            async with recv:
                async for item in recv:
                    if on_item is not None:
                        await on_item(item)
        except BaseException:
            # Reaches the asyncio task through the future chain: the HTTP request is aborted.
            future.cancel()
            raise
        if future.cancelled():
            raise ProviderUnavailable("the call was cancelled because the gateway is shutting down")
        return future.result()

    async def _tracked(self, awaitable: Awaitable[T]) -> T:
        # Runs on the asyncio thread; the counter is only touched there.
        self._in_flight += 1
        try:
            return await awaitable
        finally:
            self._in_flight -= 1

    def statistics(self) -> GatewayStatistics:
        """`in_flight`: provider calls running on the asyncio loop right now."""
        if self._worker is None:
            return GatewayStatistics(ready=self.is_ready, in_flight=self._in_flight)
        return GatewayStatistics(ready=self.is_ready,
                                 in_flight=self._in_flight + self._worker.in_flight,
                                 worker_pid=self._worker.pid)

    # ----- completion ------------------------------------------------------------------------

    async def completion(
        self,
        entry: ModelEntry,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        system: str | None = None,
        temperature: float | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 - forwarded to litellm as well as enforced here
        tools: list[dict[str, Any]] | None = None,
        stream: bool = False,
        on_delta: Callable[[str], Awaitable[None]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> CompletionResult:
        """One chat completion with `entry`'s model and key.

        Give either `prompt` (with an optional `system`) or full OpenAI-style `messages`.
        `tools` are OpenAI function tools; the result's `tool_calls` holds what the model asked for.
        With `on_delta`, the answer is streamed and each text chunk is awaited in order before the
        result is returned (`stream=True` without `on_delta` streams and just collects).
        Raises `ProviderTimeout` after `timeout` seconds, and the other `ProviderError`s on failure.
        Cancellation aborts the HTTP request.
        """
        if (prompt is None) == (messages is None):
            raise InvalidArgument("give either prompt or messages")
        if isinstance(temperature, bool) or (temperature is not None
                                             and not 0.0 <= temperature <= 2.0):
            # `True` is an int to Python and would be sent as 1.
            raise InvalidArgument(f"temperature must be a number between 0.0 and 2.0, got "
                                  f"{temperature!r}")
        if not timeout > 0:
            raise InvalidArgument(f"timeout must be a positive number of seconds, got {timeout}")
        if messages is None:
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": prompt})
        streaming = stream or on_delta is not None
        kwargs: dict[str, Any] = {
            "model": entry.model,
            "messages": messages,
            "timeout": timeout,
            # Retries would hide a 429 or 500 behind seconds of back-off: the client decides.
            "max_retries": 0,
            "num_retries": 0,
        }
        if entry.api_key:
            kwargs["api_key"] = entry.api_key.reveal()
        if entry.api_base:
            kwargs["api_base"] = entry.api_base
        if temperature is not None:
            kwargs["temperature"] = temperature
        if tools:
            kwargs["tools"] = tools
        if streaming:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        kwargs.update(extra or {})

        async def call(litellm: ModuleType, deliver: Deliver) -> CompletionResult:
            return await complete(litellm, kwargs, entry.model, deliver)

        # A provider may echo the key it was called with (or its base64) in its answer: the
        # text is scrubbed before anyone sees it, streamed chunks included.
        scrubber = StreamScrubber(self._secrets)

        async def forward(text: str) -> None:
            if on_delta is not None and (safe := scrubber.feed(text)):
                await on_delta(safe)

        litellm: ModuleType | None = None
        try:
            # litellm's own timeout covers the HTTP exchange; this deadline also covers a stream
            # that keeps trickling and the time spent waiting in queues.
            if self._worker is not None:
                with trio.fail_after(timeout):
                    result = await self._worker.complete(kwargs, entry.model, forward)
            else:
                litellm = await self.ready()
                with trio.fail_after(timeout):
                    result = await self.run(call, forward)
            if on_delta is not None and (rest := scrubber.flush()):
                await on_delta(rest)
            return _scrubbed(result, self._secrets)
        except trio.TooSlowError:
            raise ProviderTimeout(f"no complete answer within {timeout:g} seconds",
                                  model=entry.model) from None
        except AskAnotherError:
            raise
        except Exception as exc:
            raise self.map_error(litellm, exc, entry.model) from None

    # ----- search ----------------------------------------------------------------------------

    async def search(
        self,
        entry: SearchEntry,
        query: str,
        *,
        max_results: int = 8,
        timeout: float = 30.0,  # noqa: ASYNC109 - forwarded to litellm as well as enforced here
    ) -> SearchResult:
        """One web search with `entry`'s engine (`litellm.asearch`), on the gateway's loop.

        Raises `ProviderTimeout` after `timeout` seconds and the other `ProviderError`s on
        failure (named ``<provider>/search``). The cost is litellm's price per query for the
        provider (None when it has none). Cancellation aborts the HTTP request.
        """
        query = query.strip()
        if not query:
            raise InvalidArgument("the search query is empty")
        kwargs: dict[str, Any] = {"query": query, "search_provider": entry.provider,
                                  "max_results": max_results, "timeout": timeout}
        if entry.api_key:
            kwargs["api_key"] = entry.api_key.reveal()
        if entry.api_base:
            kwargs["api_base"] = entry.api_base
        name = f"{entry.provider}/search"

        async def call(litellm: ModuleType, _deliver: Deliver) -> SearchResult:
            return search_result(litellm, await litellm.asearch(**kwargs), query,
                                 entry.provider)

        litellm: ModuleType | None = None
        try:
            litellm = await self.ready()
            with trio.fail_after(timeout):
                return await self.run(call)
        except trio.TooSlowError:
            raise ProviderTimeout(f"no search results within {timeout:g} seconds",
                                  model=name) from None
        except AskAnotherError:
            raise
        except Exception as exc:
            raise self.map_error(litellm, exc, name) from None

    def map_error(
        self, litellm: ModuleType | None, exc: BaseException, model: str
    ) -> ProviderError:
        """The typed error for a litellm/provider exception, its message scrubbed of keys."""
        kind, message, status = classify_failure(litellm, exc, self._secrets)
        log.warning("gateway.call_failed", model=model, error=kind.__name__, status=status,
                    message=message)
        return kind(message, model=model, status=status)


def _scrubbed(result: CompletionResult, secrets: Sequence[str]) -> CompletionResult:
    calls = tuple(dataclasses.replace(c, arguments=scrub_answer(c.arguments, secrets))
                  for c in result.tool_calls)
    return dataclasses.replace(result, text=scrub_answer(result.text, secrets), tool_calls=calls)


def _classify(litellm: ModuleType, exc: BaseException, status: int | None) -> type[ProviderError]:
    import json

    table: list[tuple[tuple[type[BaseException], ...], type[ProviderError]]] = [
        ((litellm.Timeout,), ProviderTimeout),
        ((litellm.RateLimitError,), RateLimited),
        ((litellm.AuthenticationError, litellm.PermissionDeniedError), AuthenticationFailed),
        ((litellm.APIResponseValidationError, json.JSONDecodeError), MalformedResponse),
        ((litellm.BadRequestError, litellm.NotFoundError, litellm.UnprocessableEntityError),
         BadRequest),
        ((litellm.ServiceUnavailableError, litellm.InternalServerError, litellm.BadGatewayError,
          litellm.APIConnectionError), ProviderUnavailable),
    ]
    undecodable = any(isinstance(e, json.JSONDecodeError) for e in _chain(exc))
    if undecodable or "Expecting value" in str(exc):
        # litellm wraps an unparseable body as a generic API error with status 500.
        return MalformedResponse
    for types_, kind in table:
        if isinstance(exc, types_):
            return kind
    by_status = {408: ProviderTimeout, 429: RateLimited, 401: AuthenticationFailed,
                 403: AuthenticationFailed, 400: BadRequest, 404: BadRequest, 422: BadRequest}
    if status in by_status:
        return by_status[status]
    if status is not None and status >= 500:
        return ProviderUnavailable
    if isinstance(exc, (ValueError, KeyError, TypeError, AttributeError)):
        # litellm's parsers raise these on a body that is not the shape it expects.
        return MalformedResponse
    return ProviderError


async def complete(litellm: ModuleType, kwargs: dict[str, Any], model: str,
                   deliver: Deliver) -> CompletionResult:
    """One `litellm.acompletion(**kwargs)` on an asyncio loop, as a `CompletionResult`.

    Streamed (`kwargs["stream"]`): each text chunk goes to `deliver` as it arrives. Shared by the
    gateway's thread and its worker process (gateway_worker.py).
    """
    if not kwargs.get("stream"):
        response = await litellm.acompletion(**kwargs)
        return _result(litellm, response, model)
    wrapper = await litellm.acompletion(**kwargs)
    chunks = []
    async for chunk in wrapper:
        chunks.append(chunk)
        choices = getattr(chunk, "choices", None) or []
        delta = getattr(choices[0], "delta", None) if choices else None
        text = getattr(delta, "content", None)
        if text:
            deliver(text)
    if not chunks:
        raise MalformedResponse("the stream ended without any chunk", model=model)
    response = litellm.stream_chunk_builder(chunks, messages=kwargs["messages"])
    return _result(litellm, response, model)


def classify_failure(litellm: ModuleType | None, exc: BaseException,
                     secrets: Sequence[str] | None = None
                     ) -> tuple[type[ProviderError], str, int | None]:
    """For a litellm/provider exception: its `ProviderError` class (`ProviderError` itself when
    litellm is not loaded), the provider's message scrubbed of `secrets` (default: the
    registered ones), and the HTTP status if there was one."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    kind = ProviderError if litellm is None else _classify(litellm, exc, status)
    message = scrub_provider_text(_provider_text(exc), secrets)
    if kind is RateLimited and (wait := _retry_after(exc)) is not None:
        message += f" (the provider asks to retry in {wait:g} s)"
    return kind, message, status


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the provider's `Retry-After` header asks to wait (seconds or an HTTP date)."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        raw = headers.get("retry-after") if headers is not None else None
    except Exception:  # a headers object of a shape we do not know: no hint, not a failure
        return None
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, round(seconds, 1)) if math.isfinite(seconds) else None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _provider_text(exc: BaseException) -> str:
    """The provider's own message, without litellm's stacked class-name prefixes."""
    text = str(getattr(exc, "message", None) or exc).strip() or type(exc).__name__
    for _ in range(3):
        head, sep, tail = text.partition(": ")
        prefix = head.startswith("litellm.") or head.endswith(("Error", "Exception", "Timeout"))
        if sep and prefix:
            text = tail.strip()
    # "OpenAIException - <the provider's message>"
    head, sep, tail = text.partition(" - ")
    if sep and head.endswith("Exception") and " " not in head:
        text = tail.strip()
    # Drop litellm's pointer to its own docs and debug hints: noise for the person reading.
    for marker in ("\nReceived Model Group", "LiteLLM Retried:", "\nAvailable Model Group"):
        text = text.split(marker, 1)[0].strip()
    return text  # cut by scrub_provider_text, after the keys are out


def _cost(litellm: ModuleType, response: Any) -> float | None:
    """The call's price in USD, None when litellm does not know the model's price.

    litellm prices every non-streamed response itself (`_hidden_params["response_cost"]`,
    None for an unmapped model); pricing it again costs about a millisecond of the gateway
    thread's CPU per call, most of it searching the model map for a model it has already
    failed to find. Streamed responses, assembled from chunks, are priced here.
    """
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and "response_cost" in hidden:
        known = hidden["response_cost"]
        return float(known) if isinstance(known, int | float) else None
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # unmapped model: the price is unknown, which is not an error
        return None


def _result(litellm: ModuleType, response: Any, model: str) -> CompletionResult:
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise MalformedResponse("the answer had no choices", model=model)
    message = getattr(choices[0], "message", None)
    if message is None:
        raise MalformedResponse("the answer had no message", model=model)
    tool_calls = tuple(
        ToolCall(id=str(tc.id or ""), name=str(tc.function.name or ""),
                 arguments=str(tc.function.arguments or ""))
        for tc in (getattr(message, "tool_calls", None) or [])
    )
    usage_obj = getattr(response, "usage", None)
    cost = _cost(litellm, response)
    usage = Usage(
        prompt_tokens=getattr(usage_obj, "prompt_tokens", None),
        completion_tokens=getattr(usage_obj, "completion_tokens", None),
        cost_usd=cost,
    )
    return CompletionResult(
        text=str(getattr(message, "content", None) or ""),
        model=str(getattr(response, "model", None) or model),
        usage=usage,
        tool_calls=tool_calls,
        citations=_citations(response, message),
        finish_reason=getattr(choices[0], "finish_reason", None),
    )


def search_result(litellm: ModuleType, response: Any, query: str, provider: str
                  ) -> SearchResult:
    """A litellm `SearchResponse` as a `SearchResult`, priced per query from the model map."""
    hits = tuple(
        SearchHit(title=str(getattr(r, "title", "") or getattr(r, "url", "")),
                  url=str(r.url), snippet=str(getattr(r, "snippet", "") or ""))
        for r in getattr(response, "results", None) or [] if getattr(r, "url", None))
    hidden = getattr(response, "_hidden_params", None)
    cost: float | None = None
    if isinstance(hidden, dict) and isinstance(hidden.get("response_cost"), int | float):
        cost = float(hidden["response_cost"])
    else:
        price = (litellm.model_cost.get(f"{provider}/search") or {}).get("input_cost_per_query")
        cost = float(price) if isinstance(price, int | float) else None
    return SearchResult(query=query, provider=provider, hits=hits, usage=Usage(cost_usd=cost))


def _citations(response: Any, message: Any) -> tuple[str, ...]:
    found = [item if isinstance(item, str) else str(item.get("url", item))
             for item in getattr(response, "citations", None) or []]
    for note in getattr(message, "annotations", None) or []:
        citation = note.get("url_citation") if isinstance(note, dict) else getattr(
            note, "url_citation", None)
        url = citation.get("url") if isinstance(citation, dict) else getattr(citation, "url", None)
        if url:
            found.append(str(url))
    return tuple(dict.fromkeys(found))


@contextlib.asynccontextmanager
async def open_gateway(secrets: Sequence[str] = (), *, start_import: bool = True,
                       worker: bool = False) -> AsyncIterator[Gateway]:
    """A running gateway for the duration of the block; litellm imports in the background.

    `secrets` are scrubbed from every provider message. With `start_import=False` the import waits
    for `begin_import()` or the first call. With `worker`, completions run in a worker process.
    """
    gateway = Gateway(secrets, worker=worker)
    gateway.start(start_import)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(gateway.serve_worker)
        try:
            yield gateway
        finally:
            await gateway.aclose()


@dataclass(frozen=True, slots=True)
class GetGateway:
    """Ask a `GatewayActor` for its `Gateway` handle."""


class GatewayActor(Actor):
    """Owns a `Gateway` (its asyncio thread) under a supervisor.

    `init(secrets, prewarm_after, worker, log_level)`: litellm starts importing `prewarm_after`
    seconds later (None: at the first call), in the worker process too with `worker`.
    `call(GetGateway())` returns the handle.
    """

    gateway: Gateway

    async def init(self, secrets: Sequence[str] = (), prewarm_after: float | None = None,
                   worker: bool = False, log_level: str = "WARNING") -> None:
        self.gateway = Gateway(secrets, worker=worker, log_level=log_level)
        self.gateway.start(start_import=prewarm_after == 0)
        if worker:
            # Dies with the worker process: the supervisor restarts the gateway, worker and all.
            self.start_task(self.gateway.serve_worker)
        if prewarm_after:
            self.start_task(self._prewarm, prewarm_after)

    async def _prewarm(self, delay: float) -> None:
        await trio.sleep(delay)
        self.gateway.begin_import()

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if isinstance(msg, GetGateway):
            return self.gateway
        return await super().handle_call(msg, caller)

    async def terminate(self, reason: ExitReason) -> None:
        await self.gateway.aclose()
