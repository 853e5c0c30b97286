"""hypercorn's trio worker for plain sockets, with connections that cannot end the node.

`serve` is hypercorn 0.18's `worker_serve` (hypercorn/trio/run.py) for the insecure sockets of a
config, with two differences in how each accepted connection is served:

- Whatever one connection raises stays in that connection (`Connection.run`): one log line and
  one count (`on_fault`), never the node. hypercorn's `TCPServer.run` catches `OSError` only,
  and 0.18 has a race that raises something else: a client hanging up while its body still
  arrives makes hypercorn send a 400 from the reading task while the task that answered the
  request holds the stream in `send_eof`, and trio's `BusyResourceError` then went through the
  server's nursery and `trio.run` (300 slow bodies hanging up near the body deadline ended the
  node in 3 of 20 trials).
- Each write has a deadline (`WriteDeadline`): a client that does not read its answers (pipelined
  requests it never reads) is closed once one write has waited `write_seconds`. hypercorn's
  keep-alive timer runs only while a connection is idle, and it has no write timeout, so such
  connections were held for ever: two waves of them filled a 1,024-file node.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import Event, RawData
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState, LifespanState
from hypercorn.utils import ShutdownError, raise_shutdown, repr_socket_addr, wrap_app

from ask_another.logs import get_logger

__all__ = ["REASON_HEADER", "Connection", "WriteDeadline", "serve"]

log = get_logger("ask_another.server.http")

REASON_HEADER: Final = "x-ask-another-reason"
"""A response header that a connection moves into its status line's reason phrase (HTTP/1.1),
for a refusal whose reason a client shows: ASGI has no reason phrase, and hypercorn sends none
("HTTP/1.1 429 "), while clients show the status line, not the body."""


class WriteDeadline(trio.abc.HalfCloseableStream):
    """A socket stream whose `send_all` gives up after `seconds`: the connection is then
    closed and the write raises `BrokenResourceError`, which hypercorn takes as a client gone.
    hypercorn shields its writes from cancellation; the deadline here is inside that shield."""

    def __init__(self, stream: trio.SocketStream, seconds: float) -> None:
        self.stream = stream
        self.seconds = seconds

    @property
    def socket(self) -> trio.socket.SocketType:  # read by hypercorn for the peer's address
        return self.stream.socket

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        with trio.move_on_after(self.seconds):
            await self.stream.send_all(data)
            return
        await self.stream.aclose()  # a cancelled send_all leaves the stream unusable
        log.info("http.write_timeout", seconds=self.seconds,
                 reason="the client read nothing of its answers for that long")
        raise trio.BrokenResourceError(f"the client read nothing for {self.seconds:g} s")

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self.stream.send_eof()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.stream.aclose()


class Connection(TCPServer):
    """hypercorn's connection, whose unexpected exceptions end it alone (`on_fault` is told)."""

    def __init__(self, app: Any, config: HypercornConfig, context: WorkerContext,
                 state: LifespanState, stream: trio.SocketStream, *, write_seconds: float,
                 on_fault: Callable[[BaseException], None]) -> None:
        super().__init__(app, config, context, state,
                         WriteDeadline(stream, write_seconds))  # type: ignore[arg-type]
        self.on_fault = on_fault

    async def run(self) -> None:
        try:
            await super().run()  # which closes the stream whatever happens
        except* Exception as group:  # trio.Cancelled (shutdown) is not an Exception: it goes on
            for fault in _leaves(group):
                self.on_fault(fault)

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, RawData) and event.data.startswith(b"HTTP/1.1 "):
            event = RawData(data=with_reason(event.data))
        await super().protocol_send(event)

    async def _close(self) -> None:
        # hypercorn ends the stream (`send_eof`) without its send lock, so a write of another
        # task could meet it: the race above. Taken here, a write comes before or after it (and
        # after, it finds the stream shut: a client gone, which hypercorn handles).
        try:
            async with self.send_lock:
                await super()._close()
        finally:
            await self.stream.aclose()  # closed even if cancelled waiting for the lock


def with_reason(head: bytes) -> bytes:
    """A response's head with its `REASON_HEADER` (if any) moved into the status line."""
    marker = b"\r\n" + REASON_HEADER.encode() + b": "
    at = head.find(marker, 0, head.find(b"\r\n\r\n") + 2)
    if at < 0:
        return head
    line_end = head.index(b"\r\n", at + 2)
    status_end = head.index(b"\r\n")
    version, code = head[:status_end].split(b" ")[:2]
    return (b"%s %s %s" % (version, code, head[at + len(marker):line_end])
            + head[status_end:at] + head[line_end:])


def _leaves(group: BaseExceptionGroup[Exception]) -> list[Exception]:
    found: list[Exception] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


class _OneLine(logging.Filter):
    """Drops the traceback of trio's "accept returned EMFILE" (one a tenth of a second while
    the node is out of files): the line says it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = record.exc_text = None
        return True


def log_fault(exc: BaseException) -> None:
    """The default `on_fault`: one line, without the traceback hypercorn would have printed."""
    log.warning("http.connection_fault", error=type(exc).__name__, detail=str(exc)[:200])


async def serve(app: Any, config: HypercornConfig, *, write_seconds: float,
                shutdown_trigger: Callable[[], Awaitable[None]],
                on_fault: Callable[[BaseException], None] = log_fault,
                task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the ASGI `app` on `config`'s insecure sockets until `shutdown_trigger` returns, as
    `hypercorn.trio.serve` does (lifespan, graceful timeout), with `Connection`s."""
    accepting = logging.getLogger("trio.serve_listeners")
    if not any(isinstance(known, _OneLine) for known in accepting.filters):
        accepting.addFilter(_OneLine())
    wrapped = wrap_app(app, config.wsgi_max_body_size, None)
    lifespan_state: LifespanState = {}
    lifespan = Lifespan(wrapped, config, lifespan_state)
    context = WorkerContext(None)
    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as server_nursery:
            sockets = config.create_sockets()
            listeners = []
            binds = []
            for sock in sockets.insecure_sockets:
                sock.listen(config.backlog)
                listeners.append(trio.SocketListener(trio.socket.from_stdlib_socket(sock)))
                binds.append(f"http://{repr_socket_addr(sock.family, sock.getsockname())}")
            handler = partial(Connection, wrapped, config, context,
                              ConnectionState(lifespan_state.copy()),
                              write_seconds=write_seconds, on_fault=on_fault)
            task_status.started(binds)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(raise_shutdown, shutdown_trigger)
                    nursery.start_soon(partial(trio.serve_listeners, handler, listeners,
                                               handler_nursery=server_nursery))
            except* ShutdownError:
                pass
            finally:
                await context.terminated.set()
                server_nursery.cancel_scope.deadline = (trio.current_time()
                                                        + config.graceful_timeout)
        await lifespan.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()
