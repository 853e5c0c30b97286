"""ask-another: ask other models for a second opinion or a deep research report.

The embedding API (the MCP server is built on the same calls)::

    async with ask_another.open_runtime(ask_another.Config.from_env()) as runtime:
        turn = await runtime.run_turn("gpt4", "Summarise https://...", interaction=my_ui,
                                      tools=[my_tool])
        job = await runtime.jobs.start("gpt4", "Research ...", interaction=my_ui)
        final = await runtime.jobs.wait(job.id, timeout=600)

From asyncio, `ask_another.aio.open_runtime` takes the same arguments and gives the same calls
as asyncio coroutines (trio runs as the guest of the host's loop); the adapters for agent
frameworks are in `ask_another.adapters`. See docs/interaction.md for the tool-call lifecycle,
the `Interaction` protocol and the asyncio face.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ask_another._lazy import lazy_getattr

if TYPE_CHECKING:
    from ask_another.config import Config as Config
    from ask_another.errors import AskAnotherError as AskAnotherError
    from ask_another.interaction import ALLOW as ALLOW
    from ask_another.interaction import Allow as Allow
    from ask_another.interaction import CallHandle as CallHandle
    from ask_another.interaction import Choice as Choice
    from ask_another.interaction import ChoiceFailed as ChoiceFailed
    from ask_another.interaction import ChoiceOption as ChoiceOption
    from ask_another.interaction import Decision as Decision
    from ask_another.interaction import Deny as Deny
    from ask_another.interaction import Interaction as Interaction
    from ask_another.interaction import PermissionRequest as PermissionRequest
    from ask_another.interaction import Policy as Policy
    from ask_another.interaction import Question as Question
    from ask_another.interaction import Tool as Tool
    from ask_another.interaction import ToolCall as ToolCall
    from ask_another.interaction import ToolRegistry as ToolRegistry
    from ask_another.interaction import ToolUpdate as ToolUpdate
    from ask_another.interaction import valid as valid
    from ask_another.interaction.router import CallRecord as CallRecord
    from ask_another.interaction.router import TurnResult as TurnResult
    from ask_another.research import JobUpdate as JobUpdate
    from ask_another.research import ResearchJobs as ResearchJobs
    from ask_another.runtime import Runtime as Runtime
    from ask_another.runtime import open_runtime as open_runtime
    from ask_another.store.jobs import JobRecord as JobRecord

# Each public name and the module it lives in. They are imported at first use (PEP 562):
# the gateway's worker process, `ask-another --help` and the people commands import this
# package without needing the runtime and everything it imports (about 0.1 s and 10 MiB).
_EXPORTS = {
    "ALLOW": "ask_another.interaction",
    "Allow": "ask_another.interaction",
    "AskAnotherError": "ask_another.errors",
    "CallHandle": "ask_another.interaction",
    "CallRecord": "ask_another.interaction.router",
    "Choice": "ask_another.interaction",
    "ChoiceFailed": "ask_another.interaction",
    "ChoiceOption": "ask_another.interaction",
    "Config": "ask_another.config",
    "Decision": "ask_another.interaction",
    "Deny": "ask_another.interaction",
    "Interaction": "ask_another.interaction",
    "JobRecord": "ask_another.store.jobs",
    "JobUpdate": "ask_another.research",
    "PermissionRequest": "ask_another.interaction",
    "Policy": "ask_another.interaction",
    "Question": "ask_another.interaction",
    "ResearchJobs": "ask_another.research",
    "Runtime": "ask_another.runtime",
    "Tool": "ask_another.interaction",
    "ToolCall": "ask_another.interaction",
    "ToolRegistry": "ask_another.interaction",
    "ToolUpdate": "ask_another.interaction",
    "TurnResult": "ask_another.interaction.router",
    "open_runtime": "ask_another.runtime",
    "valid": "ask_another.interaction",
}

__all__ = [
    "ALLOW",
    "Allow",
    "AskAnotherError",
    "CallHandle",
    "CallRecord",
    "Choice",
    "ChoiceFailed",
    "ChoiceOption",
    "Config",
    "Decision",
    "Deny",
    "Interaction",
    "JobRecord",
    "JobUpdate",
    "PermissionRequest",
    "Policy",
    "Question",
    "ResearchJobs",
    "Runtime",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolUpdate",
    "TurnResult",
    "open_runtime",
    "valid",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS)
