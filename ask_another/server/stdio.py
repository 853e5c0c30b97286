"""The stdio transport, with an answer for every request the SDK's reader cannot parse.

The MCP SDK (2.3) reads stdin line by line and parses each line with pydantic's JSON parser; a line
that parser refuses (a lone surrogate escape such as ``"\\ud800"``, a number of more than 4,300
digits) becomes an exception in the read stream, which the session drops: the client gets no reply
at all and waits until its own timeout. ``AnsweringStdin`` sits between stdin and the SDK's reader:
a line the SDK's parser refuses is answered as JSON-RPC 2.0 asks, through the same write stream
every reply takes (so frames never interleave): a request whose id Python's own JSON parser can
still read gets a parse error with that id and the reason; a line that is not JSON, or not a
request object, gets an error with a null id; a notification or a response gets nothing. Every
line the SDK can read reaches it unchanged. See docs/server.md, "Known issues".

``Unanswered`` bounds the requests read but not yet answered (`UNANSWERED`): past it, the next
message is taken from the SDK's reader only once an answer has been written, so a client that
stops reading stdout makes the server stop reading stdin (its pipe fills, and it waits) instead
of holding an answer for every request it goes on reading (1.15 GB after 10,000 `tools/list`
never read).

``AskAnotherServer`` is the ``MCPServer`` whose ``run_stdio_async`` uses them. With its stdin given
explicitly the SDK does not divert fd 0, so ``_claim_stdin`` does what it would have done: the
wire is read from a private duplicate and fd 0 points at the null device while serving (a child
process reading stdin gets EOF instead of the client's messages). A pipe or socket is read by
trio itself (`PipeLines`), not in a thread as the SDK's reader does: a read blocked in a thread
cannot be cancelled, so a server told to stop by SIGTERM or SIGHUP while its client still held
stdin open handed its jobs back and then hung until the client killed it.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import json
import os
import stat
from collections.abc import AsyncIterator, Iterator
from io import TextIOWrapper
from typing import Any, Final

import anyio
import mcp_types as types
import trio
from anyio.abc import ObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from ask_another.logs import get_logger
from ask_another.server.lifespan import ServerState

__all__ = ["UNANSWERED", "AnsweringStdin", "AskAnotherServer", "Unanswered"]

log = get_logger("ask_another.server.stdio")

_HINTS: Final = (
    ("hex escape", "a lone surrogate such as \\ud800 is not valid Unicode"),
    ("surrogate", "a lone surrogate such as \\ud800 is not valid Unicode"),
    ("number out of range", "numbers are limited to 4,300 digits"),
    ("recursion limit", "arrays and objects may nest about 200 deep"),
)

UNANSWERED: Final = 256
"""Requests read from stdin and not yet answered, at most (long calls in flight included)."""

DEEP: Final = "recursion limit"
"""What the SDK's parser says of a line nested too deep: such a line is not parsed again here."""


def _bounded_int(text: str) -> int:
    # Python refuses to convert more than 4,300 digits; the value is not needed, only the id.
    return int(text) if len(text) <= 4300 else 0


def _addressee(line: str) -> tuple[bool, int | str | None]:
    """Whether JSON-RPC asks for a reply to a line the SDK refused, and its id: None when the id
    cannot be determined (the line is not JSON, or not a request object), which the reply says
    with a null id. No reply is due to a notification or to a response from the client."""
    try:
        message = json.loads(line, parse_int=_bounded_int, parse_float=lambda _: 0.0)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's stack
        return True, None
    if not isinstance(message, dict):
        return True, None
    if "method" not in message:
        return "id" not in message, None  # a response (its content broken) is not answered
    if "id" not in message:
        return False, None  # a notification is never answered, even with an error
    request_id = message["id"]
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return True, None
    return True, request_id


def _is_parse_failure(exc: Exception) -> bool:
    """Whether the SDK's parser refused the line as JSON (rather than its shape as a message)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return True
    try:
        return any(error["type"] == "json_invalid" for error in errors())
    except Exception:
        return True


def _reason(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    detail = str(exc).splitlines()[0]
    if callable(errors):
        with contextlib.suppress(Exception):
            detail = str(errors()[0]["msg"])
    hints = [hint for marker, hint in _HINTS if marker in detail]
    return f"{detail} ({hints[0]})" if hints else detail


class PipeLines:
    """The lines of a pipe or socket `fd` (a duplicate of it is read, non-blocking, by trio), as
    the SDK's reader iterates a text file: each with its newline, UTF-8 with replacement."""

    def __init__(self, fd: int) -> None:
        self._stream = trio.lowlevel.FdStream(os.dup(fd))

    async def __aiter__(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        try:
            while chunk := await self._stream.receive_some(65536):
                pending += decoder.decode(chunk)
                *lines, pending = pending.split("\n")
                for line in lines:
                    yield line + "\n"
            pending += decoder.decode(b"", final=True)
            if pending:
                yield pending
        finally:
            await self._stream.aclose()


def _lines(fd: int) -> Any:
    """`fd`'s lines: read by trio where it can wait on it (a pipe, a socket), otherwise (a
    terminal, a file given as stdin) in a thread that cancellation abandons (`_Lines`)."""
    if stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode):
        return PipeLines(fd)
    text = TextIOWrapper(os.fdopen(fd, "rb", closefd=False), encoding="utf-8", errors="replace")
    return _Lines(text)


