"""The built-in tools of a router turn: `read_article` and `search_web` (class read; web
search only when a `SEARCH_*` engine is configured) and `ask_user`.

`read_article` is the articles package's reader, unchanged. A model-driven read of a host of
`ASK_ANOTHER_ALLOW_HOSTS` (the user's own wiki or intranet) is a call of class `internal`, and
only such a call may reach those hosts (a public page redirecting to one is refused); once an
internal page has been read, every other read and search of the same job (one `ReadScope`) is of
class `after_internal`, since it could carry that page's contents to another host. The default
policy asks a person for both (docs/interaction.md, "Threat model").

`ask_user` puts a multiple-choice question to the person through the
turn's Interaction (`ask_choice`); without an Interaction nobody can answer, and the model is told
so. Both are ordinary `Tool`s: an agent host registers its own next to them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any, Final

from ask_another.articles import (
    READ_ARTICLE_DESCRIPTION,
    READ_ARTICLE_NAME,
    READ_ARTICLE_PARAMETERS,
    read_article,
    url_is_allowed,
)
from ask_another.errors import AskAnotherError
from ask_another.interaction.tools import Tool, ToolCall, ToolRegistry
from ask_another.interaction.types import CallClass, Choice, ChoiceFailed, ChoiceOption
from ask_another.websearch import (
    SEARCH_WEB_DESCRIPTION,
    SEARCH_WEB_NAME,
    SEARCH_WEB_PARAMETERS,
    search_web,
)

if TYPE_CHECKING:
    from ask_another.config import SearchEntry
    from ask_another.gateway import Gateway, SearchResult

__all__ = [
    "ASK_USER_NAME",
    "ASK_USER_PARAMETERS",
    "BUILTIN_NAMES",
    "ChoiceUnanswered",
    "ReadScope",
    "ask_user_tool",
    "builtin_tools",
    "read_article_tool",
    "search_web_tool",
]

ASK_USER_NAME: Final = "ask_user"
BUILTIN_NAMES: Final = frozenset({READ_ARTICLE_NAME, SEARCH_WEB_NAME, ASK_USER_NAME})
"""The names of the built-in tools: a host's own tool may take none of them."""
ASK_USER_DESCRIPTION: Final = (
    "Ask the person you are working for a multiple-choice question and wait for their pick. "
    "Use it when a decision is theirs to make. Returns the id of the chosen option."
)
ASK_USER_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "minLength": 1, "description": "The question to ask."},
        "options": {
            "type": "array",
            "minItems": 1,
            "maxItems": 20,
            "description": "The answers the person can pick from.",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "label": {"type": "string", "minLength": 1},
                },
                "required": ["id", "label"],
            },
        },
    },
    "required": ["prompt", "options"],
}

_UNANSWERED: Final = {
    "expired": "the person did not answer in time (expired)",
    "no_answer": "nobody can answer questions in this turn (no_answer)",
}


class ChoiceUnanswered(AskAnotherError):
    """`ask_user` got no pick; the tool call fails with this message."""


class ReadScope:
    """What one job's model-driven reads have let into its context: whether a page of an
    allowed (internal) host is there, so later reads are judged `after_internal`. One per job
    (per tool registry); not shared between jobs."""

    def __init__(self, allow_hosts: Collection[str] = ()) -> None:
        self.allow_hosts = frozenset(allow_hosts)
        self.internal_read = False

    def classify_read(self, arguments: object) -> CallClass:
        url = arguments.get("url", "") if isinstance(arguments, dict) else ""
        if isinstance(url, str) and url_is_allowed(url, self.allow_hosts):
            return "internal"
        return self.classify_search(arguments)

    def classify_search(self, _arguments: object) -> CallClass:
        return "after_internal" if self.internal_read else "read"


