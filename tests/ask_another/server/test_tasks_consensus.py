"""A consensus as an MCP Task, through real servers: a task-augmented `consensus` call stores a
job of method "consensus" (durable: committed before the answer), run in the background by the
job machinery; its result is the consensus tool's answer.

- stdio, 2025-11-25 (raw JSON-RPC) and 2026-07-28 (`mcp.Client` declaring the extension): the
  task polled to its answer (the same text check_research shows), the spend confirmation of a
  priced panel as input_required (asked through tasks/result; answered by tasks/update), a
  cancel that hangs up every call in flight, bad arguments refused before anything is stored,
  the task read by another server process on the same home, a consensus interrupted by that
  restart ended with the reason rather than asked (and billed) again, and a call without a
  task answered as always.
- HTTP, two `serve --http` nodes on one PostgreSQL database: a consensus task started on node 1
  is read on node 2 (both eras) and refused to another user; a consensus started on node 1 is
  cancelled from node 2 and its calls are hung up.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from http_server import http_client_for, http_server
from mcp.shared.exceptions import MCPError
from raw_stdio import RpcError, allowing, raw_stdio, raw_until
from stdio_server import stdio_client_for
from tasks_client import TaskHandle, TasksClient, create_task, request, tasks_get, until
from tool_results import call, text_of

from ask_another.server.auth import TokensFile
from ask_another.simulator import Reply, Simulator, Slow

pytestmark = pytest.mark.slow  # starts real server processes

FAKE_KEY = "sk-test-TASKS-CONSENSUS-4f3e2d"


def server_env(sim: Simulator, home: Path) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(home), "ASK_ANOTHER_POLL_SECONDS": "0.05",
            "ASK_ANOTHER_LEASE_SECONDS": "3", "ASK_ANOTHER_TASK_POLL_SECONDS": "0.2",
            # The unpriced panel runs unconfirmed; gpt-4o and its mini (priced, about $0.01
            # each) wait for a person's confirmation.
            "ASK_ANOTHER_CONFIRM_USD": "0.001",
            "MODEL_FAST": f"openai/fast;{FAKE_KEY};{sim.openai_base}",
            "MODEL_MID": f"openai/mid;{FAKE_KEY};{sim.openai_base}",
            "MODEL_GPT4": f"openai/gpt-4o;{FAKE_KEY};{sim.openai_base}",
            "MODEL_MINI": f"openai/gpt-4o-mini;{FAKE_KEY};{sim.openai_base}"}


def replies(sim: Simulator, tag: str) -> None:
    sim.script("fast", [Reply(f"Fast says yes ({tag}).")])
    sim.script("mid", [Reply(f"Mid says no ({tag}).")])


async def wait_until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    with trio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 - polls the simulator in its own thread
            await trio.sleep(0.02)


def is_answer(text: str, tag: str) -> bool:
    return (text.startswith("Consensus of 2 models (2 answered)")
            and f"Fast says yes ({tag})." in text and f"Mid says no ({tag})." in text
            and "conversation_id" in text)


async def test_2025_consensus_tasks_over_stdio(sim: Simulator, tmp_path: Path):
    asked: list[dict[str, Any]] = []

    env = server_env(sim, tmp_path / "home")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with raw_stdio(env, stderr, capabilities={"elicitation": {}},
                             on_request=allowing(asked)) as rpc:
            tools = {t["name"]: t for t in (await rpc.request("tools/list"))["tools"]}
            assert tools["consensus"]["execution"] == {"taskSupport": "optional"}

            # 1. The task at once; its result, through tasks/result, is the tool's answer.
            replies(sim, "one")
            created = await rpc.request("tools/call", {
                "name": "consensus", "task": {},
                "arguments": {"models": ["fast", "mid"], "prompt": "Is the sea salty?"}})
            task_id = created["task"]["taskId"]
            assert created["task"]["status"] == "working" and "content" not in created
            result = await rpc.request("tasks/result", {"taskId": task_id})
            assert result["isError"] is False
            text = result["content"][0]["text"]
            assert is_answer(text, "one"), text
            checked = await rpc.request("tools/call", {"name": "check_research",
                                                       "arguments": {"job_id": task_id}})
            assert json.loads(checked["content"][0]["text"])["report"] == text
            assert (await rpc.request("tasks/get", {"taskId": task_id}))["status"] == \
                "completed"
            assert asked == []  # an unpriced panel is not confirmed

            # 2. A priced panel waits for its spend confirmation (input_required), asked
            #    through tasks/result with nothing spent before the answer.
            sim.script("gpt-4o", [Reply("Priced yes.")])
            sim.script("gpt-4o-mini", [Reply("Priced no.")])
            created = await rpc.request("tools/call", {
                "name": "consensus", "task": {},
                "arguments": {"models": ["gpt4", "mini"], "prompt": "Worth it?"}})
            priced = created["task"]["taskId"]
            waiting = await raw_until(rpc, priced, "input_required", "completed", "failed")
            assert waiting["status"] == "input_required", waiting
            assert "confirm" in waiting["statusMessage"]
            assert sim.requests_for("gpt-4o") == []
            result = await rpc.request("tasks/result", {"taskId": priced})
            assert result["content"][0]["text"].startswith("Consensus of 2 models (2 answered)")
            assert len(asked) == 1 and asked[0]["method"] == "elicitation/create"
            assert "a consensus of openai/gpt-4o, openai/gpt-4o-mini" in asked[0]["message"]
            assert asked[0]["_meta"]["io.modelcontextprotocol/related-task"] == {
                "taskId": priced}

            # 3. tasks/cancel hangs up every call of the panel in flight.
            sim.clear()
            sim.script("fast", [Slow(60)])
            sim.script("mid", [Slow(60)])
            created = await rpc.request("tools/call", {
                "name": "consensus", "task": {},
                "arguments": {"models": ["fast", "mid"], "prompt": "hold on"}})
            held = created["task"]["taskId"]
            await wait_until(lambda: len(sim.requests) == 2)
            cancelled = await rpc.request("tasks/cancel", {"taskId": held})
            assert cancelled["status"] == "cancelled"
            await wait_until(lambda: len(sim.hangups) == 2)
            assert sorted(r.model or "" for r in sim.hangups) == ["fast", "mid"]
            result = await rpc.request("tasks/result", {"taskId": held})
            assert result["content"][0]["text"] == \
                f"Consensus {held} was cancelled before it finished."

            # 4. Bad arguments: refused in one line, before anything is stored.
            before = len((await rpc.request("tasks/list"))["tasks"])
            for arguments, says in (({"models": ["fast"], "prompt": "x"},
                                     "needs 2 to 8 models, got 1"),
                                    ({"models": "fast,mid", "prompt": "x"},
                                     "models is required and must be a list"),
                                    ({"models": ["fast", "mid"], "prompt": "x",
                                      "temperature": 7}, "temperature must be between")):
                with pytest.raises(RpcError) as refused:
                    await rpc.request("tools/call", {"name": "consensus", "task": {},
                                                     "arguments": arguments})
                assert refused.value.code == -32602 and says in refused.value.message
            assert len((await rpc.request("tasks/list"))["tasks"]) == before

            # 5. Without `task`, consensus answers as it always did.
            sim.clear()
            replies(sim, "plain")
            plain = await rpc.request("tools/call", {
                "name": "consensus",
                "arguments": {"models": ["fast", "mid"], "prompt": "plain?"}})
            assert "task" not in plain and is_answer(plain["content"][0]["text"], "plain")
    assert FAKE_KEY not in (tmp_path / "stderr.log").read_text()


async def test_2026_consensus_tasks_over_stdio_survive_a_restart(sim: Simulator,
                                                                tmp_path: Path):
    env = server_env(sim, tmp_path / "home")
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with stdio_client_for(env, stderr, extensions=[TasksClient()]) as client:
            # 1. The task, polled to completed with the consensus inline.
            replies(sim, "modern")
            handle = await create_task(client, "consensus", {"models": ["fast", "mid"],
                                                             "prompt": "Is the sea salty?"})
            assert isinstance(handle, TaskHandle) and handle.status == "working"
            task_id = handle.task_id
            done = await until(client, task_id, "completed")
            assert done["result"]["isError"] is False
            text = done["result"]["content"][0]["text"]
            assert is_answer(text, "modern"), text

            # 2. The spend confirmation in inputRequests, answered by tasks/update.
            sim.script("gpt-4o", [Reply("Priced yes.")])
            sim.script("gpt-4o-mini", [Reply("Priced no.")])
            handle = await create_task(client, "consensus", {"models": ["gpt4", "mini"],
                                                             "prompt": "Worth it?"})
            assert isinstance(handle, TaskHandle)
            waiting = await until(client, handle.task_id, "input_required", "completed")
            assert list(waiting.get("inputRequests", {})) == ["spend:confirm-spend"], waiting
            assert sim.requests_for("gpt-4o") == []
            await request(client, "tasks/update", {"taskId": handle.task_id, "inputResponses": {
                "spend:confirm-spend": {"action": "accept", "content": {"decision": "allow"}}}})
            priced = await until(client, handle.task_id, "completed")
            assert priced["result"]["content"][0]["text"].startswith(
                "Consensus of 2 models (2 answered)")

            # 3. Bad arguments: the tool's own one-line error, no task.
            refused = await create_task(client, "consensus", {"models": ["fast", "fast"],
                                                              "prompt": "x"})
            assert not isinstance(refused, TaskHandle) and refused.is_error
            assert "named twice" in text_of(refused)

            # 4. A consensus still asking when its server stops (it hands the job back).
            sim.clear()
            sim.script("fast", [Slow(60)])
            sim.script("mid", [Slow(60)])
            handle = await create_task(client, "consensus", {"models": ["fast", "mid"],
                                                             "prompt": "hold on"})
            assert isinstance(handle, TaskHandle)
            held = handle.task_id
            await wait_until(lambda: len(sim.requests) == 2)

        # 5. Another server process on the same home (a restart) reads the same task; the
        #    interrupted consensus resumes from its stored seats (docs/research.md,
        #    "Surviving restarts"): neither seat had answered, so each is asked once more
        #    (the cut-off calls stay in the ledger, unanswered), and its task completes. A
        #    client that does not declare the extension gets today's answer.
        async with stdio_client_for(env, stderr, extensions=[TasksClient()]) as client:
            again = await tasks_get(client, task_id)
            assert again["status"] == "completed"
            assert again["result"]["content"][0]["text"] == text
            ended = await until(client, held, "completed", "failed", "cancelled")
            assert ended["status"] == "completed", ended
            assert ended["result"]["isError"] is False, ended
            assert len(sim.requests) == 4  # the two cut off, and each asked once more
        async with stdio_client_for(env, stderr) as plain:
            replies(sim, "plain")
            error, answer = await call(plain, "consensus", models=["fast", "mid"],
                                       prompt="plain?")
            assert not error and is_answer(answer, "plain")
    assert FAKE_KEY not in (tmp_path / "stderr.log").read_text()


async def test_a_consensus_task_across_two_nodes(sim: Simulator, tmp_path: Path,
                                                 postgres_url: str):
    tokens = TokensFile(tmp_path / "tokens.json")
    alice, bob = tokens.add("alice"), tokens.add("bob")

    def node_env(n: int) -> dict[str, str]:
        return {**server_env(sim, tmp_path / f"node{n}"),
                "ASK_ANOTHER_DATABASE_URL": postgres_url,
                "ASK_ANOTHER_TOKENS_FILE": str(tmp_path / "tokens.json"),
                "ASK_ANOTHER_RATE_PER_MINUTE": "0"}

    async with http_server(node_env(1), tmp_path / "node1.log") as first, \
            http_server(node_env(2), tmp_path / "node2.log") as second, \
            http_client_for(first.url, alice, extensions=[TasksClient()]) as one, \
            http_client_for(second.url, alice, extensions=[TasksClient()]) as two, \
            http_client_for(second.url, bob, extensions=[TasksClient()]) as other, \
            http_client_for(second.url, alice, mode="legacy") as legacy:
        # 1. Started on node 1; the row is committed before the answer, so node 2 knows the
        #    task at once, reads it to the end in both eras, and refuses it to Bob.
        sim.script("fast", [Slow(1.0, Reply("Fast says yes (nodes)."))])
        sim.script("mid", [Slow(1.0, Reply("Mid says no (nodes)."))])
        handle = await create_task(one, "consensus", {"models": ["fast", "mid"],
                                                      "prompt": "Is the sea salty?"})
        assert isinstance(handle, TaskHandle)
        task_id = handle.task_id
        assert (await tasks_get(two, task_id))["status"] in ("working", "completed")
        with pytest.raises(MCPError) as refused:
            await tasks_get(other, task_id)
        assert refused.value.error.message.startswith(f"No research job has the id '{task_id}'")
        done = await until(two, task_id, "completed")
        text = done["result"]["content"][0]["text"]
        assert is_answer(text, "nodes"), text
        assert (await tasks_get(one, task_id))["result"]["content"][0]["text"] == text
        legacy_task = await request(legacy, "tasks/get", {"taskId": task_id})
        assert legacy_task["status"] == "completed" and "pollInterval" in legacy_task
        result = await request(legacy, "tasks/result", {"taskId": task_id})
        assert result["content"][0]["text"] == text

        # 2. Started on node 1, cancelled from node 2: node 1 hangs up the panel's calls.
        sim.clear()
        sim.script("fast", [Slow(60)])
        sim.script("mid", [Slow(60)])
        handle = await create_task(one, "consensus", {"models": ["fast", "mid"],
                                                      "prompt": "hold on"})
        assert isinstance(handle, TaskHandle)
        await wait_until(lambda: len(sim.requests) == 2)
        await request(two, "tasks/cancel", {"taskId": handle.task_id})
        assert (await tasks_get(two, handle.task_id))["status"] == "cancelled"
        await wait_until(lambda: len(sim.hangups) == 2)
    for log in ("node1.log", "node2.log"):
        logged = (tmp_path / log).read_text()
        assert FAKE_KEY not in logged and alice not in logged and bob not in logged
