"""What the people commands show on a terminal while they wait, and how they ask a person.

`open_progress(stream)` keeps one live status line on `stream` (stderr): on a terminal a spinner
redrawn in place, with the seconds waited; anywhere else (a pipe, a log file) a plain line when
the status changes and a "still ..." line every `every` seconds, so nothing is drawn over.
`TerminalPerson` answers a research job's open questions (permission requests, `ask_user`
choices, a spend confirmation) on the terminal and reads the answer from stdin (end of input
denies).

Only `cli.py` writes through these; the server never does (stdout is its protocol).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TextIO

import trio

from ask_another.interaction.types import (
    ALLOW,
    Choice,
    Decision,
    Deny,
    PermissionRequest,
    Question,
    SpendRequest,
)

__all__ = ["Progress", "TerminalPerson", "open_progress"]

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Progress:
    """The status line; made by `open_progress`."""

    def __init__(self, stream: TextIO, live: bool, every: float) -> None:
        self._stream = stream
        self._live = live
        self._every = every
        self._text = ""
        self._shown = False
        self._stopped = False
        self._began = trio.current_time()
        self._said_at = self._began

    def set(self, text: str) -> None:
        """A new status. Off a terminal it is printed as a line at once."""
        if text == self._text or self._stopped:
            return
        self._text = text
        if not self._live:
            self._line(text)
        else:
            self._draw()

    def stop(self) -> None:
        """Erase the status line for good (the answer is about to be written)."""
        self._erase()
        self._stopped = True

    @asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """The line erased and not redrawn while a question is asked."""
        was = self._stopped
        self.stop()
        try:
            yield
        finally:
            self._stopped = was

    def _elapsed(self) -> float:
        return trio.current_time() - self._began

    def _line(self, text: str) -> None:
        self._said_at = trio.current_time()
        print(f"… {text} ({self._elapsed():.0f} s)", file=self._stream, flush=True)

    def _draw(self) -> None:
        if self._stopped or not self._text:
            return
        frame = FRAMES[int(self._elapsed() * 10) % len(FRAMES)]
        self._stream.write(f"\r{frame} {self._text} · {self._elapsed():.0f} s\x1b[K")
        self._stream.flush()
        self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False

    async def _tick(self) -> None:
        while True:
            await trio.sleep(0.1 if self._live else 1.0)
            if self._live:
                self._draw()
            elif (not self._stopped and self._text
                  and trio.current_time() - self._said_at >= self._every):
                self._line(f"still {self._text}")


@asynccontextmanager
async def open_progress(stream: TextIO | None = None, *, live: bool | None = None,
                        every: float = 10.0) -> AsyncIterator[Progress]:
    """A status line on `stream` (stderr) for the block; erased when it ends. `live`: draw a
    spinner in place (default: when `stream` is a terminal)."""
    out = stream if stream is not None else sys.stderr
    progress = Progress(out, out.isatty() if live is None else live, every)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(progress._tick)
        try:
            yield progress
        finally:
            progress.stop()
            nursery.cancel_scope.cancel()


class TerminalPerson:
    """The person at this terminal, answering a research job's open questions (the `Question`
    values of its `waiting_for`: permission requests, `ask_user` choices, a spend confirmation):
    each is
    asked on `out` with the status line paused, and the answer read by `read_line` (stdin's
    `readline` by default; "" is end of input, which denies or leaves the choice unanswered)."""

    def __init__(self, progress: Progress, out: TextIO | None = None,
                 read_line: Callable[[], str] | None = None) -> None:
        self.progress = progress
        self.out = out if out is not None else sys.stderr
        self.read_line: Callable[[], str] = (read_line if read_line is not None
                                             else sys.stdin.readline)
        # One read at a time: a question withdrawn while its read waits (answered in the
        # console) leaves that read running, and the line it gets answers the next question
        # rather than being lost to an abandoned thread.
        self._reading: trio.Event | None = None
        self._lines: list[str] = []

    async def _next_line(self) -> str:
        if not self._lines and self._reading is None:
            done = self._reading = trio.Event()
            token = trio.lowlevel.current_trio_token()

            def read() -> None:
                line = self.read_line()
                with contextlib.suppress(trio.RunFinishedError):  # the command has ended
                    token.run_sync_soon(got, line)

            def got(line: str) -> None:
                self._lines.append(line)
                self._reading = None
                done.set()

            threading.Thread(target=read, name="terminal-readline", daemon=True).start()
        while not self._lines:
            assert self._reading is not None
            await self._reading.wait()
        return self._lines.pop(0)

    async def _ask(self, question: str) -> str | None:
        async with self.progress.paused():
            print(question, end="", file=self.out, flush=True)
            line = await self._next_line()
        if not line:
            print("(no answer: end of input)", file=self.out, flush=True)
            return None
        return line.strip()

    def withdrawn(self, why: str) -> None:
        """Mark the question being asked as settled elsewhere (`why`: "answered in the
        console"), after its ask was cancelled: the terminal shows why it no longer waits."""
        print(f"({why})", file=self.out, flush=True)

    async def permission(self, question: Question, link: str | None = None) -> Decision:
        """The person's `Decision` on a permission request or a spend confirmation; `link`, the
        request's approval page in a running console, is shown as the other way to answer."""
        match question.request:
            case SpendRequest(estimated_cost=cost):
                text = f"Confirm the research job's estimated cost, {cost}? [y/N] "
            case PermissionRequest() as request:
                arguments = ", ".join(f"{k}={v!r}" for k, v in request.arguments.items())
                text = (f"The research agent wants to run {request.tool}({arguments}) "
                        f"[{request.class_}]. Allow it? [y/N] ")
            case _:
                raise ValueError(f"not a permission: {question.kind}")
        answer = await self._ask(_or_at(link) + text)
        return ALLOW if answer is not None and answer.lower() in ("y", "yes") else Deny()

    async def choice(self, question: Question, link: str | None = None) -> str | None:
        """The picked option's id for a question of kind choice, or None (`link`: as for
        `permission`)."""
        assert isinstance(question.request, Choice)
        options = [(o.id, o.label) for o in question.request.options]
        lines = [_or_at(link) + f"The research agent asks: {question.request.prompt}"]
        lines += [f"  {n}. {label}" for n, (_, label) in enumerate(options, 1)]
        while True:
            answer = await self._ask("\n".join(lines) + f"\nYour pick (1-{len(options)}): ")
            if answer is None:
                return None
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return options[int(answer) - 1][0]
            picked = next((i for i, label in options if answer in (i, label)), None)
            if picked is not None:
                return picked
            lines = [f"{answer!r} is not one of the options."]


def _or_at(link: str | None) -> str:
    # Before the question, so the prompt stays the last thing on the line the answer is typed on.
    return "" if link is None else f"(You can also answer it in the console: {link})\n"