def read_article_tool(allow_hosts: Collection[str] = (), scope: ReadScope | None = None) -> Tool:
    """`read_article` as a router tool (class read; a call for an allowed host is `internal`,
    see the module docstring); `scope` is the job's, shared with its `search_web`."""
    scope = scope if scope is not None else ReadScope(allow_hosts)
    hosts = frozenset(allow_hosts)

    async def run(call: ToolCall) -> object:
        url = str(call.arguments.get("url", ""))
        internal = url_is_allowed(url, hosts)
        # Only a call judged (and permitted) as internal may reach the allowed hosts: a public
        # URL redirecting to one is refused like any internal address.
        result = await read_article(url, allow_hosts=hosts if internal else ())
        if internal and isinstance(result, dict) and result.get("success"):
            scope.internal_read = True
        return result

    return Tool(name=READ_ARTICLE_NAME, description=READ_ARTICLE_DESCRIPTION,
                schema=READ_ARTICLE_PARAMETERS, class_="read", run=run, title="Read an article",
                classify=scope.classify_read)


def search_web_tool(gateway: Gateway, engine: SearchEntry,
                    on_usage: Callable[[SearchResult], None] | None = None,
                    scope: ReadScope | None = None) -> Tool:
    """`search_web` as a router tool (class read; `after_internal` once the job's `scope` has
    read an internal page), searching with `engine` through `gateway`; every search that
    reached the engine is reported to `on_usage`."""

    async def run(call: ToolCall) -> object:
        return await search_web(gateway, engine, str(call.arguments.get("query", "")),
                                on_usage=on_usage)

    return Tool(name=SEARCH_WEB_NAME, description=SEARCH_WEB_DESCRIPTION,
                schema=SEARCH_WEB_PARAMETERS, class_="read", run=run, title="Search the web",
                classify=scope.classify_search if scope is not None else None)


async def _ask_user(call: ToolCall) -> object:
    raw_options: Any = call.arguments["options"]
    options = [ChoiceOption(str(o["id"]), str(o["label"])) for o in raw_options]
    ids = [o.id for o in options]
    if len(set(ids)) != len(ids):
        raise ChoiceUnanswered("ask_user: every option needs its own id")
    if call.interaction is None:
        raise ChoiceUnanswered(_UNANSWERED["no_answer"])
    choice = Choice(tool_call_id=call.id, prompt=str(call.arguments["prompt"]), options=options)
    answer = await call.interaction.ask_choice(choice)
    if isinstance(answer, ChoiceFailed):
        raise ChoiceUnanswered(_UNANSWERED.get(answer.reason, answer.reason))
    picked = next((o for o in options if o.id == answer), None)
    if picked is None:
        raise ChoiceUnanswered(f"the answer {answer!r} is not one of the options {ids}")
    return {"success": True, "option_id": picked.id, "label": picked.label}


def ask_user_tool() -> Tool:
    """`ask_user` as a router tool (class read: asking is harmless, the person decides). It never
    asks permission to ask: under `read=ask` the person sees the question once, not a permission
    request first (`deny` still keeps it from running)."""
    return Tool(name=ASK_USER_NAME, description=ASK_USER_DESCRIPTION, schema=ASK_USER_PARAMETERS,
                class_="read", run=_ask_user, title="Ask the user", asks_the_person=True)


def builtin_tools(
    allow_hosts: Collection[str] = (),
    extra: Iterable[Tool] = (),
    *,
    search: tuple[Gateway, SearchEntry] | None = None,
    on_search: Callable[[SearchResult], None] | None = None,
) -> ToolRegistry:
    """A registry with `read_article`, `search_web` (when `search` gives a gateway and an
    engine) and `ask_user`, then `extra` (a host's own tools)."""
    scope = ReadScope(allow_hosts)
    registry = ToolRegistry([read_article_tool(allow_hosts, scope), ask_user_tool()])
    if search is not None:
        registry.register(search_web_tool(*search, on_usage=on_search, scope=scope))
    for tool in extra:
        registry.register(tool)
    return registry
