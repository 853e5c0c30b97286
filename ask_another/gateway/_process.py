"""The worker-process transport: litellm in a child process, so the server never imports it.

litellm costs the process that imports it 200-250 MB and 1.5-3 s, and spends 8-12 ms of CPU on
every chat completion. In a worker process that CPU runs on another core, off the server's GIL,
and the server stays light (the MCP SDK, trio, our code). The worker (`python -m
ask_another.gateway._worker LEVEL`) runs the same litellm-facing code as the thread transport
(_litellm.py) on an asyncio loop, and talks to this side in msgpack frames over its stdin and
stdout (_wire.py).

The worker's life:
- `warm()` (the runtime calls it as it opens) or the first call starts it; it imports litellm at
  once, so the first call does not wait for the import;
- after `idle_exit` seconds with no call in flight, this side closes the worker's stdin and the
  worker exits (its memory goes back to the system); the next call starts a new one;
- if it exits on its own (killed, crashed), every call in flight fails with `WorkerStopped` and
  `serve()` raises it, so the gateway's supervisor restarts the gateway with a new worker;
- `aclose()` closes its stdin and waits (at most 10 s) for it to exit, or kills it at once while
  it still imports litellm (nothing of ours runs in it yet).

Cancelling a caller sends `Cancel`: the worker cancels the asyncio task, which aborts the HTTP
request. Failures arrive classified (the `ProviderError` subclass's name) with the provider's
message scrubbed of the call's key; this side scrubs again with every configured key.

`SharedTransport` (_shared.py) is this transport with `_Worker`'s stdin and stdout replaced by a
connection to the one worker of a home (`_open`, `_end_output`, `_closed`).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
import trio

from ask_another import tracing
from ask_another.errors import ProviderUnavailable
from ask_another.gateway._results import (
    CompletionResult,
    GatewayStatistics,
    InteractionState,
    SearchResult,
)
from ask_another.gateway._wire import (
    HEADER,
    Call,
    Cancel,
    Delta,
    Done,
    Failed,
    FrameTooLarge,
    FromWorker,
    Interact,
    Interacted,
    Ready,
    Search,
    Searched,
    error_class,
    frame,
    frame_size,
)
from ask_another.logs import get_logger, scrub_provider_text

log = get_logger("ask_another.gateway")

WORKER_MODULE = "ask_another.gateway._worker"


class WorkerStopped(ProviderUnavailable):
    kind = "The gateway worker stopped"


class _Retired(Exception):
    """The worker chosen for a call is leaving (idle exit): the call goes to the next one."""


class _Worker:
    """One worker process and the calls in flight in it."""

    def __init__(self, secrets: list[str], log_level: str) -> None:
        self._secrets = secrets
        self._log_level = log_level
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(FromWorker)
        self._ids = itertools.count(1)
        self._calls: dict[int, trio.MemorySendChannel[FromWorker]] = {}
        self._send_lock = trio.Lock()
        self._quiet = trio.Event()  # set when the last call in flight ends
        self._quiet_since = trio.current_time()
        self.ready = trio.Event()
        self.import_error: str | None = None
        self.process: trio.Process | None = None
        self.pid: int | None = None
        self.finished = trio.Event()  # set when `run()` is over
        self._input: trio.abc.ReceiveStream | None = None  # the worker's frames
        self._output: trio.abc.SendStream | None = None  # to the worker
        self.retiring = False  # no new calls: it is leaving because it was idle
        self.stopped: str | None = None  # why calls can no longer be made
        # Once stopped, calls not yet sent go to the next worker (a shared worker's connection:
        # the transport makes the next one); a private worker's end crashes the gateway instead.
        self.replaceable = False

    @property
    def leaving(self) -> bool:
        """No new calls: it is retiring, or it stopped and the next worker takes them."""
        return self.retiring or (self.stopped is not None and self.replaceable)

    @property
    def in_flight(self) -> int:
        return len(self._calls)

    async def run(self, idle_exit: float | None, *, closing: Callable[[], bool]) -> None:
        """Start the process and read its frames until it exits. Returns after an idle exit or
        a close; raises `WorkerStopped` if the process ended on its own, unless `replaceable`."""
        try:
            await self._open()
            if self._input is None:  # closed before it was connected (`_Connection`)
                return
            async with trio.open_nursery() as nursery:
                if idle_exit is not None:
                    nursery.start_soon(self._exit_when_idle, idle_exit)
                await self._read_frames()
                nursery.cancel_scope.cancel()
        finally:
            self.stopped = self.stopped or "the gateway worker stopped"
            self.ready.set()
            for channel in list(self._calls.values()):
                channel.close()  # each caller raises WorkerStopped
            with trio.CancelScope(shield=True):
                code = await self._closed()
            self.finished.set()
        if self.retiring:
            log.info("gateway.worker_idle_exit", pid=self.pid, code=code)
        elif not closing():
            self.stopped = (f"the gateway worker process exited (code {code})" if code is not None
                            else "the shared gateway worker closed the connection")
            log.error("gateway.worker_stopped", code=code)
            # Its calls in flight have failed. This server's own worker crashing crashes the
            # gateway, and its supervisor starts a new one. A shared worker is not this
            # server's: the next call connects again, starting a new one; crashing instead would
            # count each of its ends against this server's restart limit (3 in 5 s), and every
            # server on the home would be ended at once when it died a fourth time.
            if not self.replaceable:
                raise WorkerStopped(self.stopped)

    async def _open(self) -> None:
        self.process = process = await trio.lowlevel.open_process(
            [sys.executable, "-m", WORKER_MODULE, self._log_level],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        assert process.stdin is not None and process.stdout is not None
        self.pid = process.pid
        self._output, self._input = process.stdin, process.stdout

    async def _closed(self) -> int | None:
        """After the frames end: the process's exit code."""
        return None if self.process is None else await self._wait(self.process)

    async def _read_frames(self) -> None:
        assert self._input is not None
        buffer = bytearray()
        while True:
            try:
                data = await self._input.receive_some(1 << 16)
            except trio.BrokenResourceError:  # a shared worker's socket reset: it is gone too
                return
            if not data:
                return
            buffer += data
            while len(buffer) >= HEADER:
                try:
                    end = HEADER + frame_size(bytes(buffer[:HEADER]))
                except FrameTooLarge as exc:  # the worker is broken: treated as gone
                    log.error("gateway.frame_too_large", error=str(exc))
                    return
                if len(buffer) < end:
                    break
                self._dispatch(self._decoder.decode(bytes(buffer[HEADER:end])))
                del buffer[:end]

    def _dispatch(self, message: FromWorker) -> None:
        if isinstance(message, Ready):
            self.import_error = message.error
            self.pid = message.pid or self.pid
            self._quiet_since = trio.current_time()
            self.ready.set()
            if message.error is None:
                log.info("gateway.worker_ready", pid=self.pid)
            return
        channel = self._calls.get(message.id)
        if channel is not None:  # None: the caller gave up (cancelled) meanwhile
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                channel.send_nowait(message)

    async def _exit_when_idle(self, idle_exit: float) -> None:
        await self.ready.wait()
        while True:
            if self._calls:
                await self._quiet.wait()
                continue
            await trio.sleep_until(self._quiet_since + idle_exit)
            if not self._calls and trio.current_time() >= self._quiet_since + idle_exit:
                # No checkpoint between the check and this: a call either got in before (and
                # the worker stays) or sees `retiring` and asks for the next worker.
                self.retiring = True
                await self.close_stdin()
                return

    async def close_stdin(self) -> None:
        """The worker cancels this side's calls (and, over stdin, closes its HTTP clients and
        exits)."""
        if self._output is not None:
            with trio.CancelScope(shield=True), contextlib.suppress(
                    trio.BrokenResourceError, trio.ClosedResourceError):
                async with self._send_lock:
                    await self._end_output(self._output)

    async def _end_output(self, output: trio.abc.SendStream) -> None:
        await output.aclose()

    @staticmethod
    async def _wait(process: trio.Process) -> int:
        with trio.move_on_after(10):
            return await process.wait()
        process.kill()
        return await process.wait()

    async def _send(self, message: msgspec.Struct) -> None:
        output = self._output
        if output is None or self.stopped:
            raise WorkerStopped(self.stopped or "the gateway worker is not running")
        async with self._send_lock:
            try:
                await output.send_all(frame(self._encoder, message))
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise WorkerStopped("the gateway worker stopped reading") from exc

    async def call(self, make: Callable[[int], Call | Interact | Search], model: str,
                   on_delta: Callable[[str], Awaitable[None]] | None) -> Any:
        """Send one call and wait for its answer (a `CompletionResult`, `InteractionState` or
        `SearchResult`).
        Raises `_Retired` if this worker is leaving, or is `replaceable` and stopped, before
        anything is sent."""
        if self.leaving:
            raise _Retired
        if self.stopped:
            raise WorkerStopped(self.stopped)
        if self.import_error is not None:
            raise ProviderUnavailable(f"litellm could not be loaded: {self.import_error}")
        call_id = next(self._ids)
        send, receive = trio.open_memory_channel[FromWorker](math.inf)
        self._calls[call_id] = send
        answered = False
        try:
            try:
                await self._send(make(call_id))
            except WorkerStopped:
                if self.replaceable:  # it died before the call reached it: safe to send again
                    raise _Retired from None
                raise
            async with receive:
                async for message in receive:
                    if isinstance(message, Delta):
                        if on_delta is not None:
                            await on_delta(message.text)
                    elif isinstance(message, Done):
                        answered = True
                        return message.result
                    elif isinstance(message, Interacted):
                        answered = True
                        return message.state
                    elif isinstance(message, Searched):
                        answered = True
                        return message.result
                    elif isinstance(message, Failed):
                        answered = True
                        kind = error_class(message.kind)
                        text = scrub_provider_text(message.message, self._secrets)
                        raise kind(text, model=model, status=message.status)
            raise WorkerStopped(self.stopped or "the gateway worker stopped")
        finally:
            del self._calls[call_id]
            if not self._calls:
                self._quiet_since = trio.current_time()
                self._quiet.set()
                self._quiet = trio.Event()
            if not answered and not self.stopped:
                # Cancelled or timed out: the worker aborts the HTTP request.
                with trio.CancelScope(shield=True), contextlib.suppress(WorkerStopped):
                    await self._send(Cancel(call_id))


