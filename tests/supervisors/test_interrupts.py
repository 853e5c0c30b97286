"""Ctrl-C always ends the program: a KeyboardInterrupt raised in a child's own task reaches
`trio.run`, and a start into a closed nursery fails at once. Each case runs in a subprocess with
a wall-clock limit, because the failure these guard against is a hang no trio timeout can end
(the old code waited, shielded, for a task that never started)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

_PRELUDE = textwrap.dedent(
    """
    import sys
    import trio
    from supervisors import (
        Actor, StartError, child_spec, open_dynamic_supervisor, open_supervisor, spawn,
    )

    class Boom(Actor):
        async def init(self) -> None:
            self.start_task(trio.sleep_forever)  # a restart would start it into a dying nursery

        async def handle_cast(self, msg: object) -> None:
            raise KeyboardInterrupt

    def only_interrupts(exc: BaseException) -> bool:
        if isinstance(exc, BaseExceptionGroup):
            return all(only_interrupts(inner) for inner in exc.exceptions)
        return isinstance(exc, KeyboardInterrupt)
    """
)

_STATIC = """
async def main() -> None:
    async with open_supervisor([child_spec(Boom, id="boom")]) as sup:
        (info,) = await sup.which_children()
        info.ref.cast("go")
        await trio.sleep_forever()
"""

_DYNAMIC = """
async def main() -> None:
    async with open_dynamic_supervisor() as sup:
        ref = await sup.start_child(child_spec(Boom, id="boom"))
        ref.cast("go")
        await trio.sleep_forever()
"""

_RUN_INTERRUPTED = """
try:
    trio.run(main)
except BaseException as exc:
    print("interrupted" if only_interrupts(exc) else f"other: {exc!r}")
"""

_CLOSED_NURSERY = """
async def main() -> None:
    async with trio.open_nursery() as nursery:
        pass
    try:
        await spawn(nursery, Boom)
    except StartError as exc:
        print("refused:", type(exc.__cause__).__name__)

trio.run(main)
"""


def _run(body: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PRELUDE + body],
        capture_output=True,
        text=True,
        timeout=60,  # the old code never returned
        check=False,
    )
    return done.stdout.strip()


@pytest.mark.parametrize("tree", [_STATIC, _DYNAMIC], ids=["static", "dynamic"])
def test_keyboard_interrupt_in_a_supervised_child_reaches_trio_run(tree: str) -> None:
    assert _run(tree + _RUN_INTERRUPTED) == "interrupted"


_SYS_EXIT = """
class Exits(Actor):
    async def handle_cast(self, msg: object) -> None:
        sys.exit(3)

async def main() -> None:
    async with open_supervisor([child_spec(Exits, id="exits")]) as sup:
        (info,) = await sup.which_children()
        info.ref.cast("go")
        await trio.sleep_forever()

trio.run(main)
"""


def test_sys_exit_in_a_supervised_actor_is_the_programs_exit_status() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PRELUDE + _SYS_EXIT],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3, done.stderr[-2000:]


def test_start_task_into_a_closed_nursery_fails_the_start_at_once() -> None:
    assert _run(_CLOSED_NURSERY) == "refused: RuntimeError"
