"""The gateway's worker process: `python -m ask_another.gateway._worker LEVEL`.

It imports litellm at once (with pydantic's validator building deferred, see coldstart.py: about
half the import time), runs litellm's first completion with a mock answer (`_litellm.warm_up`),
drops litellm's per-call pricing and success logging that nothing reads here (`_litellm.lighten`),
has the OpenAI-compatible calls made by litellm's own HTTP handler (`_litellm.own_http_handler`),
says `Ready`, then runs each `Call`, `Interact` and `Search` from its
stdin as an asyncio task with the litellm-facing code in _litellm.py, answering on its stdout in
the frames of _wire.py. `Cancel` cancels a task (the HTTP request is aborted). It ends when its
stdin closes (the parent closed it, after an idle time or at shutdown, or died). Its stdout is
kept for frames only: anything else printing to it (litellm's banners) goes to stderr, like the
server's logs.

With `--shared SOCKET IDLE` it is the one worker of every server on a home (_shared.py): it
listens on the unix socket, serves each connection as it would its stdin, and exits after IDLE
seconds with no connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from ask_another import tracing
from ask_another.gateway import _litellm
from ask_another.gateway._spans import completed, provider_span, searched
from ask_another.gateway._wire import (
    HEADER,
    Call,
    Cancel,
    Delta,
    Done,
    Failed,
    FrameTooLarge,
    Hello,
    Interact,
    Interacted,
    Ready,
    Search,
    Searched,
    ToWorker,
    frame,
    frame_size,
    peer_uid,
)
from ask_another.logs import configure_logging, get_logger, register_secrets

_BEGAN = time.monotonic()  # about when this process started (its first imports are done)
LAST_START_FILE = "last-start"  # _shared.LAST_START_FILE: seconds from start to Ready, last time


def _load() -> tuple[Any, str | None]:
    """litellm, imported and warmed up, or None and why not."""
    try:
        litellm = _litellm.load(quick=True)
        _litellm.warm_up(litellm)
        _litellm.lighten(litellm)  # this process registers no litellm callbacks
        _litellm.own_http_handler(litellm)  # this process's environment is its own
    except Exception as exc:
        return None, repr(exc)
    return litellm, None


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, litellm: Any,
                 error: str | None) -> None:
    """Say `Ready`, then run the calls that arrive on `reader` until it ends; then cancel the
    ones still running. One parent (a server) per reader: its calls and cancels are its own."""
    loop = asyncio.get_running_loop()
    encoder = msgspec.msgpack.Encoder()
    decoder = msgspec.msgpack.Decoder(ToWorker)

    def send(message: msgspec.Struct) -> None:
        if not writer.is_closing():
            writer.write(frame(encoder, message))

    send(Ready(error=error, pid=os.getpid()))
    tasks: dict[int, asyncio.Task[None]] = {}

    async def run(message: Call | Interact | Search) -> None:
        key = message.kwargs.get("api_key")
        if key and key not in _known_keys:  # masked in anything this process logs from now on
            _known_keys.add(key)
            register_secrets([key])
        try:
            async with _slots(litellm).held(message.kwargs):  # sized to litellm's pool
                if isinstance(message, Call):
                    with provider_span("chat", message.model, message.kwargs,
                                       message.traceparent) as span:
                        result = await _litellm.complete(
                            litellm, message.kwargs, message.model,
                            lambda text: send(Delta(message.id, text)))
                        completed(span, result)
                    send(Done(message.id, result))
                elif isinstance(message, Interact):
                    with provider_span(message.name, _agent(message.kwargs), message.kwargs,
                                       message.traceparent):
                        state = await _litellm.interact(litellm, message.name, message.kwargs,
                                                        message.model)
                    send(Interacted(message.id, state))
                else:
                    engine = str(message.kwargs.get("search_provider"))
                    with provider_span("search", engine, message.kwargs,
                                       message.traceparent) as span:
                        found = await _litellm.search(litellm, message.kwargs)
                        searched(span, found)
                    send(Searched(message.id, found))
        except asyncio.CancelledError:
            pass  # the parent cancelled: it expects no answer
        except Exception as exc:
            # Scrubbed of every key this process has seen (registered above).
            kind, text, status = _litellm.classify_failure(litellm, exc)
            send(Failed(message.id, kind.__name__, text, status))
        finally:
            tasks.pop(message.id, None)

    while True:
        try:
            header = await reader.readexactly(HEADER)
            message = decoder.decode(await reader.readexactly(frame_size(header)))
        except (asyncio.IncompleteReadError, ConnectionError):
            break  # the parent is done (or gone)
        except FrameTooLarge as exc:
            get_logger("ask_another.gateway").error("gateway.frame_too_large", error=str(exc))
            break
        if isinstance(message, Hello):
            register_secrets(message.secrets)
        elif isinstance(message, Cancel):
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
    with contextlib.suppress(Exception):
        await writer.drain()
    writer.close()


def _agent(kwargs: dict[str, Any]) -> str:
    return str(kwargs.get("agent") or kwargs.get("model") or "gemini")


_known_keys: set[str] = set()
_shared_slots: list[_litellm.ConnectionSlots] = []


def _slots(litellm: Any) -> _litellm.ConnectionSlots:
    """The process's connection slots: one set for every parent (a shared worker's too)."""
    if not _shared_slots:
        _shared_slots.append(_litellm.connection_slots(litellm))
    return _shared_slots[0]


async def _worker_main(frames_out: int) -> None:
    """The private worker: one parent, on stdin and stdout."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(0, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(frames_out, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    litellm, error = _load()
    if litellm is not None:
        _litellm.inline_prelude(litellm, loop)
    await _serve(reader, writer, litellm, error)
    if litellm is not None:
        await _litellm.close_clients(litellm)


