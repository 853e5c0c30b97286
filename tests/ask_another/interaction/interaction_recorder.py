"""`Recorder`: an agent host's `Interaction` for the interaction tests, which writes every
callback down (`events`, in order) and answers from a script (`decision`, `choice`)."""

from __future__ import annotations

from ask_another.interaction import (
    ALLOW,
    CallHandle,
    Choice,
    ChoiceFailed,
    Decision,
    PermissionRequest,
    ToolUpdate,
)


class Recorder:
    """An Interaction that writes down every callback and answers from a script."""

    def __init__(self, decision: Decision = ALLOW, choice: str | ChoiceFailed = "a") -> None:
        self.events: list[tuple[str, object]] = []
        self.decision = decision
        self.choice = choice
        self.handles: dict[str, CallHandle] = {}
        self.requests: list[PermissionRequest] = []

    async def tool_updated(self, update: ToolUpdate) -> None:
        self.events.append(("update", update.status))

    async def request_permission(self, request: PermissionRequest) -> Decision:
        self.events.append(("permission", request.tool))
        self.requests.append(request)
        return self.decision

    async def register_call(self, tool_call_id: str, handle: CallHandle) -> None:
        self.events.append(("register", tool_call_id))
        self.handles[tool_call_id] = handle

    async def ask_choice(self, choice: Choice) -> str | ChoiceFailed:
        self.events.append(("choice", choice.prompt))
        return self.choice

    async def text_delta(self, text: str) -> None:
        self.events.append(("delta", text))
