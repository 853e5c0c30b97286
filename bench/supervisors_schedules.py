"""Supervisor properties over thousands of seeded trio schedules: `python -m bench
supervisors_schedules` (10,000 seeds; `--quick`: 200), or `python -m bench.supervisors_schedules
--seed N` to replay one.

Importing Hypothesis runs trio's plugin, which makes trio's scheduler deterministic: each batch
of runnable tasks is shuffled by `trio._core._run._r`, a `random.Random` that we seed. So one
seed fixes both a scenario (drawn from ``random.Random(seed)``) and the order in which trio runs
the tasks of every batch; time is trio's `MockClock`, jumping when every task is blocked.

Each seed checks, against a small reference model of OTP's supervisor:
- restarts: a static supervisor of 1-4 children (random strategy, restart types, shutdown
  policies, intensity) sees a random sequence of child exits (crash, normal, shutdown) spaced
  on the clock; after each, `which_children()` (who runs, restart counts) and whether the
  supervisor gave up (`GIVE_UP_REASON`) must be what OTP's rules give;
- shutdown order: stopping the supervisor runs its running children's `terminate` in reverse
  start order;
- exit propagation: B exits (crash, normal, shutdown, kill) with A linked to it (trapping or
  not) and M monitoring A: A exits with B's very reason unless that is `Normal()` or A traps
  (then it gets `Exit`), and M's `Down` carries A's reason;
- the call/timeout/cancel race: a call answered after d seconds, with timeout t, its caller
  cancelled at c: exactly one outcome, the earliest of the three (any of them on a tie), and
  the actor answers the next call.
A failure raises `ScheduleFailure` naming the seed and the command that replays it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import hypothesis  # noqa: F401  (its trio plugin makes trio's scheduler seedable)
import structlog
import trio
import trio._core._run as trio_run
import trio.testing

from bench.report import Row
from supervisors import (
    GIVE_UP_REASON,
    Actor,
    ActorRef,
    Caller,
    CallTimeout,
    Crash,
    Down,
    Exit,
    ExitReason,
    Killed,
    Normal,
    Shutdown,
    child_spec,
    spawn,
    start_supervisor,
)

SUITE = "supervisors"
STRATEGIES = ("one_for_one", "one_for_all", "rest_for_one")
RESTARTS = ("permanent", "transient", "temporary")
EXITS = ("crash", "normal", "shutdown")


class ScheduleFailure(AssertionError):
    """A property failed for one seed."""

    def __init__(self, seed: int, detail: str) -> None:
        super().__init__(
            f"seed {seed}: {detail}\n  replay: uv run python -m bench.supervisors_schedules "
            f"--seed {seed}"
        )
        self.seed = seed


class _Planned(Exception):
    """The crash a scenario asks a child for."""


Journal = list[tuple[str, int]]


class _Worker(Actor):
    async def init(self, journal: Journal, cid: int) -> None:
        self.journal = journal
        self.cid = cid
        journal.append(("start", cid))

    async def handle_cast(self, msg: str) -> None:
        match msg:
            case "crash":
                raise _Planned(f"child {self.cid}")
            case "normal":
                self.stop()
            case "shutdown":
                self.stop(Shutdown("planned"))

    async def terminate(self, reason: ExitReason) -> None:
        await trio.lowlevel.checkpoint()  # a point where other tasks may run first
        self.journal.append(("stop", self.cid))


# -- the reference model of OTP's supervisor ----------------------------------------------------


@dataclass
class _ModelChild:
    cid: int
    restart: str
    running: bool = True
    restarts: int = 0


@dataclass
class _Model:
    strategy: str
    children: list[_ModelChild]
    max_restarts: int
    max_seconds: float
    times: list[float] = field(default_factory=list)
    alive: bool = True

    def exit(self, cid: int, kind: str, now: float) -> None:
        """OTP's supervisor on a child's exit (restart_child/3, add_restart/1)."""
        child = next(c for c in self.children if c.cid == cid)
        child.running = False
        abnormal = kind == "crash"
        if not (child.restart == "permanent" or (child.restart == "transient" and abnormal)):
            if child.restart == "temporary":
                self.children.remove(child)
            return
        self.times = [t for t in [*self.times, now] if not now - t > self.max_seconds]
        if len(self.times) > self.max_restarts:
            self.alive = False
            for c in self.children:
                c.running = False
            return
        index = self.children.index(child)
        if self.strategy == "one_for_one":
            group = [child]
        elif self.strategy == "one_for_all":
            group = list(self.children)
        else:
            group = self.children[index:]
        for sibling in group:
            if sibling is not child and sibling.restart == "temporary":
                self.children.remove(sibling)
        for member in group:
            if member is child or member.restart != "temporary":
                member.running = True
                member.restarts += 1

    def view(self) -> list[tuple[int, bool, int]]:
        return [(c.cid, c.running, c.restarts) for c in self.children]


async def _restarts(seed: int, rng: random.Random, trace: list[Any]) -> None:
    strategy = rng.choice(STRATEGIES)
    n = rng.randint(1, 4)
    restarts = [rng.choice(RESTARTS) for _ in range(n)]
    shutdowns: list[Any] = [rng.choice([0.5, "brutal_kill", "infinity"]) for _ in range(n)]
    max_restarts = rng.randint(0, 3)
    max_seconds = rng.choice([1.0, 5.0])
    journal: Journal = []
    specs = [
        child_spec(_Worker, journal, i, id=i, restart=restarts[i], shutdown=shutdowns[i])
        for i in range(n)
    ]
    model = _Model(strategy, [_ModelChild(i, restarts[i]) for i in range(n)], max_restarts,
                   max_seconds)
    trace.append(("restarts", strategy, restarts, shutdowns, max_restarts, max_seconds))
    async with trio.open_nursery() as nursery:
        sup = await start_supervisor(nursery, specs, strategy, max_restarts, max_seconds)
        for _ in range(rng.randint(1, 6)):
            await trio.sleep(rng.choice([0, 0.5, 1, 2]))
            cid, kind = rng.randrange(n), rng.choice(EXITS)
            infos = {info.id: info for info in await sup.which_children()}
            info = infos.get(cid)
            if info is None or info.ref is None:
                continue  # removed or stopped: nothing to ask
            trace.append((trio.current_time(), cid, kind))
            model.exit(cid, kind, trio.current_time())
            info.ref.cast(kind)
            await trio.testing.wait_all_tasks_blocked()
            if not model.alive:
                break
            seen = [(i.id, i.status == "running", i.restarts) for i in await sup.which_children()]
            if seen != model.view():
                raise ScheduleFailure(seed, f"after {trace[-1]}: children {seen}, OTP's "
                                            f"model {model.view()}; trace {trace}")
        if not model.alive:
            reason = await sup.wait()
            if reason != GIVE_UP_REASON:
                raise ScheduleFailure(seed, f"gave up with {reason}, not {GIVE_UP_REASON}")
            return
        if not sup.alive:
            raise ScheduleFailure(seed, f"supervisor exited {sup.exit_reason}; model alive; "
                                        f"trace {trace}")
        trace.append(("journal", list(journal)))
        running = [c.cid for c in model.children
                   if c.running and shutdowns[c.cid] != "brutal_kill"]
        mark = len(journal)
        await sup.stop(Shutdown())
        stopped = [cid for what, cid in journal[mark:] if what == "stop"]
        if stopped != running[::-1]:
            raise ScheduleFailure(seed, f"shutdown order {stopped}, expected reverse of "
                                        f"{running}; trace {trace}")


# -- exit propagation through links and monitors ---------------------------------------------


class _Linked(Actor):
    async def init(self, other: ActorRef, trap: bool) -> None:
        self.trap_exits = trap
        self.exits: list[Exit] = []
        self.link(other)

    async def handle_info(self, msg: Any) -> None:
        if isinstance(msg, Exit):
            self.exits.append(msg)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        return [exit_.reason for exit_ in self.exits]


class _Monitor(Actor):
    async def init(self, target: ActorRef) -> None:
        self.downs: list[ExitReason] = []
        self.monitor(target)

    async def handle_info(self, msg: Any) -> None:
        if isinstance(msg, Down):
            self.downs.append(msg.reason)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        return list(self.downs)


async def _propagation(seed: int, rng: random.Random, trace: list[Any]) -> None:
    kind, trap = rng.choice([*EXITS, "kill"]), rng.random() < 0.5
    trace.append(("propagation", kind, trap))
    async with trio.open_nursery() as nursery:
        b = await spawn(nursery, _Worker, [], 0)
        a = await spawn(nursery, _Linked, b, trap)
        m = await spawn(nursery, _Monitor, a)
        if kind == "kill":
            b.kill()
        else:
            b.cast(kind)
        b_reason = await b.wait()
        await trio.testing.wait_all_tasks_blocked()
        expected = {"crash": Crash, "normal": Normal, "shutdown": Shutdown, "kill": Killed}[kind]
        if not isinstance(b_reason, expected):
            raise ScheduleFailure(seed, f"B exited {b_reason}, asked {kind}")
        if trap or isinstance(b_reason, Normal):
            if not a.alive:
                raise ScheduleFailure(seed, f"A exited {a.exit_reason} on B's {b_reason} "
                                            f"(trapping: {trap})")
            exits = await a.call("exits")
            if exits != ([b_reason] if trap else []):
                raise ScheduleFailure(seed, f"A got exits {exits} for B's {b_reason}")
            if await m.call("downs") != []:
                raise ScheduleFailure(seed, "M got a Down for an A still alive")
            await a.stop()
        elif a.exit_reason != b_reason:
            raise ScheduleFailure(seed, f"A exited {a.exit_reason}, B {b_reason}")
        downs = await m.call("downs")
        if downs != [a.exit_reason]:
            raise ScheduleFailure(seed, f"M saw {downs}, A exited {a.exit_reason}")
        nursery.cancel_scope.cancel()


# -- the call / timeout / cancel race -----------------------------------------------------------


class _Slow(Actor):
    async def handle_call(self, msg: float, caller: Caller) -> Any:
        await trio.sleep(msg)
        return "reply"


async def _race(seed: int, rng: random.Random, trace: list[Any]) -> None:
    delay, timeout = rng.choice([0, 1, 2, 3]), rng.choice([1, 2, 3])
    cancel_at = rng.choice([None, 1, 2, 3])
    trace.append(("race", delay, timeout, cancel_at))
    outcomes: list[str] = []
    async with trio.open_nursery() as nursery:
        ref = await spawn(nursery, _Slow)
        scope = trio.CancelScope()

        async def caller() -> None:
            with scope:
                try:
                    outcomes.append(await ref.call(delay, timeout=timeout))
                except CallTimeout:
                    outcomes.append("timeout")
            if scope.cancelled_caught:
                outcomes.append("cancelled")

        nursery.start_soon(caller)
        if cancel_at is not None:
            await trio.sleep(cancel_at)
            scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(4)  # past every deadline
        times = {"reply": delay, "timeout": timeout}
        if cancel_at is not None:
            times["cancelled"] = cancel_at
        first = min(times.values())
        allowed = {what for what, at in times.items() if at == first}
        if len(outcomes) != 1 or outcomes[0] not in allowed:
            raise ScheduleFailure(seed, f"call race d={delay} t={timeout} c={cancel_at}: "
                                        f"outcomes {outcomes}, allowed one of {allowed}")
        if await ref.call(0, timeout=1) != "reply":
            raise ScheduleFailure(seed, "the actor did not answer after the race")
        nursery.cancel_scope.cancel()


# -- running seeds ------------------------------------------------------------------------------


def run_seed(seed: int) -> list[Any]:
    """Run every property under one seed (scenario and schedule); the trace of what it did."""
    rng = random.Random(seed)
    trio_run._r.seed(seed)
    trace: list[Any] = []

    async def main() -> None:
        await _restarts(seed, rng, trace)
        await _propagation(seed, rng, trace)
        await _race(seed, rng, trace)

    try:
        with structlog.testing.capture_logs():  # crash reports are expected: off stderr
            trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    except BaseExceptionGroup as group:  # raised inside a nursery: the failure itself
        failures, _ = group.split(ScheduleFailure)
        while isinstance(failures, BaseExceptionGroup):
            failures = failures.exceptions[0]
        if failures is None:
            raise
        raise failures from group
    return trace


def explore(seeds: range) -> float:
    """Run `seeds`; the seconds it took. Raises `ScheduleFailure` at the first failing seed."""
    if not trio_run._ALLOW_DETERMINISTIC_SCHEDULING:
        raise RuntimeError("trio's scheduler is not seedable: Hypothesis's trio plugin did not run")
    start = time.perf_counter()
    for seed in seeds:
        run_seed(seed)
    return time.perf_counter() - start


def run(quick: bool) -> list[Row]:
    count = 200 if quick else 10_000
    seconds = explore(range(count))
    return [Row(SUITE, "seeded schedules explored (supervisor properties)", count, "schedules",
                extra={"seconds": seconds, "ms_per_schedule": 1000 * seconds / count,
                       "properties": "restarts against OTP's model, shutdown order, exit "
                                     "propagation, call/timeout/cancel race",
                       "seeds": f"0..{count - 1}"}),
            Row(SUITE, "seeded schedules: run time", seconds, "s",
                extra={"count": count})]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.supervisors_schedules",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, help="replay one seed and print its trace")
    parser.add_argument("--count", type=int, default=10_000, help="seeds 0..COUNT-1")
    args = parser.parse_args()
    if args.seed is not None:
        for step in run_seed(args.seed):
            print(step)
        print(f"seed {args.seed}: every property holds")
        return 0
    seconds = explore(range(args.count))
    print(f"{args.count} seeded schedules, every property held, {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
