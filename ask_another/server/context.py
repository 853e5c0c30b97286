"""From a tool call's `Context` to the server's state (`ServerState`), the running `Runtime` and
the `User` making it, and from our errors to `ToolError`s.

`user_of(ctx)` is the one place a request becomes a user: the access token the SDK's auth
middleware verified (HTTP with a bearer token), or the local user when there is none (stdio, a
loopback server started with --no-auth). `check_rate` applies the per-user tool-call limit
(limits.py) to every tool call; the server calls it once per call (server/app.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from ask_another.errors import AskAnotherError, InvalidArgument
from ask_another.logs import get_logger
from ask_another.runtime import Runtime
from ask_another.server.lifespan import ServerState, Unavailable
from ask_another.server.wording import tool_text
from ask_another.users import ADMIN_SCOPE, LOCAL_USER, User, token_user

__all__ = ["ADMIN_SCOPE", "LOCAL_USER", "ServerState", "Unavailable", "User", "arguments_text",
           "check_rate", "runtime_of", "state_of", "token_user", "tool_errors", "user_of"]

log = get_logger("ask_another.server")


def state_of(ctx: Context[ServerState]) -> ServerState:
    """The server's state, as its lifespan made it."""
    state = ctx.request_context.lifespan_context
    if not isinstance(state, ServerState):  # only if the server was built without our lifespan
        raise ToolError(tool_text(RuntimeError("the ask-another runtime is not running")))
    return state


def runtime_of(ctx: Context[ServerState]) -> Runtime:
    """The runtime the server's lifespan opened (a `ToolError` saying why it did not start)."""
    opened = state_of(ctx).opened
    if isinstance(opened, Unavailable):
        raise ToolError(tool_text(opened.error))
    return opened


def user_of(ctx: Context[ServerState] | None = None) -> User:
    """Who makes this request: the verified access token's user (its `subject`, else its
    `client_id`; an admin with the ``ask-another:admin`` scope), or `LOCAL_USER` without one.

    The token is read from the SDK's request context variable, so `ctx` itself is not needed;
    it is taken so every tool reads its user the same way it reads its runtime."""
    token = get_access_token()
    if token is None:
        return LOCAL_USER
    return token_user(token)


def check_rate(ctx: Context[ServerState] | None) -> None:
    """Count this tool call against its user's `ASK_ANOTHER_RATE_PER_MINUTE`; a `ToolError`
    saying the limit, the count and when to retry if it is reached. Nothing to count without a
    running runtime (the tool then fails on its own)."""
    try:
        state = ctx.request_context.lifespan_context if ctx is not None else None
    except ValueError:  # no request context: a direct call, not a client's
        return
    runtime = state.opened if isinstance(state, ServerState) else None
    if isinstance(runtime, Runtime):
        try:
            runtime.rates.check(user_of(ctx))
        except AskAnotherError as exc:
            raise ToolError(tool_text(exc)) from None


@contextlib.contextmanager
def tool_errors(tool: str) -> Iterator[None]:
    """Turn every failure inside a tool into a `ToolError` a person can act on (no traceback).

    Cancellation passes through untouched: trio's `Cancelled` is not an `Exception`.
    """
    try:
        yield
    except ToolError:
        raise
    except Exception as exc:
        if not isinstance(exc, AskAnotherError):
            log.exception("tool.crashed", tool=tool)
        raise ToolError(tool_text(exc)) from None



def arguments_text(tool: str, exc: ValidationError) -> str:
    """The SDK's argument validation failure, worded like our other errors (one line per field,
    no pydantic type codes or links) and ending with the feedback pointer."""
    problems = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(part) for part in err["loc"]) or "the arguments"
        if err["type"] == "missing":
            problems.append(f"{field} is required")
            continue
        message = str(err["msg"])
        message = message[len("Input "):] if message.startswith("Input ") else message
        shown = repr(err.get("input"))
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        problems.append(f"{field} {message}, got {shown}")
    return tool_text(InvalidArgument(f"Invalid arguments for {tool}: {'; '.join(problems)}"))
