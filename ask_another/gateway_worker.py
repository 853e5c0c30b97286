"""Completions in a worker process: litellm's CPU off the server's GIL.

litellm spends 8-12 ms of CPU on every chat completion (building the request, parsing the answer,
pricing it, its logging objects). In the gateway's thread that CPU competes with the trio loop
for the one GIL, so an MCP server answering hundreds of concurrent `completion` calls runs at the
speed of one core shared by the protocol, our runtime and litellm. A worker process runs the same
asyncio code (`gateway.complete`) on the other core; the server only encodes requests and decodes
answers (`python -m bench server`: see docs/server.md for the figures).

The worker is a child process (`python -m ask_another.gateway_worker LEVEL`) that talks to its
parent over its stdin and stdout in length-prefixed msgpack frames:

- parent -> worker: `Call` (one `litellm.acompletion` kwargs dict, the model id) and `Cancel`;
- worker -> parent: `Ready` once litellm is imported (or why it could not be), then per call any
  number of `Delta` (streamed text, in order) and one `Done` or `Failed`.

Cancelling the trio caller sends `Cancel`: the worker cancels the asyncio task, which aborts the
HTTP request. Failures arrive classified (the `ProviderError` subclass's name) with the provider's
message scrubbed of the call's key; the parent scrubs again with every configured key. The worker
ends when its stdin closes (the parent closed it or died). Its stdout is kept for frames only:
anything else printing to it (litellm's banners) goes to stderr, like the server's logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio

from ask_another import errors
from ask_another.errors import ProviderError, ProviderUnavailable
from ask_another.gateway import CompletionResult, classify_failure, complete
from ask_another.logs import (
    configure_logging,
    get_logger,
    quiet_litellm_loggers,
    register_secrets,
    scrub,
    scrub_provider_text,
    silence_litellm,
)

log = get_logger("ask_another.gateway_worker")


class Call(msgspec.Struct, tag="call"):
    id: int
    kwargs: dict[str, Any]
    model: str


class Cancel(msgspec.Struct, tag="cancel"):
    id: int


class Ready(msgspec.Struct, tag="ready"):
    error: str | None = None


class Delta(msgspec.Struct, tag="delta"):
    id: int
    text: str


class Done(msgspec.Struct, tag="done"):
    id: int
    result: CompletionResult


class Failed(msgspec.Struct, tag="failed"):
    id: int
    kind: str  # the name of a ProviderError subclass in ask_another.errors
    message: str
    status: int | None = None


ToWorker = Call | Cancel
FromWorker = Ready | Delta | Done | Failed
_HEADER = 4  # bytes of big-endian frame length


def _frame(encoder: msgspec.msgpack.Encoder, message: msgspec.Struct) -> bytes:
    body = encoder.encode(message)
    return len(body).to_bytes(_HEADER, "big") + body


def _error_class(name: str) -> type[ProviderError]:
    kind = getattr(errors, name, None)
    return kind if isinstance(kind, type) and issubclass(kind, ProviderError) else ProviderError


# ----- the parent's side (trio) ---------------------------------------------------------------

class WorkerStopped(ProviderUnavailable):
    kind = "The gateway worker stopped"


class GatewayWorker:
    """The parent's handle on one worker process. `serve()` runs it; `complete()` uses it."""

    def __init__(self, secrets: list[str], log_level: str = "WARNING") -> None:
        self._secrets = secrets
        self._log_level = log_level
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(FromWorker)
        self._ids = itertools.count(1)
        self._calls: dict[int, trio.MemorySendChannel[FromWorker]] = {}
        self._ready = trio.Event()
        self._go = trio.Event()
        self._import_error: str | None = None
        self._process: trio.Process | None = None
        self._send_lock = trio.Lock()
        self._closing = False
        self._stopped: str | None = None  # why calls can no longer be made

    @property
    def in_flight(self) -> int:
        return len(self._calls)

    @property
    def is_ready(self) -> bool:
        return self._ready.is_set() and self._import_error is None and self._stopped is None

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    def begin(self) -> None:
        """Start the process now (idempotent); otherwise the first call starts it."""
        self._go.set()

    async def serve(self) -> None:
        """Start the worker when asked, then read its frames until it exits.

        Returns when the process ends after `aclose()`; raises `WorkerStopped` if it ends on its
        own (so a supervising actor restarts it), after failing every call in flight.
        """
        await self._go.wait()
        if self._closing:
            return
        self._process = process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "ask_another.gateway_worker", self._log_level],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        try:
            await self._read_frames(process)
        finally:
            self._stopped = self._stopped or "the gateway worker stopped"
            self._ready.set()
            for channel in list(self._calls.values()):
                channel.close()  # each caller raises WorkerStopped
        if not self._closing:
            with trio.CancelScope(shield=True):
                code = await process.wait()
            self._stopped = f"the gateway worker process exited (code {code})"
            log.error("gateway.worker_stopped", code=code)
            raise WorkerStopped(self._stopped)

    async def _read_frames(self, process: trio.Process) -> None:
        assert process.stdout is not None
        buffer = bytearray()
        while data := await process.stdout.receive_some(1 << 16):
            buffer += data
            while len(buffer) >= _HEADER:
                end = _HEADER + int.from_bytes(buffer[:_HEADER], "big")
                if len(buffer) < end:
                    break
                self._dispatch(self._decoder.decode(bytes(buffer[_HEADER:end])))
                del buffer[:end]

    def _dispatch(self, message: FromWorker) -> None:
        if isinstance(message, Ready):
            self._import_error = message.error
            self._ready.set()
            if message.error is None:
                log.info("gateway.worker_ready", pid=self._process.pid if self._process else None)
            return
        channel = self._calls.get(message.id)
        if channel is not None:  # None: the caller gave up (cancelled) meanwhile
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                channel.send_nowait(message)

    async def _send(self, message: msgspec.Struct) -> None:
        process = self._process
        if process is None or process.stdin is None or self._stopped:
            raise WorkerStopped(self._stopped or "the gateway worker is not running")
        async with self._send_lock:
            try:
                await process.stdin.send_all(_frame(self._encoder, message))
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise WorkerStopped("the gateway worker stopped reading") from exc

    async def complete(self, kwargs: dict[str, Any], model: str,
                       on_delta: Callable[[str], Awaitable[None]]) -> CompletionResult:
        """One completion in the worker; raises the same `ProviderError`s as the thread path."""
        self.begin()
        await self._ready.wait()
        if self._stopped:
            raise WorkerStopped(self._stopped)
        if self._import_error is not None:
            raise ProviderUnavailable(f"litellm could not be loaded: {self._import_error}")
        call_id = next(self._ids)
        send, receive = trio.open_memory_channel[FromWorker](math.inf)
        self._calls[call_id] = send
        answered = False
        try:
            await self._send(Call(call_id, kwargs, model))
            async with receive:
                async for message in receive:
                    if isinstance(message, Delta):
                        await on_delta(message.text)
                    elif isinstance(message, Done):
                        answered = True
                        return message.result
                    elif isinstance(message, Failed):
                        answered = True
                        kind = _error_class(message.kind)
                        text = scrub_provider_text(message.message, self._secrets)
                        log.warning("gateway.call_failed", model=model, error=kind.__name__,
                                    status=message.status, message=text)
                        raise kind(text, model=model, status=message.status)
            raise WorkerStopped(self._stopped or "the gateway worker stopped")
        finally:
            del self._calls[call_id]
            if not answered and not self._stopped:
                # Cancelled or timed out: the worker aborts the HTTP request.
                with trio.CancelScope(shield=True), contextlib.suppress(WorkerStopped):
                    await self._send(Cancel(call_id))

    async def aclose(self) -> None:
        """Close the worker's stdin (it cancels its calls and exits); kill it if it lingers."""
        self._closing = True
        self._stopped = self._stopped or "the gateway is shut down"
        self._go.set()
        process = self._process
        if process is None:
            return
        with trio.CancelScope(shield=True):
            if process.stdin is not None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await process.stdin.aclose()
            with trio.move_on_after(10):
                await process.wait()
            if process.poll() is None:
                process.kill()
                await process.wait()


