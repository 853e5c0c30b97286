"""From a task request to a job: the runtime and the caller's console, a job's refusal as a
JSON-RPC error, and the job a task-augmented tools/call starts (its tool's arguments, checked as
the tool's schema would)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from ask_another.errors import AskAnotherError, InvalidArgument
from ask_another.logs import get_logger
from ask_another.research.methods import CONSENSUS_METHOD
from ask_another.runtime import Runtime
from ask_another.server.lifespan import ServerState, Unavailable
from ask_another.server.tools.stances import stances_map
from ask_another.server.wording import tool_text
from ask_another.store.jobs import JobRecord
from ask_another.users import User

__all__ = [
    "console_root",
    "immediate_text",
    "refused",
    "request_runtime",
    "start_job",
    "task_id_of",
]


log = get_logger("ask_another.server.tasks")


def request_runtime(ctx: ServerRequestContext[ServerState, Any]) -> Runtime:
    state = ctx.lifespan_context
    runtime = state.opened if isinstance(state, ServerState) else None
    if isinstance(runtime, Unavailable):
        raise MCPError(types.INTERNAL_ERROR, tool_text(runtime.error))
    if not isinstance(runtime, Runtime):
        raise MCPError(types.INTERNAL_ERROR, "the ask-another runtime is not running")
    return runtime


def console_root(ctx: ServerRequestContext[ServerState, Any]) -> str | None:
    """Where the approval links of the input requests point (`ServerState.console_root`)."""
    state = ctx.lifespan_context
    return state.console_root() if isinstance(state, ServerState) else None


def refused(exc: Exception) -> MCPError:
    """A job's refusal (unknown id, another user's job, bad arguments) as invalid params, one
    line a person can act on; anything else as an internal error, logged."""
    if isinstance(exc, AskAnotherError):
        return MCPError(types.INVALID_PARAMS, tool_text(exc))
    log.exception("tasks.crashed")
    return MCPError(types.INTERNAL_ERROR, tool_text(exc))


def task_id_of(params: Mapping[str, Any] | None) -> str:
    task_id = (params or {}).get("taskId")
    if not isinstance(task_id, str) or not task_id.strip():
        raise MCPError(types.INVALID_PARAMS, "taskId is required: the id of a task (a research "
                                             "job id, such as r-0123456789)")
    return task_id.strip()


def _argument(arguments: Mapping[str, Any], name: str, default: str | None = None, *,
              tool: str = "start_research") -> str:
    value = arguments.get(name, default)
    if not isinstance(value, str):
        raise InvalidArgument(f"Invalid arguments for {tool}: {name} is required "
                              "and must be a string" if value is None else
                              f"Invalid arguments for {tool}: {name} must be a string, "
                              f"got {value!r}")
    return value


def _optional(arguments: Mapping[str, Any], name: str, kind: type | tuple[type, ...],
              what: str) -> Any:
    """A consensus argument that may be left out (None), else of `kind`."""
    value = arguments.get(name)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise InvalidArgument(f"Invalid arguments for consensus: {name} must be {what}, got "
                              f"{value!r}")
    return value


async def _start_consensus(runtime: Runtime, user: User, arguments: Mapping[str, Any]
                           ) -> JobRecord:
    """The consensus job a task-augmented consensus asks for: the tool's arguments, checked
    here as its schema would (`confirm_spend` has no use: the task asks for the confirmation)."""
    models = arguments.get("models")
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise InvalidArgument("Invalid arguments for consensus: models is required and must "
                              f"be a list of model names, got {models!r}")
    stances = stances_map(arguments.get("stances"))
    return await runtime.jobs_for(user).start_consensus(
        models, _argument(arguments, "prompt", tool="consensus"),
        system=_optional(arguments, "system", str, "a string"), stances=stances,
        synthesize=_optional(arguments, "synthesize", str, "a model name"),
        conversation_id=_optional(arguments, "conversation_id", str, "a conversation id"),
        temperature=_optional(arguments, "temperature", (int, float), "a number"),
        timeout=_optional(arguments, "timeout", (int, float), "a number of seconds"))


async def start_job(runtime: Runtime, user: User, tool: str, arguments: Mapping[str, Any]
                 ) -> JobRecord:
    """Start the job a task-augmented call of `tool` asks for; the row is committed when this
    returns, so tasks/get finds it from any node at once."""
    runtime.rates.check(user)  # the per-user tool-call limit, as for every tool call
    if tool == "consensus":
        record = await _start_consensus(runtime, user, arguments)
    else:
        model = _argument(arguments, "model")
        query = _argument(arguments, "query")
        method = _argument(arguments, "method", "auto").strip() or "auto"
        depth = _argument(arguments, "depth", "standard").strip() or "standard"
        record = await runtime.jobs_for(user).start(model, query, method, depth=depth)
    log.info("tasks.created", job_id=record.id, user=user.id, tool=tool)
    return record


def immediate_text(record: JobRecord) -> str:
    if record.method == CONSENSUS_METHOD:
        return (f"Consensus {record.id} runs as a task. The panel's answer arrives when the "
                f"task completes; check_research with job_id='{record.id}' shows it too.")
    return (f"Research job {record.id} ({record.model}) runs as a task. Its report arrives "
            f"when the task completes; check_research with job_id='{record.id}' shows it too.")
