"""The pieces of an agent job's Interaction that need no thread: text previews coalesced on
trio's MockClock, the question bookkeeping's answers and refusals, and the permission settings."""

from __future__ import annotations

from typing import Any

import trio

from ask_another.config import Config
from ask_another.interaction import Deny, PermissionRequest, Policy
from ask_another.research.messages import NotWaiting, TextPreview
from ask_another.research.methods.agent import PREVIEW_EVERY, JobInteraction
from ask_another.research.questions import Questions
from ask_another.server.wording import tool_text
from supervisors import Actor, Caller, spawn


class Collector(Actor):
    async def init(self) -> None:
        self.seen: list[TextPreview] = []

    async def handle_info(self, msg: Any) -> None:
        self.seen.append(msg)

    async def handle_call(self, msg: Any, caller: Caller) -> Any:
        return list(self.seen)


async def test_text_deltas_are_coalesced_into_ordered_previews(autojump_clock: Any) -> None:
    async with trio.open_nursery() as nursery:
        ref = await spawn(nursery, Collector)
        interaction = JobInteraction(ref)
        fragments = [f"part{n} " for n in range(40)]
        for fragment in fragments:
            await interaction.text_delta(fragment)
            await trio.sleep(PREVIEW_EVERY / 5)  # five fragments per preview interval
        interaction.finish()
        seen: list[TextPreview] = await ref.call("seen")
        await ref.stop()
    text = "".join(fragments)
    assert 6 <= len(seen) <= 10  # about one preview per interval, not one per fragment
    assert [p.chars for p in seen] == sorted(p.chars for p in seen)
    assert seen[-1].chars == len(text)
    for preview in seen:
        assert text[: preview.chars].endswith(preview.tail)


class _Caller:
    def __init__(self) -> None:
        self.replies: list[object] = []

    def reply(self, value: object) -> None:
        self.replies.append(value)


def _request(call_id: str) -> PermissionRequest:
    return PermissionRequest(tool_call_id=call_id, tool="write_note", server="host",
                             class_="effect", arguments={"text": "x"})


def _said(refusal: NotWaiting | None) -> str:
    """A refusal as the MCP face words it (its hint as the tool to use)."""
    return tool_text(refusal.error()) if refusal is not None else ""


def test_a_question_is_settled_once_and_later_answers_say_how() -> None:
    questions = Questions()
    caller = _Caller()
    questions.add(_request("c1"), "c1", caller, 10)  # type: ignore[arg-type]
    assert questions.refusal("r-1", "c1", "permission") is None
    assert "use answer_permission" in _said(questions.refusal("r-1", "c1", "choice"))
    assert "no question for tool call 'c2'" in _said(questions.refusal("r-1", "c2", "permission"))
    assert questions.expire("c1") is True
    assert caller.replies == [Deny("expired")]
    assert questions.expire("c1") is False  # settled once
    assert "already expired without an answer" in _said(
        questions.refusal("r-1", "c1", "permission"))


def test_permission_settings_are_parsed_by_the_one_config_parser() -> None:
    config = Config.from_env({"ASK_ANOTHER_PERMISSIONS": "effect=deny,read_article=ask",
                              "ASK_ANOTHER_PERMISSION_TIMEOUT": "30"})
    assert config.permissions.decide("read_article", "read") == "ask"
    assert config.permissions.decide("write_note", "effect") == "deny"
    assert config.permission_timeout == 30 and not config.problems
    broken = Config.from_env({"ASK_ANOTHER_PERMISSIONS": "read=sometimes",
                              "ASK_ANOTHER_PERMISSION_TIMEOUT": "-1"})
    assert broken.permissions == Policy() and broken.permission_timeout == 600
    assert {p.variable for p in broken.problems} == {"ASK_ANOTHER_PERMISSIONS",
                                                     "ASK_ANOTHER_PERMISSION_TIMEOUT"}
    assert "'sometimes' is not one of allow, ask, deny" in str(broken.problems[0])
