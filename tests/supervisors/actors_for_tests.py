"""Small actors shared by the supervisors tests, and a `Ticker` that shows whether others run."""

from __future__ import annotations

from typing import Any

import trio

from supervisors import Actor, Caller, ExitReason


class Ticker:
    """A task that counts each time it gets to run: a loop that never yields keeps it at 0."""

    def __init__(self) -> None:
        self.ticks = 0

    async def run(self) -> None:
        while True:
            self.ticks += 1
            await trio.lowlevel.checkpoint()


# Every time a test actor starts or stops, it appends here so tests can assert on order.
Journal = list[tuple[str, Any]]


class Echo(Actor):
    """Replies with the message; casts are recorded; 'crash' raises."""

    async def init(self, journal: Journal | None = None, tag: Any = None) -> None:
        self.journal = journal if journal is not None else []
        self.tag = tag
        self.casts: list[Any] = []
        self.journal.append(("start", tag))

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        match msg:
            case "crash":
                raise RuntimeError("asked to crash")
            case ("sleep", seconds):
                await trio.sleep(seconds)
                return "slept"
            case "casts":
                return list(self.casts)
            case "stop":
                self.stop()
                return "stopping"
        return msg

    async def handle_cast(self, msg: Any) -> None:
        if msg == "crash":
            raise RuntimeError("asked to crash")
        self.casts.append(msg)

    async def terminate(self, reason: ExitReason) -> None:
        self.journal.append(("stop", self.tag))


class Stubborn(Echo):
    """Ignores graceful stop requests for a long time (its terminate sleeps)."""

    async def terminate(self, reason: ExitReason) -> None:
        self.journal.append(("terminating", self.tag))
        await trio.sleep(1000)
        self.journal.append(("stop", self.tag))


class FailingInit(Actor):
    async def init(self, message: str = "no database") -> None:
        raise ValueError(message)