async def _shared_main(path: Path, idle: float, started: int) -> None:
    """The shared worker (_shared.py): many servers, one connection each, on the unix socket
    `path`; exits after `idle` seconds with no connection, or once nobody is connected and its
    socket file is gone (its home was removed) or is another worker's."""
    loop = asyncio.get_running_loop()
    connections = 0
    quiet_since = loop.time()  # when the last connection closed
    changed = asyncio.Event()  # a connection came or went
    loaded = asyncio.Event()
    litellm: Any = None
    error: str | None = None

    async def connection(sock: socket.socket) -> None:
        nonlocal quiet_since, connections
        try:
            uid = peer_uid(sock)
            if uid is not None and uid != os.geteuid():  # nothing read from it, nothing sent
                get_logger("ask_another.gateway").warning(
                    "gateway.peer_refused", uid=uid,
                    reason="a connection from another user: closed before anything was read")
                sock.close()
                return
            reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 26)
            await loaded.wait()
            await _serve(reader, writer, litellm, error)
        finally:
            connections -= 1
            quiet_since = loop.time()
            changed.set()

    serving: set[asyncio.Task[None]] = set()

    async def accept() -> None:
        # Counted as it is accepted, so the idle check below never misses one: a connection the
        # kernel holds but this loop has not accepted is closed unserved when the listener
        # closes, before the worker's `Ready`, and that server connects again.
        nonlocal connections
        while True:
            sock, _ = await loop.sock_accept(listener)
            connections += 1
            changed.set()
            task = loop.create_task(connection(sock))
            serving.add(task)
            task.add_done_callback(serving.discard)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)  # the socket is created 0600: only this user may connect
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_mask)
    os.chmod(path, 0o600)
    listener.listen(64)
    listener.setblocking(False)
    identity = os.stat(path).st_ino
    pid_file = path.with_suffix(".pid")  # for people and tests: which process this is
    # 0600 whatever the umask, as every file in the home.
    pid_fd = os.open(pid_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.fchmod(pid_fd, 0o600)  # a file left by an older worker keeps its mode otherwise
    with os.fdopen(pid_fd, "w") as out:
        out.write(f"{os.getpid()}\n")
    os.write(started, _LISTENING)
    os.close(started)
    accepting = loop.create_task(accept())
    litellm, error = _load()
    if litellm is not None:
        _litellm.inline_prelude(litellm, loop)
    loaded.set()
    if error is None:  # how long a first call waited here, for `ask-another doctor` to quote
        with contextlib.suppress(OSError):  # 0600, as every file of the home
            fd = os.open(path.with_name(LAST_START_FILE), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                         0o600)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, f"{time.monotonic() - _BEGAN:.1f}\n".encode())
            finally:
                os.close(fd)

    def ours() -> bool:
        try:
            return os.stat(path).st_ino == identity
        except OSError:
            return False

    # Wake at least this often to see whether the socket file is still ours.
    check_every = min(idle / 4, 10.0)
    while True:
        changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), check_every)
        if connections:
            continue
        if not ours():  # nobody can connect any more: leave
            break
        if loop.time() - quiet_since < idle:
            continue
        # Idle: leave under the lock the servers connect under, so none connects to a worker
        # that is leaving (one the kernel accepted just before is closed unserved: it retries).
        lock = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
            if connections:
                continue
            # OSError: a read-only directory keeps the files; the next server finds nobody
            # listening, cannot remove the socket either and runs a private worker.
            with contextlib.suppress(OSError):
                if ours():  # not a newer worker's socket
                    os.unlink(path)
                    pid_file.unlink()
            break
        finally:
            os.close(lock)
    accepting.cancel()
    listener.close()
    while connections:
        changed.clear()
        await changed.wait()
    if litellm is not None:
        await _litellm.close_clients(litellm)


_LISTENING = b"listening\n"  # _shared.LISTENING: not imported, _shared.py needs trio


def main() -> None:
    # Frames go out on a private copy of stdout; fd 1 itself now points at stderr, so a stray
    # print (litellm's banners) cannot corrupt the frame stream.
    frames_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Ctrl+C in a terminal reaches the whole process group: the parent shuts down and closes
    # stdin, which ends this process once its calls are cancelled; dying first would only make
    # the parent report a crashed worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_logging(sys.argv[1] if len(sys.argv) > 1 else "WARNING")
    tracing.configure()  # the OTEL_* settings of the server that started it
    if len(sys.argv) == 5 and sys.argv[2] == "--shared":
        asyncio.run(_shared_main(Path(sys.argv[3]), float(sys.argv[4]), frames_out))
    else:
        asyncio.run(_worker_main(frames_out))


if __name__ == "__main__":
    main()
