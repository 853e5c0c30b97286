"""Recording spend: one ledger row per provider call, from the gateway's result values.

`Purpose` says what a call served (the tool, the research job, the conversation). `record_call`
writes the row (store/usage.py) from a result's `Usage` (tokens and the price litellm computed,
None when unknown); it never fails the call it records: a ledger write that fails is logged.
"""

from __future__ import annotations

from dataclasses import dataclass

from ask_another.errors import AskAnotherError
from ask_another.gateway import Usage
from ask_another.logs import get_logger
from ask_another.services import Services
from ask_another.store.usage import Kind, UsageRow, record_usage

__all__ = ["Purpose", "record_call", "usage_row"]

log = get_logger("ask_another.spend")


@dataclass(frozen=True, slots=True)
class Purpose:
    """What a provider call served, and for whom (`user_id`, None: the local user)."""

    tool: str | None = None
    job_id: str | None = None
    conversation_id: str | None = None
    user_id: str | None = None


def usage_row(kind: Kind, model: str, usage: Usage | None, purpose: Purpose) -> UsageRow:
    """The ledger row of a call that returned, for a caller that writes it together with what
    the call produced (a conversation's turn: one transaction, store/conversations.py)."""
    usage = usage if usage is not None else Usage()
    return UsageRow(kind=kind, model=model, prompt_tokens=usage.prompt_tokens,
                    completion_tokens=usage.completion_tokens, cost_usd=usage.cost_usd,
                    tool=purpose.tool, job_id=purpose.job_id,
                    conversation_id=purpose.conversation_id, user_id=purpose.user_id)


async def record_call(services: Services, kind: Kind, model: str, usage: Usage | None,
                      purpose: Purpose) -> None:
    """One ledger row for a call that returned (`usage` None: nothing known but the call)."""
    row = usage_row(kind, model, usage, purpose)
    try:
        await record_usage(await services.database(), row)
    except AskAnotherError as exc:
        log.error("usage.not_recorded", kind=kind, model=model, error=str(exc))
