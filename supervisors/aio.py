"""`open_guest`: trio code, supervisors and all, inside a running asyncio program.

Everything in `supervisors` is trio. An asyncio host (an agent framework, a web app) gets it
through trio's guest mode (`trio.lowlevel.start_guest_run`): trio's scheduler runs on the host's
own loop, in the host's thread, its ticks as loop callbacks; only trio's wait for I/O runs in
trio's cached helper thread (that is how guest mode sleeps), so no call crosses a thread.

    async def main() -> None:
        async with supervisors.aio.open_guest(open_supervisor, [child_spec(Agent)]) as guest:
            sup = guest.value                        # what the trio context manager yielded
            await guest.call(sup.which_children)     # asyncio -> trio
            ...

    asyncio.run(main())

Two directions, both in the one thread:

- `Guest.call(fn, *args)` from asyncio runs `fn` as a task of the guest run (handed over with the
  run's `TrioToken`) and awaits an asyncio future the task resolves. Its exception arrives as
  itself. Cancelling the awaiting asyncio task cancels the trio task's scope and waits for it
  to end; a trio-side cancellation (the guest closing) reaches the caller as
  `asyncio.CancelledError`.
- `run_on_host(fn, *args)` from trio code of the guest run runs the coroutine `fn(*args)` as an
  asyncio task on the host's loop and awaits it through a trio Event. A trio cancellation
  cancels the asyncio task (it sees `asyncio.CancelledError`) and waits for it to end. The task
  runs in a copy of the asyncio context of the `Guest.call` that led to it (the host's
  contextvars: its tracing spans), or of the `open_guest` caller.

One guest run per thread (trio's rule, so one per loop). Leaving the block ends the trio
context manager in order, also when the block is left because the loop is shutting down
(`asyncio.run` cancelling its tasks): the exit waits for trio to finish, then raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Generic, ParamSpec, TypeVar, final

import outcome
import sniffio
import trio

__all__ = ["Guest", "GuestError", "HostCancelled", "open_guest", "run_on_host"]

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")


class GuestError(RuntimeError):
    """The guest bridge was used from the wrong side, or after its run ended."""


@final
class _Host:
    """What trio code of a guest run needs to reach its host: the loop and the asyncio context
    the run was opened in."""

    def __init__(self, loop: asyncio.AbstractEventLoop, context: contextvars.Context) -> None:
        self.loop = loop
        self.context = context


_HOST: Final = trio.lowlevel.RunVar[_Host]("supervisors.aio.host")
# The asyncio context of the `Guest.call` a trio task serves (inherited by the tasks it starts),
# so the host coroutines it leads to see the caller's contextvars.
_CALLER_CONTEXT: Final = contextvars.ContextVar[contextvars.Context | None](
    "supervisors.aio.caller_context", default=None)


@final
class Guest(Generic[T]):
    """A guest run on the host's loop and the value its context manager yielded. Made by
    `open_guest`; its methods are called from asyncio code on that loop."""

    def __init__(self, value: T, token: trio.lowlevel.TrioToken, nursery: trio.Nursery,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.value = value
        self._token = token
        self._nursery = nursery
        self._loop = loop

    async def call(self, fn: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run `await fn(*args, **kwargs)` under trio and return its result (see the module
        docstring for exceptions and cancellation)."""
        _check_asyncio("Guest.call")
        done: asyncio.Future[outcome.Outcome[R]] = self._loop.create_future()
        scope = trio.CancelScope()
        context = contextvars.copy_context()
        self.call_soon(self._nursery.start_soon, _serve, done, scope, context,
                       lambda: fn(*args, **kwargs))
        try:
            result = await asyncio.shield(done)
        except asyncio.CancelledError:
            if not done.done():
                self.call_soon(scope.cancel)
                await _wait_out(done)
            raise
        return result.unwrap()

    def call_soon(self, fn: Callable[..., object], *args: object) -> None:
        """Run the synchronous trio function `fn(*args)` at the guest's next tick, without
        waiting (e.g. `CancelScope.cancel`); safe from any asyncio code."""
        try:
            self._token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            raise GuestError("the trio guest run has ended: the block that opened it was "
                             "left") from None


async def _serve(done: asyncio.Future[outcome.Outcome[R]], scope: trio.CancelScope,
                 context: contextvars.Context, call: Callable[[], Awaitable[R]]) -> None:
    _CALLER_CONTEXT.set(context)
    # What a caller cancelled meanwhile (the scope caught it) is told; it waits for this end.
    result: outcome.Outcome[R] = outcome.Error(asyncio.CancelledError())
    try:
        with scope:
            result = outcome.Value(await call())
    except trio.Cancelled:
        if not done.done():
            done.cancel()  # the guest is closing: the caller sees asyncio.CancelledError
        raise
    except Exception as exc:
        result = outcome.Error(exc)
    except BaseException:
        if not done.done():
            done.cancel()
        raise
    if not done.done():
        done.set_result(result)


