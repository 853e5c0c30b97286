"""A consensus run as a job: job method "consensus", started only as an MCP Task.

A task-augmented `consensus` call (server/tasks.py) stores a job of this method
(`ResearchJobs.start_consensus`): its query is the prompt, its model the panel's first, and its
detail keeps the call's arguments (``detail["consensus"]``) and the panel's estimate. So the
task is durable like a research job's (the row is committed before the call is answered), read,
answered and cancelled from any node, and the job's own spend confirmation asks a person before
anything is spent. `run_consensus` then asks the panel with `Consensus.ask`, as the tool does,
and the job's report is the tool's answer (`consensus_text`); the consensus keeps its
conversation and its ledger rows itself (kind ``consensus``, ``synthesis``).

Cancelling the job cancels its work task, and so the panel's nursery: every call in flight is
hung up. Each seat's answer is a step (``seat:<model>``, stored as the seat's call ends), so a
consensus job resumed after a kill asks only the seats that had not answered; each call's
ledger id names the job, its attempt and the seat.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ask_another.consensus import Answer, Consensus, answer_heading, consensus_text
from ask_another.interaction.types import ALLOW, Decision
from ask_another.research.methods.method import JobContext, Method, ResearchFailed, ResearchResult
from ask_another.spend.estimate import Estimate
from ask_another.users import User

__all__ = ["CONSENSUS", "CONSENSUS_METHOD", "run_consensus"]

CONSENSUS_METHOD: Final = "consensus"


async def run_consensus(ctx: JobContext) -> ResearchResult:
    """Ask the job's panel (see the module docstring)."""
    arguments: Any = ctx.detail.get("consensus")
    if not isinstance(arguments, dict) or ctx.services is None:
        raise ResearchFailed("this consensus job holds no panel to ask (a row of another shape)")
    # The user's admin flag as it was when the task was made: their conversation was checked
    # then, and is checked again by the same rule now.
    user = User(ctx.user_id, admin=bool(arguments.get("admin")))

    async def progress(answer: Answer, ended: int, total: int) -> None:
        await ctx.save_step(f"seat:{answer.model}", msgspec.to_builtins(answer))
        ctx.report(f"{ended} of {total} models ended: {answer_heading(answer)}",
                   ended=ended, total=total)

    known = {}
    for name in arguments["models"]:
        model = ctx.services.config.resolve(name).model
        stored = ctx.step(f"seat:{model}")
        if stored is not None:
            known[model] = msgspec.convert(stored, Answer)

    async def confirmed(_estimate: Estimate) -> Decision:
        return ALLOW  # the job had its estimate confirmed before it started (job.py)

    ctx.report(f"asking {len(arguments['models'])} models at once")
    result = await Consensus(ctx.services, user).ask(
        arguments["models"], ctx.query, system=arguments.get("system"),
        stances=arguments.get("stances"), synthesize=arguments.get("synthesize"),
        conversation_id=arguments.get("conversation_id"),
        temperature=arguments.get("temperature"), timeout=arguments.get("timeout"),
        on_answer=progress, confirm=confirmed, known=known, call_id=ctx.call_id)
    return ResearchResult(report=consensus_text(result),
                          detail={**ctx.detail, "conversation_id": result.conversation_id})


CONSENSUS: Final = Method(run=run_consensus)
"""The consensus job method: no remote side to cancel (a cancel hangs up its calls); resumed
from its answered seats."""
