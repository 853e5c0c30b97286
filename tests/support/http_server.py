"""Start `python -m ask_another serve --http` as a real subprocess and connect clients to it.

The server is started on `--port 0`; its `http.listening` log line names the URL it bound, and
`http_server` waits for that line (the runtime is open by then), or for the process to exit;
the line is logged at INFO, so the server must not run with ASK_ANOTHER_LOG_LEVEL above it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from deadlines import generous
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pycache import PYCACHE
from stdio_server import REPO

LISTENING = re.compile(r"http\.listening .*?url=(\S+)")


@dataclass
class HttpServer:
    url: str  # http://127.0.0.1:PORT/mcp
    process: trio.Process
    stderr: Path

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    def log(self) -> str:
        return self.stderr.read_text()

    def signal(self, signum: int = signal.SIGTERM) -> None:
        self.process.send_signal(signum)


def server_command(*args: str, open_files: tuple[int, int] | None = None) -> list[str]:
    """The server's command line; with `open_files` (soft, hard), it starts under that
    RLIMIT_NOFILE (set by a Python that then execs the server: no preexec_fn in a threaded
    test process)."""
    command = [sys.executable, "-m", "ask_another", "serve", "--http", "--port", "0", *args]
    if open_files is None:
        return command
    limit = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, "
             f"{open_files!r}); os.execv(sys.executable, sys.argv[1:])")
    return [sys.executable, "-c", limit, *command]


def process_env(env: dict[str, str]) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPYCACHEPREFIX": str(PYCACHE), **env}


async def wait_for_line(path: Path, pattern: re.Pattern[str], process: trio.Process,
                        seconds: float = 60) -> re.Match[str]:
    """The first match of `pattern` in the log file `path`, polled until it appears; fails at
    once if the process exits first (with its log in the message)."""
    with trio.fail_after(generous(seconds)):
        while True:
            text = await trio.Path(path).read_text()
            found = pattern.search(text)
            if found:
                return found
            if process.returncode is not None:
                raise AssertionError(f"the server exited ({process.returncode}) before "
                                     f"{pattern.pattern!r}:\n{text}")
            await trio.sleep(0.05)


@asynccontextmanager
async def http_server(env: dict[str, str], stderr: Path, *args: str,
                      open_files: tuple[int, int] | None = None) -> AsyncIterator[HttpServer]:
    """A running `serve --http` (extra `args`: --host, --no-auth; `open_files`: its
    RLIMIT_NOFILE, soft and hard); killed afterwards if it is still running (a test that stops
    it waits for `server.process` itself)."""
    with stderr.open("w") as err:
        process = await trio.lowlevel.open_process(
            server_command(*args, open_files=open_files), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=err, env=process_env(env), cwd=REPO)
    try:
        found = await wait_for_line(stderr, LISTENING, process)
        yield HttpServer(found.group(1), process, stderr)
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


@asynccontextmanager
async def http_client_for(url: str, token: str | None = None, mode: str = "auto",
                          **client_options: Any) -> AsyncIterator[Client]:
    """An `mcp.Client` over Streamable HTTP, sending `token` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http, Client(
            streamable_http_client(url, http_client=http), mode=mode,
            read_timeout_seconds=generous(60),
            **client_options) as client:
        yield client


def run_cli(env: dict[str, str], *args: str, check: bool = False
            ) -> subprocess.CompletedProcess[str]:
    """`python -m ask_another ARGS` to completion (the token commands, a refused serve)."""
    return subprocess.run([sys.executable, "-m", "ask_another", *args], env=process_env(env),
                          cwd=REPO, capture_output=True, text=True, timeout=generous(60),
                          check=check, stdin=subprocess.DEVNULL)


