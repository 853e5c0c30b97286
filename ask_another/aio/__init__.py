"""ask-another from asyncio: the same runtime, started as trio's guest on the host's loop.

    import asyncio
    import ask_another.aio

    async def main() -> None:
        async with ask_another.aio.open_runtime(ask_another.Config.from_env()) as rt:
            answer = await rt.complete("gpt4", "Is 1 prime?")
            job = await rt.jobs.start("gpt4", "What changed in ...?", "agent",
                                      interaction=my_asyncio_ui)
            final = await rt.jobs.wait(job.id, timeout=600)

    asyncio.run(main())

Every call of `ask_another.Runtime` has its twin here, with the same name, arguments, result
and exception classes; `Interaction` callbacks, host `Tool`s and `on_*` callbacks are asyncio
coroutines run on the host's loop. One runtime per loop, no second thread: see
docs/interaction.md ("From asyncio") for the design, cancellation and closing.
"""

from ask_another.aio._runtime import Consensus as Consensus
from ask_another.aio._runtime import Conversations as Conversations
from ask_another.aio._runtime import ResearchJobs as ResearchJobs
from ask_another.aio._runtime import Runtime as Runtime
from ask_another.aio._runtime import open_runtime as open_runtime

__all__ = ["Consensus", "Conversations", "ResearchJobs", "Runtime", "open_runtime"]
