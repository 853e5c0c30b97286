"""What the long-running faces share: opening the runtime, and serving an ASGI app until a signal.

`open_lifespan(config)` opens the runtime for a block, or, when it cannot start (an unusable
`ASK_ANOTHER_HOME`, a database file that is not SQLite), yields an `Unavailable` saying why: the
stdio server still answers `initialize` and fails each tool call with that reason
(server/lifespan.py), while `serve --http` and `ask-another console` exit with it. It imports
neither the MCP SDK nor Starlette, so `ask-another serve` opens the runtime before the SDK's
import: the gateway's worker process then imports litellm (about 1.3 s of CPU) on the other core
while this process imports the SDK (about 0.4 s).

`listen`, `Drain` and `serve_until_stopped` run an ASGI app on hypercorn's trio worker: the
socket is bound first (so `--port 0` has a known port before the app is built), SIGTERM or SIGINT
stops the listener, closes the open GET event streams and lets requests in flight finish for
`ASK_ANOTHER_SHUTDOWN_SECONDS` (the listener ends once none is left); a second Ctrl-C cancels
them. The MCP server over HTTP (server/http.py) and the console served alone (console/_serve.py)
both serve this way, and neither imports the other for it.

`until_signalled(signals, run)` runs a face that ends on its own (the stdio server at the end of
its stdin, the job host when it has lingered) until one of `signals` too: the stdio server ends
in order on SIGTERM and SIGHUP as when its stdin closes (a client ending a session may close
stdin, terminate the server's process group or hang up), so its runtime closes and hands its
jobs back to the home's job host (research/host.py) instead of leaving them to their leases.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

import trio

from ask_another.config import Config
from ask_another.errors import AskAnotherError, ConfigError
from ask_another.home import home_problem
from ask_another.logs import get_logger
from ask_another.runtime import Runtime, open_runtime

__all__ = ["KEEP_ALIVE_SECONDS", "ASGIApp", "Drain", "Scope", "Unavailable", "is_loopback",
           "listen", "open_lifespan", "serve_until_stopped", "until_signalled", "url_host"]

log = get_logger("ask_another.server")
http_log = get_logger("ask_another.server.http")

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

KEEP_ALIVE_SECONDS: Final = 5.0
"""Seconds a connection may take to send its headers, or stay idle between requests. The
console's pages refresh a second sooner (console/_app.py's POLL_SECONDS), so they keep theirs."""


@dataclass(frozen=True)
class Unavailable:
    """What the lifespan holds instead of a `Runtime` when the runtime cannot start: every tool
    call that needs the runtime fails with `error`."""

    error: AskAnotherError


@contextlib.asynccontextmanager
async def open_lifespan(config: Config, *, prewarm_after: float | None = 0,
                        per_session: bool = False) -> AsyncIterator[Runtime | Unavailable]:
    """The runtime for the duration of the block (see `open_runtime`; `per_session` for the
    stdio server), or an `Unavailable`."""
    unusable = home_problem(config.home)  # a few system calls
    if unusable is not None:
        log.error("server.home_unusable", problem=unusable)
        yield Unavailable(ConfigError(unusable))
        return
    async with contextlib.AsyncExitStack() as stack:
        try:
            runtime = await stack.enter_async_context(open_runtime(
                config, prewarm_after=prewarm_after, per_session=per_session))
        except AskAnotherError as exc:  # e.g. a database file that is not SQLite
            log.error("server.runtime_unavailable", error=str(exc))
            yield Unavailable(exc)
            return
        yield runtime


async def until_signalled(signals: tuple[signal.Signals, ...],
                          run: Callable[[], Awaitable[None]]) -> None:
    """Await `run()` until it returns or one of `signals` arrives; then it is cancelled, and
    whatever it opened closes in order (the runtime hands its jobs back). A signal arriving
    while it closes changes nothing: the jobs' release is shielded (research/job.py)."""
    with trio.open_signal_receiver(*signals) as received:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for signum in received:
                    log.info("server.stopping", signal=signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(on_signal)
            await run()
            nursery.cancel_scope.cancel()


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """`host` as it stands in a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def listen(host: str, port: int) -> socket.socket:
    """A bound socket (hypercorn listens on it): bound here so `--port 0` has a known port
    before the app (whose resource URL names it) is built, and a taken port is one line."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        busy = ("; use --port N for another port, or --port 0 for any free one"
                if exc.errno == errno.EADDRINUSE else "")
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{busy}"
                          ) from None
    return sock


