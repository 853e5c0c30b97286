"""In-band directives: ``[[sim:...]]`` markers in the prompt that steer the simulator.

They let a separate process (the MCP server under test, the demo) choose a failure or a delay
without the Python API. Directives are read from the last user message (or a Gemini
interaction's input); a scripted step for the model takes precedence over them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ._steps import Drop, Fail, Malformed, Step, ToolCall, ToolCalls

_DIRECTIVE = re.compile(r"\[\[sim:([a-z_]+)(?:=(.*?))?\]\]", re.DOTALL)


@dataclass
class Directives:
    """What the markers in one prompt asked for."""

    step: Step | None = None
    delay: float = 0.0
    polls: int | None = None
    end_status: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def strip_directives(text: str) -> str:
    """The prompt without its markers, so default answers echo what a person wrote."""
    return _DIRECTIVE.sub("", text).strip()


def parse_directives(text: str) -> Directives:
    found = Directives()
    for match in _DIRECTIVE.finditer(text):
        name, value = match.group(1), (match.group(2) or "").strip()
        try:
            _apply(found, name, value)
        except ValueError as exc:
            found.errors.append(f"[[sim:{name}={value}]]: {exc}")
    if found.tool_calls and found.step is None:
        found.step = ToolCalls(found.tool_calls)
    return found


def _apply(found: Directives, name: str, value: str) -> None:
    match name:
        case "fail":
            status_text, _, message = value.partition(" ")
            status = int(status_text)
            found.step = Fail(status, message or f"simulated {status} failure")
        case "delay":
            found.delay = float(value)
        case "drop":
            found.step = Drop()
        case "malformed":
            found.step = Malformed()
        case "tool":
            tool_name, _, arguments = value.partition(" ")
            if not tool_name:
                raise ValueError("needs a tool name")
            args: dict[str, object] | str = json.loads(arguments) if arguments else {}
            if not isinstance(args, dict):
                args = arguments
            found.tool_calls.append(ToolCall(tool_name, args))
        case "polls":
            found.polls = int(value)
        case "status":
            found.end_status = value
        case _:
            raise ValueError("unknown directive")