# ----- the worker's side (asyncio) ------------------------------------------------------------

async def _worker_main(frames_out: int) -> None:
    loop = asyncio.get_running_loop()
    encoder = msgspec.msgpack.Encoder()
    decoder = msgspec.msgpack.Decoder(ToWorker)
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(0, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(frames_out, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)

    def send(message: msgspec.Struct) -> None:
        if not writer.is_closing():
            writer.write(_frame(encoder, message))

    litellm: Any = None
    try:
        quiet_litellm_loggers()
        import litellm

        silence_litellm(litellm)
        import gc

        gc.freeze()  # litellm's import leaves ~400,000 long-lived objects: see gateway.py
        send(Ready())
    except Exception as exc:
        send(Ready(error=repr(exc)))
        litellm = None
    tasks: dict[int, asyncio.Task[None]] = {}

    known_keys: set[str] = set()

    async def run(call: Call) -> None:
        key = call.kwargs.get("api_key")
        if key and key not in known_keys:  # masked in anything this process logs from now on
            known_keys.add(key)
            register_secrets([key])
        try:
            result = await complete(litellm, call.kwargs, call.model,
                                    lambda text: send(Delta(call.id, text)))
            send(Done(call.id, result))
        except asyncio.CancelledError:
            pass  # the parent cancelled: it expects no answer
        # Messages are scrubbed of every key this process has seen (registered above).
        except ProviderError as exc:  # raised by our own parsing (MalformedResponse)
            send(Failed(call.id, type(exc).__name__, scrub(exc.provider_message), exc.status))
        except Exception as exc:
            kind, message, status = classify_failure(litellm, exc)
            send(Failed(call.id, kind.__name__, message, status))
        finally:
            tasks.pop(call.id, None)

    while True:
        try:
            header = await reader.readexactly(_HEADER)
            message = decoder.decode(await reader.readexactly(int.from_bytes(header, "big")))
        except asyncio.IncompleteReadError:
            break  # stdin closed: the parent is done (or gone)
        if isinstance(message, Cancel):
            task = tasks.get(message.id)
            if task is not None:
                task.cancel()
        elif litellm is None:
            send(Failed(message.id, "ProviderUnavailable", "litellm could not be loaded"))
        else:
            tasks[message.id] = loop.create_task(run(message))
    for task in list(tasks.values()):
        task.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    if litellm is not None:
        from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

        with contextlib.suppress(Exception):
            await close_litellm_async_clients()
    with contextlib.suppress(Exception):
        await writer.drain()
    writer.close()


def main() -> None:
    # Frames go out on a private copy of stdout; fd 1 itself now points at stderr, so a stray
    # print (litellm's banners) cannot corrupt the frame stream.
    frames_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    # Ctrl+C in a terminal reaches the whole process group: the parent shuts down and closes
    # stdin, which ends this process once its calls are cancelled; dying first would only make
    # the parent report a crashed worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_logging(sys.argv[1] if len(sys.argv) > 1 else "WARNING")
    asyncio.run(_worker_main(frames_out))


if __name__ == "__main__":
    main()