class Drain:
    """ASGI middleware that lets `serve_until_stopped` stop gracefully.

    `stop()` cancels the open GET requests (the session event streams: no call's answer travels
    on them, and they would otherwise hold the server open until the deadline); `cancel_calls()`
    cancels the rest (a second Ctrl-C); `calls_finished()` returns once, stopped, none is left."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._streams: set[trio.CancelScope] = set()
        self._calls: set[trio.CancelScope] = set()
        self.stopping = False
        self._no_calls = trio.Event()  # set once stopping with no call in flight

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held = self._streams if scope["method"] == "GET" else self._calls
        with trio.CancelScope() as cancel:
            if self.stopping and held is self._streams:
                cancel.cancel()
            held.add(cancel)
            try:
                await self.app(scope, receive, send)
            finally:
                held.discard(cancel)
                if self.stopping and not self._calls:
                    self._no_calls.set()

    @property
    def calls_in_flight(self) -> int:
        return len(self._calls)

    def stop(self) -> None:
        self.stopping = True
        for cancel in list(self._streams):
            cancel.cancel()
        if not self._calls:
            self._no_calls.set()

    async def calls_finished(self) -> None:
        """Return once stopping and no call is in flight."""
        await self._no_calls.wait()

    def cancel_calls(self) -> None:
        for cancel in list(self._calls):
            cancel.cancel()


async def serve_until_stopped(drain: Drain, sock: socket.socket, config: Config,
                              local_url: str, resource_url: str, auth_described: str,
                              ready: Callable[[], None] | None = None, *,
                              console: str | None = None,
                              on_fault: Callable[[BaseException], None] | None = None) -> None:
    """hypercorn on `sock` until SIGTERM or SIGINT, then the drain (see the module docstring);
    `on_fault` hears of each connection that raised (connections.py; one log line otherwise)."""
    from hypercorn.config import Config as HypercornConfig

    from ask_another.connections import log_fault, serve

    hypercorn = HypercornConfig()
    hypercorn.bind = [f"fd://{sock.detach()}"]
    hypercorn.graceful_timeout = config.shutdown_seconds
    hypercorn.errorlog = logging.getLogger("hypercorn.error")  # through our stderr handler
    hypercorn.accesslog = None
    hypercorn.include_server_header = False
    # Runs from the connection until its headers are complete (and between requests), however
    # slowly bytes trickle in: what ends a client that holds a connection by sending its
    # headers slowly, before any token is known (hypercorn's default, set here so it stays ours).
    hypercorn.keep_alive_timeout = KEEP_ALIVE_SECONDS

    stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signals() -> None:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    if not stop.is_set():
                        http_log.info("http.stopping", signal=name, calls=drain.calls_in_flight,
                                      deadline_seconds=config.shutdown_seconds)
                        drain.stop()
                        stop.set()
                    elif signum == signal.SIGINT:  # Ctrl-C again: a person wants it now
                        http_log.warning("http.cancelling_calls", signal=name,
                                         calls=drain.calls_in_flight)
                        drain.cancel_calls()
                    # A repeated SIGTERM changes nothing: `uv run` forwards the one a service
                    # manager sends to the whole group, so it often arrives twice.

            async def run(task_status: trio.TaskStatus[list[str]]) -> None:
                with trio.CancelScope() as serving:
                    nursery.start_soon(end_when_idle, serving)
                    await serve(drain, hypercorn, write_seconds=config.write_seconds,
                                shutdown_trigger=stop.wait, on_fault=on_fault or log_fault,
                                task_status=task_status)
                nursery.cancel_scope.cancel()  # served and shut down: stop listening for signals

            async def end_when_idle(serving: trio.CancelScope) -> None:
                # hypercorn's own drain waits its whole deadline for a browser's idle keep-alive
                # connections (Chromium's are not closed when it stops): once no call is left in
                # flight there is nothing to wait for, so the listener ends then.
                await drain.calls_finished()
                serving.cancel()

            nursery.start_soon(on_signals)
            await nursery.start(run)
            # `console`: where a person opens the console served beside the MCP endpoint.
            http_log.info("http.listening", url=local_url, resource=resource_url,
                          auth=auth_described, **({"console": console} if console else {}))
            if ready is not None:
                ready()
    http_log.info("http.stopped")
