"""Every answer is audited (store/answers.py) and shown by check_research: who answered what,
where and when (in the completed job's JSON as `answers`, so clients that parse it still can):
given with answer_permission or answer_choice, in an elicitation form, or by a standing rule
(MCP Tasks: test_task_seams.py; the terminal: test_cli.py; the console: test_console_app.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import trio
from deadlines import generous
from mcp import Client
from mcp.types import ElicitResult
from tool_results import call

from ask_another.config import Config
from ask_another.server import build_server
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls
from ask_another.store import open_database
from ask_another.store.rules import set_rule


async def test_check_research_shows_who_answered_a_permission_and_how(
    sim: Simulator, make_config: Callable[..., Config]
):
    config = make_config(ASK_ANOTHER_PERMISSIONS="read=ask", ASK_ANOTHER_CONFIRM_USD="1000")
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"},
                                          id="call-1")]), Reply("done without it")])
    async with Client(build_server(config)) as client:
        error, text = await call(client, "start_research", model="sim", query="q",
                                 method="agent", timeout=0)
        found = re.search(r"\br-[0-9a-f]{10}\b", text)
        assert not error and found, text
        job = found.group(0)
        with trio.fail_after(generous(30)):
            while "call-1" not in text:  # the job's first model call
                await trio.sleep(0.05)
                _, text = await call(client, "check_research", job_id=job)
        assert "Answers given" not in text
        error, said = await call(client, "answer_permission", job_id=job,
                                 tool_call_id="call-1", decision="deny")
        assert not error and "denied" in said, said
        with trio.fail_after(generous(30)):
            while "completed" not in text:
                await trio.sleep(0.05)
                _, text = await call(client, "check_research", job_id=job)
    (answer,) = json.loads(text)["answers"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", answer["at"]), answer
    assert {k: answer[k] for k in ("who", "face", "tool_call_id", "tool", "answer")} == {
        "who": "the local user", "face": "mcp", "tool_call_id": "call-1",
        "tool": "read_article", "answer": "deny"}


OPTIONS = [{"id": "short", "label": "A short report"}, {"id": "long", "label": "A long one"}]


async def _completed(client: Client, job: str) -> dict[str, Any]:
    with trio.fail_after(generous(30)):
        while True:
            _, text = await call(client, "check_research", job_id=job)
            if text.lstrip().startswith("{"):
                body: dict[str, Any] = json.loads(text)
                if body.get("status") == "completed":
                    return body
            await trio.sleep(0.05)


def _audited(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(a["face"], a["tool_call_id"], a["tool"], a["answer"], a["rule"])
            for a in body.get("answers", [])]


async def test_answers_given_by_form_elicitation_are_audited(
    sim: Simulator, make_config: Callable[..., Config]
):
    """Regression: an answer given in the client's elicitation form (start_research attached)
    reached the job but not the audit, which only the console and answer_permission wrote."""
    config = make_config(ASK_ANOTHER_PERMISSIONS="read=ask", ASK_ANOTHER_CONFIRM_USD="1000")
    sim.script("m1", [
        ToolCalls([ToolCall("read_article", {"url": "http://127.0.0.1:9/x"}, id="call-1")]),
        ToolCalls([ToolCall("ask_user", {"prompt": "How long?", "options": OPTIONS},
                            id="call-2")]),
        Reply("done")])

    async def on_elicit(_ctx: Any, params: Any) -> ElicitResult:
        schema = json.dumps(params.requested_schema)
        return ElicitResult(action="accept", content={"option_id": "long"}
                            if "option_id" in schema else {"decision": "deny"})

    async with Client(build_server(config), elicitation_callback=on_elicit) as client:
        error, text = await call(client, "start_research", model="sim", query="q",
                                 method="agent", timeout=generous(30))
        assert not error, text
        body = await _completed(client, json.loads(text)["job_id"])
    assert _audited(body) == [("elicitation", "call-1", "read_article", "deny", None),
                              ("elicitation", "call-2", "ask_user", "option:long", None)]


async def test_a_standing_rule_used_and_an_answer_choice_are_audited(
    sim: Simulator, make_config: Callable[..., Config]
):
    """Regression: a call a standing answer decided left no trace in the audit, nor did an
    answer given with the MCP tool answer_choice."""
    config = make_config(ASK_ANOTHER_PERMISSIONS="read=ask", ASK_ANOTHER_CONFIRM_USD="1000")
    async with open_database(config.database_path) as db:
        await set_rule(db, None, "read_article", "deny", "host:docs.example.test", "console")
    sim.script("m1", [
        ToolCalls([ToolCall("read_article", {"url": "https://docs.example.test/a"},
                            id="call-1")]),
        ToolCalls([ToolCall("ask_user", {"prompt": "How long?", "options": OPTIONS},
                            id="call-2")]),
        Reply("done")])
    async with Client(build_server(config)) as client:
        error, text = await call(client, "start_research", model="sim", query="q",
                                 method="agent", timeout=0)
        job = re.search(r"\br-[0-9a-f]{10}\b", text).group(0)  # type: ignore[union-attr]
        with trio.fail_after(generous(30)):
            while "call-2" not in text:
                await trio.sleep(0.05)
                _, text = await call(client, "check_research", job_id=job)
        assert "a standing rule of the local user answered deny to read_article" in text, text
        error, said = await call(client, "answer_choice", job_id=job, tool_call_id="call-2",
                                 option_id="short")
        assert not error, said
        body = await _completed(client, job)
    assert _audited(body) == [
        ("standing rule", "call-1", "read_article", "deny",
         "always deny read_article: reads of docs.example.test"),
        ("mcp", "call-2", "ask_user", "option:short", None)]
