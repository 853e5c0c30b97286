"""One panel seat's provider call as its own actor, under the `consensus` dynamic supervisor.

    consensus.calls   DynamicSupervisor: one temporary `PanelCall` per model call in flight

A `PanelCall` is started for one call and ends with it. `call(Ask())` starts the provider call
in a task the actor owns and replies, when it ends, with the seat's `Answer` (answered, failed
or timed out: a provider failure is the reply, not a crash). The call has its own timeout,
enforced by the gateway. A `Hangup` cast (the consensus caller was cancelled) stops the actor:
its task is cancelled before the actor exits, which aborts the HTTP request. A call that
returned is recorded in the usage ledger (spend/) before the actor replies.

Children are temporary: a crashed call is not restarted (its caller reports the seat failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import trio

from ask_another.config import ModelEntry
from ask_another.consensus._panel import Answer, one_line_reason
from ask_another.errors import AskAnotherError, ProviderTimeout
from ask_another.logs import get_logger
from ask_another.services import Services
from ask_another.spend import Purpose, record_call
from ask_another.store.usage import Kind
from supervisors import (
    NOREPLY,
    Actor,
    Caller,
    ChildSpec,
    Registry,
    Start,
    TaskDone,
    dynamic_supervisor_spec,
)

__all__ = ["CALLS_SUPERVISOR", "Ask", "Hangup", "PanelCall", "consensus_spec", "panel_call_spec"]

log = get_logger("ask_another.consensus")

CALLS_SUPERVISOR: Final = "consensus.calls"
# Shared by every panel call; a crash is reported in its seat, never retried.
CALL_RESTARTS: Final = 100_000


@dataclass(frozen=True, slots=True)
class Ask:
    """Call: make the provider call; the reply is the seat's `Answer`, when it ends."""


@dataclass(frozen=True, slots=True)
class Hangup:
    """Cast: the caller gave up; cancel the call (the HTTP request is aborted) and stop."""


@dataclass(frozen=True, slots=True)
class CallSpec:
    entry: ModelEntry
    messages: list[dict[str, Any]]
    timeout: float
    stance: str | None = None
    temperature: float | None = None
    kind: Kind = "consensus"
    purpose: Purpose = field(default_factory=lambda: Purpose(tool="consensus"))


class PanelCall(Actor):
    """One provider call for one seat. Started through `panel_call_spec`, never directly."""

    async def init(self, spec: CallSpec, services: Services) -> None:
        self.spec = spec
        self.services = services
        self.waiter: Caller | None = None

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        if isinstance(msg, Ask) and self.waiter is None:
            self.waiter = caller
            self.start_task(self._run)
            return NOREPLY
        return await super().handle_call(msg, caller)

    async def handle_cast(self, msg: Any) -> None:
        if isinstance(msg, Hangup):
            log.info("consensus.call_cancelled", model=self.spec.entry.model)
            self.stop()
            return
        await super().handle_cast(msg)

    async def handle_info(self, msg: Any) -> None:
        if isinstance(msg, TaskDone) and self.waiter is not None:
            self.waiter.reply(msg.value)
            self.stop()

    async def _run(self) -> Answer:
        spec = self.spec
        model = spec.entry.model
        started = trio.current_time()
        try:
            gateway = await self.services.gateway()
            result = await gateway.completion(spec.entry, messages=spec.messages,
                                              temperature=spec.temperature, timeout=spec.timeout)
        except ProviderTimeout as exc:
            return Answer(model=model, status="timed out", stance=spec.stance,
                          latency=trio.current_time() - started, reason=one_line_reason(exc))
        except AskAnotherError as exc:
            return Answer(model=model, status="failed", stance=spec.stance,
                          latency=trio.current_time() - started, reason=one_line_reason(exc))
        latency = trio.current_time() - started
        await record_call(self.services, spec.kind, model, result.usage, spec.purpose)
        log.info("completion.finished", model=model, tool="consensus",
                 prompt_tokens=result.usage.prompt_tokens,
                 completion_tokens=result.usage.completion_tokens, cost_usd=result.usage.cost_usd)
        return Answer(model=model, status="answered", stance=spec.stance, latency=latency,
                      result=result)


def panel_call_spec(spec: CallSpec, services: Services) -> ChildSpec:
    return ChildSpec(id=object(), start=Start(PanelCall, (spec, services)),
                     restart="temporary", shutdown=5.0)


def consensus_spec(registry: Registry) -> ChildSpec:
    """The `consensus.calls` dynamic supervisor for the runtime's root supervisor."""
    return dynamic_supervisor_spec(CALLS_SUPERVISOR, max_restarts=CALL_RESTARTS,
                                   name=CALLS_SUPERVISOR, registry=registry)
