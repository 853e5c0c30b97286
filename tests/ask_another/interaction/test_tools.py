from __future__ import annotations

import pytest

from ask_another.interaction import (
    ALLOW,
    Choice,
    ChoiceFailed,
    Deny,
    Tool,
    ToolCall,
    ToolRegistry,
    ToolRegistryError,
    ToolUpdate,
    valid,
)

SCHEMA = {
    "type": "object",
    "properties": {"url": {"type": "string"}, "depth": {"type": "integer", "minimum": 1}},
    "required": ["url"],
    "additionalProperties": False,
}


async def _noop(call: ToolCall) -> object:
    return {"ok": True}


def _tool(name: str = "read_article", class_: str = "read") -> Tool:
    return Tool(name=name, description="d", schema=SCHEMA, class_=class_, run=_noop)  # type: ignore[arg-type]


def test_definitions_are_openai_function_tools_in_registration_order() -> None:
    registry = ToolRegistry([_tool("b"), _tool("a", "effect")])
    assert registry.names() == ["b", "a"]
    first = registry.definitions()[0]
    assert first == {
        "type": "function",
        "function": {"name": "b", "description": "d", "parameters": SCHEMA},
    }


def test_duplicate_names_and_bad_classes_and_bad_schemas_are_refused() -> None:
    registry = ToolRegistry([_tool()])
    with pytest.raises(ToolRegistryError, match="already registered"):
        registry.register(_tool())
    with pytest.raises(ToolRegistryError, match="class must be"):
        registry.register(_tool("x", "write"))
    with pytest.raises(ToolRegistryError, match="invalid JSON schema"):
        bad = Tool(name="y", description="", schema={"type": 5}, class_="read", run=_noop)
        registry.register(bad)


def test_argument_errors_say_what_to_fix() -> None:
    tool = _tool()
    assert tool.check_arguments({"url": "https://example.com"}) is None
    message = tool.check_arguments({"depth": 0, "extra": 1})
    assert message is not None
    assert message.startswith("invalid arguments for read_article: ")
    assert "'url' is a required property" in message
    assert "depth: 0 is less than the minimum of 1" in message
    assert "'extra' was unexpected" in message


class _Complete:
    async def tool_updated(self, update: ToolUpdate) -> None: ...
    async def request_permission(self, request: object) -> object:
        return ALLOW
    async def register_call(self, tool_call_id: str, handle: object) -> None: ...
    async def ask_choice(self, choice: Choice) -> str | ChoiceFailed:
        return ChoiceFailed("no_answer")
    async def text_delta(self, text: str) -> None: ...


class _SyncCallback(_Complete):
    def text_delta(self, text: str) -> None:  # type: ignore[override]
        ...


def test_valid_requires_every_callback_as_a_coroutine_function() -> None:
    assert valid(_Complete())
    assert not valid(_SyncCallback())
    assert not valid(object())
    assert Deny().reason == "rejected"
