"""`/metrics` of `serve --http`, in Prometheus' text format (prometheus_client): the figures the
console shows, for a scraper.

Counted as they happen: tool calls by tool and outcome, and their latencies (`Metrics.observe`,
called once per tool call by the server), labelled only with the server's own tools (`tools`):
any other name a client sends is `unknown`, since a label is kept for the process's life and a
token holder sending made-up names grew the scrape without end (3,000 names: 5.3 MB). Read at
each scrape, from the same faces the pages use: research jobs by state and the questions they
wait for (the store, every user's), the known spend today and this month, each supervised
process's restart count (the processes of the moment: a finished job's actor leaves the
scrape), and the gateway's provider calls in flight. Every label set is therefore bounded: the
tools, the two outcomes, the job states, the two periods, the processes running. Each server
has its own registry (no module-level state), so two in one process do not mix their figures.
"""

from __future__ import annotations

import time

import trio
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ask_another.console._questions import pending_questions
from ask_another.console._runtime import ProcessNode, supervision_tree
from ask_another.errors import AskAnotherError
from ask_another.runtime import Runtime
from ask_another.spend.budget import period_start
from ask_another.store.jobs import job_store
from ask_another.store.usage import usage_totals
from ask_another.users import LOCAL_USER

__all__ = ["CONTENT_TYPE", "UNKNOWN_TOOL", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNKNOWN_TOOL = "unknown"
_STATES = ("pending", "in_progress", "completed", "failed", "cancelled")


class Metrics:
    """The registry of one server, and the counters it keeps; `tools` are the names its tool
    calls are labelled with (set by the server once its tools are registered)."""

    def __init__(self, tools: frozenset[str] = frozenset()) -> None:
        self.tools = tools
        self.registry = CollectorRegistry()
        self.calls = Counter("ask_another_tool_calls", "MCP tool calls by tool and outcome",
                             ["tool", "outcome"], registry=self.registry)
        self.latency = Histogram("ask_another_tool_call_seconds", "MCP tool call latency",
                                 ["tool"], registry=self.registry,
                                 buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300))
        self.jobs = Gauge("ask_another_research_jobs", "Research jobs by state (every user's)",
                          ["state"], registry=self.registry)
        self.waiting = Gauge("ask_another_approvals_waiting",
                             "Questions research jobs wait for (permissions, spend, choices)",
                             registry=self.registry)
        self.spend = Gauge("ask_another_spend_usd", "Known provider spend since the start of "
                           "the UTC period", ["period"], registry=self.registry)
        self.restarts = Gauge("ask_another_process_restarts",
                              "Restarts of each supervised process", ["process"],
                              registry=self.registry)
        self.in_flight = Gauge("ask_another_gateway_calls_in_flight",
                               "Provider calls running in the gateway", registry=self.registry)

    def observe(self, tool: str, seconds: float, failed: bool) -> None:
        tool = tool if tool in self.tools else UNKNOWN_TOOL
        self.calls.labels(tool, "error" if failed else "ok").inc()
        self.latency.labels(tool).observe(seconds)

    async def render(self, runtime: Runtime) -> bytes:
        """Read the figures of the moment, and the text for the scraper."""
        jobs = runtime.jobs_for(LOCAL_USER)  # an admin: everyone's jobs
        counts = dict.fromkeys(_STATES, 0)
        for record in await jobs.list(limit=100_000):
            counts[record.status] = counts.get(record.status, 0) + 1
        for state, count in counts.items():
            self.jobs.labels(state).set(count)
        db = await runtime.database()
        self.waiting.set(len(await pending_questions(jobs, job_store(db))))
        now = time.time()
        for period in ("day", "month"):
            totals = await usage_totals(db, period_start(period, now)[0], now + 1)
            self.spend.labels(period).set(totals.total.known_usd)
        tree = await supervision_tree(runtime.supervisor, runtime.registry)
        self.restarts.clear()  # the processes of this moment only
        self._restarts(tree)
        try:
            with trio.move_on_after(2):
                self.in_flight.set((await runtime.gateway()).statistics().in_flight)
        except AskAnotherError:
            pass
        return generate_latest(self.registry)

    def _restarts(self, node: ProcessNode) -> None:
        if node.path:
            self.restarts.labels(node.path).set(node.restarts)
        for child in node.children:
            self._restarts(child)
