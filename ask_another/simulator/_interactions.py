"""Simulated Gemini interactions (deep research agents run in the background).

litellm's Gemini interactions client (Api-Revision 2026-05-20) calls, under ``api_base``:
``POST /v1beta/interactions`` to create, ``GET /v1beta/interactions/{id}`` to poll and
``POST /v1beta/interactions/{id}/cancel`` to cancel, authenticating with ``x-goog-api-key``.
A completed interaction carries ``steps``: the ``user_input`` step and a ``model_output`` step
whose text content holds the report, with citation annotations.
"""

from __future__ import annotations

import collections
import datetime
import itertools
import threading
from dataclasses import dataclass, field, replace
from typing import Any

STATUSES = frozenset(
    {
        "queued",
        "in_progress",
        "requires_action",
        "completed",
        "failed",
        "cancelled",
        "incomplete",
        "budget_exceeded",
        "requires_continuation",
    }
)
TERMINAL = frozenset({"completed", "failed", "cancelled", "incomplete", "budget_exceeded"})


@dataclass(frozen=True)
class InteractionScript:
    """How the next interaction for an agent unfolds (see `Simulator.script_interaction`)."""

    statuses: tuple[str, ...]
    report: str | None = None
    citations: tuple[str, ...] | None = None
    error: str | None = None
    answer_when: threading.Event | None = None


@dataclass
class SimInteraction:
    """One interaction as the simulator holds it; `Simulator.interactions` returns copies.

    `status` is what the last response said; `polls` counts GET requests; `cancel_called` says
    whether the client asked to cancel it (even after it had finished).
    """

    id: str
    agent: str
    input_text: str
    statuses: tuple[str, ...]
    report: str
    citations: tuple[str, ...]
    error: str | None = None
    position: int = 0
    polls: int = 0
    cancel_called: bool = False
    cancelled: bool = False
    created: str = field(default_factory=lambda: _now())
    updated: str = field(default_factory=lambda: _now())
    answer_when: threading.Event | None = field(default=None, repr=False, compare=False)

    @property
    def status(self) -> str:
        if self.cancelled:
            return "cancelled"
        return self.statuses[min(self.position, len(self.statuses) - 1)]

    def body(self, legacy: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "interaction",
            "agent": self.agent,
            "status": self.status,
            "created": self.created,
            "updated": self.updated,
        }
        status = self.status
        user_step = {"type": "user_input", "content": [{"type": "text", "text": self.input_text}]}
        output: dict[str, Any] | None = None
        if status == "completed":
            output = {"type": "text", "text": self.report, "annotations": self._annotations()}
        elif status in ("incomplete", "budget_exceeded") and self.report:
            # A partial report: what was written before the budget ran out.
            output = {"type": "text", "text": self.report[: max(1, len(self.report) // 2)]}
        if legacy:
            body["outputs"] = [output] if output else []
        else:
            steps: list[dict[str, Any]] = [user_step]
            if output:
                steps.append({"type": "model_output", "content": [output]})
            body["steps"] = steps
        if status in ("completed", "incomplete", "budget_exceeded"):
            body["usage"] = {
                "total_input_tokens": max(1, len(self.input_text) // 4),
                "total_output_tokens": max(1, len(self.report) // 4),
                "total_tokens": max(1, len(self.input_text) // 4) + max(1, len(self.report) // 4),
            }
        if status == "failed":
            body["error"] = {
                "code": "simulated_failure",
                "message": self.error or "simulated failure",
            }
        return body

    def _annotations(self) -> list[dict[str, Any]]:
        annotations = []
        for number, url in enumerate(self.citations, start=1):
            marker = f"[{number}]"
            start = self.report.find(marker)
            start, end = (start, start + len(marker)) if start >= 0 else (0, 0)
            annotations.append(
                {
                    "type": "url_citation",
                    "url": url,
                    "title": f"Simulated source {number}",
                    "source": url,
                    "start_index": start,
                    "end_index": end,
                }
            )
        return annotations


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Interactions:
    """Every interaction created on this simulator, and the scripts for new ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, SimInteraction] = {}
        self._scripts: dict[str, collections.deque[InteractionScript]] = {}
        self._ids = itertools.count(1)

    def add_script(self, agent: str, script: InteractionScript) -> None:
        unknown = [s for s in script.statuses if s not in STATUSES]
        if unknown or not script.statuses:
            raise ValueError(f"unknown interaction statuses {unknown}; use {sorted(STATUSES)}")
        with self._lock:
            self._scripts.setdefault(agent, collections.deque()).append(script)

    def create(
        self,
        agent: str,
        input_text: str,
        default: InteractionScript,
        base_url: str,
    ) -> SimInteraction:
        with self._lock:
            queue = self._scripts.get(agent)
            script = queue.popleft() if queue else default
            interaction_id = f"sim-interaction-{next(self._ids)}"
            citations = (
                script.citations
                if script.citations is not None
                else tuple(f"{base_url}/sources/{interaction_id}/{n}" for n in (1, 2))
            )
            report = (
                script.report
                if script.report is not None
                else default_report(agent, input_text, len(citations))
            )
            item = SimInteraction(
                id=interaction_id,
                agent=agent,
                input_text=input_text,
                statuses=script.statuses,
                report=report,
                citations=citations,
                error=script.error,
                answer_when=script.answer_when,
            )
            self._items[interaction_id] = item
            return replace(item)

    def agent_of(self, interaction_id: str) -> str | None:
        with self._lock:
            item = self._items.get(interaction_id)
            return item.agent if item is not None else None

    def poll(self, interaction_id: str) -> SimInteraction | None:
        """Each GET moves the interaction one status further along its script."""
        with self._lock:
            item = self._items.get(interaction_id)
            if item is None:
                return None
            item.polls += 1
            if not item.cancelled and item.status not in TERMINAL:
                item.position = min(item.position + 1, len(item.statuses) - 1)
                item.updated = _now()
            return replace(item)

    def cancel(self, interaction_id: str) -> SimInteraction | None:
        with self._lock:
            item = self._items.get(interaction_id)
            if item is None:
                return None
            item.cancel_called = True
            if item.status not in TERMINAL:
                item.cancelled = True
                item.updated = _now()
            return replace(item)

    def end(self, interaction_id: str, status: str) -> None:
        """The next poll of a running interaction answers `status`, which then stays."""
        if status not in STATUSES:
            raise ValueError(f"unknown interaction status {status!r}; use {sorted(STATUSES)}")
        with self._lock:
            item = self._items[interaction_id]
            if not item.cancelled and item.status not in TERMINAL:
                item.statuses, item.position = (item.status, status), 0

    def snapshot(self) -> dict[str, SimInteraction]:
        with self._lock:
            return {key: replace(item) for key, item in self._items.items()}

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._scripts.clear()


def default_report(agent: str, input_text: str, citation_count: int) -> str:
    question = input_text[:200]
    markers = "".join(f"[{n}]" for n in range(1, citation_count + 1))
    return (
        f"# [simulated {agent}] research report\n\n"
        f"Question: {question}\n\n"
        f"This report was written by the ask-another simulator, not by a real model. "
        f"It cites simulated sources {markers}.\n"
    )
