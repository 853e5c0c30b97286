"""The permission policy: answers a tool call's permission request before any person is asked.

Written as comma-separated `key=value` pairs (the `ASK_ANOTHER_PERMISSIONS` setting), where a key
is a call class (`read`, `effect`, `internal`, `after_internal`) or a tool name and a value is
`allow`, `ask` or `deny`. A tool name overrides `read` and `effect`. Unnamed classes keep the
default `read=allow,effect=ask,internal=ask,after_internal=ask`: reading the public web is
harmless, changing the world needs a person, and so does a model reading a host the user allowed
for themselves (`ASK_ANOTHER_ALLOW_HOSTS`: a wiki, an intranet) or, once it has, reading anything
else (which could carry what it read to another host). `internal` and `after_internal` are decided
by their class alone: `read_article=allow` does not open the user's internal hosts to a model.

A person's standing answer (*always allow* / *always deny*, store/rules.py) covers one tool and
one target of it, its scope (`rule_scope`, the one place every face takes it from): the host
for `read_article`, the engine for `search_web`, the exact arguments for any other tool. A rule
made before rules were scoped covers every call of its tool (`ANY_SCOPE`).

A leaf (it imports only errors.py), so config.py parses `ASK_ANOTHER_PERMISSIONS` with it without
importing interaction/, which builds on the gateway and so on config.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, get_args
from urllib.parse import urlsplit

from ask_another.errors import AskAnotherError

CallClass = Literal["read", "effect", "internal", "after_internal"]
"""The class one call is judged by: its tool's class, or, for a model-driven read, `internal`
(it reads a host of `ASK_ANOTHER_ALLOW_HOSTS`) or `after_internal` (it reads another host, or
searches, after an internal page was read in the same job: it could carry that page out)."""

Rule = Literal["allow", "ask", "deny"]

_RULES: tuple[str, ...] = get_args(Rule)
_CLASSES: tuple[str, ...] = get_args(CallClass)
# Classes a tool-name rule cannot override: they guard the user's own hosts.
_GUARDED: tuple[str, ...] = ("internal", "after_internal")
DEFAULT_TEXT = "read=allow,effect=ask,internal=ask,after_internal=ask"


ANY_SCOPE = "*"
"""The scope of a standing rule made before rules were scoped: every call of its tool."""
# The tool names, as the tools define them (articles/, websearch.py): this leaf imports neither.
_READ_ARTICLE = "read_article"
_SEARCH_WEB = "search_web"


def rule_scope(tool: str, arguments: Mapping[str, object]) -> str:
    """What a standing answer given on this call of `tool` covers: the host it reads
    (`read_article`), the engine it searches with (`search_web`), or exactly these arguments."""
    if tool == _READ_ARTICLE:
        try:
            host = urlsplit(str(arguments.get("url", ""))).hostname or ""
        except ValueError:
            host = ""
        return f"host:{host.lower()}"
    if tool == _SEARCH_WEB:
        return f"engine:{arguments.get('engine') or 'configured'}"
    return "arguments:" + json.dumps(dict(arguments), sort_keys=True, ensure_ascii=False,
                                     separators=(",", ":"), default=str)


def scope_text(scope: str) -> str:
    """A scope as people read it, where a rule is made and where it is listed."""
    kind, _, value = scope.partition(":")
    if scope == ANY_SCOPE:
        return "every call (a rule made before rules were scoped)"
    if kind == "host":
        return f"reads of {value or 'an address with no host'}"
    if kind == "engine":
        return ("searches with the configured engine" if value == "configured"
                else f"searches with {value}")
    return f"calls with exactly these arguments: {value}"


class PolicyError(AskAnotherError):
    """The permission policy text is malformed; the message names the offending pair."""


class Policy:
    """Decides `allow`, `ask` or `deny` for a tool call from its name and class."""

    __slots__ = ("_by_class", "_by_tool", "_standing")

    def __init__(
        self,
        by_class: Mapping[str, Rule] | None = None,
        by_tool: Mapping[str, Rule] | None = None,
        standing: Mapping[tuple[str, str], Rule] | None = None,
    ) -> None:
        classes: dict[str, Rule] = {"read": "allow", "effect": "ask", "internal": "ask",
                                    "after_internal": "ask"}
        classes.update(by_class or {})
        self._by_class = MappingProxyType(classes)
        self._by_tool = MappingProxyType(dict(by_tool or {}))
        self._standing = MappingProxyType(dict(standing or {}))

    def with_standing(self, standing: Mapping[tuple[str, str], Rule]) -> Policy:
        """This policy with a person's standing answers by (tool, scope) (*always allow* /
        *always deny*, store/rules.py; `rule_scope`): each applies only to the calls of its
        scope and only where this policy would ask, so it never allows what the
        configuration denies, nor a guarded class (`internal`, `after_internal`), which is
        asked every time."""
        return Policy(self._by_class, self._by_tool, {**self._standing, **standing})

    @classmethod
    def parse(cls, text: str | None) -> Policy:
        """Parse `read=allow,effect=ask,read_article=deny`; blank text gives the default."""
        by_class: dict[str, Rule] = {}
        by_tool: dict[str, Rule] = {}
        for raw in (text or "").split(","):
            pair = raw.strip()
            if not pair:
                continue
            key, sep, value = (part.strip() for part in pair.partition("="))
            if not sep or not key:
                raise PolicyError(
                    f"permission rule {pair!r} is not key=value "
                    f"(for example {DEFAULT_TEXT!r})"
                )
            if value not in _RULES:
                raise PolicyError(
                    f"permission rule {pair!r}: {value!r} is not one of {', '.join(_RULES)}"
                )
            target = by_class if key in _CLASSES else by_tool
            if key in target:
                raise PolicyError(f"permission rule for {key!r} is given twice")
            target[key] = value  # type: ignore[assignment]
        return cls(by_class, by_tool)

    def decide(self, tool: str, class_: CallClass,
               arguments: Mapping[str, object] | None = None) -> Rule:
        """The rule for one call; a standing answer counts for the call's scope (its
        `arguments`; without them, only a rule of `ANY_SCOPE`)."""
        if class_ in _GUARDED:
            return self._by_class[class_]
        scope = self.standing_scope(tool, class_, arguments)
        if scope is not None:
            return self._standing[(tool, scope)]
        return self._by_tool.get(tool) or self._by_class[class_]

    def standing_scope(self, tool: str, class_: CallClass,
                       arguments: Mapping[str, object] | None = None) -> str | None:
        """The scope of the standing answer that decides this call (`decide`), or None when
        none does: the policy itself does not ask, or no answer covers the call."""
        if class_ in _GUARDED or (self._by_tool.get(tool) or self._by_class[class_]) != "ask":
            return None
        if arguments is not None and (tool, scope := rule_scope(tool, arguments)) in \
                self._standing:
            return scope
        return ANY_SCOPE if (tool, ANY_SCOPE) in self._standing else None

    def __str__(self) -> str:
        # The standing answers are a person's, not configuration: not part of the text.
        pairs = [*self._by_class.items(), *sorted(self._by_tool.items())]
        return ",".join(f"{key}={value}" for key, value in pairs)

    def __repr__(self) -> str:
        return f"Policy({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Policy) and str(self) == str(other)
                and self._standing == other._standing)

    def __hash__(self) -> int:
        return hash(str(self))
