"""Serving the simulator: in a background thread of the caller, or in a child process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import uvicorn

from ._app import SimulatorState, build_app
from ._interactions import InteractionScript, SimInteraction
from ._steps import Responder, SimRequest, Step

# The benchmarks open up to a thousand connections at once: the listen queue must hold them.
BACKLOG: Final = 4096
_START_TIMEOUT: Final = 10.0


@dataclass(frozen=True)
class SimulatorURLs:
    """Where a running simulator listens."""

    url: str

    @property
    def openai_base(self) -> str:
        """The ``api_base`` for OpenAI-compatible models (``openai/<anything>``, Perplexity)."""
        return f"{self.url}/v1"

    @property
    def gemini_base(self) -> str:
        """The ``api_base`` for litellm's Gemini interactions API."""
        return self.url


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket, bound before serving so the port is known at once.

    TCP_NODELAY, inherited by every accepted connection: uvicorn writes a response's head and
    body separately, and without it the body waits for the client's delayed ACK, 40 ms on
    every request after the first on a kept-alive connection (which litellm's clients reuse)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


def make_server(state: SimulatorState) -> uvicorn.Server:
    config = uvicorn.Config(
        build_app(state),
        # No logging config of our own: uvicorn's default sends access logs to stdout.
        log_config=None,
        access_log=False,
        lifespan="off",
        loop="asyncio",
        http="h11",
        backlog=BACKLOG,
        limit_concurrency=None,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=1,
    )
    return uvicorn.Server(config)


class Simulator:
    """A running simulated provider. Make one with `Simulator.running()`.

    Scripting and inspection methods are thread-safe: call them from the test while the server
    thread answers requests.
    """

    def __init__(self, state: SimulatorState, urls: SimulatorURLs) -> None:
        self._state = state
        self._urls = urls

    @classmethod
    @contextlib.contextmanager
    def running(cls, latency: float = 0.0, port: int = 0) -> Iterator[Simulator]:
        """Serve on 127.0.0.1 in a background thread with its own asyncio loop.

        Every request waits `latency` seconds before it is answered. Leaving the block stops the
        server (requests still running get about a second to finish) and joins the thread.
        """
        sock = bind_socket(port=port)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        state = SimulatorState(latency)
        state.base_url = url
        server = make_server(state)
        failure: list[BaseException] = []

        def serve() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as exc:  # reported to the caller, not lost in the thread
                failure.append(exc)

        thread = threading.Thread(target=serve, name=f"simulator-{url}", daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + _START_TIMEOUT
            while not server.started:
                if failure or not thread.is_alive():
                    raise RuntimeError(f"the simulator failed to start: {failure!r}")
                if time.monotonic() > deadline:
                    raise RuntimeError("the simulator did not start within 10 s")
                time.sleep(0.005)
            yield cls(state, SimulatorURLs(url))
        finally:
            server.should_exit = True
            thread.join(timeout=15)
            sock.close()

    @staticmethod
    @contextlib.contextmanager
    def process(latency: float = 0.0) -> Iterator[SimulatorURLs]:
        """Serve from a child process (``python -m ask_another.simulator``), so a benchmark's
        measured process does not also serve. Yields its URLs; the child is stopped on exit.
        It can be steered only with in-band directives."""
        with _child_process(latency) as urls:
            yield urls

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``"""
        return self._urls.url

    @property
    def openai_base(self) -> str:
        """``http://127.0.0.1:PORT/v1``: use as ``MODEL_X="openai/anything;key;<openai_base>"``."""
        return self._urls.openai_base

    @property
    def gemini_base(self) -> str:
        """The ``api_base`` for ``litellm.interactions.create/get/cancel``."""
        return self._urls.gemini_base

    @property
    def urls(self) -> SimulatorURLs:
        return self._urls

    @property
    def latency(self) -> float:
        return self._state.latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        self._state.latency = seconds

    def script(self, model: str, steps: Sequence[Step] | Responder) -> None:
        """Decide how requests for `model` (the body's model, without litellm's provider prefix)
        are answered.

        A list of steps is queued (appended to any queue already there) and consumed one per
        request, in order; afterwards the default behaviour resumes. A callable receives each
        `SimRequest` and returns the step, for concurrent callers; it stays until `clear()`.
        Queued steps are used before the callable.
        """
        self._state.scripts.add(model, steps if callable(steps) else list(steps))

    def pending(self, model: str) -> int:
        """How many queued steps for `model` are still unused."""
        return self._state.scripts.pending(model)

    def script_interaction(
        self,
        agent: str,
        statuses: Sequence[str] = ("queued", "in_progress", "completed"),
        report: str | None = None,
        citations: Sequence[str] | None = None,
        error: str | None = None,
        answer_when: threading.Event | None = None,
    ) -> None:
        """Script the next interaction created for `agent`.

        The create answer has ``statuses[0]``; each GET moves one status on, and the last one
        stays. A cancel before a terminal status makes it ``cancelled`` for good. `report` and
        `citations` fill a ``completed`` interaction (defaults: a deterministic report citing two
        simulated source pages); `error` is the message of a ``failed`` one. With `answer_when`,
        the interaction exists (and runs) at once but the create is answered only once that
        event is set (at most 60 s): a provider slow to say what it has started. Scripts for the
        same agent queue up, one per created interaction.
        """
        self._state.interactions.add_script(
            agent,
            InteractionScript(
                statuses=tuple(statuses),
                report=report,
                citations=tuple(citations) if citations is not None else None,
                error=error,
                answer_when=answer_when,
            ),
        )

    def end_interaction(self, interaction_id: str, status: str = "completed") -> None:
        """End a running interaction at its next poll with `status` (a script of
        ``["in_progress"]`` runs until this is called: a test decides when the provider is done,
        whoever polls). An interaction already ended or cancelled is left as it is."""
        self._state.interactions.end(interaction_id, status)

    @property
    def requests(self) -> list[SimRequest]:
        """Every request received so far, oldest first (a copy)."""
        return self._state.requests()

    @property
    def hangups(self) -> list[SimRequest]:
        """Completion requests whose client closed the connection while the simulator was still
        waiting to answer (its latency, a directive's delay or a `Slow` step), oldest first."""
        return self._state.hangups()

    def requests_for(self, model: str) -> list[SimRequest]:
        return [r for r in self._state.requests() if r.model == model]

    @property
    def interactions(self) -> dict[str, SimInteraction]:
        """Every interaction created so far by id (copies: re-read to see later polls)."""
        return self._state.interactions.snapshot()

    def clear(self) -> None:
        """Forget recorded requests, interactions and every script."""
        self._state.clear()


@contextlib.contextmanager
def _child_process(latency: float) -> Iterator[SimulatorURLs]:
    command = [sys.executable, "-m", "ask_another.simulator", "--latency", str(latency)]
    child = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    stderr = child.stderr
    assert stderr is not None
    drain: threading.Thread | None = None
    try:
        url = None
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while url is None and time.monotonic() < deadline:
            line = stderr.readline().decode(errors="replace")
            if not line:
                break
            seen.append(line)
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict) and event.get("event") == "simulator.listening":
                    url = str(event["url"])
        if url is None:
            raise RuntimeError("the simulator process did not start: " + "".join(seen)[-2000:])
        # Keep reading its stderr so the child never blocks on a full pipe.
        drain = threading.Thread(target=stderr.read, name="simulator-stderr", daemon=True)
        drain.start()
        yield SimulatorURLs(url)
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if drain is not None:
            drain.join(timeout=5)
        stderr.close()
