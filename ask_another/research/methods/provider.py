"""Research method "provider": the model's own provider does the research.

- ``gemini/deep-research-*``: litellm's interactions API, through the gateway
  (`Gateway.interaction`, so in its worker process). The interaction is created with
  ``background=True``, its id is saved (durably, before polling starts: that is what lets a
  restarted server resume polling instead of paying for a second run), then polled with an
  interval that starts at ``ASK_ANOTHER_POLL_SECONDS`` and grows by half each time up to 60 s,
  until ``ASK_ANOTHER_RESEARCH_DEADLINE`` (default 60 min) after the job started. Every status is
  handled: queued / in_progress / requires_continuation keep polling; completed returns the
  report and its citations; failed, cancelled, requires_action, incomplete and budget_exceeded end
  the job as failed with the reason (keeping a partial report when there is one).
- any other model: one completion with ``ASK_ANOTHER_RESEARCH_TIMEOUT`` (default 30 min);
  citations are taken from the response (Perplexity's list, OpenAI url annotations).

Errors: `ResearchFailed` ends the job as failed with its message. A transient provider error
(`research.retry.TRANSIENT`) escapes to the job's attempt loop, which retries it within the job's
attempt bound (see job.py); an unexpected exception crashes the job actor (a bug).

`PROVIDER` is the `Method`: it can cancel a Gemini interaction on the provider's side, and a job
interrupted by a restart resumes polling its saved interaction.
"""

from __future__ import annotations

import time
from typing import Any, Final

import trio

from ask_another.catalog import is_gemini_agent
from ask_another.config import ModelEntry
from ask_another.errors import ProviderError
from ask_another.gateway import Gateway, InteractionState
from ask_another.logs import scrub_answer, scrub_provider_text
from ask_another.research.methods.method import (
    JobContext,
    Method,
    ResearchFailed,
    ResearchResult,
    cited_urls,
)
from ask_another.spend.budget import BudgetExceeded

__all__ = ["PROVIDER", "cancel_interaction", "provider_method"]

MAX_POLL_INTERVAL: Final = 60.0
POLL_GROWTH: Final = 1.5
REMOTE_CANCEL_TIMEOUT: Final = 10.0
# How long a started interaction's create may take: shielded (below), so it needs its own bound.
CREATE_TIMEOUT: Final = 60.0

_KEEP_POLLING: Final = frozenset({"queued", "in_progress", "requires_continuation", None})
_ENDED: Final = {
    "failed": "the research failed on the provider's side",
    "cancelled": "the interaction was cancelled on the provider's side",
    "requires_action": "the interaction asks for an action this server cannot take",
    "incomplete": "the research stopped before it finished (incomplete)",
    "budget_exceeded": "the research ran out of its budget before it finished",
}


# ----- method "provider" ---------------------------------------------------------------------


async def provider_method(ctx: JobContext) -> ResearchResult:
    if is_gemini_agent(ctx.entry.model):
        return await _gemini_interaction(ctx)
    return await _long_completion(ctx)


async def _long_completion(ctx: JobContext) -> ResearchResult:
    ctx.report(f"asking {ctx.entry.model} (one long completion)")
    with ctx.traced("completion"):
        result = await ctx.calls("completion").completion(ctx.entry, ctx.query,
                                                           timeout=ctx.config.research_timeout)
    return ResearchResult(report=result.text, citations=cited_urls(result.citations),
                          detail={"usage": ctx.usage.as_dict(), "model": result.model})


async def _interactions(gateway: Gateway, entry: ModelEntry, name: str,
                        **kwargs: Any) -> InteractionState:
    """``litellm.interactions.<name>(**kwargs)`` through the gateway (its worker process)."""
    return await gateway.interaction(entry, name, **kwargs)


