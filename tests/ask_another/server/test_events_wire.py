"""A job's end and its start of waiting for a person as MCP Events (SEP-3415), and as a Claude
Code channel event, on the wire.

A raw JSON-RPC client over a real stdio server, as the extension's draft writes the messages:
the capability under `capabilities.extensions`, `events/list`, `events/poll` with a resume
cursor (null: from now; the cursor replays from the job table, also after a restart on the same
home) and `events/stream` (`notifications/events/active`, then `notifications/events/event`
with the stream's id in `_meta`, ended by `notifications/cancelled`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from loopback_pages import Page, PageServer
from raw_stdio import RawClient, RpcError, raw_stdio

from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # starts real server processes

EVENTS = "io.modelcontextprotocol/events"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
GEMINI = "gemini/deep-research-pro-preview-12-2025"
FAKE_KEY = "sk-test-EVENTS-9f8e7d"
ARTICLE = ("<html><body><article><h1>Tides</h1><p>" + "The moon pulls the sea. " * 40
           + "</p></article></body></html>").encode()
JOB_EVENT = {"name": "research.job_updated", "arguments": {}}


async def _poll_until(rpc: RawClient, cursor: str, wanted: int) -> tuple[list[Any], str]:
    events: list[Any] = []
    with trio.fail_after(60):
        while len(events) < wanted:
            page = await rpc.request("events/poll", {**JOB_EVENT, "cursor": cursor})
            events += page["events"]
            cursor = page["cursor"]
            if len(events) < wanted:
                await trio.sleep(0.1)
    return events, cursor


async def test_job_events_poll_replay_and_push(sim: Simulator, tmp_path: Path,
                                               nursery: trio.Nursery):
    pages = await PageServer().start(nursery)
    url = pages.add("/tides", Page(ARTICLE))
    sim.script_interaction(GEMINI.split("/", 1)[1], statuses=["in_progress"] * 2 + ["completed"])
    sim.script("m1", [ToolCalls([ToolCall("read_article", {"url": url}, id="call-v")]),
                      Reply("The evented report.")])
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "ASK_ANOTHER_POLL_SECONDS": "0.05",
           "ASK_ANOTHER_CONFIRM_USD": "1000", "ASK_ANOTHER_PERMISSIONS": "read=ask",
           "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
           "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}",
           "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.url}/v1"}
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with raw_stdio(env, stderr) as rpc:
            assert EVENTS in rpc.initialize_result["capabilities"]["extensions"]
            # Channels are declared only when set (hosts enable them per launch).
            assert "claude/channel" not in (rpc.initialize_result["capabilities"]
                                            .get("experimental") or {})
            listed = (await rpc.request("events/list"))["events"]
            assert [e["name"] for e in listed] == ["research.job_updated"]
            assert set(listed[0]["delivery"]) == {"poll", "push"}
            start = (await rpc.request("events/poll", {**JOB_EVENT, "cursor": None}))
            assert start["events"] == [] and start["cursor"]
            with pytest.raises(RpcError) as unknown:
                await rpc.request("events/poll", {"name": "nope", "cursor": None})
            assert unknown.value.code == -32011

            # Poll: a job's end, with the call that fetches the report.
            created = await rpc.request("tools/call", {
                "name": "start_research", "arguments": {"model": "gdr", "query": "tides",
                                                        "timeout": 0}})
            job = created["content"][0]["text"].split("job_id='")[1][:12]
            [ended], after = await _poll_until(rpc, start["cursor"], 1)
            assert ended["name"] == "research.job_updated"
            assert ended["data"]["job_id"] == job and ended["data"]["status"] == "completed"
            assert f"check_research with job_id='{job}'" in ended["data"]["text"]
            assert ended["eventId"] == f"{job}:completed" and ended["cursor"] == after

            # Push: the stream acknowledges, then a job that starts waiting for a person.
            stream_done = trio.Event()

            async def stream() -> None:
                with trio.move_on_after(90):
                    await rpc.request("events/stream", {**JOB_EVENT, "cursor": after},
                                      seconds=90)
                stream_done.set()

            nursery.start_soon(stream)
            with trio.fail_after(30):
                active = await rpc.notified("notifications/events/active")
            sid = active["params"]["_meta"][SUBSCRIPTION_ID]
            await rpc.request("tools/call", {"name": "start_research", "arguments": {
                "model": "sim", "query": "tides?", "method": "agent", "timeout": 0}})
            with trio.fail_after(60):
                pushed = await rpc.notified("notifications/events/event")
            assert pushed["params"]["_meta"][SUBSCRIPTION_ID] == sid
            assert pushed["params"]["data"]["waiting"] is True
            assert "answer_permission" in pushed["params"]["data"]["text"]
            await rpc.notify("notifications/cancelled", {"requestId": sid})

        # Another server on the same home (a restart): the first cursor replays the end.
        async with raw_stdio(env, stderr) as again:
            replayed, _ = await _poll_until(again, start["cursor"], 1)
            assert replayed[0]["eventId"] == f"{job}:completed"


async def test_a_job_end_is_a_claude_code_channel_event(sim: Simulator, tmp_path: Path):
    sim.script_interaction(GEMINI.split("/", 1)[1], statuses=["in_progress"] * 2 + ["completed"])
    env = {"ASK_ANOTHER_HOME": str(tmp_path / "home"), "ASK_ANOTHER_POLL_SECONDS": "0.05",
           "ASK_ANOTHER_CONFIRM_USD": "1000", "ASK_ANOTHER_CLAUDE_CHANNEL": "1",
           "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}"}
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with raw_stdio(env, stderr) as rpc:
            assert rpc.initialize_result["capabilities"]["experimental"]["claude/channel"] == {}
            created = await rpc.request("tools/call", {
                "name": "start_research", "arguments": {"model": "gdr", "query": "tides",
                                                        "timeout": 0}})
            job = created["content"][0]["text"].split("job_id='")[1][:12]
            with trio.fail_after(60):
                told = await rpc.notified("notifications/claude/channel")
            assert told["params"]["meta"] == {"job_id": job, "status": "completed",
                                              "event": "ended"}
            assert f"call check_research with job_id='{job}' for the report" in \
                told["params"]["content"]
            with trio.move_on_after(2.5):  # the store is read each second: told once
                await rpc.notified("notifications/claude/channel", content="again")
            assert [n["method"] for n in rpc.notifications].count(
                "notifications/claude/channel") == 1
