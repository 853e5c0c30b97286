"""The thread transport: litellm in this process, on a long-lived asyncio loop in a thread.

litellm's async API needs asyncio. A daemon thread imports litellm (at `warm()` or the first call)
and then runs an asyncio event loop until the transport closes. Every provider call is a
coroutine submitted to that loop, so hundreds of calls can be in flight at once without a thread
each (trio's thread limiter is 40).

The bridge: a call returns its result to trio through `TrioToken.run_sync_soon`, and streamed
chunks travel the same way, one at a time, to the caller's `on_delta`. When the trio caller is
cancelled (a client cancels the tool call, a timeout fires), the asyncio task is cancelled too, so
the HTTP request is aborted rather than left running.

With litellm in this process its CPU shares the GIL with the trio loop, so this transport
shortens the interpreter's GIL switch interval and freezes litellm's objects out of the cyclic
collector's reach (see `_share_the_gil` and `_thread_main`). The worker-process transport
(_process.py), the default, needs neither in the server's process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import math
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

import trio

from ask_another import tracing
from ask_another.errors import AskAnotherError, ProviderUnavailable
from ask_another.gateway import _litellm
from ask_another.gateway._results import (
    CompletionResult,
    GatewayStatistics,
    InteractionState,
    SearchResult,
)
from ask_another.gateway._spans import completed, provider_span, searched
from ask_another.logs import get_logger

log = get_logger("ask_another.gateway")
T = TypeVar("T")
Deliver = Callable[[Any], None]

SWITCH_INTERVAL = 0.001
"""Seconds a thread may hold the GIL while another waits for it (Python's default: 0.005)."""


def _share_the_gil() -> None:
    """Shorten the interpreter's GIL switch interval to `SWITCH_INTERVAL` (never lengthen it).

    The gateway's thread and the trio loop share one GIL, and litellm spends milliseconds of
    CPU on every request. The trio loop gives the GIL up at every system call and then waits for
    it up to the switch interval each time, so with litellm busy every scheduler pass costs it a
    full interval: `python -m bench research` measured a check_research p99 of 30-46 ms at 1 ms
    against 276-518 ms at the default, with this transport. Process-wide, so set only when the
    thread starts and only ever shortened.
    """
    if sys.getswitchinterval() > SWITCH_INTERVAL:
        sys.setswitchinterval(SWITCH_INTERVAL)


class ThreadTransport:
    """litellm on an asyncio loop in a thread of this process. `serve()` runs it."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        self._secrets = list(secrets)
        self._token: trio.lowlevel.TrioToken | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._litellm: ModuleType | None = None
        self._import_error: BaseException | None = None
        self._ready = trio.Event()
        self._done = trio.Event()
        self._stopped = threading.Event()
        self._go = threading.Event()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._in_flight = 0

    # ----- lifecycle -------------------------------------------------------------------------

    def warm(self) -> None:
        """Import litellm now (in the thread; idempotent, never blocks)."""
        self._go.set()

    async def serve(self) -> None:
        """Start the thread and run until `aclose()`."""
        if self._thread is None and not self._closing:
            self._token = trio.lowlevel.current_trio_token()
            _share_the_gil()
            # A daemon thread: a process that quits while litellm is still importing must not
            # hang.
            self._thread = threading.Thread(target=self._thread_main,
                                            name="ask-another-gateway", daemon=True)
            self._thread.start()
        await self._done.wait()

    @property
    def closed(self) -> bool:
        return self._closing

    async def aclose(self) -> None:
        """Cancel calls still in flight, close litellm's HTTP clients, stop the loop.

        Does not wait for an import still in progress (the daemon thread finishes it alone).
        """
        if self._closing:
            return
        self._closing = True
        self._done.set()
        self._go.set()  # a thread still waiting to import wakes up, sees _closing and leaves
        loop = self._loop
        if self._ready.is_set() and loop is not None and self._litellm is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
            with trio.move_on_after(10), trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._stopped.wait, abandon_on_cancel=True)

    def statistics(self) -> GatewayStatistics:
        """`in_flight`: provider calls running on the asyncio loop right now."""
        ready = self._ready.is_set() and self._litellm is not None
        # Not ready: litellm is being imported in this process's thread.
        return GatewayStatistics(ready=ready, in_flight=self._in_flight, starting=not ready)

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
            self._litellm = _litellm.load()
            _litellm.inline_prelude(self._litellm, loop)
            # litellm leaves about a million long-lived objects behind its import; without this
            # every full collection walks them all and pauses the whole process (trio loop
            # included) for 100-800 ms under load.
            gc.freeze()
        except BaseException as exc:  # reported to callers by _ready_litellm()
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
            loop.run_until_complete(_litellm.close_clients(self._litellm))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
            self._stopped.set()

    def _notify(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the trio loop, soon; silently dropped once trio has finished."""
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(fn, *args)

    async def _ready_litellm(self) -> ModuleType:
        self._go.set()
        await self._ready.wait()
        if self._litellm is None:
            raise ProviderUnavailable(f"litellm could not be loaded: {self._import_error!r}")
        return self._litellm

    # ----- calls -----------------------------------------------------------------------------

    async def complete(self, kwargs: dict[str, Any], model: str,
                       on_delta: Callable[[str], Awaitable[None]]) -> CompletionResult:
        """One completion; raises `ProviderError`s (scrubbed) on failure."""
        traceparent = tracing.traceparent()  # the asyncio thread has no trace of its own

        async def call(litellm: ModuleType, deliver: Deliver) -> CompletionResult:
            with provider_span("chat", model, kwargs, traceparent) as span:
                result = await _litellm.complete(litellm, kwargs, model, deliver)
                completed(span, result)
            return result

        return await self._run(call, model, on_delta)

    async def interact(self, name: str, kwargs: dict[str, Any], model: str) -> InteractionState:
        """One `litellm.interactions` call (acreate, aget, acancel)."""
        traceparent = tracing.traceparent()

        async def call(litellm: ModuleType, _deliver: Deliver) -> InteractionState:
            with provider_span(name, model, kwargs, traceparent):
                return await _litellm.interact(litellm, name, kwargs, model)

        return await self._run(call, model)

    async def search(self, kwargs: dict[str, Any], name: str) -> SearchResult:
        """One `litellm.asearch`."""
        traceparent = tracing.traceparent()

        async def call(litellm: ModuleType, _deliver: Deliver) -> SearchResult:
            with provider_span("search", str(kwargs.get("search_provider")), kwargs,
                               traceparent) as span:
                found = await _litellm.search(litellm, kwargs)
                searched(span, found)
            return found

        return await self._run(call, name)

    async def _run(
        self,
        fn: Callable[[ModuleType, Deliver], Awaitable[T]],
        model: str,
        on_item: Callable[[Any], Awaitable[None]] | None = None,
    ) -> T:
        """Run `fn(litellm, deliver)` on the asyncio loop and return its result to trio.

        `deliver(item)` (called on the asyncio side) hands `item` to `await on_item(item)` on the
        trio side, in order. Cancelling the trio caller cancels the asyncio task.
        """
        litellm = await self._ready_litellm()
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
        try:
            return future.result()
        except AskAnotherError:
            raise
        except Exception as exc:
            kind, message, status = _litellm.classify_failure(litellm, exc, self._secrets)
            raise kind(message, model=model, status=status) from None

    async def _tracked(self, awaitable: Awaitable[T]) -> T:
        # Runs on the asyncio thread; the counter is only touched there.
        self._in_flight += 1
        try:
            return await awaitable
        finally:
            self._in_flight -= 1