async def _gemini_interaction(ctx: JobContext) -> ResearchResult:
    entry, gateway = ctx.entry, ctx.gateway
    agent = entry.model.split("/", 1)[1]
    response: InteractionState | None
    if ctx.handle is None:
        ctx.report("starting the Gemini deep-research interaction")
        # Shielded, with the handle's write: once the request has left, the provider runs (and
        # bills) the interaction whether or not this job is still there to hear its id. A
        # cancel that arrives meanwhile is carried out when the id is known (the job's
        # `save_handle` cancels it on the provider), so no interaction runs on unseen.
        started: InteractionState | None = None
        with trio.CancelScope(shield=True):
            with trio.move_on_after(CREATE_TIMEOUT):
                started = await _interactions(gateway, entry, "acreate", agent=agent,
                                              input=ctx.query, background=True)
                if started.id:
                    await ctx.save_handle(started.id)
        if started is None:
            raise ResearchFailed(f"the provider did not answer the start of the interaction "
                                 f"within {CREATE_TIMEOUT:g} s")
        response = started
        if not response.id:
            raise ResearchFailed("the provider did not return an interaction id")
        interaction_id = response.id
        await trio.lowlevel.checkpoint()  # a cancel that came during the create ends the job here
    else:
        interaction_id = ctx.handle
        ctx.report("resuming the Gemini interaction", interaction_id=interaction_id)
        response = await _interactions(gateway, entry, "aget", interaction_id=interaction_id)
    # The deadline counts from the job's start, so a resumed job does not get a fresh hour.
    deadline = trio.current_time() + ctx.config.research_deadline - (time.time() - ctx.started_at)
    interval = ctx.config.poll_seconds
    polls, last_status = 0, None
    while True:
        status = getattr(response, "status", None)
        if status != last_status:
            ctx.report(f"Gemini interaction {status or 'status unknown'}",
                       interaction_id=interaction_id, polls=polls)
            last_status = status
        if status == "completed":
            report, citations, titles = _report_of(response)
            report = scrub_answer(report, ctx.config.secrets())  # an echoed key stays out
            reported = getattr(response, "usage", None)
            reported = reported if isinstance(reported, dict) else getattr(
                reported, "__dict__", None) or {}
            # The interaction's id: a takeover (or a retry) that sees it complete again
            # records no second row (store/usage.py).
            ctx.usage.add_reported(reported, call_id=f"gemini-interaction:{interaction_id}",
                                   cost_usd=response.cost_usd)
            return ResearchResult(report=report, citations=cited_urls(citations, titles),
                                  detail={"usage": ctx.usage.as_dict(),
                                          "interaction_id": interaction_id, "polls": polls})
        if status not in _KEEP_POLLING:
            keys = ctx.config.secrets()
            raise ResearchFailed(scrub_provider_text(_ended_message(response, str(status)), keys),
                                 report=scrub_answer(_report_of(response)[0], keys) or None)
        try:
            # A budget ceiling reached meanwhile stops the job at this step, its partial report
            # kept and the provider's work cancelled, so it spends no more.
            await ctx.check_budget()
        except BudgetExceeded as exc:
            partial = scrub_answer(_report_of(response)[0], ctx.config.secrets()) or None
            outcome = await cancel_interaction(gateway, entry, interaction_id)
            raise ResearchFailed(f"{exc}. {outcome}", report=partial) from None
        # Not kept while the job sleeps: a waiting job holds nothing of litellm's.
        response = None
        if trio.current_time() + interval > deadline:
            outcome = await cancel_interaction(gateway, entry, interaction_id)
            raise ResearchFailed(
                f"no result within the research deadline of {ctx.config.research_deadline:g} s "
                f"(ASK_ANOTHER_RESEARCH_DEADLINE); {outcome}"
            )
        await trio.sleep(interval)
        interval = min(interval * POLL_GROWTH, MAX_POLL_INTERVAL)
        response = await _interactions(gateway, entry, "aget", interaction_id=interaction_id)
        polls += 1


def _report_of(response: Any) -> tuple[str, tuple[str, ...], dict[str, str]]:
    """The report text, cited URLs and their titles of an interaction (new `steps` or legacy
    `outputs`)."""
    contents: list[dict[str, Any]] = []
    for step in getattr(response, "steps", None) or []:
        if isinstance(step, dict) and step.get("type") == "model_output":
            contents.extend(c for c in step.get("content") or [] if isinstance(c, dict))
    contents.extend(o for o in getattr(response, "outputs", None) or [] if isinstance(o, dict))
    texts: list[str] = []
    urls: list[str] = []
    titles: dict[str, str] = {}
    for content in contents:
        if content.get("type", "text") == "text" and content.get("text"):
            texts.append(str(content["text"]))
        for note in content.get("annotations") or []:
            if isinstance(note, dict) and note.get("url"):
                urls.append(str(note["url"]))
                if note.get("title"):
                    titles.setdefault(str(note["url"]), str(note["title"]))
    return "\n\n".join(texts), tuple(dict.fromkeys(urls)), titles


def _ended_message(response: Any, status: str) -> str:
    message = _ENDED.get(status, f"the interaction ended with status {status!r}")
    error = getattr(response, "error", None)
    if isinstance(error, dict) and error.get("message"):
        message += f": {error['message']}"
    return message


async def cancel_interaction(gateway: Gateway, entry: ModelEntry, interaction_id: str) -> str:
    """Cancel a Gemini interaction; returns what happened, in words, for the person asking."""
    try:
        with trio.fail_after(REMOTE_CANCEL_TIMEOUT):
            result = await _interactions(gateway, entry, "acancel", interaction_id=interaction_id)
    except trio.TooSlowError:
        return (f"the provider did not confirm cancelling interaction {interaction_id} within "
                f"{REMOTE_CANCEL_TIMEOUT:g} s")
    except ProviderError as exc:
        return f"cancelling interaction {interaction_id} on the provider failed: {exc}"
    status = getattr(result, "status", None)
    if status == "cancelled":
        return f"the Gemini interaction {interaction_id} was cancelled on the provider"
    return (f"the provider answered the cancel of interaction {interaction_id} with status "
            f"{status!r}")


async def _provider_cancel(gateway: Gateway, entry: ModelEntry, handle: str) -> str:
    if is_gemini_agent(entry.model):
        return await cancel_interaction(gateway, entry, handle)
    return "nothing to cancel on the provider's side"


# Resumed after a kill: a Gemini interaction is polled again from its saved handle (the
# provider holds its work); a long completion in flight at the kill is asked again (its first
# call stays in the ledger, unanswered).
PROVIDER: Final = Method(run=provider_method, cancel_remote=_provider_cancel)
