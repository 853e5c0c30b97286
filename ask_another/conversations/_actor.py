"""The conversation actor, its messages, and the `conversations` part of the supervision tree.

    conversations          (Supervisor, rest_for_one)
    ├── conversations.live     DynamicSupervisor: one temporary `Conversation` per active thread
    └── conversations.starter  `ConversationStarter`: finds or starts a conversation's actor

A `Conversation` is registered as ``("conversation", id)``. It takes one turn at a time: the turn
(reading an article for `discuss`, the provider call, the store write) runs in a task the actor
owns, so while it runs the actor still answers, and refuses a second `Turn` at once with
`ConversationBusy`. The store is the truth: each turn reads the history from it and writes the
turn's messages (the user's, any synthetic tool exchange, the answer) in one commit when the
model has answered, so a failed or cancelled turn leaves nothing behind. An actor that has had no
message for `idle_seconds` with no turn running stops (gen_server's timeout); the next turn
starts a new one from the store. Children are temporary: a crashed conversation is not
restarted, its next turn starts it again.

A first turn has no actor (`take_turn(..., new=True)` runs in the caller: nobody knows the id
yet). Every start goes through the one `ConversationStarter`, whose mailbox serializes "is it
running? else start it", so two turns racing to wake the same conversation never both start an
actor.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ask_another.articles import READ_ARTICLE_NAME, read_article
from ask_another.conversations._errors import ArticleUnreadable, ConversationBusy
from ask_another.conversations._history import build_history, tool_exchange
from ask_another.errors import AskAnotherError, StoreError
from ask_another.gateway import CompletionResult
from ask_another.logs import get_logger
from ask_another.services import Services
from ask_another.spend import Purpose, forget_call, intend_call, record_call, usage_row
from ask_another.spend.budget import ceilings, check_budget
from ask_another.spend.estimate import Estimate, completion_line
from ask_another.spend.ledger import CALL_HEADER, NOT_BILLED
from ask_another.spend.prices import prices
from ask_another.store.conversations import (
    ConversationRecord,
    NewMessage,
    StoredMessage,
    append_messages,
    conversation_messages,
)
from supervisors import (
    NOREPLY,
    Actor,
    Caller,
    ChildSpec,
    DynamicSupervisorRef,
    IdleTimeout,
    Start,
    SupervisorError,
    TaskCancelled,
    TaskDone,
    TaskHandle,
    child_spec,
    dynamic_supervisor_spec,
    supervisor_spec,
)

__all__ = [
    "IDLE_SECONDS",
    "LIVE_SUPERVISOR",
    "STARTER",
    "CancelTurn",
    "Conversation",
    "ConversationStarter",
    "Info",
    "Open",
    "Services",
    "Turn",
    "TurnOutcome",
    "conversation_name",
    "conversations_spec",
    "take_turn",
]

log = get_logger("ask_another.conversations")

IDLE_SECONDS: Final = 120.0
LIVE_SUPERVISOR: Final = "conversations.live"
STARTER: Final = "conversations.starter"
# Shared by every conversation; a single thread's own failures are bounded by the caller.
LIVE_RESTARTS: Final = 100_000


def conversation_name(conversation_id: str) -> tuple[str, str]:
    """The registry name of a conversation's actor."""
    return ("conversation", conversation_id)


# ----- messages ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    """Take one turn: optionally read `article_url` first (discuss), then answer `prompt`.

    `system` replaces the conversation's system prompt from this turn on (None keeps it, ""
    removes it). `model` answers instead of the conversation's own (a consensus thread's panel
    member). The reply is a `TurnOutcome` or the `AskAnotherError` that stopped the turn.
    """

    prompt: str
    timeout: float
    model: str | None = None
    entry: str | None = None
    system: str | None = None
    temperature: float | None = None
    on_delta: Callable[[str], Awaitable[None]] | None = None
    article_url: str | None = None
    user_id: str | None = None  # who asks (the ledger's row and the budget are theirs)
    token: object = field(default_factory=object, compare=False)


@dataclass(frozen=True, slots=True)
class CancelTurn:
    """Cast: cancel the turn started by the `Turn` with this `token` (its caller gave up)."""

    token: object


@dataclass(frozen=True, slots=True)
class Info:
    """Call: the conversation's record (answered at once, even while a turn runs)."""


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """A turn's answer. `not_stored` says why, when the provider answered (and billed) the turn
    but the store could not keep it (a full disk): the answer is still the caller's."""

    conversation_id: str
    model: str
    result: CompletionResult
    stored: list[StoredMessage]
    not_stored: str | None = None
    continuable: bool = True  # the conversation exists in the store (False: a first turn lost)


@dataclass(frozen=True, slots=True)
class Open:
    """Call the starter: the live actor of `record`'s conversation, started if need be."""

    record: ConversationRecord


# ----- the actor -----------------------------------------------------------------------------


class Conversation(Actor):
    """One conversation thread. Started by `ConversationStarter`, never directly."""

    record: ConversationRecord
    services: Services

    async def init(self, record: ConversationRecord, services: Services,
                   idle_seconds: float = IDLE_SECONDS) -> None:
        # No I/O: init runs in the supervisor's task. History is read per turn.
        self.record = record
        self.services = services
        self.turn: TaskHandle | None = None
        self.turn_token: object = None
        self.waiter: Caller | None = None
        # A turn whose caller cancelled it is on its way out: the next turn waits for it to
        # finish (rather than being refused as busy) and then starts.
        self.cancelling = False
        self.next_turn: tuple[Turn, Caller] | None = None
        # gen_server's timeout: IdleTimeout arrives after idle_seconds without a message.
        self.set_idle_timeout(idle_seconds)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        match msg:
            case Info():
                return self.record
            case Turn():
                if self.turn is None:
                    self._start_turn(msg, caller)
                elif self.cancelling and self.next_turn is None:
                    self.next_turn = (msg, caller)
                else:
                    return ConversationBusy(self.record.id)
                return NOREPLY
        return await super().handle_call(msg, caller)

    async def handle_cast(self, msg: Any) -> None:
        match msg:
            case CancelTurn(token) if self.turn is not None and token is self.turn_token:
                log.info("conversation.turn_cancelled", conversation_id=self.record.id)
                self.cancelling = True
                self.turn.cancel()
            case CancelTurn():
                pass  # that turn has already finished
            case _:
                await super().handle_cast(msg)

    async def handle_info(self, msg: Any) -> None:
        match msg:
            case TaskDone(handle, value) if handle is self.turn:
                self._finish_turn(value)
            case TaskCancelled(handle) if handle is self.turn:
                self._finish_turn(AskAnotherError("the turn was cancelled"))
            case IdleTimeout() if self.turn is None:
                log.debug("conversation.idle_stop", conversation_id=self.record.id)
                self.stop()
            case _:
                pass  # idle while a turn runs (a long provider call): not idle at all

    def _start_turn(self, turn: Turn, caller: Caller) -> None:
        self.turn = self.start_task(self._run, turn)
        self.turn_token = turn.token
        self.waiter = caller

    def _finish_turn(self, value: Any) -> None:
        if self.waiter is not None:
            self.waiter.reply(value)
        self.turn = self.turn_token = self.waiter = None
        self.cancelling = False
        if self.next_turn is not None:
            turn, caller = self.next_turn
            self.next_turn = None
            self._start_turn(turn, caller)

    async def _run(self, turn: Turn) -> TurnOutcome | AskAnotherError:
        # Anticipated failures are the reply, not a crash: the conversation stays usable.
        try:
            return await self._take(turn)
        except AskAnotherError as exc:
            return exc

    async def _take(self, turn: Turn) -> TurnOutcome:
        outcome, self.record = await take_turn(self.services, self.record, turn)
        return outcome


async def take_turn(services: Services, record: ConversationRecord, turn: Turn, *,
                    new: bool = False) -> tuple[TurnOutcome, ConversationRecord]:
    """One turn of the conversation `record`: its history read (none when `new`: a conversation
    nobody else knows yet, whose first turn needs no actor), the provider called, then the ledger
    row and the turn's messages written in ONE transaction. Returns the outcome and the record
    as it is now stored (the same record when the store could not keep the turn)."""
    added: list[NewMessage] = []
    if turn.article_url is not None:
        article = await read_article(turn.article_url, allow_hosts=services.config.allow_hosts)
        if not article.get("success"):
            raise ArticleUnreadable(str(article.get("error") or "unreadable"))
        added.append(tool_exchange([(READ_ARTICLE_NAME, {"url": article["url"]}, article)]))
    added.append(NewMessage(role="user", content=turn.prompt))
    if turn.model is not None:
        entry = services.config.stored_entry(turn.model, turn.entry)
    else:
        entry = services.config.stored_entry(record.model, record.entry)
    db = await services.database()
    stored = [] if new else await conversation_messages(db, record.id)
    system = record.system if turn.system is None else turn.system
    messages = [{"role": "system", "content": system}] if system else []
    messages += build_history([*stored, *added])
    gateway = await services.gateway()
    if ceilings(services):
        # A budget ceiling is set: refuse a turn whose estimate would cross it.
        line = completion_line(await prices(services), entry.model, messages)
        await check_budget(services, Estimate((line,)), "this completion", turn.user_id)
    log.debug("completion.started", model=entry.model, conversation_id=record.id)
    purpose = Purpose(tool="discuss" if turn.article_url is not None else "completion",
                      conversation_id=record.id, user_id=turn.user_id)
    # The ledger row before the call (unanswered), completed in the turn's transaction below.
    call_id = await intend_call(services, "completion", entry.model, purpose)
    try:
        result = await gateway.completion(entry, messages=messages,
                                          temperature=turn.temperature, timeout=turn.timeout,
                                          on_delta=turn.on_delta,
                                          extra={"extra_headers": {CALL_HEADER: call_id}})
    except NOT_BILLED:
        await forget_call(services, call_id)
        raise
    updated = msgspec.structs.replace(record, system=system or None)
    row = usage_row("completion", entry.model, result.usage, purpose, call_id)
    try:
        written = await append_messages(
            db, updated, [*added, NewMessage(role="assistant", content=result.text)],
            now=time.time(), usage=row, first=not stored)
    except StoreError as exc:
        # The provider answered and billed it: the ledger row goes on its own (record_call
        # waits for the database, and logs it if that fails too), under the same call id, in
        # case the failed transaction was committed after all; losing the answer too would
        # cost twice.
        await record_call(services, "completion", entry.model, result.usage, purpose,
                          call_id=row.call_id)
        log.error("conversation.not_stored", conversation_id=record.id, error=str(exc),
                  prompt_tokens=result.usage.prompt_tokens,
                  completion_tokens=result.usage.completion_tokens,
                  cost_usd=result.usage.cost_usd)
        return TurnOutcome(conversation_id=record.id, model=result.model, result=result,
                           stored=[], not_stored=str(exc), continuable=bool(stored)), record
    # The same event as a one-off completion: usage and cost per call, in one place to grep.
    log.info("completion.finished", model=entry.model, conversation_id=record.id,
             history=len(stored), article=turn.article_url is not None,
             prompt_tokens=result.usage.prompt_tokens,
             completion_tokens=result.usage.completion_tokens, cost_usd=result.usage.cost_usd)
    return TurnOutcome(conversation_id=record.id, model=result.model, result=result,
                       stored=written), updated


class ConversationStarter(Actor):
    """Finds a conversation's live actor or starts one, one request at a time."""

    async def init(self, services: Services, idle_seconds: float = IDLE_SECONDS) -> None:
        self.services = services
        self.idle_seconds = idle_seconds

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        match msg:
            case Open(record):
                registry = self.services.registry
                ref = registry.whereis(conversation_name(record.id))
                if ref is not None and ref.alive:
                    return ref
                live = registry.whereis(LIVE_SUPERVISOR)
                # Failures are the reply (the caller raises them): the starter must not crash.
                if not isinstance(live, DynamicSupervisorRef):
                    return AskAnotherError("the conversation supervisor is restarting; try "
                                           "again in a moment")
                try:
                    return await live.start_child(conversation_spec(record, self.services,
                                                                    self.idle_seconds))
                except SupervisorError as exc:
                    log.error("conversation.start_failed", conversation_id=record.id,
                              error=str(exc))
                    return AskAnotherError(f"the conversation could not be started ({exc})")
        return await super().handle_call(msg, caller)


def conversation_spec(record: ConversationRecord, services: Services,
                      idle_seconds: float = IDLE_SECONDS) -> ChildSpec:
    return ChildSpec(
        id=record.id,
        start=Start(Conversation, (record, services, idle_seconds),
                    name=conversation_name(record.id), registry=services.registry),
        restart="temporary",
        shutdown=5.0,
    )


def conversations_spec(services: Services, idle_seconds: float = IDLE_SECONDS) -> ChildSpec:
    """The `conversations` subtree for the runtime's root supervisor."""
    registry = services.registry
    return supervisor_spec(
        "conversations",
        [
            dynamic_supervisor_spec(LIVE_SUPERVISOR, max_restarts=LIVE_RESTARTS,
                                    name=LIVE_SUPERVISOR, registry=registry),
            child_spec(ConversationStarter, services, idle_seconds, name=STARTER,
                       registry=registry),
        ],
        "rest_for_one",
        name="conversations",
        registry=registry,
    )
