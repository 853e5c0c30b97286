"""The gateway's worker process: `python -m ask_another.gateway._worker LEVEL`.

It imports litellm at once (with pydantic's validator building deferred, see coldstart.py: about
half the import time), runs litellm's first completion with a mock answer (`_litellm.warm_up`),
says `Ready`, then runs each `Call`, `Interact` and `Search` from its
stdin as an asyncio task with the litellm-facing code in _litellm.py, answering on its stdout in
the frames of _wire.py. `Cancel` cancels a task (the HTTP request is aborted). It ends when its
stdin closes (the parent closed it, after an idle time or at shutdown, or died). Its stdout is
kept for frames only: anything else printing to it (litellm's banners) goes to stderr, like the
server's logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

import msgspec

from ask_another.gateway import _litellm
from ask_another.gateway._wire import (
    HEADER,
    Call,
    Cancel,
    Delta,
    Done,
    Failed,
    Interact,
    Interacted,
    Ready,
    Search,
    Searched,
    ToWorker,
    frame,
)
from ask_another.logs import configure_logging, register_secrets


async def _worker_main(frames_out: int) -> None:
    loop = asyncio.get_running_loop()
    encoder = msgspec.msgpack.Encoder()
    decoder = msgspec.msgpack.Decoder(ToWorker)
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(0, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(frames_out, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)

    def send(message: msgspec.Struct) -> None:
        if not writer.is_closing():
            writer.write(frame(encoder, message))

    litellm: Any = None
    try:
        litellm = _litellm.load(quick=True)
        _litellm.warm_up(litellm)
        send(Ready())
    except Exception as exc:
        send(Ready(error=repr(exc)))
        litellm = None
    tasks: dict[int, asyncio.Task[None]] = {}
    known_keys: set[str] = set()

    async def run(message: Call | Interact | Search) -> None:
        key = message.kwargs.get("api_key")
        if key and key not in known_keys:  # masked in anything this process logs from now on
            known_keys.add(key)
            register_secrets([key])
        try:
            if isinstance(message, Call):
                result = await _litellm.complete(litellm, message.kwargs, message.model,
                                                 lambda text: send(Delta(message.id, text)))
                send(Done(message.id, result))
            elif isinstance(message, Interact):
                state = await _litellm.interact(litellm, message.name, message.kwargs)
                send(Interacted(message.id, state))
            else:
                found = await _litellm.search(litellm, message.kwargs)
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
            message = decoder.decode(await reader.readexactly(int.from_bytes(header, "big")))
        except asyncio.IncompleteReadError:
            break  # stdin closed: the parent is done (or gone)
        if isinstance(message, Cancel):
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
    if litellm is not None:
        await _litellm.close_clients(litellm)
    with contextlib.suppress(Exception):
        await writer.drain()
    writer.close()


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
    asyncio.run(_worker_main(frames_out))


if __name__ == "__main__":
    main()
