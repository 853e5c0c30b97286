"""A research job as an agent framework's tool sees it: started, waited on until it ends or asks
a person (`settle`), and told in words a model acts on (`job_text`)."""

from __future__ import annotations

import asyncio
import contextlib
import json

from ask_another.aio import Runtime
from ask_another.interaction.types import Deny, PermissionRequest, Question
from ask_another.research import JobUpdate
from ask_another.store.jobs import JobRecord

PERMIT_TOOL = "allow_job_tool"
"""The adapters' tool that asks the person (the framework's approval) to let a job's tool call
run, by the job id and the tool_call_id its question gives."""


def open_questions(record: JobRecord, answered: frozenset[str] = frozenset()) -> list[Question]:
    return [q for q in record.waiting_for if q.tool_call_id not in answered]


async def settle(rt: Runtime, job_id: str, timeout: float,  # noqa: ASYNC109 - the job's wait
                 answered: frozenset[str] = frozenset()) -> JobRecord:
    """Wait until the job finishes, waits for a person on a question not in `answered` (ids
    just answered, which a report may still show), or `timeout` passes; its record then."""
    asked = asyncio.Event()

    async def on_progress(update: JobUpdate) -> None:
        if any(q.tool_call_id not in answered for q in update.waiting_for):
            asked.set()

    record = await rt.jobs.get(job_id)
    if record.finished or open_questions(record, answered):
        return record
    waiting = asyncio.ensure_future(rt.jobs.wait(job_id, timeout, on_progress,
                                                 progress_every=1.0))
    asking = asyncio.ensure_future(asked.wait())
    try:
        await asyncio.wait({waiting, asking}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiting, asking):
            task.cancel()
        for task in (waiting, asking):
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if waiting.done() and not waiting.cancelled() and waiting.exception() is None:
        return waiting.result()
    return await rt.jobs.get(job_id)


def permission(record: JobRecord, tool_call_id: str) -> PermissionRequest | None:
    """What the job asks permission for under `tool_call_id`, if it still waits for it."""
    for question in record.waiting_for:
        if question.tool_call_id == tool_call_id and isinstance(question.request,
                                                               PermissionRequest):
            return question.request
    return None


async def deny(rt: Runtime, job_id: str, tool_call_id: str, decision: Deny,
               request: PermissionRequest | None, wait: float) -> str:
    """Tell the job the person's `decision` on `tool_call_id` (when it still asks, `request`)
    and wait, as an approval's tool does, until it has acted on it: it finishes, asks again, or
    `wait` passes. The framework's rejection text: the denial and the job's state. Without the
    wait the host's run could end, and its runtime close, before the job's model was told (a
    job stores each round before its next model call, research/methods/agent.py)."""
    said = (f"The user denied the job's tool call {tool_call_id}"
            + (f": {decision.message}" if decision.message else "."))
    if request is None:
        return said
    await rt.jobs.answer_permission(job_id, tool_call_id, decision)
    answered = frozenset({tool_call_id})
    return f"{said}\n{job_text(await settle(rt, job_id, wait, answered), answered)}"


def job_text(record: JobRecord, answered: frozenset[str] = frozenset()) -> str:
    """The job's state for the model: its report, its failure, or what it waits for and the
    call that answers it."""
    if record.finished:
        if record.status == "completed":
            return f"Research job {record.id} completed. Report:\n{record.report or ''}"
        return f"Research job {record.id} {record.status}: {record.error or 'no report'}"
    lines = []
    for question in open_questions(record, answered):
        request = question.request
        if isinstance(request, PermissionRequest):
            lines.append(
                f"Research job {record.id} waits for permission to run {request.tool} (class "
                f"{request.class_}) with arguments {json.dumps(dict(request.arguments))}: call "
                f"{PERMIT_TOOL}(job_id={record.id!r}, tool_call_id={question.tool_call_id!r}) "
                f"to ask the user.")
        else:
            lines.append(f"Research job {record.id} waits for the user ({question.kind}, "
                         f"tool_call_id {question.tool_call_id!r}).")
    return "\n".join(lines) or (f"Research job {record.id} is {record.status}"
                                f"{': ' + record.step if record.step else ''}; ask again later.")
