"""From a tool call's `Context` to the running `Runtime`, and from our errors to `ToolError`s."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from ask_another.errors import AskAnotherError, InvalidArgument, error_text
from ask_another.logs import get_logger
from ask_another.runtime import Runtime

log = get_logger("ask_another.server")


@dataclass(frozen=True)
class Unavailable:
    """What the lifespan holds instead of a `Runtime` when the runtime cannot start (an unusable
    `ASK_ANOTHER_HOME`): the server still answers `initialize`, and every tool call that needs
    the runtime fails with `error`."""

    error: AskAnotherError


def runtime_of(ctx: Context[Any, Any]) -> Runtime:
    """The runtime the server's lifespan opened."""
    runtime = ctx.request_context.lifespan_context
    if isinstance(runtime, Unavailable):
        raise ToolError(error_text(runtime.error))
    if not isinstance(runtime, Runtime):  # only if the server was built without our lifespan
        raise ToolError(error_text(RuntimeError("the ask-another runtime is not running")))
    return runtime


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
        raise ToolError(error_text(exc)) from None



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
    return error_text(InvalidArgument(f"Invalid arguments for {tool}: {'; '.join(problems)}"))
