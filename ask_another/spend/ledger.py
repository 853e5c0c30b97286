"""Recording spend: one ledger row per provider call, written before the call and completed after.

`Purpose` says what a call served (the tool, the research job, the conversation). A provider
call's row is written in two statements (store/usage.py): `intend_call` BEFORE the call (the
row, unanswered), `record_call` after it (its tokens and the price litellm computed, None when
unknown: one statement that completes the intent). So a process killed during the call leaves
the call in the ledger, marked unanswered, and nothing needs reconciling when a runtime starts.
A call the provider refused, or that was never sent (`NOT_BILLED`: a bad request, a rate limit,
a refused key, nothing listening), is no call: `forget_call` deletes its intent. A call cut off
any other way (a timeout, a cancel, a dropped connection) may have been billed and stays,
unanswered.

`paid(...)` is the three steps around one call; `PaidGateway` is a `Gateway` whose every
completion and web search goes through it, for code that makes many calls (a research job's
methods, a router turn's model calls and searches). Writing the row never fails the call it
records: a database that cannot be reached is waited for, up to `PATIENCE` seconds
(store/outage.py); a row that still cannot be written is logged at ERROR as
`usage.not_recorded` with everything it held, so it can be added by hand.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Final, TypeVar

import trio

from ask_another.config import ModelEntry, SearchEntry
from ask_another.errors import (
    AskAnotherError,
    AuthenticationFailed,
    BadRequest,
    InvalidArgument,
    ModelError,
    ProviderUnreachable,
    RateLimited,
)
from ask_another.gateway import CompletionResult, Gateway, SearchResult, Usage
from ask_another.logs import get_logger
from ask_another.services import Services
from ask_another.store.outage import WAITS_FOR_SPACE, until_stored
from ask_another.store.usage import Kind, UsageRow, forget_usage, record_intent, record_usage

__all__ = ["CALL_HEADER", "NOT_BILLED", "PATIENCE", "PaidGateway", "Purpose", "forget_call",
           "intend_call", "paid", "record_call", "usage_row"]

PATIENCE: Final = 120.0
"""Seconds a usage row waits for a database that cannot be reached before it is logged instead."""
NOT_BILLED: Final = (InvalidArgument, ModelError, BadRequest, AuthenticationFailed, RateLimited,
                     ProviderUnreachable)
"""Failures after which the provider billed nothing (it refused the call, or it was never sent):
the call's intent is deleted."""
CALL_HEADER: Final = "X-Ask-Another-Call"
"""The header that carries a completion's ledger call id to the provider, so a provider's own
log (or the simulator's) can be matched with the ledger row by row."""

log = get_logger("ask_another.spend")
R = TypeVar("R")


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


async def _write(services: Services, row: UsageRow, what: str,
                 write: Callable[[Any, UsageRow], Awaitable[Any]]) -> None:
    try:
        db = await services.database()
        # A job's row waits for space on a full disk, as the job does; a person's call does not.
        await until_stored(lambda: write(db, row), patience=PATIENCE, what=what,
                           call_id=row.call_id,
                           **({"waits_for": WAITS_FOR_SPACE} if row.job_id else {}))
    except AskAnotherError as exc:
        log.error("usage.not_recorded", error=str(exc), **asdict(row))


async def intend_call(services: Services, kind: Kind, model: str, purpose: Purpose,
                      call_id: str | None = None) -> str:
    """Write the row of a call about to be made, unanswered (before the call: see the module
    docstring); returns its call id (`call_id`, or a new random one)."""
    row = replace(usage_row(kind, model, None, purpose, call_id), answered=False)
    await _write(services, row, "usage intent", record_intent)
    return row.call_id


async def record_call(services: Services, kind: Kind, model: str, usage: Usage | None,
                      purpose: Purpose, call_id: str | None = None) -> None:
    """The row of a call that returned (`usage` None: nothing known but the call): completes
    its intent, or writes it whole; once per `call_id` (see `usage_row`), waiting for the
    database up to `PATIENCE`."""
    await _write(services, usage_row(kind, model, usage, purpose, call_id), "usage row",
                 record_usage)


async def forget_call(services: Services, call_id: str) -> None:
    """Delete the intent of a call the provider billed nothing for (`NOT_BILLED`)."""
    async def forget(db: Any, _row: UsageRow) -> None:
        await forget_usage(db, call_id)
    with trio.CancelScope(shield=True):
        await _write(services, UsageRow(kind="completion", model="", call_id=call_id),
                     "usage intent withdrawn", forget)


async def paid(services: Services, kind: Kind, model: str, purpose: Purpose,
               call: Callable[[], Awaitable[R]], usage_of: Callable[[R], Usage], *,
               call_id: str | None = None) -> R:
    """`call()` with its ledger row written before it and completed after it (see the module
    docstring); its failures are re-raised, its cancellation leaves the row unanswered."""
    call_id = await intend_call(services, kind, model, purpose, call_id)
    try:
        result = await call()
    except NOT_BILLED:
        await forget_call(services, call_id)
        raise
    with trio.CancelScope(shield=True):  # answered and billed: the row is completed whatever
        await record_call(services, kind, model, usage_of(result), purpose, call_id)
    return result


class PaidGateway(Gateway):
    """A `Gateway` whose every completion and web search is `paid`: its ledger row written
    before the call and completed after it. `ids()` gives each call's id (a research job's
    name the job, attempt and step; None: random), `on_usage(usage, search)` is told each
    answered call's usage (a job's running sum), `kind` is what a completion is recorded as.
    The Gemini interaction calls pass through unrecorded: their usage is reported when the
    interaction completes (research/methods/provider.py)."""

    def __init__(self, inner: Gateway, services: Services, purpose: Purpose, *,
                 kind: Kind = "completion", ids: Callable[[], str] | None = None,
                 on_usage: Callable[[Usage, bool], None] | None = None) -> None:
        super().__init__(inner._transport, inner._secrets)
        self.services = services
        self.purpose = purpose
        self.kind: Kind = kind
        self.ids = ids
        self.on_usage = on_usage

    def _id(self) -> str:
        return self.ids() if self.ids is not None else secrets.token_hex(12)

    def _counted(self, usage: Usage, search: bool) -> Usage:
        if self.on_usage is not None:
            self.on_usage(usage, search)
        return usage

    async def completion(
        self,
        entry: ModelEntry,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        system: str | None = None,
        temperature: float | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 - forwarded to the gateway
        tools: list[dict[str, Any]] | None = None,
        stream: bool = False,
        on_delta: Callable[[str], Awaitable[None]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> CompletionResult:
        call_id = self._id()
        headers = {**(extra or {}).get("extra_headers", {}), CALL_HEADER: call_id}

        async def call() -> CompletionResult:
            return await Gateway.completion(
                self, entry, prompt, messages=messages, system=system, temperature=temperature,
                timeout=timeout, tools=tools, stream=stream, on_delta=on_delta,
                extra={**(extra or {}), "extra_headers": headers})

        return await paid(self.services, self.kind, entry.model, self.purpose, call,
                          lambda r: self._counted(r.usage, False), call_id=call_id)

    async def search(
        self,
        entry: SearchEntry,
        query: str,
        *,
        max_results: int = 8,
        timeout: float = 30.0,  # noqa: ASYNC109 - forwarded to the gateway
    ) -> SearchResult:
        async def call() -> SearchResult:
            return await Gateway.search(self, entry, query, max_results=max_results,
                                        timeout=timeout)

        return await paid(self.services, "search", "web search", self.purpose, call,
                          lambda r: self._counted(r.usage, True), call_id=self._id())
