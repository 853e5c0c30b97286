"""A crashed actor's exit reason does not pin its frames: once the crash is reported (logged,
delivered to callers, monitors and links), the exception keeps no traceback, so a ref or a log
sink that keeps the reason keeps neither the actor's state nor its hook's locals."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
import trio
import trio.testing

from supervisors import Actor, ActorExited, Crash, spawn


class Payload:
    """Something only the crashed frames reach (weakref-able, unlike a bytearray)."""


class Crashes(Actor):
    async def init(self, seen: list[weakref.ref[Payload]]) -> None:
        self.seen = seen
        self.state = Payload()
        seen.append(weakref.ref(self.state))

    async def handle_call(self, msg: Any, caller: Any) -> Any:
        local = Payload()
        self.seen.append(weakref.ref(local))
        raise ValueError(f"boom with {type(local).__name__}")


async def test_crashed_actors_held_by_refs_keep_no_frames(
    nursery: trio.Nursery, events: list[dict[str, Any]]
) -> None:
    seen: list[weakref.ref[Payload]] = []
    refs = []
    for _ in range(50):
        ref = await spawn(nursery, Crashes, seen)
        with pytest.raises(ActorExited) as raised:
            await ref.call("crash")
        del raised
        refs.append(ref)
    await trio.testing.wait_all_tasks_blocked()
    reasons = [ref.exit_reason for ref in refs]
    assert all(isinstance(r, Crash) and isinstance(r.exception, ValueError) for r in reasons)
    assert all(r.exception.__traceback__ is None for r in reasons if isinstance(r, Crash))
    kept_sink = [event for event in events if event["event"] == "actor.crashed"]
    assert len(kept_sink) == 50  # a sink that keeps every crash report, exc_info included
    gc.collect()
    assert len(seen) == 100
    assert [w for w in seen if w() is not None] == []  # neither the state nor the locals