class ProcessTransport:
    """litellm in a worker process, started at `warm()` or the first call, gone after
    `idle_exit` seconds without a call (None: never). `serve()` runs it."""

    def __init__(self, secrets: Sequence[str] = (), *, log_level: str = "WARNING",
                 idle_exit: float | None = None) -> None:
        if idle_exit is not None and not idle_exit > 0:
            raise ValueError(f"idle_exit must be a positive number of seconds, got {idle_exit}")
        self._secrets = list(secrets)
        self._log_level = log_level
        self._idle_exit = idle_exit
        self._current: _Worker | None = None
        self._wanted = trio.Event()  # a call or warm() wants a worker
        self._replaced = trio.Event()  # a new worker was installed
        self._closing = False

    def _new_worker(self) -> _Worker:
        return _Worker(self._secrets, self._log_level)

    def warm(self) -> None:
        """Start the worker now if none runs (idempotent, never blocks)."""
        self._wanted.set()

    @property
    def closed(self) -> bool:
        return self._closing

    async def serve(self) -> None:
        """Run a worker whenever one is wanted, until `aclose()`; raises `WorkerStopped` if one
        ends on its own."""
        while True:
            await self._wanted.wait()
            if self._closing:
                return
            self._wanted = trio.Event()
            worker = self._current = self._new_worker()
            self._replaced.set()
            self._replaced = trio.Event()
            try:
                await worker.run(self._idle_exit, closing=lambda: self._closing)
            finally:
                if self._current is worker:
                    self._current = None
            if self._closing:
                return

    async def aclose(self) -> None:
        """Close the worker's stdin (it cancels its calls and exits); kill it if it lingers."""
        self._closing = True
        self._wanted.set()
        self._replaced.set()
        worker = self._current
        if worker is None:
            return
        worker.stopped = worker.stopped or "the gateway is shut down"
        await worker.close_stdin()
        process = worker.process
        if process is None:  # a shared worker's connection: it ends when the worker hangs up
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                await worker.finished.wait()
        else:
            with trio.CancelScope(shield=True):
                if not worker.ready.is_set():
                    # Still importing litellm: no call can have reached it, and it would read
                    # its closed stdin only once the import is done (seconds on a busy machine;
                    # serve --http waited that long on SIGTERM with nothing in flight).
                    process.kill()
                with trio.move_on_after(10):
                    await process.wait()
                if process.poll() is None:
                    process.kill()
                    await process.wait()

    def statistics(self) -> GatewayStatistics:
        worker = self._current
        if worker is None:
            return GatewayStatistics(ready=False, in_flight=0, starting=self._starting(None))
        process = worker.process
        alive = not worker.stopped if process is None else process.returncode is None
        ready = worker.ready.is_set() and worker.import_error is None and not worker.stopped
        return GatewayStatistics(
            ready=ready, in_flight=worker.in_flight, worker_pid=worker.pid if alive else None,
            starting=not ready and self._starting(worker))

    def _starting(self, worker: _Worker | None) -> bool:
        """Whether `worker`, not ready yet, is a process started for these calls: always here."""
        return True

    async def _call(self, make: Callable[[int], Call | Interact | Search], model: str,
                    on_delta: Callable[[str], Awaitable[None]] | None = None) -> Any:
        while True:
            if self._closing:
                raise ProviderUnavailable("the gateway is shut down")
            worker = self._current
            if worker is None or worker.leaving:
                self._wanted.set()
                await self._replaced.wait()
                continue
            await worker.ready.wait()
            try:
                return await worker.call(make, model, on_delta)
            except _Retired:
                continue

    async def complete(self, kwargs: dict[str, Any], model: str,
                       on_delta: Callable[[str], Awaitable[None]]) -> CompletionResult:
        """One completion in the worker; raises the same `ProviderError`s as the thread."""
        traceparent = tracing.traceparent()
        result: CompletionResult = await self._call(
            lambda i: Call(i, kwargs, model, traceparent), model, on_delta)
        return result

    async def interact(self, name: str, kwargs: dict[str, Any], model: str) -> InteractionState:
        """One `litellm.interactions` call (acreate, aget, acancel) in the worker."""
        traceparent = tracing.traceparent()
        state: InteractionState = await self._call(
            lambda i: Interact(i, name, kwargs, model, traceparent), model)
        return state

    async def search(self, kwargs: dict[str, Any], name: str) -> SearchResult:
        """One `litellm.asearch` in the worker."""
        traceparent = tracing.traceparent()
        found: SearchResult = await self._call(lambda i: Search(i, kwargs, traceparent), name)
        return found
