"""One router turn: call the model with tools, run what it asks for under the lifecycle, repeat.

For every tool call the model asks for, in the order it gave them:

1. a tool the model named wrongly is reported `failed` without asking anyone;
2. `tool_updated(pending)`; arguments that are not a JSON object or do not fit the tool's schema
   fail here with a message the model can act on, without asking anyone;
3. the policy answers `allow` or `deny` itself, or (`ask`) the Interaction's `request_permission`
   does; a denied call never runs and the model receives an error result that says why;
4. on allow, the tool runs in its own task with its own cancel scope: `register_call` with a
   handle that cancels just that call, `tool_updated(in_progress, cancellable=True)`, then
   `completed` or `failed`.

Results go back to the model as tool messages and the turn continues until the model answers
without asking for tools (or `max_rounds` is reached). A turn without an Interaction runs under
the policy silently: what the policy would ask a person about is denied, since nobody can answer.

A turn can be resumed (a research job's after a kill, research/methods/agent.py): `so_far` holds
what its earlier rounds added, and the model's answer of the round that was running its tools
when it stopped. That round's tool calls run again, except that a call of class ``effect`` (it
may have run, and running it twice is worse than asking) is put to the person again whatever
the policy says (denied without an Interaction). `on_asked` is awaited with the model's answer
before its tools run, `on_round` after each round, so the caller can store both.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
import trio

from ask_another.interaction.protocol import Interaction
from ask_another.interaction.tools import ToolCall, ToolRegistry
from ask_another.interaction.types import (
    Allow,
    Decision,
    Deny,
    PermissionRequest,
    ToolStatus,
    ToolUpdate,
)
from ask_another.policy import Policy, Rule

log = structlog.get_logger("ask_another.router")

Message = dict[str, Any]
DEFAULT_MAX_ROUNDS = 8


class RequestedCall(Protocol):
    """A tool call as the model asked for it (the gateway's result type fits this)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str | Mapping[str, object]: ...


class ModelAnswer(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def tool_calls(self) -> Sequence[RequestedCall]: ...


ModelCall = Callable[
    [list[Message], list[dict[str, object]], Callable[[str], Awaitable[None]] | None],
    Awaitable[ModelAnswer],
]
"""`(messages, tool definitions, on_delta)` -> the model's answer. `on_delta` is None when nobody
listens for text fragments; a provider that cannot stream never calls it."""


@dataclass(slots=True)
class CallRecord:
    """What became of one tool call, kept for the job timeline and for history replay."""

    id: str
    tool: str
    arguments: object
    status: ToolStatus
    result: object = None


@dataclass(slots=True)
class TurnResult:
    text: str
    messages: list[Message]
    """Every message this turn added: assistant tool-call messages, tool results, final answer."""
    calls: list[CallRecord] = field(default_factory=list)
    rounds: int = 0


@dataclass(slots=True)
class TurnSoFar:
    """A turn to resume: the messages and tool calls its finished rounds added, their number,
    and the model's tool-call answer of the round that had not finished (None: none)."""

    messages: list[Message]
    calls: list[CallRecord]
    rounds: int
    asked: Message | None = None


@dataclass(frozen=True, slots=True)
class _Asked:
    """A tool call of a stored tool-call answer (a `RequestedCall`)."""

    id: str
    name: str
    arguments: str


def _asked_calls(message: Message) -> list[_Asked]:
    return [_Asked(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or []]


class _ScopeHandle:
    """The CallHandle for one running tool call: cancelling it cancels only that call."""

    __slots__ = ("_scope", "reason")

    def __init__(self, scope: trio.CancelScope) -> None:
        self._scope = scope
        self.reason: str | None = None

    def cancel(self, reason: str = "cancelled by the user") -> None:
        if self.reason is None:
            self.reason = reason
        self._scope.cancel()


def _tool_message(call_id: str, result: object) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result, default=str)}


def _failure(message: str) -> dict[str, object]:
    return {"success": False, "error": message}


def _parse_arguments(raw: str | Mapping[str, object]) -> tuple[dict[str, object] | None, str]:
    if isinstance(raw, Mapping):
        return dict(raw), ""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return None, "arguments must be a JSON object"
    return value, ""


async def run_turn(
    model_call: ModelCall,
    messages: Sequence[Message],
    tools: ToolRegistry,
    *,
    policy: Policy,
    interaction: Interaction | None = None,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    so_far: TurnSoFar | None = None,
    on_asked: Callable[[int, Message], Awaitable[None]] | None = None,
    on_round: Callable[[TurnResult], Awaitable[None]] | None = None,
    on_standing: OnStanding | None = None,
) -> TurnResult:
    """Run one turn from `messages` (not modified) and return what it added (see the module
    docstring for `so_far`, `on_asked` and `on_round`). `on_standing(request, rule, scope)` is
    awaited for each call a person's standing answer decided without asking (for the audit).

    Cancellation: cancelling the caller cancels the model call or the running tool; the
    Interaction is not told (the job that owns the turn records the cancellation).
    """
    history = list(messages)
    result = TurnResult(text="", messages=[])
    definitions = tools.definitions()
    on_delta = interaction.text_delta if interaction is not None else None
    if so_far is not None:
        history += so_far.messages
        result = TurnResult(text="", messages=list(so_far.messages), calls=list(so_far.calls),
                            rounds=so_far.rounds)
        last = so_far.messages[-1] if so_far.messages else None
        if last is not None and last.get("role") == "assistant" and not last.get("tool_calls"):
            result.text = str(last.get("content") or "")  # it had answered: nothing to do
            return result
        if so_far.asked is not None:
            result.rounds += 1
            history.append(so_far.asked)
            result.messages.append(so_far.asked)
            await _run_calls(_asked_calls(so_far.asked), tools, policy, interaction, history,
                             result, again=True, on_standing=on_standing)
            if on_round is not None:
                await on_round(result)
    while result.rounds < max_rounds:
        result.rounds += 1
        answer = await model_call(history, definitions, on_delta)
        if not answer.tool_calls:
            final: Message = {"role": "assistant", "content": answer.text}
            history.append(final)
            result.messages.append(final)
            result.text = answer.text
            if on_round is not None:
                await on_round(result)
            return result
        asked: Message = {
            "role": "assistant",
            "content": answer.text or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments
                        if isinstance(call.arguments, str)
                        else json.dumps(call.arguments),
                    },
                }
                for call in answer.tool_calls
            ],
        }
        if on_asked is not None:
            await on_asked(result.rounds, asked)
        history.append(asked)
        result.messages.append(asked)
        await _run_calls(answer.tool_calls, tools, policy, interaction, history, result,
                         on_standing=on_standing)
        if on_round is not None:
            await on_round(result)
    result.text = (
        f"The turn stopped after {max_rounds} rounds of tool calls without a final answer."
    )
    return result


