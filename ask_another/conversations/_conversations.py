"""`Conversations`: the face of conversations for the MCP tools and for embedding.

It holds no conversation state: it resolves the model, finds the conversation (its live actor, or
its row in the store), checks the model binding, has the starter wake the actor, and sends the
turn. Every turn answers with the conversation id, so the caller can continue the thread.

    conversations = runtime.conversations_for(user)
    first = await conversations.turn("gpt4", "Is this proof right? ...")
    again = await conversations.turn("gpt4", "And step 3?", first.conversation_id)
    talk = await conversations.discuss("https://example.org/post", "gpt4")

A conversation is bound to its model: a turn naming another model is refused
(`ConversationModelMismatch`) rather than silently switching models mid-thread. A consensus
thread (consensus/) is bound to its panel: a turn may name any model of the panel.

A `Conversations` acts for one user (`User`, users.py; the local user by default): the
conversations it starts are theirs, and another user's conversation is answered as none
(`NoSuchConversation`: continued, discussed or read), so an id never tells that it exists; an
admin may take part in any.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import trio

from ask_another.calls import CallSettings
from ask_another.config import MODEL_PREFIX, Config
from ask_another.conversations._actor import (
    STARTER,
    CancelTurn,
    Info,
    Open,
    Services,
    Turn,
    TurnOutcome,
    conversation_name,
    take_turn,
)
from ask_another.conversations._errors import ConversationModelMismatch, NoSuchConversation
from ask_another.errors import AskAnotherError, InvalidArgument
from ask_another.store.conversations import (
    ConversationRecord,
    StoredMessage,
    conversation_messages,
    get_conversation,
    panel_entry,
    panel_of,
)
from ask_another.users import LOCAL_USER, User
from supervisors import ActorExited, ActorRef, Crash, MailboxFull, Normal, SupervisorError

__all__ = ["DISCUSS_PROMPT", "Conversations", "allowed_conversation"]

DISCUSS_PROMPT: Final = "Please summarize and discuss this article."
# An actor may stop for idleness between being found and receiving the turn: find it again.
_WAKE_ATTEMPTS: Final = 5

Delta = Callable[[str], Awaitable[None]]


def _new_id() -> str:
    return f"c-{secrets.token_hex(5)}"


def allowed_conversation(user: User, record: ConversationRecord) -> ConversationRecord:
    """`record`, if `user` may take part in it; raises `NoSuchConversation` otherwise:
    another user's conversation and none get one answer, so an id tells nobody it exists."""
    if not user.can_see(record.user_id):
        raise NoSuchConversation(record.id)
    return record


class Conversations:
    """Take turns in conversations (see the module docstring)."""

    def __init__(self, services: Services, user: User = LOCAL_USER) -> None:
        self.services = services
        self.user = user

    @property
    def config(self) -> Config:
        return self.services.config

    async def turn(
        self,
        model: str,
        prompt: str,
        conversation_id: str | None = None,
        *,
        system: str | None = None,
        temperature: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call setting, enforced by the gateway
        on_delta: Delta | None = None,
    ) -> TurnOutcome:
        """Send `prompt` in a conversation (a new one when `conversation_id` is None or blank).

        The history (including earlier tool exchanges) is replayed to the model; the prompt and
        the answer are stored together once the model has answered. `system` replaces the
        conversation's system prompt from this turn on. Raises `NoSuchConversation` (for
        another user's conversation too), `ConversationBusy` (a turn is running),
        `ConversationModelMismatch`, `ModelNotAllowed` / `AmbiguousModel`, `InvalidArgument`,
        and the `ProviderError`s. Cancelling the caller cancels the turn (nothing is stored).
        """
        if not prompt.strip():
            raise InvalidArgument("the prompt is empty")
        self.config.check_size("prompt", prompt)
        self.config.check_size("system prompt", system)
        return await self._take(model, conversation_id, Turn(
            prompt=prompt, system=system, temperature=temperature,
            timeout=self._timeout(timeout, temperature), on_delta=on_delta,
            user_id=self.user.id))

    async def discuss(
        self,
        url: str,
        model: str,
        conversation_id: str | None = None,
        prompt: str = DISCUSS_PROMPT,
        *,
        system: str | None = None,
        temperature: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call setting, enforced by the gateway
        on_delta: Delta | None = None,
    ) -> TurnOutcome:
        """Read the article at `url` and discuss it with `model`.

        The article is fetched live (read_article, with the configured allowed hosts) and stored
        as a synthetic read_article exchange (an assistant tool call and its result), followed by
        `prompt` as the user's message; then the turn runs. All three messages and the answer
        are stored together. Raises `ArticleUnreadable` (nothing stored) when the fetch fails,
        and what `turn` raises.
        """
        if not url.strip():
            raise InvalidArgument("No URL provided: give the address of the article to discuss")
        if not prompt.strip():
            prompt = DISCUSS_PROMPT
        self.config.check_size("prompt", prompt)
        self.config.check_size("system prompt", system)
        return await self._take(model, conversation_id, Turn(
            prompt=prompt, system=system, temperature=temperature,
            timeout=self._timeout(timeout, temperature), on_delta=on_delta,
            article_url=url.strip(), user_id=self.user.id))

    async def get(self, conversation_id: str) -> ConversationRecord:
        """The stored conversation (raises `NoSuchConversation`, for another
        user's)."""
        record = await get_conversation(await self.services.database(), conversation_id)
        if record is None:
            raise NoSuchConversation(conversation_id)
        return allowed_conversation(self.user, record)

    async def messages(self, conversation_id: str) -> list[StoredMessage]:
        """The stored messages of a conversation, in order (raises `NoSuchConversation`)."""
        await self.get(conversation_id)
        return await conversation_messages(await self.services.database(), conversation_id)

    # ----- internals -------------------------------------------------------------------------

    def _timeout(self, timeout: float | None, temperature: float | None) -> float:
        return CallSettings(temperature, timeout).timeout_or(self.config.timeout)

    async def _take(self, model: str, conversation_id: str | None, turn: Turn) -> TurnOutcome:
        entry = self.config.resolve(model)
        wanted = (conversation_id or "").strip()
        for _ in range(_WAKE_ATTEMPTS):
            if wanted:
                record = await self._existing(wanted)
                panel = panel_of(record.model)
                bound_entry = record.entry
                if entry.model in panel:
                    # A consensus thread: any model of its panel may take it further.
                    turn = dataclasses.replace(turn, model=entry.model, entry=entry.variable)
                    bound_entry = panel_entry(record.entry, panel.index(entry.model))
                elif record.model != entry.model:
                    raise ConversationModelMismatch(wanted, record.model, entry.model)
                if bound_entry is not None and bound_entry != entry.variable:
                    # The same model id through another MODEL_* variable (another key or base).
                    bound = bound_entry.removeprefix(MODEL_PREFIX).lower()
                    raise ConversationModelMismatch(wanted, bound, entry.shorthand)
            else:
                now = time.time()
                record = ConversationRecord(id=_new_id(), model=entry.model, system=None,
                                            created_at=now, updated_at=now,
                                            entry=entry.variable, user_id=self.user.id)
                # Nobody knows this conversation until its answer names it: its first turn
                # runs here, with no actor to start, and writes once (docs/conversations.md).
                outcome, _ = await take_turn(self.services, record, turn, new=True)
                return outcome
            ref = await self._open(record)
            try:
                reply = await self._send(ref, turn)
            except ActorExited as exc:
                if isinstance(exc.reason, Normal):
                    continue  # it stopped for idleness before our turn reached it
                if isinstance(exc.reason, Crash):
                    raise AskAnotherError(
                        f"the conversation {record.id} failed unexpectedly "
                        f"({type(exc.reason.exception).__name__}); its stored history is intact, "
                        "so try again") from None
                raise AskAnotherError("the server is shutting down") from None
            if isinstance(reply, BaseException):
                raise reply
            assert isinstance(reply, TurnOutcome)
            return reply
        raise AskAnotherError("the conversation kept stopping before it could answer; try again")

    async def _existing(self, conversation_id: str) -> ConversationRecord:
        ref = self.services.registry.whereis(conversation_name(conversation_id))
        if ref is not None:
            # Live (perhaps in its first turn, not stored yet): it knows its own record.
            with contextlib.suppress(ActorExited):
                record: ConversationRecord = await ref.call(Info())
                return allowed_conversation(self.user, record)
        return await self.get(conversation_id)

    async def _open(self, record: ConversationRecord) -> ActorRef:
        starter = self.services.registry.whereis(STARTER)
        if starter is None:
            raise AskAnotherError("the conversation supervisor is restarting; try again shortly")
        delay = 0.001
        while True:
            try:
                reply = await starter.call(Open(record))
                break
            except MailboxFull:
                # Hundreds of new conversations at once: let the starter catch up.
                await trio.sleep(delay)
                delay = min(delay * 2, 0.1)
        if isinstance(reply, BaseException):
            raise reply
        assert isinstance(reply, ActorRef)
        return reply

    async def _send(self, ref: ActorRef, turn: Turn) -> Any:
        try:
            return await ref.call(turn, timeout=None)
        except trio.Cancelled:
            # The caller gave up (a client cancelled the tool call): stop the provider call too.
            with contextlib.suppress(SupervisorError):
                ref.cast(CancelTurn(turn.token))
            raise
