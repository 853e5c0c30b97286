"""`Consensus`: one prompt to several allowed models at once, their replies side by side.

    consensus = runtime.consensus_for(user)
    result = await consensus.ask(["gpt4", "claude", "gemini"], "Is this proof right? ...",
                                 stances={"claude": "against"}, synthesize="gpt4")

Each seat's call is a task of one nursery (`panel_call`, consensus/_seat.py) with its own
timeout, all started before any is awaited, so the wall time is the slowest model's, not the
sum. A seat that fails or times out keeps its place with a one-line reason; the others still
come back. When the caller is cancelled, every call still in flight is cancelled (the HTTP
requests are aborted).

The panel's replies (and the synthesis) are stored in a conversation: a new consensus thread,
bound to its panel (the model ids and the `MODEL_*` entries they came from), or the thread named
by `conversation_id` (any conversation: the panel sees its history). A consensus thread can be
continued by another consensus, and by `completion` or
`discuss` with any model of its panel (conversations/).

A `Consensus` acts for one user (users.py; the local user by default): the threads it starts
are theirs, and another user's conversation is answered as none (`NoSuchConversation`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import trio

from ask_another.calls import CallSettings
from ask_another.config import ModelEntry
from ask_another.consensus._panel import (
    MAX_MODELS,
    MIN_MODELS,
    Answer,
    ConsensusResult,
    Seat,
    stance_instruction,
)
from ask_another.consensus._seat import CallSpec, panel_call
from ask_another.conversations import NoSuchConversation, allowed_conversation, build_history
from ask_another.errors import InvalidArgument
from ask_another.interaction.types import Decision, Deny
from ask_another.logs import get_logger
from ask_another.services import Services
from ask_another.spend import Purpose
from ask_another.spend.budget import check_budget
from ask_another.spend.confirm import SpendNotConfirmed, needs_confirmation, not_confirmed_text
from ask_another.spend.estimate import ASSUMED_OUTPUT_TOKENS, Estimate, completion_line
from ask_another.spend.prices import prices as spend_prices
from ask_another.store.conversations import (
    ConversationRecord,
    NewMessage,
    append_messages,
    conversation_messages,
    get_conversation,
    panel_binding,
    panel_entries,
)
from ask_another.users import LOCAL_USER, User

__all__ = ["SYNTHESIS_PROMPT", "Confirm", "Consensus", "OnAnswer", "panel_text"]

log = get_logger("ask_another.consensus")


OnAnswer = Callable[[Answer, int, int], Awaitable[None]]
"""Called as each seat's call ends: ``(answer, how many have ended, panel size)``."""

Confirm = Callable[[Estimate], Awaitable[Decision]]
"""Asked before any call when the estimate is above ASK_ANOTHER_CONFIRM_USD: `Allow` runs the
consensus; `Deny` (a person said no, or nobody answered in time) refuses it, nothing spent."""


@dataclass(frozen=True, slots=True)
class _Plan:
    calls: list[CallSpec]
    synthesizer: ModelEntry | None
    record: ConversationRecord
    seconds: float
    purpose: Purpose
    prompt: str


SYNTHESIS_PROMPT = """Several models answered the same prompt. Compare their replies and write a \
synthesis in three sections:
1. Agreements: what the models agree on.
2. Differences: where they disagree, and who said what.
3. Single-model claims: claims only one model made, naming that model.
Judge the arguments, not the majority. Be concise.

The prompt:
{prompt}

The replies:
{replies}"""


def panel_text(answers: Sequence[Answer]) -> str:
    """The panel's replies as one text, each under its model's name (stored in the thread and
    shown to the synthesizer)."""
    blocks = []
    for answer in answers:
        head = f"[{answer.model}" + (f", stance: {answer.stance}" if answer.stance else "") + "]"
        if answer.result is not None:
            blocks.append(f"{head}\n{answer.result.text.strip()}")
        else:
            blocks.append(f"{head}\n({answer.status}: {answer.reason})")
    return "\n\n".join(blocks)


