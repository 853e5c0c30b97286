"""One panel seat's provider call: a task of the consensus caller's nursery.

`panel_call(spec, services)` makes the call with its own timeout (enforced by the gateway) and
returns the seat's `Answer` (answered, failed or timed out: a provider failure is the answer,
not an exception). The call's ledger row is written before it and completed when it returns
(spend/ledger.py: `paid`), so a seat whose process is killed mid-call stays in the ledger as
unanswered; its id is `CallSpec.call_id` (a consensus job's: the job, attempt and seat).
Cancelling the caller cancels the task, which aborts the HTTP request. A seat has no state to
keep or lifecycle of its own, so it is no actor (it was `PanelCall`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio

from ask_another import tracing
from ask_another.config import ModelEntry
from ask_another.consensus._panel import STANCES, Answer, one_line_reason
from ask_another.errors import AskAnotherError, ProviderTimeout
from ask_another.logs import get_logger
from ask_another.services import Services
from ask_another.spend import PaidGateway, Purpose
from ask_another.store.usage import Kind

__all__ = ["CallSpec", "panel_call"]

log = get_logger("ask_another.consensus")


@dataclass(frozen=True, slots=True)
class CallSpec:
    entry: ModelEntry
    messages: list[dict[str, Any]]
    timeout: float
    stance: str | None = None
    temperature: float | None = None
    kind: Kind = "consensus"
    purpose: Purpose = field(default_factory=lambda: Purpose(tool="consensus"))
    call_id: str | None = None  # the ledger's id of the call (None: a random one)


async def panel_call(spec: CallSpec, services: Services) -> Answer:
    """One provider call for one seat (see the module docstring). An unexpected exception (a
    bug) is logged and the seat fails with it; only cancellation escapes."""
    model = spec.entry.model
    started = trio.current_time()
    try:
        call_id = spec.call_id
        gateway = PaidGateway(await services.gateway(), services, spec.purpose, kind=spec.kind,
                              ids=(lambda: call_id) if call_id is not None else None)
        # The seat's span (tracing.py): its provider call's span, in the gateway, is its child.
        seat = {"gen_ai.request.model": model, "ask_another.seat.kind": spec.kind}
        if spec.stance:  # a stance of the caller's own words is content: named only with consent
            named = spec.stance.strip().lower() in STANCES or tracing.capture_content()
            seat["ask_another.seat.stance"] = spec.stance if named else "custom"
        with tracing.span(f"seat {model}", seat):
            result = await gateway.completion(spec.entry, messages=spec.messages,
                                              temperature=spec.temperature,
                                              timeout=spec.timeout)
    except ProviderTimeout as exc:
        return Answer(model=model, status="timed out", stance=spec.stance,
                      latency=trio.current_time() - started, reason=one_line_reason(exc))
    except AskAnotherError as exc:
        return Answer(model=model, status="failed", stance=spec.stance,
                      latency=trio.current_time() - started, reason=one_line_reason(exc))
    except Exception:
        log.exception("consensus.call_crashed", model=model)
        return Answer(model=model, status="failed", stance=spec.stance,
                      latency=trio.current_time() - started,
                      reason="the call crashed unexpectedly")
    latency = trio.current_time() - started
    log.info("completion.finished", model=model, tool="consensus",
             prompt_tokens=result.usage.prompt_tokens,
             completion_tokens=result.usage.completion_tokens, cost_usd=result.usage.cost_usd)
    return Answer(model=model, status="answered", stance=spec.stance, latency=latency,
                  result=result)
