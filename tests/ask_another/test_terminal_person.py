"""`TerminalPerson`: a research job's questions asked at a terminal, read from a real pipe."""

from __future__ import annotations

import io
import os

import trio

from ask_another.interaction.types import ALLOW, Deny, PermissionRequest, Question
from ask_another.terminal import TerminalPerson, open_progress


def permission(call_id: str) -> Question:
    return Question(kind="permission", tool_call_id=call_id, expires_at=1_796_083_200.0,
                    request=PermissionRequest(tool_call_id=call_id, tool="write_note",
                                              server="host", class_="effect",
                                              arguments={"text": "a"}))


async def test_a_question_answered_elsewhere_is_marked_and_its_read_is_not_lost():
    # A question answered in the console while the terminal asked it: the terminal kept its
    # prompt with no mark, and the abandoned read would take the line typed for the next one.
    reading, writing = os.pipe()
    lines = os.fdopen(reading, "r")
    out = io.StringIO()
    try:
        async with open_progress(out, live=False) as progress:
            person = TerminalPerson(progress, out=out, read_line=lines.readline)
            with trio.move_on_after(0.2):
                await person.permission(permission("call-1"))
            person.withdrawn("answered in the console")
            os.write(writing, b"y\n")  # typed for the next question
            with trio.fail_after(30):
                decision = await person.permission(permission("call-2"))
    finally:
        lines.close()
        os.close(writing)
    assert decision == ALLOW
    assert decision != Deny()
    asked = out.getvalue()
    assert "Allow it? [y/N] (answered in the console)\n" in asked
    assert asked.count("Allow it? [y/N] ") == 2