class Consensus:
    """Ask a panel of models (see the module docstring). Holds no state of its own."""

    def __init__(self, services: Services, user: User = LOCAL_USER) -> None:
        self.services = services
        self.user = user

    def seats(self, models: Sequence[str], stances: Mapping[str, str] | None = None
              ) -> list[Seat]:
        """The panel for `models` (2-8 distinct allowed models) with their stances; raises
        `InvalidArgument`, `ModelNotAllowed` or `AmbiguousModel`."""
        names = [m.strip() for m in models if m.strip()]
        if not MIN_MODELS <= len(names) <= MAX_MODELS:
            raise InvalidArgument(f"a consensus needs {MIN_MODELS} to {MAX_MODELS} models, "
                                  f"got {len(names)}")
        config = self.services.config
        entries = [config.resolve(name) for name in names]
        ids = [e.model for e in entries]
        for model in ids:
            if ids.count(model) > 1:
                raise InvalidArgument(f"{model} is named twice: name each model once")
        stance_of: dict[str, str] = {}
        for name, stance in (stances or {}).items():
            model = config.resolve(name).model
            if model not in ids:
                raise InvalidArgument(f"a stance was given for {name!r}, which is not on the "
                                      "panel")
            if stance.strip():
                stance_of[model] = stance.strip()
        return [Seat(entry=e, stance=stance_of.get(e.model)) for e in entries]

    async def ask(
        self,
        models: Sequence[str],
        prompt: str,
        *,
        system: str | None = None,
        stances: Mapping[str, str] | None = None,
        synthesize: str | None = None,
        conversation_id: str | None = None,
        temperature: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - per model call, enforced by the gateway
        on_answer: OnAnswer | None = None,
        confirm: Confirm | None = None,
        known: Mapping[str, Answer] | None = None,
        call_id: Callable[[str], str] | None = None,
    ) -> ConsensusResult:
        """Ask every model of the panel `prompt` at once; see the module docstring.

        `system` (kept for the thread) goes to every model, each seat's stance after it.
        `synthesize`: an allowed model that then compares the replies (none by default).
        The cost is estimated before any call starts (`result.estimate`): an estimate that would
        cross a budget ceiling raises `BudgetExceeded`; one above ASK_ANOTHER_CONFIRM_USD is put
        to `confirm` (no `confirm`: not confirmed), and a `Deny` raises `SpendNotConfirmed`.
        Either way nothing is asked or spent.
        Raises `InvalidArgument`, `ModelNotAllowed` / `AmbiguousModel`, `NoSuchConversation`
        (another user's conversation too);
        provider failures are reported in their seats, never raised. Cancelling the caller
        hangs up every call in flight; nothing is stored then.
        `known`: the answers of seats asked before, by model (a consensus job resumed after a
        kill: only the other seats are asked); `call_id(step)`: the ledger id of a seat's call
        (step ``seat:<model>``) or the synthesis's (``synthesis``), None: random ones.
        """
        plan = await self._plan(models, prompt, system, stances, synthesize, conversation_id,
                                temperature, timeout, call_id)
        estimate = await self._estimate(plan)
        await check_budget(self.services, estimate, "this consensus", self.user.id)
        if needs_confirmation(self.services, estimate):
            decision: Decision = await confirm(estimate) if confirm is not None else Deny()
            if isinstance(decision, Deny):
                log.info("consensus.not_confirmed", estimate_usd=estimate.known_usd,
                         reason=decision.reason)
                raise SpendNotConfirmed(
                    "This consensus was " + not_confirmed_text(self.services, estimate, decision))
        calls, record = plan.calls, plan.record
        started = trio.current_time()
        known = known or {}
        asked = await self._panel([c for c in calls if c.entry.model not in known], on_answer)
        answers = [known[c.entry.model] if c.entry.model in known else asked.pop(0)
                   for c in calls]
        synthesis = None
        answered = [a for a in answers if a.result is not None]
        if plan.synthesizer is not None:
            synthesis = await self._synthesize(plan.synthesizer, prompt, answers, plan.seconds,
                                               plan.purpose, call_id)
        conversation = None
        if answered:
            reply = panel_text(answers)
            if synthesis is not None and synthesis.result is not None:
                reply += f"\n\n[synthesis by {synthesis.model}]\n{synthesis.result.text.strip()}"
            db = await self.services.database()
            await append_messages(db, record, [NewMessage(role="user", content=prompt),
                                               NewMessage(role="assistant", content=reply)],
                                  now=time.time())
            conversation = record.id
        wall = trio.current_time() - started
        log.info("consensus.finished", models=len(calls), answered=len(answered),
                 wall=round(wall, 3), conversation_id=conversation)
        return ConsensusResult(answers=tuple(answers), synthesis=synthesis,
                               conversation_id=conversation, wall=wall, estimate=estimate)

    async def estimate(
        self,
        models: Sequence[str],
        prompt: str,
        *,
        system: str | None = None,
        stances: Mapping[str, str] | None = None,
        synthesize: str | None = None,
        conversation_id: str | None = None,
    ) -> Estimate:
        """What `ask` with these arguments should cost (from litellm's price map), after the
        same validation; nothing is asked. The MCP tool asks for confirmation with it."""
        plan = await self._plan(models, prompt, system, stances, synthesize, conversation_id,
                                None, None, None)
        return await self._estimate(plan)

    # ----- internals -------------------------------------------------------------------------

    async def _plan(self, models: Sequence[str], prompt: str, system: str | None,
                    stances: Mapping[str, str] | None, synthesize: str | None,
                    conversation_id: str | None, temperature: float | None,
                    timeout: float | None,  # noqa: ASYNC109 - per model call
                    call_id: Callable[[str], str] | None) -> _Plan:
        """Validate the arguments and build every call, asking nothing yet."""
        if not prompt.strip():
            raise InvalidArgument("the prompt is empty")
        self.services.config.check_size("prompt", prompt)
        self.services.config.check_size("system prompt", system)
        seats = self.seats(models, stances)
        synthesizer = self.services.config.resolve(synthesize) if synthesize else None
        settings = CallSettings(temperature, timeout)
        seconds = settings.timeout_or(self.services.config.timeout)
        record, history = await self._thread(conversation_id, seats, system)
        if system is not None:
            record = msgspec.structs.replace(record, system=system or None)
        purpose = Purpose(tool="consensus", conversation_id=record.id, user_id=self.user.id)
        calls = [CallSpec(entry=seat.entry, stance=seat.stance, timeout=seconds,
                          temperature=temperature, purpose=purpose,
                          messages=self._messages(record.system, seat.stance, history, prompt),
                          call_id=call_id(f"seat:{seat.entry.model}") if call_id else None)
                 for seat in seats]
        return _Plan(calls=calls, synthesizer=synthesizer, record=record, seconds=seconds,
                     purpose=purpose, prompt=prompt)

    async def _estimate(self, plan: _Plan) -> Estimate:
        """What the panel (and the synthesis) should cost, from litellm's price map."""
        prices = await spend_prices(self.services)
        lines = [completion_line(prices, c.entry.model, c.messages) for c in plan.calls]
        if plan.synthesizer is not None:
            replies = len(plan.calls) * ASSUMED_OUTPUT_TOKENS
            lines.append(completion_line(prices, plan.synthesizer.model,
                                         [{"content": SYNTHESIS_PROMPT + plan.prompt}],
                                         extra_input_tokens=replies))
        return Estimate(tuple(lines))

    async def _thread(self, conversation_id: str | None, seats: list[Seat], system: str | None,
                      ) -> tuple[ConversationRecord, list[dict[str, Any]]]:
        wanted = (conversation_id or "").strip()
        db = await self.services.database()
        if not wanted:
            now = time.time()
            binding = panel_binding([seat.entry.model for seat in seats])
            record = ConversationRecord(id=f"c-{secrets.token_hex(5)}", model=binding,
                                        system=system or None, created_at=now, updated_at=now,
                                        user_id=self.user.id,
                                        entry=panel_entries([s.entry.variable for s in seats]))
            return record, []
        found = await get_conversation(db, wanted)
        if found is None:
            raise NoSuchConversation(wanted)
        allowed_conversation(self.user, found)
        return found, build_history(await conversation_messages(db, wanted))

    @staticmethod
    def _messages(system: str | None, stance: str | None, history: list[dict[str, Any]],
                  prompt: str) -> list[dict[str, Any]]:
        parts = [p for p in (system, stance_instruction(stance) if stance else None) if p]
        messages: list[dict[str, Any]] = (
            [{"role": "system", "content": "\n\n".join(parts)}] if parts else [])
        return [*messages, *history, {"role": "user", "content": prompt}]

    async def _panel(self, calls: list[CallSpec], on_answer: OnAnswer | None) -> list[Answer]:
        """Every call at once, each a task; answers in the order of `calls`. Cancelling the
        caller cancels the calls still in flight (their HTTP requests are aborted)."""
        answers: list[Answer | None] = [None] * len(calls)
        ended = 0

        async def seat(i: int, call: CallSpec) -> None:
            nonlocal ended
            answers[i] = answer = await panel_call(call, self.services)
            ended += 1
            if on_answer is not None:
                await on_answer(answer, ended, len(calls))

        async with trio.open_nursery() as nursery:
            for i, call in enumerate(calls):
                nursery.start_soon(seat, i, call)
        return [a for a in answers if a is not None]

    async def _synthesize(self, entry: ModelEntry, prompt: str, answers: list[Answer],
                          seconds: float, purpose: Purpose,
                          call_id: Callable[[str], str] | None = None) -> Answer:
        answered = [a for a in answers if a.result is not None]
        if not answered:
            return Answer(model=entry.model, status="failed", latency=0.0,
                          reason="not asked: no model of the panel answered")
        text = SYNTHESIS_PROMPT.format(prompt=prompt.strip(), replies=panel_text(answers))
        call = CallSpec(entry=entry, timeout=seconds, kind="synthesis", purpose=purpose,
                        messages=[{"role": "user", "content": text}],
                        call_id=call_id("synthesis") if call_id else None)
        answer = (await self._panel([call], None))[0]
        return answer
