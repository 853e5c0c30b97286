"""The tool registry: the tools a model may ask for in a router turn.

Each tool has a name, a description and a JSON schema (what the model sees), a class (`read` or
`effect`, what the permission policy keys on), the server it belongs to, and an async function
that runs it. Agent hosts register their own tools next to the built-in ones.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field

from ask_another.errors import AskAnotherError
from ask_another.interaction.protocol import Interaction
from ask_another.interaction.types import CallClass, ToolClass


class ToolRegistryError(AskAnotherError):
    """A tool definition is unusable, or its name is taken."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for, as the tool function sees it."""

    id: str
    name: str
    arguments: Mapping[str, object]
    interaction: Interaction | None = None


ToolFunction = Callable[[ToolCall], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    schema: Mapping[str, object]
    class_: ToolClass
    run: ToolFunction
    server: str = "ask-another"
    title: str = field(default="")
    # A tool whose whole work is to put a question to the person (ask_user): under an `ask`
    # rule the question itself is the asking, so no permission request comes first. `deny`
    # still denies it.
    asks_the_person: bool = False
    # The class one call is judged by, from its arguments (read_article: `internal` for a host
    # of ASK_ANOTHER_ALLOW_HOSTS); None: always `class_`.
    classify: Callable[[Mapping[str, object]], CallClass] | None = None

    def call_class(self, arguments: Mapping[str, object]) -> CallClass:
        return self.classify(arguments) if self.classify is not None else self.class_

    def definition(self) -> dict[str, object]:
        """The OpenAI-format function definition sent to the model."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.schema),
            },
        }

    def check_arguments(self, arguments: object) -> str | None:
        """None when `arguments` fit the schema, else a message the model can act on."""
        import jsonschema  # at first use: it costs a tenth of a second at server start-up

        validator = jsonschema.Draft202012Validator(self.schema)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        parts = []
        for error in errors[:5]:
            where = "/".join(str(p) for p in error.absolute_path)
            parts.append(f"{where}: {error.message}" if where else error.message)
        return f"invalid arguments for {self.name}: " + "; ".join(parts)


class ToolRegistry:
    """Tools by name. Iteration order is registration order, so prompts are stable."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ToolRegistryError(f"a tool named {tool.name!r} is already registered")
        if tool.class_ not in ("read", "effect"):
            raise ToolRegistryError(f"tool {tool.name!r}: class must be 'read' or 'effect'")
        import jsonschema  # at first use: it costs a tenth of a second at server start-up

        try:
            jsonschema.Draft202012Validator.check_schema(tool.schema)
        except jsonschema.SchemaError as exc:
            raise ToolRegistryError(
                f"tool {tool.name!r}: invalid JSON schema: {exc.message}"
            ) from None
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def definitions(self) -> list[dict[str, object]]:
        return [tool.definition() for tool in self._tools.values()]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools
