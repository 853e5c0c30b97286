"""Recording spend: one ledger row per provider call, from the gateway's result values.

`Purpose` says what a call served (the tool, the research job, the conversation). `record_call`
writes the row (store/usage.py) from a result's `Usage` (tokens and the price litellm computed,
None when unknown); it never fails the call it records. A database that cannot be reached is
waited for, up to `PATIENCE` seconds (store/outage.py: the row falls in an outage of the
database, the provider billed the call all the same); a row that still cannot be written is
logged at ERROR as `usage.not_recorded` with everything it held, so it can be added by hand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Final

from ask_another.errors import AskAnotherError
from ask_another.gateway import Usage
from ask_another.logs import get_logger
from ask_another.services import Services
from ask_another.store.outage import until_stored
from ask_another.store.usage import Kind, UsageRow, record_usage

__all__ = ["PATIENCE", "Purpose", "record_call", "usage_row"]

PATIENCE: Final = 120.0
"""Seconds a usage row waits for a database that cannot be reached before it is logged instead."""

log = get_logger("ask_another.spend")


@dataclass(frozen=True, slots=True)
class Purpose:
    """What a provider call served, and for whom (`user_id`, None: the local user)."""

    tool: str | None = None
    job_id: str | None = None
    conversation_id: str | None = None
    user_id: str | None = None


def usage_row(kind: Kind, model: str, usage: Usage | None, purpose: Purpose,
              call_id: str | None = None) -> UsageRow:
    """The ledger row of a call that returned, for a caller that writes it together with what
    the call produced (a conversation's turn: one transaction, store/conversations.py).
    `call_id`: the call's own id when it has one (else a random one)."""
    usage = usage if usage is not None else Usage()
    row = UsageRow(kind=kind, model=model, prompt_tokens=usage.prompt_tokens,
                   completion_tokens=usage.completion_tokens, cost_usd=usage.cost_usd,
                   tool=purpose.tool, job_id=purpose.job_id,
                   conversation_id=purpose.conversation_id, user_id=purpose.user_id)
    return row if call_id is None else replace(row, call_id=call_id)


async def record_call(services: Services, kind: Kind, model: str, usage: Usage | None,
                      purpose: Purpose, call_id: str | None = None) -> None:
    """One ledger row for a call that returned (`usage` None: nothing known but the call),
    written once (`call_id`, see `usage_row`), waiting for the database up to `PATIENCE`."""
    row = usage_row(kind, model, usage, purpose, call_id)
    try:
        db = await services.database()
        await until_stored(lambda: record_usage(db, row), patience=PATIENCE, what="usage row",
                           call_id=row.call_id)
    except AskAnotherError as exc:
        log.error("usage.not_recorded", error=str(exc), **asdict(row))
