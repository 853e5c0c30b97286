"""The runtime page's picture of the node: its supervision tree, read from the supervisors'
own introspection (`which_children`, `ActorRef.statistics`), as Erlang's observer and Phoenix
LiveDashboard show a BEAM node.

A supervisor's node carries its children's recent exits (`SupervisorRef.statistics()`), with
their reasons, and each child its own latest one, so a crash that was restarted at once is still
visible after it.

Each process is named by its path of child ids from the root (``research/research.owner``), so
a detail panel or a stop names the same process across refreshes; a restarted child keeps its
path and shows its new ref. Reading the tree asks each supervisor once (a call with a short
timeout: a supervisor busy restarting is shown as such rather than holding the page).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

import trio

from supervisors import (
    ActorRef,
    CallTimeout,
    ChildExit,
    DynamicSupervisorRef,
    Registry,
    SupervisorRef,
)

__all__ = ["ExitRow", "ProcessNode", "find", "supervision_tree"]

ASK_SECONDS: Final = 2.0


@dataclass
class ProcessNode:
    """One process of the tree (the root is the runtime's supervisor)."""

    path: str
    id: str
    kind: str  # "supervisor", "dynamic supervisor" or "worker"
    status: str  # running, restarting, stopped, or "busy" (did not answer in time)
    restarts: int = 0
    ref: ActorRef | None = None
    names: list[str] = field(default_factory=list)  # registered names
    queued: int = 0
    capacity: int = 0
    actor: str = ""  # the actor's class and id, as its ref shows it
    children: list[ProcessNode] = field(default_factory=list)
    exits: list[ExitRow] = field(default_factory=list)  # a supervisor's, newest first
    last_exit: ExitRow | None = None  # this process's latest, from its supervisor's record

    def count(self) -> int:
        return 1 + sum(child.count() for child in self.children)


@dataclass(frozen=True)
class ExitRow:
    """One recent exit of a child, as the page shows it."""

    at: str  # UTC wall-clock time, HH:MM:SS
    child: str
    reason: str


def _rows(exits: tuple[ChildExit, ...]) -> list[ExitRow]:
    # The supervisor stamps exits on trio's clock; the page shows the wall clock.
    offset = time.time() - trio.current_time()
    return [ExitRow(datetime.fromtimestamp(e.at + offset, UTC).strftime("%H:%M:%S"),
                    str(e.child), e.reason) for e in reversed(exits)]


async def supervision_tree(root: SupervisorRef, registry: Registry) -> ProcessNode:
    """The tree under `root`, with each process's registered names and mailbox figures."""
    names: dict[ActorRef, list[str]] = {}
    for name in registry.names():
        ref = registry.whereis(name)
        if ref is not None:
            names.setdefault(ref, []).append(str(name))
    node = ProcessNode("", str(root.name), "supervisor", "running", ref=root)
    await _fill(node, names)
    return node


async def _fill(node: ProcessNode, names: dict[ActorRef, list[str]]) -> None:
    ref = node.ref
    if ref is None:
        return
    stats = ref.statistics()
    node.queued, node.capacity = stats.queued, stats.capacity
    node.names = names.get(ref, [])
    node.actor = repr(ref).strip("<>")
    if not isinstance(ref, SupervisorRef | DynamicSupervisorRef):
        return
    node.kind = "dynamic supervisor" if isinstance(ref, DynamicSupervisorRef) else "supervisor"
    node.exits = _rows(ref.statistics().recent_exits)
    latest = {row.child: row for row in reversed(node.exits)}  # each child's newest wins
    try:
        infos = await ref.which_children(timeout=ASK_SECONDS)
    except CallTimeout:
        node.status = "busy"
        return
    for info in infos:
        child_id = str(info.ref.name if info.id is None and info.ref is not None else info.id)
        child = ProcessNode(f"{node.path}/{child_id}".lstrip("/"), child_id,
                            "supervisor" if info.type == "supervisor" else "worker",
                            info.status, info.restarts, info.ref,
                            last_exit=latest.get(child_id))
        await _fill(child, names)
        node.children.append(child)


def find(node: ProcessNode, path: str) -> ProcessNode | None:
    """The process at `path` in the tree, or None."""
    if node.path == path:
        return node
    for child in node.children:
        if path == child.path or path.startswith(child.path + "/"):
            return find(child, path)
    return None
