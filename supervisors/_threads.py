"""Calls into the runtime from a thread that is not its own.

An actor lives in one trio run, in one thread, and the runtime's state is touched only there
(no locks: a mailbox's parked reader is rescheduled with trio's own primitives). A synchronous
entry point (`cast`, `send`, `kill`, `Caller.reply`) called from a plain thread is handed to
the actor's run with `trio.from_thread.run_sync` and the saved `TrioToken`: the thread blocks
until the runtime has done it, and gets its result or error as if it were local. An awaitable
entry point (`call`, `stop`, `wait`, `spawn`, a supervisor's requests) cannot be handed over
this way, since the caller's task would have to live in the actor's run, and a thread running
a loop of its own (another `trio.run`, asyncio) cannot block for a handover: both raise
`WrongThread`, naming what works. The check is one `threading.get_ident()` per entry.
"""

from __future__ import annotations

from collections.abc import Callable
from threading import get_ident
from typing import TYPE_CHECKING, Any, Final, TypeVar, final

import trio

from ._errors import WrongThread
from ._mailbox import Mailbox

if TYPE_CHECKING:
    from ._exited import Exited
    from ._process import Process

T = TypeVar("T")

@final
class Home:
    """One trio run as its actors see it: its thread, its token, and the closed mailboxes
    exited actors share (one per capacity: an exited actor's ref keeps no mailbox of its
    own, so a crashed actor held by a ref costs a few hundred bytes)."""

    __slots__ = ("_closed", "thread", "token")

    def __init__(self) -> None:
        self.thread = get_ident()
        self.token = trio.lowlevel.current_trio_token()
        self._closed: dict[int, Mailbox] = {}

    def closed_mailbox(self, capacity: int) -> Mailbox:
        mailbox = self._closed.get(capacity)
        if mailbox is None:
            mailbox = self._closed[capacity] = Mailbox(capacity)
            mailbox.close()
        return mailbox


_HOME: Final = trio.lowlevel.RunVar[Home]("supervisors_home")


def home_run() -> Home:
    """The current trio run's `Home` (made at its first actor)."""
    try:
        return _HOME.get()
    except LookupError:
        home = Home()
        _HOME.set(home)
        return home


def hand_over(process: Process | Exited, what: str, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in `process`'s trio run from another thread; its result or error.
    After the run has ended this raises `trio.RunFinishedError` (nothing is left to do it)."""
    try:
        trio.lowlevel.current_task()
    except RuntimeError:  # a plain thread: it may block until the runtime has done it
        return trio.from_thread.run_sync(fn, *args, trio_token=process.home.token)
    raise WrongThread(
        f"{what} was called from a trio run other than the actor's (another thread's "
        "trio.run); from there use trio.to_thread.run_sync(trio.from_thread.run_sync, fn, "
        "*args, trio_token=token), with the actor's run's trio.lowlevel.current_trio_token()"
    )


def in_trio_run() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


def refuse_foreign(what: str) -> WrongThread:
    """The error an awaitable entry point raises when awaited outside the actor's thread."""
    return WrongThread(
        f"{what} was awaited from a thread that is not the actor's trio run's; from a plain "
        f"thread use trio.from_thread.run(<the async function>, *args, trio_token=token) (no "
        "trio_token= needed in a thread trio.to_thread started), with the token saved by "
        "trio.lowlevel.current_trio_token() in the actor's run"
    )


def check_nursery(nursery: trio.Nursery, what: str) -> None:
    """Refuse to start an actor in a nursery of another trio run (another thread's)."""
    task: trio.lowlevel.Task | None = nursery.parent_task
    root = task
    while task is not None:
        root = task
        parent = task.parent_nursery
        task = None if parent is None else parent.parent_task
    try:
        here = trio.lowlevel.current_root_task()
    except RuntimeError:
        here = None
    if root is not here:
        raise refuse_foreign(what)
