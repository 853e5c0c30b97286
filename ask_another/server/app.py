"""`build_server(config)`: the ask-another `MCPServer`, its instructions and its lifespan.

The server is built from a `Config` that has already been read, so the instructions can name the
configured favourites and any malformed variable. Nothing slow happens here or in the lifespan:
the runtime opens the store and starts the gateway's worker process, which imports litellm on its
own, so `initialize` and `tools/list` are answered at once. `serve_stdio` is given a lifespan
opened before this module (and the SDK) was imported (server/lifespan.py), so the worker's import
overlaps the SDK's.

Logging must be configured (`logs.configure_logging`) before this module builds a server: the
SDK installs its own root handler otherwise.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import structlog
import trio
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from ask_another.config import Config
from ask_another.home import home_problem
from ask_another.logs import ensure_logging
from ask_another.runtime import Runtime
from ask_another.server import events, tasks
from ask_another.server.context import arguments_text, check_rate
from ask_another.server.lifespan import ServerState, Unavailable, open_lifespan
from ask_another.server.metadata import describe_tool, output_schemas
from ask_another.server.stdio import AskAnotherServer
from ask_another.server.tools import (
    articles,
    completion,
    consensus,
    feedback,
    models,
    reports,
    research,
    sequential,
    usage,
)

__all__ = ["build_server", "instructions", "serve_stdio"]


def instructions(config: Config, extra_howto: Sequence[str] = (),
                 unusable: str | None = None) -> str:
    """The server instructions: purpose, how to, favourites, problems, feedback.

    `extra_howto` lets later tool areas (research) add their own how-to lines; `unusable` is why
    the server cannot work at all (an unusable home), said first.
    """
    lines = [
        *([f"NOT WORKING: {unusable} Every tool that needs the store fails until it is fixed "
           "and the server restarted (`ask-another doctor` checks it)."] if unusable else []),
        "Purpose:",
        "  - Ask another LLM for a second opinion.",
        "  - Provide access to other models through litellm.",
        "Howto:",
        "  - For a quick query, use completion with a favourite model (see below).",
        "  - To use another model: search_families → search_models → completion.",
        *[f"  - {line}" for line in extra_howto],
        "  - Never guess model IDs.",
    ]
    if config.models:
        lines.append("Favourites (pass the shorthand or the ID as completion's model):")
        provider_counts: dict[str, int] = {}
        for entry in config.models:
            provider_counts[entry.provider] = provider_counts.get(entry.provider, 0) + 1
        for entry in config.models:
            names = [entry.shorthand]
            if provider_counts[entry.provider] == 1 and entry.provider != entry.shorthand:
                names.append(entry.provider)
            lines.append(f"  - {' or '.join(repr(n) for n in names)}: {entry.model}")
    else:
        lines.append("Favourites: none configured. The server's environment needs "
                     "MODEL_<NAME>=\"provider/model;api-key\" variables.")
    if config.problems:
        lines.append("Configuration problems (these variables were ignored):")
        lines.extend(f"  - {p}" for p in config.problems)
    lines += [
        "Feedback:",
        "  - We'd love to hear how ask-another is working for you. Call",
        "    feedback to share issues, suggestions, or anything that felt",
        "    harder than it should be.",
        "  - Call feedback before retrying if you receive confusing output",
        "    or a tool call fails — it helps us improve.",
    ]
    return "\n".join(lines)


def _version() -> str:
    try:
        return version("ask-another")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0"


class _Server(AskAnotherServer):
    """The SDK's server with our stdio transport (server/stdio.py), its argument validation
    errors worded like ours and its tool list carrying titles, numeric limits and output
    schemas (server/metadata.py)."""

    _listed: list[MCPTool] | None = None

    async def list_tools(self) -> list[MCPTool]:
        # Fixed once built (every tool is registered in build_server, before any request), so
        # described once: clients list the tools before calls, and building the output schemas
        # and the limits each time was a few per cent of the server's CPU under load.
        if self._listed is None:
            schemas = output_schemas()
            self._listed = [describe_tool(tool, schemas) for tool in await super().list_tools()]
        return self._listed

    metrics: Any = None  # serve --http: the /metrics counters (console/_metrics.py)
    updates: tasks.JobUpdates | None = None  # research://JOB_ID updates (server/tasks/)

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[ServerState] | None = None,
                        ) -> CallToolResult | InputRequiredResult:
        if self.metrics is None:
            return await self._call_tool(name, arguments, context)
        began = time.perf_counter()
        failed = True
        try:
            result = await self._call_tool(name, arguments, context)
            failed = isinstance(result, CallToolResult) and result.is_error
            return result
        finally:
            self.metrics.observe(name, time.perf_counter() - began, failed)

    async def _call_tool(self, name: str, arguments: dict[str, Any],
                         context: Context[ServerState] | None = None,
                         ) -> CallToolResult | InputRequiredResult:
        check_rate(context)  # the one place every tool call passes: the per-user rate limit
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            raise ToolError(arguments_text(name, cause)) from cause


def build_server(config: Config, *, prewarm_after: float | None = 0,
                 auth: AuthSettings | None = None,
                 token_verifier: TokenVerifier | None = None,
                 opened: Runtime | Unavailable | None = None,
                 metrics: Any = None, console_url: str | None = None
                 ) -> MCPServer[ServerState]:
    """The MCP server with every tool registered; its lifespan opens the runtime
    (`open_lifespan`), or holds `opened`, a lifespan its caller opened and closes, in the
    server's one `ServerState`.

    `auth` and `token_verifier` are for Streamable HTTP (server/http.py, server/auth.py); stdio
    has no authentication: the user who started the process is the caller. `metrics` (a
    `console.Metrics`, for /metrics) counts every tool call and its latency; `console_url` is
    where the console served with it is (`ServerState.console_url`).

    Provider calls run in the gateway's worker process (runtime.py picks the transport), so
    this process never imports litellm.
    """
    ensure_logging(config.log_level)  # before MCPServer(), which would install its own handler
    # The instructions say first that the server cannot work (the lifespan answers every tool
    # call with why): a few system calls.
    unusable = home_problem(config.home)

    # research://JOB_ID updates for listeners of both eras, watched for while the runtime runs.
    updates = tasks.JobUpdates(channel=config.claude_channel)

    @asynccontextmanager
    async def lifespan(_: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        async with contextlib.AsyncExitStack() as stack:
            state = opened if opened is not None else await stack.enter_async_context(
                open_lifespan(config, prewarm_after=prewarm_after))
            async with trio.open_nursery() as nursery:
                if isinstance(state, Runtime):
                    nursery.start_soon(updates.run, state)
                yield ServerState(state, console_url=console_url)
                nursery.cancel_scope.cancel()

    server = _Server(
        "ask-another",
        title="ask-another",
        description="Ask other models for a second opinion, through litellm.",
        instructions=instructions(config, (*consensus.HOWTO, *research.HOWTO, *sequential.HOWTO,
                                           *articles.HOWTO), unusable),
        version=_version(),
        lifespan=lifespan,
        auth=auth,
        token_verifier=token_verifier,
        log_level=config.log_level,  # type: ignore[arg-type]
        # MCP Tasks over research jobs, in both protocol eras (server/tasks/).
        extensions=[*tasks.extensions(), events.EventsExtension()],
        middleware=tasks.middleware(updates),
        subscriptions=updates,
    )
    server.metrics = metrics
    server.updates = updates
    tasks.live_resources(server, updates)
    events.serve_events(server)  # a job's end or wait as MCP Events (server/events.py)
    models.register(server)
    completion.register(server)
    consensus.register(server)
    research.register(server)
    articles.register(server)
    sequential.register(server)
    feedback.register(server)
    reports.register(server)
    usage.register(server)
    return server


async def serve_stdio(config: Config, opened: Runtime | Unavailable | None = None) -> None:
    """Serve MCP on stdin/stdout until the client closes the connection (run under trio).
    `opened`: the lifespan, already opened by the caller (see `build_server`)."""
    try:
        await build_server(config, opened=opened).run_stdio_async()
    except* BrokenPipeError:
        # The client closed its end of stdout before reading every reply: it is gone, and that
        # ends the session like closing stdin does. Python would still try to flush stdout at
        # exit and print an "Exception ignored" traceback to stderr: point it at /dev/null.
        structlog.get_logger(__name__).info("server.client_gone", reason="stdout closed")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
