"""MCP Tasks over research jobs, in both protocol eras: a thin adapter, no task state of its own.

A research job already is what the protocol calls a task: durable (its row is committed before
`start_research` answers), polled, cancellable, and waiting for a person now and then. So a task
*is* a job (a task-augmented `consensus` stores one too, of method "consensus":
research/methods/consensus.py): the task id is the job id, every `tasks/*` request acts for
the caller's user through `ResearchJobs` (another user's id is refused like check_research
refuses it), and everything is read from and written to the job store, so a task started on
one node is read, answered and cancelled on another, and outlives the session that started it
(docs/research.md, "One owner per job").

Job to task (the state table in docs/server.md):

- pending / in_progress -> ``working``, or ``input_required`` while the job waits for a person
  (a permission, an ask_user choice, a spend confirmation); ``statusMessage`` is the live step,
  or what it waits for.
- completed -> ``completed``; cancelled -> ``cancelled``.
- failed -> ``failed`` on 2025-11-25 (that revision counts an ``isError`` tool result as a
  failure); on 2026-07-28 ``completed`` with the ``isError`` tool result, since that revision
  keeps ``failed`` for JSON-RPC errors only.
- The task's result is the tool result its tool would have given: for start_research the same
  report JSON check_research shows, for consensus the panel's answer (the job's report).

Two wire forms, both served here:

- **2025-11-25** (VS Code's agent mode): `LegacyTasks`, a server middleware. It adds
  ``capabilities.tasks`` to the initialize result, stamps ``execution.taskSupport: "optional"``
  on the long tools in tools/list, answers a tools/call carrying ``task`` with
  ``{"task": ...}`` at once, and serves tasks/get, tasks/result (blocks until the job ends; the
  job's questions are elicited through it, with the related-task ``_meta``, and status
  notifications ride it), tasks/list (the user's own) and tasks/cancel.
- **2026-07-28** (SEP-2663, ``io.modelcontextprotocol/tasks``): `TasksExtension`. Its
  tools/call interceptor answers with the flat ``resultType: "task"`` only when the request
  declares the extension (else the ordinary result); tasks/get carries the result inline once
  done and the job's questions as ``inputRequests``; tasks/update delivers ``inputResponses``
  to the job as answer_permission / answer_choice do; tasks/cancel.

It also pushes `research://JOB_ID` updates (`JobUpdates`): through the subscription bus to
2026-07-28 listen streams, through resources/subscribe to 2025-11-25 sessions, to the job's user
only, raised by each node from what it reads in the store.

The SDK (mcp 2.3) has the 2025 task types but no tasks runtime, so this leans on provisional
parts of it: `MCPServer(middleware=...)` (a middleware runs before params validation and owns
its short-circuited result, so a 2025 task answer escapes the result sieve that would drop it
from a tools/call handler's result), `Extension` with `MethodBinding` and
`intercept_tool_call`, the fields of `ServerRequestContext`, `MCPServer(subscriptions=...)` and
`_lowlevel_server` (resources/subscribe has no decorator). `seam_problems()` (seams.py) names each
one an SDK upgrade moved; tests/ask_another/server/test_task_seams.py fails with those names.

The package, one concept a module: job.py (a job as a task), questions.py (what it waits for),
requests.py (from a task request to a job), legacy.py (2025-11-25), modern.py (2026-07-28),
updates.py (live job resources and the sessions told of changes), seams.py (the SDK parts it
leans on).
"""

from __future__ import annotations

from typing import Any

from mcp.server.extension import Extension

from ask_another.server.tasks.job import (
    RELATED_TASK,
    TASK_TOOLS,
    TASKS_EXTENSION,
    status_notification,
    task_fields,
    task_status,
    tool_result,
)
from ask_another.server.tasks.legacy import LegacyTasks
from ask_another.server.tasks.modern import TasksExtension
from ask_another.server.tasks.questions import Asked, Claims, open_questions
from ask_another.server.tasks.seams import seam_problems
from ask_another.server.tasks.updates import (
    MAX_LEGACY_PER_USER,
    MAX_LEGACY_SUBSCRIPTIONS,
    MAX_LISTENS_PER_USER,
    Creator,
    JobUpdates,
    ListenBound,
    live_resources,
)

__all__ = [
    "MAX_LEGACY_PER_USER",
    "MAX_LEGACY_SUBSCRIPTIONS",
    "MAX_LISTENS_PER_USER",
    "RELATED_TASK",
    "TASKS_EXTENSION",
    "TASK_TOOLS",
    "Asked",
    "Claims",
    "Creator",
    "JobUpdates",
    "LegacyTasks",
    "ListenBound",
    "TasksExtension",
    "extensions",
    "live_resources",
    "middleware",
    "open_questions",
    "seam_problems",
    "status_notification",
    "task_fields",
    "task_status",
    "tool_result",
]


def middleware(updates: JobUpdates | None = None) -> list[Any]:
    """For `MCPServer(middleware=...)`; `updates` sends the status of the tasks a 2025-11-25
    session created to it as they change, and bounds each user's listen streams."""
    return [LegacyTasks(updates), *([ListenBound(updates)] if updates is not None else [])]


def extensions() -> list[Extension]:
    """For `MCPServer(extensions=...)`."""
    return [TasksExtension()]


