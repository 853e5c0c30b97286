"""The worker process's wire: length-prefixed msgpack frames over its stdin and stdout.

- parent -> worker: `Hello` (on a shared worker's connection: the server's secrets, masked in
  anything the worker logs), `Call` (one `litellm.acompletion` kwargs dict, the model id),
  `Interact` (one `litellm.interactions` call), `Search` (one `litellm.asearch`) and `Cancel`;
  each call carries the caller's W3C `traceparent` (None outside a trace), so the span the
  worker makes of it is a child of the caller's (_spans.py);
- worker -> parent: `Ready` once litellm is imported (or why it could not be), then per call any
  number of `Delta` (streamed text, in order) and one `Done`, `Interacted`, `Searched` or
  `Failed`.

The same frames go over a shared worker's unix socket, one connection per server (_shared.py).
Shared by the parent's side (_process.py) and the worker's (_worker.py); no litellm here.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import msgspec

from ask_another import errors
from ask_another.errors import ProviderError
from ask_another.gateway._results import CompletionResult, InteractionState, SearchResult


class Call(msgspec.Struct, tag="call"):
    id: int
    kwargs: dict[str, Any]
    model: str
    traceparent: str | None = None  # the caller's span: the call's span is its child (_spans.py)


class Interact(msgspec.Struct, tag="interact"):
    id: int
    name: str  # acreate, aget or acancel
    kwargs: dict[str, Any]
    model: str = ""  # the model the reported usage is priced as ("": not priced)
    traceparent: str | None = None


class Search(msgspec.Struct, tag="search"):
    id: int
    kwargs: dict[str, Any]
    traceparent: str | None = None


class Cancel(msgspec.Struct, tag="cancel"):
    id: int


class Hello(msgspec.Struct, tag="hello"):
    secrets: list[str]


class Ready(msgspec.Struct, tag="ready"):
    error: str | None = None
    pid: int | None = None  # the worker's: a shared worker is not this side's child


class Delta(msgspec.Struct, tag="delta"):
    id: int
    text: str


class Done(msgspec.Struct, tag="done"):
    id: int
    result: CompletionResult


class Interacted(msgspec.Struct, tag="interacted"):
    id: int
    state: InteractionState


class Searched(msgspec.Struct, tag="searched"):
    id: int
    result: SearchResult


class Failed(msgspec.Struct, tag="failed"):
    id: int
    kind: str  # the name of a ProviderError subclass in ask_another.errors
    message: str
    status: int | None = None


ToWorker = Hello | Call | Interact | Search | Cancel
FromWorker = Ready | Delta | Done | Interacted | Searched | Failed
HEADER = 4  # bytes of big-endian frame length
MAX_FRAME = 256 << 20
"""The largest frame body either side reads (256 MiB: a prompt at its 1,000,000-character cap,
with a conversation's history and a long answer, is a few MiB). A header announcing more ends
the connection with `FrameTooLarge` instead of buffering what it announces (a 2 GiB header
grew the worker by 530 MB, waiting for the rest)."""


class FrameTooLarge(ValueError):
    """A frame header announced more than `MAX_FRAME` bytes."""


def frame_size(header: bytes) -> int:
    """The body size a frame `header` announces; `FrameTooLarge` above `MAX_FRAME`."""
    size = int.from_bytes(header, "big")
    if size > MAX_FRAME:
        raise FrameTooLarge(f"a gateway frame announced {size} bytes, more than the "
                            f"{MAX_FRAME} one may have: the connection is closed")
    return size


def frame(encoder: msgspec.msgpack.Encoder, message: msgspec.Struct) -> bytes:
    body = encoder.encode(message)
    return len(body).to_bytes(HEADER, "big") + body


def error_class(name: str) -> type[ProviderError]:
    kind = getattr(errors, name, None)
    return kind if isinstance(kind, type) and issubclass(kind, ProviderError) else ProviderError


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end of the unix socket `sock` (`SO_PEERCRED`:
    for a listening socket, whoever called listen), or None where the system has no such option.
    Both ends of a shared worker's connection check it before anything is sent: the server's
    `Hello` carries its keys, and the worker's answers its prompts' replies."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option,
                                                          struct.calcsize("3i")))
    return int(uid)

