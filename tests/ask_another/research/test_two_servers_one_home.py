"""Two real stdio servers on one ASK_ANOTHER_HOME: each job has one owner (issue 13).

Server A runs an agent job and Gemini jobs; server B starts meanwhile on the same home. B must
leave A's jobs alone (before leases, B's start-up recovery failed A's agent job as "interrupted
by a server restart" and polled A's Gemini interaction as well), show A's live step, and carry
a permission answer and a cancel to A. After A is killed with SIGKILL, the home's job host
(started by A with its first job, so with A's environment) takes the Gemini job over once A's
lease expires and completes it, and B, a session, takes nothing over; the agent job is failed
with a reason saying its owner died. Each server has its own Gemini key, so the simulator tells
whose GETs it received.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import trio
from mcp import Client
from processes import processes_with
from research_helpers import GEMINI, GEMINI_AGENT
from stdio_server import stdio_client_for
from tool_results import call, check_until, job_id_in

from ask_another.research import OWNER_DIED
from ask_another.simulator import Reply, Simulator, ToolCalls
from ask_another.simulator import ToolCall as SimCall

pytestmark = pytest.mark.slow  # starts real server processes

KEY_A = "sk-test-SERVER-A-1111"
KEY_B = "sk-test-SERVER-B-2222"


def env_for(sim: Simulator, home: Path, name: str, key: str) -> dict[str, str]:
    return {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_POLL_SECONDS": "0.05",
        "ASK_ANOTHER_LEASE_SECONDS": "3",
        "ASK_ANOTHER_CONFIRM_USD": "1000",  # simulated jobs run without a spend confirmation
        "ASK_ANOTHER_PERMISSIONS": "read=ask",
        "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
        "MODEL_GDR": f"{GEMINI};{key};{sim.url}",
        "MODEL_SIM": f"openai/m1;{key};{sim.openai_base}",
        "ASK_ANOTHER_TEST_SERVER": name,  # read by nobody: it finds the process to kill
    }


def gets_with(sim: Simulator, interaction_id: str, key: str) -> int:
    return sum(1 for r in sim.requests
               if r.method == "GET" and interaction_id in r.path
               and r.headers.get("x-goog-api-key") == key)


def server_pid(name: str) -> int:
    found = [pid for pid, cmdline in processes_with(f"ASK_ANOTHER_TEST_SERVER={name}")
             if cmdline.split(b"\0")[1:3] == [b"-m", b"ask_another"]]  # not its worker or host
    assert len(found) == 1, found
    return found[0]


def agent_step(call_id: str, report: str) -> list[ToolCalls | Reply]:
    url = "http://127.0.0.1:9/article"  # never fetched unless allowed; its failure is fine
    return [ToolCalls([SimCall("read_article", {"url": url}, id=call_id)]), Reply(report)]


async def test_two_servers_on_one_home_one_owner_per_job_requests_reach_it_takeover_on_death(
    sim: Simulator, tmp_path: Path
):
    home = tmp_path / "home"
    a_ready = trio.Event()
    killed = trio.Event()
    clients: dict[str, Client] = {}

    async def run_a() -> None:
        with (tmp_path / "a.log").open("w") as stderr:
            try:
                async with stdio_client_for(env_for(sim, home, "a", KEY_A), stderr) as client:
                    clients["a"] = client
                    a_ready.set()
                    await trio.sleep_forever()
            except BaseException:  # its pipe breaks when it is killed: expected then only
                if not killed.is_set():
                    raise

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_a)
        with trio.fail_after(60):
            await a_ready.wait()
        a = clients["a"]
        # A: an agent job that waits for permission, and a long Gemini job.
        sim.script("m1", agent_step("call-1", "agent report from A"))
        _, text = await call(a, "start_research", model="sim", query="agent one",
                             method="agent", timeout=0)
        agent_job = job_id_in(text)
        sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"] * 16 + ["completed"],
                               report="gemini report")
        _, text = await call(a, "start_research", model="gdr", query="gemini long", timeout=0)
        gemini_job = job_id_in(text)
        await check_until(a, agent_job, "waiting for permission")

        # B starts while A runs both: it leaves them alone.
        with (tmp_path / "b.log").open("w") as stderr:
            async with stdio_client_for(env_for(sim, home, "b", KEY_B), stderr) as b:
                # check_research from B shows A's live step, and the question it waits on.
                text = await check_until(b, agent_job, "waiting for permission")
                assert "call-1" in text and "answer_permission" in text

                # The permission answer given in B reaches A's job, and B says what it did.
                error, text = await call(b, "answer_permission", job_id=agent_job,
                                         tool_call_id="call-1", decision="allow")
                assert not error and "allowed" in text, text
                error, text = await call(b, "answer_permission", job_id=agent_job,
                                         tool_call_id="call-1", decision="deny")
                # Refused, saying why: by the owner while the job runs, by the store once the
                # job has finished (its answer arrives quickly).
                assert error and ("already allowed" in text or "waits for nothing" in text), text
                done = json.loads(await check_until(b, agent_job, '"completed"'))
                assert done["report"] == "agent report from A"
                _, text = await call(a, "check_research", job_id=agent_job)
                assert json.loads(text)["report"] == "agent report from A"

                # A cancel given in B stops A's job and its interaction at the provider.
                sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])
                _, text = await call(a, "start_research", model="gdr", query="cancel me",
                                     timeout=0)
                doomed = job_id_in(text)
                await check_until(b, doomed, "Gemini interaction in_progress")
                error, text = await call(b, "cancel_research", job_id=doomed)
                assert not error and "was cancelled" in text, text
                assert "cancelled on the provider" in text, text
                (remote,) = [i for i in sim.interactions.values() if i.input_text == "cancel me"]
                assert remote.cancel_called and remote.status == "cancelled"

                # A tool-call cancel given in B reaches A's job too; the job goes on.
                sim.script("m1", agent_step("call-3", "went on without it"))
                _, text = await call(a, "start_research", model="sim", query="agent three",
                                     method="agent", timeout=0)
                third = job_id_in(text)
                await check_until(b, third, "waiting for permission")
                error, text = await call(b, "cancel_research", job_id=third,
                                         tool_call_id="call-3")
                assert not error and "will not run" in text, text
                done = json.loads(await check_until(b, third, '"completed"'))
                assert done["report"] == "went on without it"

                # Only A polls its Gemini interaction.
                (gemini,) = [i for i in sim.interactions.values()
                             if i.input_text == "gemini long"]
                assert gets_with(sim, gemini.id, KEY_A) > 0
                assert gets_with(sim, gemini.id, KEY_B) == 0

                # A second agent job waits in A; then A dies.
                sim.script("m1", agent_step("call-2", "never written"))
                _, text = await call(a, "start_research", model="sim", query="agent two",
                                     method="agent", timeout=0)
                orphan = job_id_in(text)
                await check_until(b, orphan, "waiting for permission")
                _, text = await call(b, "check_research", job_id=gemini_job)
                assert "is in progress" in text, text
                killed.set()
                os.kill(server_pid("a"), signal.SIGKILL)

                # The job host takes the Gemini job over once A's lease expires, and completes
                # it; B, a session, polls nothing: the host runs with A's environment.
                polled_by_a = gets_with(sim, gemini.id, KEY_A)
                done = json.loads(await check_until(b, gemini_job, '"completed"'))
                assert done["report"] == "gemini report"
                assert gets_with(sim, gemini.id, KEY_A) > polled_by_a
                assert gets_with(sim, gemini.id, KEY_B) == 0
                # The agent job resumes from its stored round, in the host: its tool call
                # (asked before the kill) waits for permission again, and B sees it.
                text = await check_until(b, orphan, "waiting for permission")
                assert OWNER_DIED not in text and "restart" not in text, text
        nursery.cancel_scope.cancel()