async def _run_calls(calls: Sequence[RequestedCall], tools: ToolRegistry, policy: Policy,
                     interaction: Interaction | None, history: list[Message],
                     result: TurnResult, *, again: bool = False,
                     on_standing: OnStanding | None = None) -> None:
    """One round's tool calls, in order, each result added to the history and the result
    (`again`: the round of a resumed turn, see the module docstring)."""
    for call in calls:
        record = await _run_call(call, tools, policy, interaction, again, on_standing)
        result.calls.append(record)
        reply = _tool_message(call.id, record.result)
        history.append(reply)
        result.messages.append(reply)


OnStanding = Callable[[PermissionRequest, Rule, str], Awaitable[None]]
"""Told of a call a standing answer decided: its request, the rule applied and its scope."""

MAX_DENY_MESSAGE = 2000
"""Characters of a person's reason given to the model with a denial."""


async def _decide(
    request: PermissionRequest, policy: Policy, interaction: Interaction | None,
    asks_the_person: bool = False, again: bool = False,
    on_standing: OnStanding | None = None,
) -> Decision:
    rule = policy.decide(request.tool, request.class_, request.arguments)
    if again and request.class_ == "effect" and rule != "deny":
        # It may have run before the turn stopped: a person decides whether it runs again.
        if interaction is None:
            return Deny("rejected")
        return await interaction.request_permission(request)
    scope = policy.standing_scope(request.tool, request.class_, request.arguments)
    if scope is not None and on_standing is not None:
        await on_standing(request, rule, scope)
    if rule == "allow" or (rule == "ask" and asks_the_person):
        return Allow()
    if rule == "deny" or interaction is None:
        return Deny("rejected")
    return await interaction.request_permission(request)


