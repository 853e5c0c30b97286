"""The asyncio twins of the runtime's faces: `Runtime`, `ResearchJobs`, `Consensus`,
`Conversations`, each method a `twin` of the trio method of the same name."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import ParamSpec, final

import sniffio

from ask_another import runtime as trio_runtime
from ask_another.aio._bridge import Face, twin
from ask_another.config import Config
from ask_another.consensus import Consensus as TrioConsensus
from ask_another.conversations import Conversations as TrioConversations
from ask_another.errors import WrongEventLoop
from ask_another.research.jobs import ResearchJobs as TrioJobs
from ask_another.spend.report import usage_report
from ask_another.users import LOCAL_USER, User
from supervisors.aio import Guest, open_guest

P = ParamSpec("P")


@final
class ResearchJobs(Face):
    """`ResearchJobs` (research/jobs.py) from asyncio: the same methods and exceptions."""

    start = twin(TrioJobs.start)
    start_consensus = twin(TrioJobs.start_consensus)
    get = twin(TrioJobs.get)
    list = twin(TrioJobs.list)
    wait = twin(TrioJobs.wait)
    cancel = twin(TrioJobs.cancel)
    cancel_call = twin(TrioJobs.cancel_call)
    answer_permission = twin(TrioJobs.answer_permission)
    answer_choice = twin(TrioJobs.answer_choice)


@final
class Consensus(Face):
    """`Consensus` (consensus/) from asyncio."""

    ask = twin(TrioConsensus.ask)
    estimate = twin(TrioConsensus.estimate)


@final
class Conversations(Face):
    """`Conversations` (conversations/) from asyncio."""

    turn = twin(TrioConversations.turn)
    discuss = twin(TrioConversations.discuss)
    get = twin(TrioConversations.get)
    messages = twin(TrioConversations.messages)


@final
class Runtime(Face):
    """The runtime from asyncio. Made by `ask_another.aio.open_runtime()`; valid inside its
    `async with` block. `trio` is the trio `Runtime` it drives and `guest` the bridge
    (`guest.call(fn, *args)` runs any trio function of it)."""

    def __init__(self, guest: Guest[trio_runtime.Runtime]) -> None:
        super().__init__(guest, guest.value)
        self.guest = guest
        self.trio = guest.value

    @property
    def config(self) -> Config:
        return self.trio.config

    complete = twin(trio_runtime.Runtime.complete)
    run_turn = twin(trio_runtime.Runtime.run_turn)
    add_feedback = twin(trio_runtime.Runtime.add_feedback)
    catalog = twin(trio_runtime.Runtime.catalog)

    async def usage(self, period: str = "month", user: User = LOCAL_USER) -> str:
        """The usage report for `period` (today, month, Nd, all) of what `user` may see, as the
        `usage` tool and command give it."""
        report: str = await self.guest.call(usage_report, self.trio.services, period, user)
        return report

    @property
    def jobs(self) -> ResearchJobs:
        """Research jobs as the local user (see `ask_another.Runtime.jobs`)."""
        return ResearchJobs(self.guest, self.trio.jobs)

    def jobs_for(self, user: User) -> ResearchJobs:
        return ResearchJobs(self.guest, self.trio.jobs_for(user))

    @property
    def consensus(self) -> Consensus:
        return Consensus(self.guest, self.trio.consensus)

    def consensus_for(self, user: User) -> Consensus:
        return Consensus(self.guest, self.trio.consensus_for(user))

    @property
    def conversations(self) -> Conversations:
        return Conversations(self.guest, self.trio.conversations)

    def conversations_for(self, user: User) -> Conversations:
        return Conversations(self.guest, self.trio.conversations_for(user))


def _asyncio_face(opener: Callable[P, AbstractAsyncContextManager[trio_runtime.Runtime]]
                  ) -> Callable[P, AbstractAsyncContextManager[Runtime]]:
    @functools.wraps(opener)
    @contextlib.asynccontextmanager
    async def open_runtime(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[Runtime]:
        _require_asyncio()
        async with open_guest(opener, *args, **kwargs) as guest:
            yield Runtime(guest)

    return open_runtime


def _require_asyncio() -> None:
    try:
        library: str | None = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = None
    if library == "asyncio":
        return
    if library == "trio":
        raise WrongEventLoop("ask_another.aio.open_runtime is the asyncio face and this is trio "
                             "code: use `async with ask_another.open_runtime(...)`, with the "
                             "same arguments and the same calls")
    raise WrongEventLoop(f"ask_another.aio.open_runtime runs on a running asyncio loop (inside "
                         f"asyncio.run), not under {library or 'no event loop'}")


open_runtime = _asyncio_face(trio_runtime.open_runtime)
"""`async with ask_another.aio.open_runtime(config) as rt`: `ask_another.open_runtime`'s
arguments, started as trio's guest on the running asyncio loop; `rt` has the same calls as
asyncio coroutines. See docs/interaction.md, "From asyncio"."""



