"""Tasks an actor owns (`Actor.start_task`): a handle with a state, and the task's runner.

The task runs in the nursery the actor was spawned in; its outcome reaches the actor as a
message (`TaskDone`, `TaskCancelled`), an exception in it crashes the actor, and the actor
cancels and awaits its tasks before it reports its exit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, final

import trio

from ._log import log_crash
from ._reasons import TaskCancelled, TaskDone

if TYPE_CHECKING:
    from ._process import Process

TaskState = Literal["running", "done", "cancelled", "failed"]
"""`TaskHandle.status`: running until the task ends, then how it ended."""


@final
class TaskHandle:
    """A task owned by an actor (see `Actor.start_task`). `cancel()` is idempotent; when the task
    ends the actor receives `TaskDone(handle, value)` or `TaskCancelled(handle)`."""

    __slots__ = ("_scope", "name", "status")

    def __init__(self, name: str) -> None:
        self._scope = trio.CancelScope()
        self.name = name
        self.status: TaskState = "running"

    def cancel(self) -> None:
        """Ask the task to stop (trio cancellation: it stops at its next checkpoint)."""
        self._scope.cancel()

    def __repr__(self) -> str:
        return f"<TaskHandle {self.name} {self.status}>"


async def run_task(
    process: Process,
    handle: TaskHandle,
    fn: Callable[..., Awaitable[Any]],
    args: tuple[Any, ...],
) -> None:
    finished = False
    value: Any = None
    try:
        with handle._scope:
            value = await fn(*args)
            finished = True
    except Exception as exc:
        handle.status = "failed"
        process.task_ended(handle)
        log_crash(process.ref, exc, f"task {handle.name}")
        process.crash_from_task(exc)
        return
    except BaseException:
        handle.status = "cancelled"
        process.task_ended(handle)
        raise
    process.task_ended(handle)
    if finished:
        handle.status = "done"
        process.deliver(TaskDone(handle, value))
    else:
        handle.status = "cancelled"
        process.deliver(TaskCancelled(handle))
