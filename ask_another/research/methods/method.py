"""What a research method is, and what it gets and returns: the types every method and the job
actor share (and nothing else, so the methods depend on this module, never on each other).

A method is an async function that receives a `JobContext` and returns a `ResearchResult`; a
`Method` is that function plus the optional hooks the job uses around it. The job actor runs it in
a task it owns, so the job keeps answering status and cancel meanwhile. `ResearchFailed` ends the
job as failed with its message; a transient provider error (`research.retry.TRANSIENT`) escapes
to the job's attempt loop (job.py); an unexpected exception crashes the job actor (a bug).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ask_another import tracing
from ask_another.config import Config, ModelEntry
from ask_another.errors import AskAnotherError
from ask_another.gateway import Gateway, Usage
from ask_another.interaction.protocol import Interaction
from ask_another.interaction.tools import Tool
from ask_another.policy import Policy
from ask_another.research.usage import JobUsage
from ask_another.services import Services
from ask_another.spend.ledger import PaidGateway, Purpose
from ask_another.store.jobs import JobRecord

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = [
    "DEPTHS",
    "CancelFn",
    "Cited",
    "JobContext",
    "Method",
    "MethodFn",
    "ResearchFailed",
    "ResearchResult",
    "cited_urls",
]

DEPTHS: Final = ("shallow", "standard", "deep")
"""How thorough a research job is: the local pipeline plans fewer or more queries."""

class ResearchFailed(AskAnotherError):
    """The research cannot succeed; the job fails with this message (`report`: any partial
    report worth keeping)."""

    def __init__(self, message: str, *, report: str | None = None) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True, slots=True)
class Cited:
    """One source a report cites: its URL, its title when known, and the research query it
    supports (the pipeline's query text; None for the provider's own research)."""

    url: str
    title: str | None = None
    query: str | None = None

    def as_dict(self) -> dict[str, str]:
        found = {"url": self.url, "title": self.title or self.url}
        if self.query:
            found["query"] = self.query
        return found


def cited_urls(urls: Iterable[str], titles: dict[str, str] | None = None) -> tuple[Cited, ...]:
    """URLs (and any titles known for them) as citations, in order, each once."""
    return tuple(Cited(url, (titles or {}).get(url)) for url in dict.fromkeys(urls))


@dataclass(frozen=True, slots=True)
class ResearchResult:
    """What a finished method returns."""

    report: str
    citations: tuple[Cited, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)  # usage, provider status, ...


@dataclass(slots=True)
class JobContext:
    """What a method gets: the job, its model, the gateway, and ways to report and save.

    `report(step, **progress)` records a timeline event (written to the store by the job actor,
    shown by check_research and in progress notifications); it never blocks. `save_handle(h)`
    durably records the provider's handle (e.g. a Gemini interaction id) before returning.
    `handle` is the handle saved by an earlier attempt or run, when resuming. `step(name)` and
    `save_step(name, value)` are the job's completed steps (research_steps): a method stores
    each as it ends and skips each it finds, so a job resumed after a kill runs only what was
    not finished (docs/research.md, "Surviving restarts").
    """

    job_id: str
    entry: ModelEntry
    query: str
    config: Config
    gateway: Gateway
    attempt: int
    started_at: float
    handle: str | None
    report: Callable[..., None]
    save_handle: Callable[[str], Awaitable[None]]
    interaction: Interaction | None = None
    """Agent jobs: the Interaction of the turn (the job itself, or an embedding host's)."""
    tools: Iterable[Tool] = ()
    """Agent jobs: a host's own tools, next to the built-in ones."""
    depth: str = "standard"
    """One of `DEPTHS`: how many queries the sequential pipeline plans."""
    policy: Policy | None = None
    """Agent jobs: the permission policy of the turn (the configured one with the job's user's
    standing answers, store/rules.py); None: `config.permissions`."""
    usage: JobUsage = field(default_factory=JobUsage)
    """Every provider call of the job adds its usage here (see research/usage.py); a progress
    report with a ``usage`` detail shows the sum so far."""
    check_budget: Callable[[], Awaitable[None]] = field(default=lambda: _nothing())
    """Raises `BudgetExceeded` once a budget ceiling is reached: a method calls it before each
    step and stops, keeping its partial report (spend/budget.py)."""
    detail: dict[str, Any] = field(default_factory=dict)
    """The job's stored detail: its depth, its estimate, a consensus job's arguments."""
    user_id: str | None = None
    """The job's user (None: the local user)."""
    services: Services | None = None
    """The runtime's services, for a method that needs more than the gateway (a consensus
    keeps its conversation and its ledger rows itself)."""
    purpose: Purpose | None = None
    """What the job's calls serve, as their ledger rows say (None: the job, for its user)."""
    call_counts: dict[tuple[int, str], int] = field(default_factory=dict)
    """The calls made so far per (attempt, step), kept by the job across its attempts."""
    steps: dict[str, Any] = field(default_factory=dict)
    """The job's completed steps as stored (read once, when the job started here): a resumed
    job skips each (see `step`)."""
    save_step: Callable[[str, Any], Awaitable[None]] = field(default=lambda _n, _v: _nothing())
    """`save_step(name, value)`: store a completed step (JSON `value`) durably before returning,
    waiting through a database outage like `save_handle`; a step stored already keeps its
    first value."""

    def calls(self, step: str) -> Gateway:
        """The gateway for the provider calls of step `step` (every call a method makes goes
        through one): each call's ledger row is written before it and completed after it
        (spend/ledger.py), with the id ``job:<job>:<attempt>:<step>:<n>`` (n counts the step's
        calls in this attempt: a step run again after a kill makes new rows, a write retried
        makes none), and each call is counted in `usage`. Without `services` (a test of a
        method alone): `gateway` itself."""
        if self.services is None:
            return self.gateway

        def counted(usage: Usage, search: bool) -> None:
            self.usage.add(usage, search=search)

        purpose = self.purpose or Purpose(job_id=self.job_id, user_id=self.user_id)
        return PaidGateway(self.gateway, self.services, purpose, kind="research",
                           ids=lambda: self.call_id(step), on_usage=counted)

    def call_id(self, step: str) -> str:
        """The ledger id of the next provider call of step `step` (see `calls`)."""
        n = self.call_counts.get((self.attempt, step), 0)
        self.call_counts[(self.attempt, step)] = n + 1
        return f"job:{self.job_id}:{self.attempt}:{step}:{n}"

    def traced(self, step: str) -> AbstractContextManager[Span | None]:
        """A span for step `step` of the job (tracing.py; it carries the job's id): the block
        that does the step's work, not a step skipped because it was stored."""
        return tracing.span(f"step {step}", {"ask_another.job.step": step,
                                              "ask_another.job.attempt": self.attempt})

    def step(self, name: str) -> Any | None:
        """The value of the job's completed step `name` (as stored), or None when it has not
        been completed yet."""
        return self.steps.get(name)


async def _nothing() -> None:
    return None


MethodFn = Callable[[JobContext], Awaitable[ResearchResult]]
CancelFn = Callable[[Gateway, ModelEntry, str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Method:
    """A research method: `run`, and the optional hooks the job uses around it.

    - `cancel_remote(gateway, entry, handle)`: stop the provider's side; returns what happened.
    - `resumable(record)`: True if a job interrupted by a server restart can continue. Every
      method's is: each resumes from its stored steps (`JobContext.step`), so no completed step
      is run (and billed) twice.
    """

    run: MethodFn
    cancel_remote: CancelFn | None = None
    resumable: Callable[[JobRecord], bool] = lambda _record: True
