"""`Gateway`: every provider call ask-another makes (completions, Gemini interactions, web
search), over one of two transports.

The gateway validates a call, builds litellm's arguments (the model's key and API base, no
retries: the client decides) and enforces its deadline; a `Transport` carries it to litellm:

- `ProcessTransport` (_process.py, the default): litellm in a worker process, started warm and
  gone after an idle time, so the server process never imports litellm;
- `ThreadTransport` (_thread.py): litellm on an asyncio loop in a thread of this process.

Both run the same litellm-facing code (_litellm.py) and raise the same typed `ProviderError`s,
their messages scrubbed of every API key. `open_runtime` picks the transport (runtime.py).

`GatewayActor` owns a gateway under the runtime's supervisor: it builds the transport in `init`,
runs it (a transport that dies, such as a killed worker, crashes the actor, and the supervisor
starts a new gateway), warms it after `prewarm_after` seconds, hands out the `Gateway`
(`call(GetGateway())`) and closes it in `terminate`. Calls do not pass through its mailbox: they
go straight to the handle, so hundreds run at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from ask_another.catalog import unknown_provider
from ask_another.config import ModelEntry, SearchEntry, is_research_agent, no_chat_call
from ask_another.errors import (
    ConfigError,
    InvalidArgument,
    ProviderError,
    ProviderTimeout,
    ProviderUnreachable,
)
from ask_another.gateway._results import (
    CompletionResult,
    GatewayStatistics,
    InteractionState,
    SearchResult,
)
from ask_another.logs import StreamScrubber, get_logger, scrub_answer
from supervisors import Actor, Caller, ExitReason

log = get_logger("ask_another.gateway")


class Transport(Protocol):
    """What carries a gateway's calls to litellm (`ThreadTransport`, `ProcessTransport`).

    `serve()` runs the transport until `aclose()` and raises if it dies on its own; `warm()`
    starts loading litellm now (idempotent, never blocks; otherwise the first call does).
    `complete()`, `interact()` and `search()` raise only `ProviderError`s (scrubbed of keys) and are
    cancellable: cancelling the caller aborts the HTTP request.
    """

    @property
    def closed(self) -> bool: ...

    def warm(self) -> None: ...

    async def serve(self) -> None: ...

    async def complete(self, kwargs: dict[str, Any], model: str,
                       on_delta: Callable[[str], Awaitable[None]]) -> CompletionResult: ...

    async def interact(self, name: str, kwargs: dict[str, Any],
                       model: str) -> InteractionState: ...

    async def search(self, kwargs: dict[str, Any], name: str) -> SearchResult: ...

    async def aclose(self) -> None: ...

    def statistics(self) -> GatewayStatistics: ...


def _credentials(entry: ModelEntry) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if entry.api_key:
        kwargs["api_key"] = entry.api_key.reveal()
    if entry.api_base:
        kwargs["api_base"] = entry.api_base
    return kwargs


class Gateway:
    """Provider calls over a transport. Made by `open_gateway()` or `GatewayActor`.

    Calls are independent: they are never serialized through one queue, so many can be in flight.
    """

    def __init__(self, transport: Transport, secrets: Sequence[str] = ()) -> None:
        self._transport = transport
        self._secrets = list(secrets)
        self._providers: frozenset[str] | None = None  # litellm's, read at the first call

    async def _refuse_unknown_provider(self, entry: ModelEntry) -> None:
        """`ConfigError` in doctor's words for a provider litellm does not know (a misspelled
        `openai`), before the call reaches a worker: litellm's own answer is a raw "LLM Provider
        NOT provided ... E.g. For 'Huggingface'", after the worker's start. The providers are
        read once from litellm's data files (about 0.2 s, in a thread)."""
        if self._providers is None:
            from ask_another.catalog import known_providers, model_map

            self._providers = await trio.to_thread.run_sync(
                lambda: known_providers(model_map()))
        problem = unknown_provider(entry, self._providers)
        if problem is not None:
            raise ConfigError(problem)

    @property
    def closed(self) -> bool:
        return self._transport.closed

    def warm(self) -> None:
        """Load litellm now where the calls run (idempotent, never blocks)."""
        self._transport.warm()

    async def serve(self) -> None:
        """Run the transport until `aclose()`; raises if it dies on its own."""
        await self._transport.serve()

    async def aclose(self) -> None:
        """Cancel the calls in flight and stop the transport."""
        await self._transport.aclose()

    def statistics(self) -> GatewayStatistics:
        return self._transport.statistics()

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
        if is_research_agent(entry.model):  # completion, consensus, discuss, a pipeline's turn
            raise InvalidArgument(no_chat_call(entry.model), hint="run_research")
        if isinstance(temperature, bool) or (temperature is not None
                                             and not 0.0 <= temperature <= 2.0):
            # `True` is an int to Python and would be sent as 1.
            raise InvalidArgument(f"temperature must be a number between 0.0 and 2.0, got "
                                  f"{temperature!r}")
        if not timeout > 0:
            raise InvalidArgument(f"timeout must be a positive number of seconds, got {timeout}")
        await self._refuse_unknown_provider(entry)
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
            **_credentials(entry),
        }
        if temperature is not None:
            kwargs["temperature"] = temperature
        if tools:
            kwargs["tools"] = tools
        if streaming:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        kwargs.update(extra or {})

        # A provider may echo the key it was called with (or its base64) in its answer: the
        # text is scrubbed before anyone sees it, streamed chunks included.
        scrubber = StreamScrubber(self._secrets)

        async def forward(text: str) -> None:
            if on_delta is not None and (safe := scrubber.feed(text)):
                await on_delta(safe)

        try:
            # litellm's own timeout covers the HTTP exchange; this deadline also covers a stream
            # that keeps trickling and the time spent waiting for the transport.
            with trio.fail_after(timeout):
                result = await self._transport.complete(kwargs, entry.model, forward)
            if on_delta is not None and (rest := scrubber.flush()):
                await on_delta(rest)
            return _scrubbed(result, self._secrets)
        except trio.TooSlowError:
            raise ProviderTimeout(f"no complete answer within {timeout:g} seconds",
                                  model=entry.model) from None
        except ProviderError as exc:
            raise _failure(exc, kwargs) from None

    async def interaction(self, entry: ModelEntry, name: str, **kwargs: Any) -> InteractionState:
        """One Gemini interactions call with `entry`'s key and API base: `name` is acreate
        (`agent=`, `input=`, `background=`), aget or acancel (`interaction_id=`). Raises
        `ProviderError`s; cancellation aborts the HTTP request."""
        call = {**kwargs, **_credentials(entry)}
        try:
            return await self._transport.interact(name, call, entry.model)
        except ProviderError as exc:
            raise _failure(exc, call) from None


    async def search(
        self,
        entry: SearchEntry,
        query: str,
        *,
        max_results: int = 8,
        timeout: float = 30.0,  # noqa: ASYNC109 - forwarded to litellm as well as enforced here
    ) -> SearchResult:
        """One web search with `entry`'s engine (`litellm.asearch`).

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
        try:
            with trio.fail_after(timeout):
                return await self._transport.search(kwargs, name)
        except trio.TooSlowError:
            raise ProviderTimeout(f"no search results within {timeout:g} seconds",
                                  model=name) from None
        except ProviderError as exc:
            raise _failure(exc, kwargs) from None


def _scrubbed(result: CompletionResult, secrets: Sequence[str]) -> CompletionResult:
    calls = tuple(dataclasses.replace(c, arguments=scrub_answer(c.arguments, secrets))
                  for c in result.tool_calls)
    return dataclasses.replace(result, text=scrub_answer(result.text, secrets), tool_calls=calls)


def _failure(exc: ProviderError, kwargs: dict[str, Any]) -> ProviderError:
    """`exc`, naming the URL that was tried when no connection could be made to it."""
    base = kwargs.get("api_base")
    if isinstance(exc, ProviderUnreachable) and base:
        exc = ProviderUnreachable(f"{exc.provider_message} (tried {base})", model=exc.model)
    _log_failure(exc)
    return exc


def _log_failure(exc: ProviderError) -> None:
    log.warning("gateway.call_failed", model=exc.model, error=type(exc).__name__,
                status=exc.status, message=exc.provider_message)


@contextlib.asynccontextmanager
async def open_gateway(transport: Transport, secrets: Sequence[str] = (), *,
                       warm: bool = True) -> AsyncIterator[Gateway]:
    """A running gateway over `transport` for the duration of the block; `secrets` are
    scrubbed from every answer (the transport scrubs its failures with its own).

    With `warm`, litellm starts loading at once; otherwise at `warm()` or the first call.
    """
    gateway = Gateway(transport, secrets)
    if warm:
        gateway.warm()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(gateway.serve)
        try:
            yield gateway
        finally:
            await gateway.aclose()


@dataclass(frozen=True, slots=True)
class GetGateway:
    """Ask a `GatewayActor` for its `Gateway` handle."""


class GatewayActor(Actor):
    """Owns a `Gateway` under a supervisor.

    `init(transport, secrets, prewarm_after)`: `transport()` builds a fresh `Transport` (a
    restart gets a new one); `secrets` are scrubbed from answers; litellm starts loading
    `prewarm_after` seconds later (0: at once, None: at the first call). `call(GetGateway())`
    returns the handle.
    """

    gateway: Gateway

    async def init(self, transport: Callable[[], Transport], secrets: Sequence[str] = (),
                   prewarm_after: float | None = 0) -> None:
        self.gateway = Gateway(transport(), secrets)
        if prewarm_after == 0:
            self.gateway.warm()
        # Dies with the transport (a killed worker): the supervisor starts a new gateway.
        self.start_task(self.gateway.serve)
        if prewarm_after:
            self.start_task(self._prewarm, prewarm_after)

    async def _prewarm(self, delay: float) -> None:
        await trio.sleep(delay)
        self.gateway.warm()

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if isinstance(msg, GetGateway):
            return self.gateway
        return await super().handle_call(msg, caller)

    async def terminate(self, reason: ExitReason) -> None:
        await self.gateway.aclose()
