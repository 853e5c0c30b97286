"""What crosses between an asyncio host and the trio runtime: the twin of a trio method, and the
host's callbacks made trio-callable.

`twin(TrioClass.method)` is the asyncio method of the same name and arguments: it hands the call
to trio (`Guest.call`) after making each callback argument trio-callable, by what the value is
rather than by parameter name, so a trio method that gains a callback argument gets it right:

- an `Interaction` (an object with the five callbacks): each callback runs on the host's loop
  (`run_on_host`); the `CallHandle` given to `register_call` cancels through the guest;
- host `Tool`s (a list of them or a `ToolRegistry`): each `run` runs on the host's loop, and the
  `ToolCall.interaction` it is given is the host's own object (a turn's) or an asyncio view of
  the job's;
- any other callable (`on_progress`, `on_delta`, `on_answer`, `confirm`): a coroutine function
  run on the host's loop.

A plain function where a coroutine function is needed is refused before anything runs, in one
sentence naming it (`InvalidArgument`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from ask_another.errors import InvalidArgument
from ask_another.interaction.protocol import CALLBACKS
from ask_another.interaction.tools import Tool, ToolCall, ToolRegistry
from ask_another.interaction.types import (
    Choice,
    ChoiceFailed,
    Decision,
    PermissionRequest,
    ToolUpdate,
)
from supervisors.aio import Guest, run_on_host

P = ParamSpec("P")
R = TypeVar("R")


class Face:
    """An asyncio face over one trio object (`_target`), calling it through `_guest`."""

    def __init__(self, guest: Guest[Any], target: Any) -> None:
        self._guest = guest
        self._target = target


def twin(method: Callable[Concatenate[Any, P], Awaitable[R]]
         ) -> Callable[Concatenate[Face, P], Coroutine[Any, Any, R]]:
    """The asyncio method standing for the trio `method` (same name, arguments, result and
    exceptions)."""
    name = method.__name__

    async def call(self: Face, /, *args: P.args, **kwargs: P.kwargs) -> R:
        guest = self._guest
        hosted = [_hosted(guest, value) for value in args]
        named = {key: _hosted(guest, value) for key, value in kwargs.items()}
        result: R = await guest.call(getattr(self._target, name), *hosted, **named)
        return result

    functools.update_wrapper(call, method)  # its name, signature (__wrapped__) and docstring
    return call


def _hosted(guest: Guest[Any], value: object) -> object:
    """`value` as trio code may use it (see the module docstring); anything else as it is."""
    if isinstance(value, ToolRegistry):
        return [_host_tool(guest, tool) for tool in value]
    if isinstance(value, list | tuple) and value and all(isinstance(v, Tool) for v in value):
        return [_host_tool(guest, tool) for tool in value]
    if _is_interaction(value):
        return HostInteraction(guest, value)
    if callable(value) and not isinstance(value, type):
        return _host_callback(value, _name(value))
    return value


def _is_interaction(value: object) -> bool:
    return not callable(value) and any(hasattr(value, name) for name in CALLBACKS)


def _coroutine_function(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004 - an object with an async __call__


def _require_coroutine(fn: object, what: str) -> None:
    if not _coroutine_function(fn):
        raise InvalidArgument(f"{what} is a plain function: the asyncio face awaits it on your "
                              f"loop, so make it `async def`")


def _host_callback(fn: Callable[..., Awaitable[R]], what: str) -> Callable[..., Awaitable[R]]:
    _require_coroutine(fn, what)

    async def on_host(*args: Any) -> R:
        return await run_on_host(fn, *args)

    return on_host


def _name(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


class HostInteraction:
    """The host's asyncio `Interaction` as the trio runtime calls it."""

    def __init__(self, guest: Guest[Any], host: Any) -> None:
        for name in CALLBACKS:
            _require_coroutine(getattr(host, name, None), f"interaction.{name}")
        self.guest = guest
        self.host = host

    async def tool_updated(self, update: ToolUpdate) -> None:
        await run_on_host(self.host.tool_updated, update)

    async def request_permission(self, request: PermissionRequest) -> Decision:
        decision: Decision = await run_on_host(self.host.request_permission, request)
        return decision

    async def register_call(self, tool_call_id: str, handle: Any) -> None:
        await run_on_host(self.host.register_call, tool_call_id, HostHandle(self.guest, handle))

    async def ask_choice(self, choice: Choice) -> str | ChoiceFailed:
        answer: str | ChoiceFailed = await run_on_host(self.host.ask_choice, choice)
        return answer

    async def text_delta(self, text: str) -> None:
        await run_on_host(self.host.text_delta, text)


class HostHandle:
    """A running call's `CallHandle`, cancelled from asyncio code."""

    def __init__(self, guest: Guest[Any], handle: Any) -> None:
        self._guest = guest
        self._handle = handle

    def cancel(self, reason: str = "cancelled by the user") -> None:
        self._guest.call_soon(self._handle.cancel, reason)


class TrioInteraction:
    """A trio `Interaction` (a research job's) as host code awaits it: what a host tool of a
    job finds in `ToolCall.interaction`."""

    def __init__(self, guest: Guest[Any], inner: Any) -> None:
        self._guest = guest
        self._inner = inner

    async def tool_updated(self, update: ToolUpdate) -> None:
        await self._guest.call(self._inner.tool_updated, update)

    async def request_permission(self, request: PermissionRequest) -> Decision:
        decision: Decision = await self._guest.call(self._inner.request_permission, request)
        return decision

    async def register_call(self, tool_call_id: str, handle: Any) -> None:
        await self._guest.call(self._inner.register_call, tool_call_id, handle)

    async def ask_choice(self, choice: Choice) -> str | ChoiceFailed:
        answer: str | ChoiceFailed = await self._guest.call(self._inner.ask_choice, choice)
        return answer

    async def text_delta(self, text: str) -> None:
        await self._guest.call(self._inner.text_delta, text)


def _host_tool(guest: Guest[Any], tool: Tool) -> Tool:
    _require_coroutine(tool.run, f"tool {tool.name!r}'s run")
    run = tool.run

    async def run_on_loop(call: ToolCall) -> object:
        inner = call.interaction
        seen = (inner.host if isinstance(inner, HostInteraction)
                else TrioInteraction(guest, inner) if inner is not None else None)
        return await run_on_host(run, dataclasses.replace(call, interaction=seen))

    return dataclasses.replace(tool, run=run_on_loop)
