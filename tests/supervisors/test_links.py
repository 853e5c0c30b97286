"""Monitors and links: Down messages, exit propagation both ways, trap_exits."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from actors_for_tests import Echo

from supervisors import (
    Actor,
    ActorExited,
    ActorRef,
    Caller,
    Crash,
    Down,
    Exit,
    Killed,
    MonitorRef,
    Normal,
    Shutdown,
    spawn,
)


class Observer(Actor):
    """Monitors or links to refs on request and records what handle_info receives."""

    async def init(self, trap: bool = False) -> None:
        self.trap_exits = trap
        self.inbox: list[Any] = []

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        match msg:
            case ("monitor", ActorRef() as ref):
                return self.monitor(ref)
            case ("demonitor", MonitorRef() as monitor):
                return self.demonitor(monitor)
            case ("demonitor", MonitorRef() as monitor, "flush"):
                return self.demonitor(monitor, flush=True)
            case ("link", ActorRef() as ref):
                self.link(ref)
            case ("unlink", ActorRef() as ref):
                self.unlink(ref)
            case "inbox":
                return list(self.inbox)
            case "crash":
                raise RuntimeError("observer crashed")
        return None

    async def handle_info(self, msg: Any) -> None:
        self.inbox.append(msg)


async def test_monitor_delivers_down_with_the_reason(nursery: trio.Nursery) -> None:
    watcher = await spawn(nursery, Observer)
    target = await spawn(nursery, Echo)
    await watcher.call(("monitor", target))
    target.cast("crash")
    await target.wait()
    await trio.testing.wait_all_tasks_blocked()
    [down] = await watcher.call("inbox")
    match down:
        case Down(ref, Crash(RuntimeError())):
            assert ref is target
        case _:
            pytest.fail(f"unexpected {down!r}")


async def test_monitor_of_an_exited_actor_delivers_down_at_once(nursery: trio.Nursery) -> None:
    watcher = await spawn(nursery, Observer)
    target = await spawn(nursery, Echo)
    await target.stop()
    await watcher.call(("monitor", target))
    inbox = await watcher.call("inbox")
    assert [(type(m), m.reason) for m in inbox] == [(Down, Normal())]


async def test_demonitor_stops_down_messages(nursery: trio.Nursery) -> None:
    watcher = await spawn(nursery, Observer)
    target = await spawn(nursery, Echo)
    monitor = await watcher.call(("monitor", target))
    assert await watcher.call(("demonitor", monitor)) is True
    await target.stop()
    await trio.testing.wait_all_tasks_blocked()
    assert await watcher.call("inbox") == []


async def test_monitors_are_one_way(nursery: trio.Nursery) -> None:
    watcher = await spawn(nursery, Observer)
    target = await spawn(nursery, Echo)
    await watcher.call(("monitor", target))
    watcher.cast("not handled: crashes the watcher")
    await watcher.wait()
    await trio.testing.wait_all_tasks_blocked()
    assert target.alive


async def test_link_propagates_an_abnormal_exit_both_ways(nursery: trio.Nursery) -> None:
    a = await spawn(nursery, Observer)
    b = await spawn(nursery, Echo)
    await a.call(("link", b))
    b.cast("crash")
    reason_b = await b.wait()
    assert await a.wait() == reason_b  # a dies with b's reason, without terminate

    c = await spawn(nursery, Observer)
    d = await spawn(nursery, Echo)
    await c.call(("link", d))
    with pytest.raises(Exception, match="observer crashed"):
        try:
            await c.call("crash")
        except Exception as exc:
            raise exc.__cause__ or exc from None
    assert isinstance(await d.wait(), Crash)


async def test_link_ignores_normal_exit(nursery: trio.Nursery) -> None:
    a = await spawn(nursery, Observer)
    b = await spawn(nursery, Echo)
    await a.call(("link", b))
    await b.stop()
    await trio.testing.wait_all_tasks_blocked()
    assert a.alive


async def test_link_propagates_shutdown_and_kill(nursery: trio.Nursery) -> None:
    a = await spawn(nursery, Observer)
    b = await spawn(nursery, Echo)
    await a.call(("link", b))
    await b.stop(Shutdown("bye"))
    assert await a.wait() == Shutdown("bye")

    c = await spawn(nursery, Observer)
    d = await spawn(nursery, Echo)
    await c.call(("link", d))
    d.kill()
    assert await c.wait() == Killed()


async def test_trap_exits_turns_linked_exits_into_messages(nursery: trio.Nursery) -> None:
    trapper = await spawn(nursery, Observer, True)
    b = await spawn(nursery, Echo)
    c = await spawn(nursery, Echo)
    await trapper.call(("link", b))
    await trapper.call(("link", c))
    b.cast("crash")
    await b.wait()
    await c.stop()
    await trio.testing.wait_all_tasks_blocked()
    assert trapper.alive
    inbox = await trapper.call("inbox")
    assert [type(m) for m in inbox] == [Exit, Exit]
    assert inbox[0].ref is b and isinstance(inbox[0].reason, Crash)
    assert inbox[1].ref is c and inbox[1].reason == Normal()


async def test_unlink_stops_propagation(nursery: trio.Nursery) -> None:
    a = await spawn(nursery, Observer)
    b = await spawn(nursery, Echo)
    await a.call(("link", b))
    await a.call(("unlink", b))
    b.cast("crash")
    await b.wait()
    await trio.testing.wait_all_tasks_blocked()
    assert a.alive


async def test_linking_to_a_crashed_actor_brings_the_linker_down(nursery: trio.Nursery) -> None:
    a = await spawn(nursery, Observer)
    b = await spawn(nursery, Echo)
    b.cast("crash")
    crash_b = await b.wait()
    # The exit signal lands at a's next checkpoint: after this handler has returned its reply.
    await a.call(("link", b))
    assert await a.wait() == crash_b
    with pytest.raises(ActorExited):
        await a.call("inbox")
