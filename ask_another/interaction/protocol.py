"""The `Interaction` protocol: what a turn asks of a person, or of a policy standing in for one.

A router turn that carries an Interaction calls it for every tool the model asks for, in this
order: `tool_updated` (pending), `request_permission`, and when the answer is allow:
`register_call`, `tool_updated` (in_progress, cancellable), the tool itself, then `tool_updated`
(completed or failed). A denied call never runs. A tool the model named wrongly is reported failed
without asking anyone. The callbacks are awaited one at a time in the task that runs the turn, so
`request_permission` and `ask_choice` may wait as long as it takes to get an answer.
"""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

from ask_another.interaction.types import (
    Choice,
    ChoiceFailed,
    Decision,
    PermissionRequest,
    ToolUpdate,
)


@runtime_checkable
class CallHandle(Protocol):
    """What `register_call` hands over: whoever holds it can cancel that one running tool call."""

    def cancel(self, reason: str = "cancelled by the user") -> None: ...


@runtime_checkable
class Interaction(Protocol):
    async def tool_updated(self, update: ToolUpdate) -> None:
        """A tool call changed state."""

    async def request_permission(self, request: PermissionRequest) -> Decision:
        """Allow or deny one tool call; may block until a person answers."""

    async def register_call(self, tool_call_id: str, handle: CallHandle) -> None:
        """An allowed call is running under `handle`; called before its in_progress update."""

    async def ask_choice(self, choice: Choice) -> str | ChoiceFailed:
        """Put a multiple-choice question to the person; the chosen option id, or why none."""

    async def text_delta(self, text: str) -> None:
        """A fragment of the answer a streaming provider produced, in order."""


CALLBACKS = ("tool_updated", "request_permission", "register_call", "ask_choice", "text_delta")


def valid(obj: object) -> bool:
    """Whether `obj` implements every Interaction callback as a coroutine function."""
    return all(inspect.iscoroutinefunction(getattr(obj, name, None)) for name in CALLBACKS)
