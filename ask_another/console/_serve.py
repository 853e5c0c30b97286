"""`ask-another console`: the console alone, for one person on one machine.

A loopback listener over the home: its runtime opens the home's store, so the console sees every
job of every session on that home and answers them through the store's cross-process requests
(research/jobs.py), as `check_research` and `answer_permission` of any session would. Nobody
logs in with a token: the command prints a one-time link (its code works once, for five
minutes) and opens it in a browser where there is one; the session it starts is the local
user's, an admin, as at the terminal. Ctrl-C stops the listener and the runtime; the jobs keep
running in the home's job host (research/host.py), which the console, a per-session face,
makes sure of when it finds an unfinished job.
"""

from __future__ import annotations

import os
import secrets
import sys
import webbrowser
from collections.abc import Callable

import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route

from ask_another.config import Config
from ask_another.console._app import ROOT, Console, Login
from ask_another.console._session import LoginCodes
from ask_another.console_link import publish_console
from ask_another.errors import ConfigError
from ask_another.hosting import (
    Drain,
    Unavailable,
    is_loopback,
    listen,
    open_lifespan,
    serve_until_stopped,
    url_host,
)
from ask_another.logs import get_logger
from ask_another.rebinding import transport_security

__all__ = ["serve_console"]

log = get_logger("ask_another.console")


def _can_open_browser() -> bool:
    """A graphical browser can be opened: not on a server over SSH, where `webbrowser` would
    start a text browser in this terminal."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


async def _open(link: str) -> None:
    try:
        await trio.to_thread.run_sync(webbrowser.open, link)
    except Exception:  # no browser after all: the link is printed
        log.info("console.no_browser")


async def serve_console(config: Config, host: str = "127.0.0.1", port: int = 0, *,
                        open_browser: bool = True, allow_stop: bool = False,
                        say: Callable[[str], None] = print) -> None:
    """Serve the console on `host:port` (a loopback address; port 0: any free one) until
    SIGINT or SIGTERM; `say` gets the one-time login link (the terminal)."""
    if not is_loopback(host):
        raise ConfigError(f"ask-another console listens on a loopback address only (127.0.0.1, "
                          f"::1, localhost), not {host}: its login link makes the visitor the "
                          "home's owner. For a team, use `ask-another serve --http`, whose "
                          "console logs in with tokens")
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be 0-65535, got {port}")
    sock = listen(host, port)
    port = sock.getsockname()[1]
    base = f"http://{url_host(host)}:{port}"
    async with open_lifespan(config, prewarm_after=None, per_session=True) as opened:
        if isinstance(opened, Unavailable):
            sock.close()
            raise opened.error
        codes = LoginCodes()
        console = Console(opened, secrets.token_bytes(32), Login("code", codes=codes),
                          allow_stop=allow_stop, hosts=transport_security(host, None))

        async def home(_: Request) -> Response:
            return RedirectResponse(f"{ROOT}/jobs", status_code=303)

        app = Starlette(routes=[Route("/", home), Mount(ROOT, app=console.app)])
        link = f"{base}{ROOT}/login/once?code={codes.new()}"

        def ready() -> None:
            say(f"The ask-another console of {config.home} is at {base}{ROOT}\n"
                f"Log in with this link (it works once, for 5 minutes):\n  {link}\n"
                "Press Ctrl-C to stop it.")
            if open_browser and _can_open_browser():
                # In a thread: a browser that starts slowly must not hold up the listener.
                trio.lowlevel.spawn_system_task(_open, link)

        # Sessions on this home (stdio, `ask-another research`) link their pending requests
        # here while it runs (ask_another/console_link.py).
        with publish_console(config.home, f"{base}{ROOT}"):
            await serve_until_stopped(Drain(app), sock, config, f"{base}{ROOT}",
                                      f"{base}{ROOT}", "one-time login link", ready=ready)