async def _run_call(
    call: RequestedCall,
    tools: ToolRegistry,
    policy: Policy,
    interaction: Interaction | None,
    again: bool = False,
    on_standing: OnStanding | None = None,
) -> CallRecord:
    async def update(status: ToolStatus, title: str, **extra: Any) -> None:
        if interaction is not None:
            await interaction.tool_updated(
                ToolUpdate(tool_call_id=call.id, title=title, status=status, **extra)
            )

    tool = tools.get(call.name)
    if tool is None:
        message = (
            f"unknown tool {call.name!r}; the tools available are: "
            + (", ".join(tools.names()) or "none")
        )
        await update("failed", call.name, current_step=message)
        log.info("tool.unknown", tool_call_id=call.id, tool=call.name)
        return CallRecord(call.id, call.name, call.arguments, "failed", _failure(message))

    title = tool.title or tool.name
    await update("pending", title)
    arguments, problem = _parse_arguments(call.arguments)
    if arguments is not None:
        problem = tool.check_arguments(arguments) or ""
    elif problem:
        problem = f"invalid arguments for {tool.name}: {problem}"
    if problem:
        await update("failed", title, current_step=problem)
        return CallRecord(call.id, tool.name, call.arguments, "failed", _failure(problem))
    assert arguments is not None

    request = PermissionRequest(
        tool_call_id=call.id,
        tool=tool.name,
        server=tool.server,
        class_=tool.call_class(arguments),
        arguments=arguments,
    )
    decision = await _decide(request, policy, interaction, tool.asks_the_person, again,
                             on_standing)
    if isinstance(decision, Deny):
        message = (
            f"permission to run {tool.name} was denied ({decision.reason}); "
            "the call did not run"
        )
        if decision.message:
            message += f". The user said: {decision.message[:MAX_DENY_MESSAGE]}"
        await update("failed", title, current_step=f"denied: {decision.reason}")
        log.info("tool.denied", tool_call_id=call.id, tool=tool.name, reason=decision.reason)
        return CallRecord(call.id, tool.name, arguments, "failed", _failure(message))

    return await _run_allowed(call.id, tool.name, title, arguments, tools, interaction, update)


async def _run_allowed(
    call_id: str,
    name: str,
    title: str,
    arguments: dict[str, object],
    tools: ToolRegistry,
    interaction: Interaction | None,
    update: Callable[..., Awaitable[None]],
) -> CallRecord:
    tool = tools.get(name)
    assert tool is not None
    outcome: dict[str, object] = {}
    # The tool starts only once in_progress has been told, so its own use of the Interaction
    # (ask_user asks a choice) never overlaps the lifecycle callbacks.
    announced = trio.Event()

    async def work(task_status: trio.TaskStatus[_ScopeHandle]) -> None:
        with trio.CancelScope() as scope:
            handle = _ScopeHandle(scope)
            task_status.started(handle)
            await announced.wait()
            try:
                outcome["value"] = await tool.run(
                    ToolCall(id=call_id, name=name, arguments=arguments, interaction=interaction)
                )
            except Exception as exc:  # a tool's failure is the model's information, not a crash
                log.warning("tool.failed", tool_call_id=call_id, tool=name, exc_info=True)
                outcome["error"] = f"{name} failed: {exc}"
        if scope.cancelled_caught:
            outcome["error"] = handle.reason or "cancelled"

    async with trio.open_nursery() as nursery:
        handle = await nursery.start(work)
        if interaction is not None:
            await interaction.register_call(call_id, handle)
        await update("in_progress", title, cancellable=True)
        announced.set()

    if "error" in outcome:
        message = str(outcome["error"])
        await update("failed", title, current_step=message)
        return CallRecord(call_id, name, arguments, "failed", _failure(message))
    await update("completed", title)
    return CallRecord(call_id, name, arguments, "completed", outcome.get("value"))