async def _wait_out(future: asyncio.Future[Any]) -> None:
    """Wait for `future` however often the waiting task is cancelled meanwhile: a cancelled
    call still ends its trio side before the caller goes on."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(future)


async def run_on_host(fn: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
    """From trio code of a guest run: run the asyncio coroutine `fn(*args, **kwargs)` on the
    host's loop and return its result (see the module docstring)."""
    try:
        host = _HOST.get()
    except LookupError:
        raise GuestError("run_on_host runs asyncio code from a trio guest run started by "
                         "supervisors.aio.open_guest; this trio run has no asyncio host"
                         ) from None
    awaitable = fn(*args, **kwargs)
    if not inspect.isawaitable(awaitable):
        raise TypeError(f"{_name(fn)} returned {type(awaitable).__name__}, not a coroutine: "
                        f"the asyncio face awaits it on the host's loop, so make it `async def`")
    caller = _CALLER_CONTEXT.get()
    task = host.loop.create_task(_awaited(awaitable),
                                 context=(caller or host.context).copy())
    token = trio.lowlevel.current_trio_token()
    finished = trio.Event()
    task.add_done_callback(lambda _: token.run_sync_soon(finished.set))
    try:
        await finished.wait()
    except trio.Cancelled:
        task.cancel()
        with trio.CancelScope(shield=True):
            await finished.wait()
        raise
    if task.cancelled():
        raise HostCancelled(f"the asyncio task running {_name(fn)} was cancelled on the host "
                            f"(the loop shutting down, or the host's own cancel)")
    return task.result()


class HostCancelled(Exception):
    """A host coroutine awaited by trio code was cancelled by the host itself (an
    `Exception`, so trio code handles it as a failure of that call rather than a crash)."""


async def _awaited(awaitable: Awaitable[R]) -> R:
    return await awaitable


def _name(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _check_asyncio(what: str) -> None:
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = None
    if library != "asyncio":
        raise GuestError(f"{what} is called from asyncio code on the loop the guest runs on; "
                         f"this is {library or 'no async library'}: under trio, call the "
                         f"trio API directly")


@contextlib.asynccontextmanager
async def open_guest(open_cm: Callable[P, AbstractAsyncContextManager[T]],
                     *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[Guest[T]]:
    """Start a trio guest run on the running asyncio loop, enter `open_cm(*args, **kwargs)` (a
    trio async context manager) there and yield a `Guest` holding its value. Leaving the block
    exits that context manager in order and waits for the run to end. An exception of its
    start or end is raised here as itself."""
    _check_asyncio("open_guest")
    loop = asyncio.get_running_loop()
    started: asyncio.Future[Guest[T]] = loop.create_future()
    ended: asyncio.Future[outcome.Outcome[None]] = loop.create_future()
    stop = trio.Event()
    host = _Host(loop, contextvars.copy_context())

    async def guest_main() -> None:
        _HOST.set(host)
        async with open_cm(*args, **kwargs) as value, trio.open_nursery() as calls:
            started.set_result(Guest(value, trio.lowlevel.current_trio_token(), calls, loop))
            await stop.wait()
            calls.cancel_scope.cancel()  # calls still running end as CancelledError

    def on_done(result: outcome.Outcome[None]) -> None:
        if not ended.done():
            ended.set_result(result)

    try:
        trio.lowlevel.start_guest_run(
            guest_main, run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon, done_callback=on_done,
            host_uses_signal_set_wakeup_fd=True, strict_exception_groups=True)
    except RuntimeError as exc:
        if "inside a run" not in str(exc):
            raise
        raise GuestError("a trio run is already going on in this thread (one guest per "
                         "asyncio loop): share the one already open") from None
    settled: asyncio.Future[None] = loop.create_future()  # started, or ended before starting

    def settle(_: object) -> None:
        if not settled.done():
            settled.set_result(None)

    started.add_done_callback(settle)
    ended.add_done_callback(settle)
    try:
        await asyncio.shield(settled)
    except asyncio.CancelledError:  # cancelled while starting: end what started, then go
        await _wait_out(settled)
        if started.done():
            await _stop(started.result(), stop, ended)
        raise
    if not started.done():  # the start failed: its own exception, not a group around it
        _raise_single(ended.result())
    guest = started.result()
    try:
        yield guest
    finally:
        await _stop(guest, stop, ended)
        _raise_single(ended.result())


async def _stop(guest: Guest[Any], stop: trio.Event,
                ended: asyncio.Future[outcome.Outcome[None]]) -> None:
    with contextlib.suppress(GuestError):  # the run ended on its own already
        guest.call_soon(stop.set)
    await _wait_out(ended)


def _raise_single(result: outcome.Outcome[None]) -> None:
    """Unwrap the run's outcome, raising a lone exception rather than the groups around it."""
    if isinstance(result, outcome.Error):
        error = result.error
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        raise error
    result.unwrap()
