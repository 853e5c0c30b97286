"""A supervised agent in an asyncio program: it crashes on a bad question and its supervisor
starts a fresh one, while the asyncio side keeps asking (docs/supervisors.md, "Supervisors
under asyncio"). Run it: `uv run python docs/examples/supervised_agent_asyncio.py`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from supervisors import Actor, ActorExited, Caller, Registry, child_spec, open_supervisor
from supervisors.aio import open_guest, run_on_host


async def think(question: str) -> str:
    """The agent's work: asyncio code of the host (an HTTP client, a framework's agent)."""
    await asyncio.sleep(0.01)
    return f"thought about {question!r}"


class Agent(Actor):
    """A trio actor whose work runs on the host's loop; a bad question crashes it."""

    async def init(self) -> None:
        self.answered = 0

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if msg == "divide by zero":
            raise ZeroDivisionError("the agent tripped over the question")
        self.answered += 1
        return await run_on_host(think, msg), self.answered


async def agent_running(registry: Registry, previous: object = None) -> Any:
    """The agent's current ref once its supervisor has (re)started it (trio side)."""
    import trio

    # The registry has no wait for a name: look again until the restart has registered it.
    while (ref := registry.whereis("agent")) is None or ref is previous:  # noqa: ASYNC110
        await trio.sleep(0.01)
    return ref


async def main() -> list[str]:
    registry = Registry()
    agent = child_spec(Agent, name="agent", registry=registry)  # permanent: always restarted
    said: list[str] = []
    async with open_guest(open_supervisor, [agent], "one_for_one") as guest:
        first = await guest.call(agent_running, registry)
        said.append(str(await guest.call(first.call, "the weather")))
        try:
            await guest.call(first.call, "divide by zero")
        except ActorExited as exited:
            said.append(f"crashed: {exited.reason}")
        second = await guest.call(agent_running, registry, first)
        said.append(str(await guest.call(second.call, "the weather again")))
        children = await guest.call(guest.value.which_children)
        said.append(f"restarts: {children[0].restarts}")
    return said


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)  # noqa: T201 - an example program's output