class AnsweringStdin:
    """The client's stdin as the SDK's reader iterates it (``async for line in stdin``); lines the
    SDK cannot parse but that carry a request id are answered through `reply_through`'s stream."""

    def __init__(self, lines: Any) -> None:
        self._lines = lines  # `PipeLines`, or `_Lines` (a terminal or a file)
        self._replies: ObjectSendStream[SessionMessage] | None = None
        self._ready = anyio.Event()

    def reply_through(self, stream: ObjectSendStream[SessionMessage]) -> None:
        """Answers go to `stream` (the transport's write stream); lines wait until it is set."""
        self._replies = stream
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            answer = self.answer_for(line)
            if answer is None:
                yield line
                continue
            log.warning("stdio.unreadable_request", id=answer.id, reason=answer.error.message)
            await self._ready.wait()
            assert self._replies is not None
            try:
                await self._replies.send(SessionMessage(answer))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the session is over

    @staticmethod
    def answer_for(line: str) -> types.JSONRPCError | None:
        """The error to answer `line` with, or None when the SDK can read it (or no reply is due:
        a notification, a response). A line that is not JSON gets -32700 with a null id, a
        request that is not a valid JSON-RPC request -32600 (JSON-RPC 2.0, section 5.1)."""
        if not line.strip():
            return None
        try:
            types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:
            reason = _reason(exc)
            # A line nested too deep for the SDK is not parsed again to find its id: Python's
            # parser recurses once per level (a 2 kB line of 1,000 arrays raised RecursionError
            # and ended the server), and JSON-RPC allows a null id when it cannot be read.
            reply_due, request_id = (True, None) if DEEP in reason else _addressee(line)
            if not reply_due:
                return None
            if _is_parse_failure(exc):
                return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(
                    code=types.PARSE_ERROR, message=f"the request could not be read: {reason}"))
            return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(
                code=types.INVALID_REQUEST,
                message="not a valid JSON-RPC 2.0 request (an object with jsonrpc \"2.0\", a "
                        "string or integer id, a method and object params)"))
        return None


class Unanswered:
    """The requests of one stdio session read and not yet answered, at most `UNANSWERED` (see
    the module docstring): `reading(stream)` and `writing(stream)` wrap the SDK's streams. A
    request the client cancels (`notifications/cancelled`) is never answered: it stops counting
    then."""

    def __init__(self) -> None:
        self.ids: set[int | str] = set()
        self._answered = anyio.Event()

    async def before_reading(self) -> None:
        while len(self.ids) >= UNANSWERED:
            await self._answered.wait()

    def read(self, item: Any) -> None:
        if not isinstance(item, SessionMessage):
            return
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            self.ids.add(message.id)
        elif isinstance(message, types.JSONRPCNotification) \
                and message.method == "notifications/cancelled":
            self.written((message.params or {}).get("requestId"))

    def written(self, request_id: Any) -> None:
        if request_id in self.ids:
            self.ids.discard(request_id)
            self._answered.set()
            self._answered = anyio.Event()

    def reading(self, stream: Any) -> _Reading:
        return _Reading(stream, self)

    def writing(self, stream: Any) -> _Writing:
        return _Writing(stream, self)


class _Reading:
    def __init__(self, stream: Any, unanswered: Unanswered) -> None:
        self._stream = stream
        self._unanswered = unanswered

    async def receive(self) -> Any:
        await self._unanswered.before_reading()
        item = await self._stream.receive()
        self._unanswered.read(item)
        return item

    def __aiter__(self) -> _Reading:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def __getattr__(self, name: str) -> Any:  # aclose, close, last_context
        return getattr(self._stream, name)

    async def __aenter__(self) -> _Reading:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.__aexit__(*exc)


class _Writing:
    def __init__(self, stream: Any, unanswered: Unanswered) -> None:
        self._stream = stream
        self._unanswered = unanswered

    async def send(self, item: SessionMessage) -> None:
        await self._stream.send(item)
        if isinstance(item.message, (types.JSONRPCResponse, types.JSONRPCError)):
            self._unanswered.written(item.message.id)

    def __getattr__(self, name: str) -> Any:  # aclose, close
        return getattr(self._stream, name)

    async def __aenter__(self) -> _Writing:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.__aexit__(*exc)


@contextlib.contextmanager
def _claim_stdin() -> Iterator[int]:
    """A private duplicate of fd 0 for reading the wire; fd 0 is the null device meanwhile."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
    finally:
        os.close(devnull)
    try:
        yield private
    finally:
        os.dup2(private, 0)
        # Left open: the SDK's reading thread may still block on it after the session ends
        # (the SDK keeps its own duplicate open for the same reason).


class _Lines:
    """A text file's lines, each read in a worker thread that cancellation abandons.

    anyio's `wrap_file` reads in a thread that cannot be abandoned: cancelling the read waits for
    the next line, so Ctrl-C at a terminal (trio cancels the session for its KeyboardInterrupt)
    waited until the person typed a line or Ctrl-D. Abandoned, the blocked read is left to its
    (daemon) thread, which the process's exit ends; a line it reads meanwhile is not used.
    """

    def __init__(self, text: TextIOWrapper) -> None:
        self._text = text

    async def __aiter__(self) -> AsyncIterator[str]:
        while line := await anyio.to_thread.run_sync(self._text.readline,
                                                     abandon_on_cancel=True):
            yield line


class AskAnotherServer(MCPServer[ServerState]):
    """``MCPServer`` whose stdio transport answers the requests the SDK's reader drops."""

    async def run_stdio_async(self) -> None:
        with _claim_stdin() as fd:
            stdin = AnsweringStdin(_lines(fd))
            async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
                stdin.reply_through(write_stream)
                lowlevel = self._lowlevel_server
                unanswered = Unanswered()
                await lowlevel.run(unanswered.reading(read_stream),
                                   unanswered.writing(write_stream),
                                   lowlevel.create_initialization_options())
