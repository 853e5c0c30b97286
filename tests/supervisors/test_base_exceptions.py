"""A BaseException (SystemExit, KeyboardInterrupt, any other) that ends an actor on its way to
`trio.run` gives it an exit reason naming it, `Crash(exc)`, as its monitors see it (it was
`Killed()`); and `open_supervisor` lets a SystemExit out bare, so its code can become the
program's exit status (the subprocess case is in test_interrupts.py)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio
import trio.testing

from supervisors import Actor, Crash, Down, child_spec, open_supervisor, spawn


class Leaves(Actor):
    async def handle_cast(self, msg: Any) -> None:
        if msg == "exit":
            sys.exit(3)
        raise msg


class Watcher(Actor):
    async def init(self) -> None:
        self.downs: list[Down] = []

    async def handle_call(self, msg: Any, caller: Any) -> Any:
        match msg:
            case ("watch", ref):
                self.monitor(ref)
            case "downs":
                return [down.reason for down in self.downs]
        return None

    async def handle_info(self, msg: Any) -> None:
        if isinstance(msg, Down):
            self.downs.append(msg)


class Unusual(BaseException):
    """A BaseException of the program's own (neither Exception nor an interrupt)."""


async def test_system_exit_in_a_supervised_actor_names_it_and_comes_out_bare(
    nursery: trio.Nursery,
) -> None:
    watcher = await spawn(nursery, Watcher)
    with pytest.raises(SystemExit) as raised:
        async with open_supervisor([child_spec(Leaves, id="leaves")]) as sup:
            (child,) = await sup.which_children()
            assert child.ref is not None
            leaves = child.ref
            await watcher.call(("watch", leaves))
            leaves.cast("exit")
            await trio.sleep_forever()
    assert raised.type is SystemExit and raised.value.code == 3
    reason = leaves.exit_reason
    assert isinstance(reason, Crash) and isinstance(reason.exception, SystemExit)
    assert str(reason) == "crash (SystemExit: 3)"
    assert await watcher.call("downs") == [reason]


async def test_another_base_exception_in_a_hook_is_the_exit_reason() -> None:
    refs = []
    with pytest.RaisesGroup(Unusual, flatten_subgroups=True):
        async with trio.open_nursery() as inner:
            ref = await spawn(inner, Leaves)
            refs.append(ref)
            ref.cast(Unusual("mine"))
            await trio.sleep_forever()
    (ref,) = refs
    reason = ref.exit_reason
    assert isinstance(reason, Crash) and isinstance(reason.exception, Unusual)
