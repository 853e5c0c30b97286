"""Each wrong use says so in one sentence: the trio face from asyncio, the asyncio face from
trio, a plain function where a coroutine is needed, a second runtime on one loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from asyncio_runs import RunAsyncio

import ask_another
import ask_another.aio
from ask_another import Config, Tool, ToolCall
from ask_another.errors import InvalidArgument, WrongEventLoop
from supervisors.aio import GuestError


def test_the_trio_face_from_asyncio_names_the_asyncio_face(
    run: RunAsyncio, make_config: Callable[..., Config]
):
    async def main() -> None:
        async with ask_another.open_runtime(make_config()):
            pass

    with pytest.raises(WrongEventLoop) as raised:
        run(main)
    assert str(raised.value) == (
        "ask_another.open_runtime runs under trio and this is asyncio code: use `async with "
        "ask_another.aio.open_runtime(...)`, with the same arguments and the same calls")


async def test_the_asyncio_face_from_trio_names_the_trio_face(make_config: Callable[..., Config]):
    with pytest.raises(WrongEventLoop, match=r"is the asyncio face and this is trio code: use "
                                             r"`async with ask_another.open_runtime"):
        async with ask_another.aio.open_runtime(make_config()):
            pass


def test_plain_functions_where_coroutines_are_needed_are_refused_by_name(
    run: RunAsyncio, make_config: Callable[..., Config]
):
    class PlainUI:
        async def tool_updated(self, update: object) -> None: ...
        def request_permission(self, request: object) -> object:
            return ask_another.ALLOW
        async def register_call(self, tool_call_id: str, handle: object) -> None: ...
        async def ask_choice(self, choice: object) -> str:
            return ""
        async def text_delta(self, text: str) -> None: ...

    def plain_run(call: ToolCall) -> object:
        return None

    tool = Tool(name="plain", description="d", schema={"type": "object"}, class_="read",
                run=plain_run)  # type: ignore[arg-type]

    def on_progress(update: object) -> None: ...

    async def main() -> None:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            with pytest.raises(InvalidArgument, match=r"^interaction.request_permission is a "
                                                      r"plain function: .* make it `async def`"):
                await rt.run_turn("sim", "hi", interaction=PlainUI())
            with pytest.raises(InvalidArgument, match=r"^tool 'plain''s run is a plain"):
                await rt.run_turn("sim", "hi", tools=[tool])
            with pytest.raises(InvalidArgument, match=r"on_progress is a plain function"):
                # refused before anything is asked of the runtime: no such job needed
                await rt.jobs.wait("r-0000000000", 1, on_progress)  # type: ignore[arg-type]

    run(main)


def test_one_runtime_per_loop(run: RunAsyncio, make_config: Callable[..., Config]):
    async def main() -> str:
        async with ask_another.aio.open_runtime(make_config()) as rt:
            with pytest.raises(GuestError, match="one guest per asyncio loop"):
                async with ask_another.aio.open_runtime(make_config()):
                    pass
            await asyncio.sleep(0)
            return (await rt.complete("sim", "still here?")).text  # the first one is unharmed

    assert run(main).endswith("still here?")
