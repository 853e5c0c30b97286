"""A consensus call's spend confirmation: asked by elicitation where the client has it, and
otherwise answered by calling again with `confirm_spend=true`.

The same mechanism as an attached start_research call (server/elicitation.py): the SDK's
resolver form, which elicits in both protocol eras. `spend_check` estimates the call (and
validates its arguments) before anything is asked; `spend_answer` then returns
`Elicit(message, Approval)` when the estimate is above ASK_ANOTHER_CONFIRM_USD and the client
can elicit. The tool body turns the outcome into the `Decision` that `Consensus.ask` is given:

- allowed within ASK_ANOTHER_PERMISSION_TIMEOUT of the question: `Allow`;
- denied, declined or cancelled: `Deny("rejected")`; allowed too late: `Deny("expired")`;
- a client without elicitation (Gemini CLI): the call is refused with the estimate and how to
  confirm (call again with confirm_spend=true, which the client's own tool-call approval shows
  the user); with confirm_spend=true it runs.

Up to 2025-11-25 the question is a request in the middle of the call; from 2026-07-28 it ends
the round, and the client calls again with the answer, so when it was asked is kept in
`ServerState.confirmations` by the call's arguments (the resolvers re-run on every round).
"""

# No `from __future__ import annotations`: the SDK reads the resolvers' annotations with
# get_type_hints, which cannot see names that only exist here at type-check time.

import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Any

import trio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import AcceptedElicitation, Elicit, ElicitationResult, Resolve

from ask_another.interaction.types import ALLOW, Decision, Deny
from ask_another.server.context import runtime_of, state_of, tool_errors, user_of
from ask_another.server.elicitation import Approval, can_elicit
from ask_another.server.lifespan import ServerState
from ask_another.server.tools.stances import Stance, stances_map
from ask_another.spend.confirm import SpendNotConfirmed, needs_confirmation
from ask_another.spend.estimate import Estimate

__all__ = ["SpendCheck", "spend_answer", "spend_check", "spend_decision"]


@dataclass(frozen=True)
class SpendCheck:
    """A consensus call's estimate, made before anything is asked, and what it needs."""

    estimate: Estimate
    needed: bool  # above ASK_ANOTHER_CONFIRM_USD
    elicit: bool  # the client can be asked by elicitation
    confirm_spend: bool  # the caller passed confirm_spend=true
    asked_at: float  # trio.current_time() when the question was first asked
    timeout: float  # ASK_ANOTHER_PERMISSION_TIMEOUT
    models: tuple[str, ...]


def _key(arguments: list[Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


async def spend_check(ctx: Context[ServerState], models: list[str], prompt: str,
                      system: str | None = None,
                      stances: list[Stance] | dict[str, str] | None = None,
                      synthesize: str | None = None, conversation_id: str | None = None,
                      confirm_spend: bool = False) -> SpendCheck:
    with tool_errors("consensus"):
        runtime = runtime_of(ctx)
        panel_stances = stances_map(stances)
        estimate = await runtime.consensus_for(user_of(ctx)).estimate(
            models, prompt, system=system, stances=panel_stances, synthesize=synthesize,
            conversation_id=conversation_id)
        config = runtime.config
        now = trio.current_time()
        table = state_of(ctx).confirmations
        for old in [k for k, at in table.items() if at + 2 * config.permission_timeout < now]:
            del table[old]
        # The user is part of the key: another user's call with the same arguments is not theirs.
        key = _key([user_of(ctx).id, models, prompt, system, panel_stances, synthesize,
                    conversation_id, confirm_spend])
        if ctx.request_state is None:
            table[key] = now  # a new call (or the one round of the handshake era)
        # A later round whose question is no longer known (long ago, or another process):
        # treat the answer as too late rather than run without a recorded question.
        asked_at = table.get(key, float("-inf"))
        return SpendCheck(estimate=estimate, needed=needs_confirmation(runtime.services, estimate),
                          elicit=can_elicit(ctx), confirm_spend=confirm_spend,
                          asked_at=asked_at, timeout=config.permission_timeout,
                          models=tuple(m.strip() for m in models))


async def spend_answer(ctx: Context[ServerState],
                       check: Annotated[SpendCheck, Resolve(spend_check)]) -> Any:
    if not (check.needed and check.elicit):
        return check
    limit = runtime_of(ctx).config.confirm_usd
    return Elicit(
        f"This consensus of {len(check.models)} models ({', '.join(check.models)}) is "
        f"estimated at {check.estimate.describe()}, above ASK_ANOTHER_CONFIRM_USD="
        f"${limit:.2f}. Run it? Nothing is spent unless you allow it; no answer within "
        f"{check.timeout:g} s means no.", Approval)


def spend_decision(ctx: Context[ServerState], check: SpendCheck,
                outcome: ElicitationResult[Any]) -> Decision:
    """The person's answer, for `Consensus.ask(confirm=...)`; raises `SpendNotConfirmed` (the
    estimate and how to confirm) for a client that cannot be asked and did not confirm."""
    if not check.needed:
        return ALLOW
    if not check.elicit:
        if check.confirm_spend:
            return ALLOW
        limit = runtime_of(ctx).config.confirm_usd
        raise SpendNotConfirmed(
            f"Not started: this consensus is estimated at {check.estimate.describe()}, above "
            f"ASK_ANOTHER_CONFIRM_USD=${limit:.2f}, and this client cannot ask the user to "
            "confirm it (no elicitation). Nothing was spent. Ask the user whether to spend "
            "this; if they agree, call consensus again with the same arguments and "
            "confirm_spend=true.")
    if not isinstance(outcome, AcceptedElicitation) or not isinstance(outcome.data, Approval):
        return Deny("rejected")  # declined or cancelled
    if outcome.data.decision != "allow":
        return Deny("rejected")
    if trio.current_time() - check.asked_at > check.timeout:
        return Deny("expired")
    return ALLOW
