"""Two `serve --http` nodes on one PostgreSQL database: one team service (issue 18).

Real processes throughout: a PostgreSQL server (tests/support/postgres_server.py), two
`python -m ask_another serve --http` subprocesses on their own loopback ports and homes with the
same ASK_ANOTHER_DATABASE_URL and tokens file, the loopback simulator as Gemini and as the agent's
model, and MCP clients over Streamable HTTP with a bearer token.

- Handshake era (2025-11-25): a session lives on one node, so the user has a client per node. A
  job started on node 1 is checked, answered and cancelled from node 2, and each request reaches
  its owner within about a second (measured from the store's `research_requests` rows). Then a
  rolling restart: node 1 stops with SIGTERM and hands its jobs back; node 2 completes the
  Gemini job and fails the agent job as interrupted.
- 2026-07-28 era: requests carry no session, so ONE client sits behind a balancer that may send
  any request to either node. Node 1 is killed with SIGKILL mid-Gemini-job: node 2 takes the job
  over once its lease has expired and completes it with the provider's report; an agent job of
  node 1 is failed with a reason saying its owner died, and the client, failed over to node 2,
  sees both.

Each node has its own provider key, so the simulator tells which node polled an interaction.
"""

from __future__ import annotations

import itertools
import json
import re
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
import trio
from http_server import HttpServer, http_client_for, http_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult
from tool_results import call, check_until, job_id_in

from ask_another.research import INTERRUPTED, OWNER_DIED
from ask_another.server.auth import TokensFile
from ask_another.simulator import Reply, Simulator, ToolCall, ToolCalls

pytestmark = pytest.mark.slow  # starts PostgreSQL and two server processes

GEMINI = "gemini/deep-research-pro-preview-12-2025"
GEMINI_AGENT = GEMINI.split("/", 1)[1]
KEYS = ("sk-test-NODE-ONE-1111", "sk-test-NODE-TWO-2222")
# Long enough that a loaded machine's stalls never fence a live node: a node that has not
# renewed for 60 % of its lease stops its jobs (failing an agent job with that reason), and at
# 3 s a loaded two-core machine (load 20) fenced a node in each of this file's tests in one run
# (unrenewed for 1.8 and 2.5 s).
LEASE_SECONDS = 10.0
# A request given on another node reaches the owner within REQUEST_POLL (0.5 s) plus a loop's
# turn; the bound is generous so that two loaded cores cannot fail it.
DELIVERY_BOUND = 5.0


def node_env(sim: Simulator, tmp_path: Path, database_url: str, n: int) -> dict[str, str]:
    key = KEYS[n]
    return {
        "ASK_ANOTHER_HOME": str(tmp_path / f"node{n + 1}"),
        "ASK_ANOTHER_DATABASE_URL": database_url,
        "ASK_ANOTHER_TOKENS_FILE": str(tmp_path / "tokens.json"),  # one for the team
        "ASK_ANOTHER_LEASE_SECONDS": str(LEASE_SECONDS),
        "ASK_ANOTHER_POLL_SECONDS": "0.05",
        "ASK_ANOTHER_RATE_PER_MINUTE": "0",  # the test checks jobs in loops
        "ASK_ANOTHER_CONFIRM_USD": "1000",  # simulated jobs run without a spend confirmation
        "ASK_ANOTHER_PERMISSIONS": "read=ask",
        "ASK_ANOTHER_ALLOW_HOSTS": "127.0.0.1",
        "MODEL_GDR": f"{GEMINI};{key};{sim.url}",
        "MODEL_SIM": f"openai/m1;{key};{sim.openai_base}",
        "MODEL_SIM2": f"openai/m2;{key};{sim.openai_base}",  # a second script queue
    }


@asynccontextmanager
async def two_nodes(sim: Simulator, tmp_path: Path, database_url: str
                    ) -> AsyncIterator[list[HttpServer]]:
    """Both nodes, started at once (each imports litellm in its worker: seconds)."""
    nodes: list[HttpServer | None] = [None, None]
    ready = [trio.Event(), trio.Event()]
    done = trio.Event()

    async def run(n: int) -> None:
        async with http_server(node_env(sim, tmp_path, database_url, n),
                               tmp_path / f"node{n + 1}.log") as node:
            nodes[n] = node
            ready[n].set()
            await done.wait()

    async with trio.open_nursery() as nursery:
        for n in (0, 1):
            nursery.start_soon(run, n)
        for event in ready:
            await event.wait()
        try:
            yield [node for node in nodes if node is not None]
        finally:
            done.set()


def agent_script(call_id: str, report: str) -> list[ToolCalls | Reply]:
    url = "http://127.0.0.1:9/article"  # never fetched unless allowed; its failure is fine
    return [ToolCalls([ToolCall("read_article", {"url": url}, id=call_id)]), Reply(report)]


def gets_with(sim: Simulator, interaction_id: str, key: str) -> int:
    return sum(1 for r in sim.requests
               if r.method == "GET" and interaction_id in r.path
               and r.headers.get("x-goog-api-key") == key)


async def polled_with(sim: Simulator, interaction_id: str, key: str) -> None:
    """Until the node whose provider key is `key` has polled the interaction."""
    with trio.fail_after(30):
        while True:  # another process polls: nothing here to wait on
            if gets_with(sim, interaction_id, key):
                return
            await trio.sleep(0.05)


async def query(database_url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    def go() -> list[tuple[Any, ...]]:
        with psycopg.connect(database_url, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()
    return await trio.to_thread.run_sync(go)


async def owner_of(database_url: str, job_id: str) -> tuple[str | None, float | None]:
    ((owner, lease),) = await query(
        database_url, "SELECT owner, lease_expires FROM research_jobs WHERE id = %s", job_id)
    return owner, lease


async def delivery_seconds(database_url: str, job_id: str, kind: str) -> float:
    """How long the owner took to take the request: its `taken_at - created_at` (both nodes
    run on this machine, so their clocks agree)."""
    rows = await query(database_url, "SELECT created_at, taken_at, taken_by FROM "
                       "research_requests WHERE job_id = %s AND kind = %s", job_id, kind)
    ((created, taken, taken_by),) = rows
    assert taken is not None and taken_by is not None
    return float(taken - created)


async def test_handshake_era_node_2_checks_answers_cancels_node_1s_jobs_and_takes_them_on_sigterm(
    sim: Simulator, tmp_path: Path, postgres_url: str
):
    tokens = TokensFile(tmp_path / "tokens.json")
    token, bob = tokens.add("alice"), tokens.add("bob")
    async with two_nodes(sim, tmp_path, postgres_url) as (one, two), \
            http_client_for(two.url, token, "legacy") as c2, \
            http_client_for(two.url, bob, "legacy") as other:
        # Closed before node 1 stops: a handshake-era session lives on its node.
        async with http_client_for(one.url, token, "legacy") as c1:
            assert c1.protocol_version == c2.protocol_version == "2025-11-25"

            # An agent job on node 1 waits for permission; node 2 shows it and answers it.
            sim.script("m1", agent_script("call-1", "agent report from node 1"))
            _, text = await call(c1, "start_research", model="sim", query="agent one",
                                 method="agent", timeout=0)
            agent_job = job_id_in(text)
            text = await check_until(c2, agent_job, "waiting for permission")
            assert "call-1" in text and "answer_permission" in text
            owner, _ = await owner_of(postgres_url, agent_job)
            assert owner is not None and f":{one.process.pid}:" in owner

            # Another user on node 2 is answered as for no job and no request reaches the owner:
            # the one permission request counted below is alice's.
            for tool, arguments in [("check_research", {}), ("cancel_research", {}),
                                    ("answer_permission", {"tool_call_id": "call-1",
                                                           "decision": "allow"})]:
                error, text = await call(other, tool, job_id=agent_job, **arguments)
                assert error and f"No research job has the id {agent_job!r}" in text, text

            asked = trio.current_time()
            error, text = await call(c2, "answer_permission", job_id=agent_job,
                                     tool_call_id="call-1", decision="allow")
            answered_in = trio.current_time() - asked
            assert not error and "allowed" in text, text
            permission_delivery = await delivery_seconds(postgres_url, agent_job, "permission")
            assert permission_delivery < DELIVERY_BOUND
            assert answered_in < DELIVERY_BOUND + 2  # the asker polls the answer every 0.05 s
            done = json.loads(await check_until(c2, agent_job, '"completed"'))
            assert done["report"] == "agent report from node 1"

            # A Gemini job on node 1, polled by node 1 only, cancelled from node 2 (and at the
            # provider).
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])
            _, text = await call(c1, "start_research", model="gdr", query="cancel me", timeout=0)
            doomed = job_id_in(text)
            await check_until(c2, doomed, "Gemini interaction in_progress")
            (remote,) = [i for i in sim.interactions.values() if i.input_text == "cancel me"]
            # in_progress is the create's answer; node 1's first poll comes a poll interval
            # later, and a cancel taken before it left no poll of node 1's to count.
            await polled_with(sim, remote.id, KEYS[0])
            asked = trio.current_time()
            error, text = await call(c2, "cancel_research", job_id=doomed)
            cancelled_in = trio.current_time() - asked
            assert not error and "was cancelled" in text, text
            assert "cancelled on the provider" in text, text
            cancel_delivery = await delivery_seconds(postgres_url, doomed, "cancel")
            assert cancel_delivery < DELIVERY_BOUND
            assert cancelled_in < DELIVERY_BOUND + 2
            remote = sim.interactions[remote.id]
            assert remote.cancel_called and remote.status == "cancelled"
            assert gets_with(sim, remote.id, KEYS[0]) > 0
            assert gets_with(sim, remote.id, KEYS[1]) == 0
            _, text = await call(c1, "check_research", job_id=doomed)
            assert "cancelled" in text, text

            # A tool-call cancel from node 2 reaches node 1's agent job; the job goes on.
            sim.script("m1", agent_script("call-3", "went on without it"))
            _, text = await call(c1, "start_research", model="sim", query="agent three",
                                 method="agent", timeout=0)
            third = job_id_in(text)
            await check_until(c2, third, "waiting for permission")
            error, text = await call(c2, "cancel_research", job_id=third, tool_call_id="call-3")
            assert not error and "will not run" in text, text
            assert await delivery_seconds(postgres_url, third, "cancel_call") < DELIVERY_BOUND
            done = json.loads(await check_until(c2, third, '"completed"'))
            assert done["report"] == "went on without it"

            # A rolling restart: node 1 stops with SIGTERM while a Gemini job and an agent job
            # run there. It hands both back (no lease to wait out): node 2 takes them over at
            # its next look, polls the Gemini interaction on to the provider's report, and fails
            # the agent job saying why.
            sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])  # until ended
            _, text = await call(c1, "start_research", model="gdr", query="rolling",
                                 timeout=0)
            rolling = job_id_in(text)
            sim.script("m1", agent_script("call-4", "never written"))
            _, text = await call(c1, "start_research", model="sim", query="agent four",
                                 method="agent", timeout=0)
            handed_back = job_id_in(text)
            await check_until(c2, rolling, "Gemini interaction in_progress")
            await check_until(c2, handed_back, "waiting for permission")

        one.signal(signal.SIGTERM)
        with trio.fail_after(60):
            assert await one.process.wait() == 0, one.log()
        assert "research.released" in one.log()
        (interaction,) = [i for i in sim.interactions.values() if i.input_text == "rolling"]
        with trio.fail_after(60):
            while True:  # another process polls: nothing here to wait on
                if gets_with(sim, interaction.id, KEYS[1]):
                    break
                await trio.sleep(0.05)
        sim.end_interaction(interaction.id, "completed")
        done = json.loads(await check_until(c2, rolling, '"completed"'))
        assert done["report"] == sim.interactions[interaction.id].report
        # The agent job handed back resumes from its stored round: its tool call (asked for
        # before the hand-back) waits for permission again, on the node that took it.
        text = await check_until(c2, handed_back, "waiting for permission")
        assert INTERRUPTED not in text and OWNER_DIED not in text, text
        # Taken over from no owner (handed back), not from node 1's lapsed lease.
        taken = re.findall(r"research\.taken_over .*", two.log())
        assert any(f"job_id={rolling}" in line and "previous_owner=None" in line
                   for line in taken), taken

    for node in (one, two):
        log = node.log()
        assert "Traceback" not in log and KEYS[0] not in log and KEYS[1] not in log


class Balancer(httpx2.AsyncBaseTransport):
    """A load balancer in front of the nodes, as the client sees one: each request goes to the
    next node in turn, or to `pinned` when set; a node that refuses the connection (dead) is
    skipped for good. Counts the requests each node answered."""

    def __init__(self, nodes: list[HttpServer]) -> None:
        self.ports = [httpx2.URL(node.url).port for node in nodes]
        self.alive = set(self.ports)
        self.turn = itertools.cycle(self.ports)
        self.pinned: int | None = None
        self.served: Counter[int] = Counter()
        self.inner = httpx2.AsyncHTTPTransport()

    def pin(self, node: HttpServer | None) -> None:
        self.pinned = None if node is None else httpx2.URL(node.url).port

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        for _ in range(len(self.ports)):
            port = self.pinned if self.pinned in self.alive else next(self.turn)
            if port not in self.alive:
                continue
            request.url = request.url.copy_with(port=port)
            request.headers["host"] = f"127.0.0.1:{port}"
            try:
                response = await self.inner.handle_async_request(request)
            except httpx2.ConnectError:
                self.alive.discard(port)
                continue
            self.served[port] += 1
            return response
        raise httpx2.ConnectError("no node is up")

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def balanced_client(nodes: list[HttpServer], token: str, **client_options: Any
                          ) -> AsyncIterator[tuple[Client, Balancer]]:
    balancer = Balancer(nodes)
    async with httpx2.AsyncClient(transport=balancer,
                                  headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=300)) as http, Client(
            streamable_http_client(nodes[0].url, http_client=http), mode="auto",
            read_timeout_seconds=60, **client_options) as client:
        yield client, balancer


async def test_2026_era_any_node_answers_and_a_killed_nodes_jobs_are_taken_over_or_failed(
    sim: Simulator, tmp_path: Path, postgres_url: str
):
    token = TokensFile(tmp_path / "tokens.json").add("alice")
    async with two_nodes(sim, tmp_path, postgres_url) as (one, two), \
            balanced_client([one, two], token) as (client, balancer):
        assert client.protocol_version == "2026-07-28"
        port_one, port_two = (httpx2.URL(n.url).port for n in (one, two))
        # Each node's gateway worker has imported litellm before the elicitation below, whose
        # start_research waits 30 s for the question: on a loaded machine the first provider
        # call's wait for that import alone took longer, and no question came.
        for node in (one, two):
            async with http_client_for(node.url, token) as warm:
                error, text = await call(warm, "completion", model="sim", prompt="warm")
                assert not error, text

        # The one 2026-07-28 request that needs its node: an elicitation's retry, whose sealed
        # requestState only the node that asked can open (the SDK's key is per process) and
        # whose waiting call lives there. Sent to the other node, it is refused by the SDK and
        # no second job is started; the job waits on its node for answer_permission.
        asked: list[str] = []

        async def allow_on_the_other_node(_ctx: Any, params: Any) -> ElicitResult:
            asked.append(params.message)
            eliciting.pin(two)  # a balancer without client affinity
            return ElicitResult(action="accept", content={"decision": "allow"})

        async with balanced_client([one, two], token,
                                   elicitation_callback=allow_on_the_other_node
                                   ) as (elicited, eliciting):
            eliciting.pin(one)
            sim.script("m1", agent_script("call-e", "elicited report"))
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await elicited.call_tool("start_research", {
                    "model": "sim", "query": "elicit me", "method": "agent", "timeout": 30})
        assert len(asked) == 1 and "call-e" in asked[0]
        _, listing = await call(client, "check_research")
        (line,) = [row for row in listing.splitlines() if "elicit me" in row]
        elicited_job = job_id_in(line)
        await check_until(client, elicited_job, "waiting for permission")
        error, text = await call(client, "answer_permission", job_id=elicited_job,
                                 tool_call_id="call-e", decision="allow")
        assert not error and "allowed" in text, text
        await check_until(client, elicited_job, '"completed"')

        # Started on node 1; every later request of the same client goes to either node.
        balancer.pin(one)
        sim.script("m1", agent_script("call-1", "agent report"))
        _, text = await call(client, "start_research", model="sim", query="agent one",
                             method="agent", timeout=0)
        agent_job = job_id_in(text)
        sim.script_interaction(GEMINI_AGENT, statuses=["in_progress"])  # until ended below
        _, text = await call(client, "start_research", model="gdr", query="gemini long",
                             timeout=0)
        gemini_job = job_id_in(text)
        sim.script("m2", agent_script("call-2", "never written"))
        _, text = await call(client, "start_research", model="sim2", query="agent two",
                             method="agent", timeout=0)
        orphan = job_id_in(text)
        balancer.pin(None)  # round robin from here on
        before = Counter(balancer.served)
        await check_until(client, agent_job, "waiting for permission")
        await check_until(client, orphan, "waiting for permission")
        await check_until(client, gemini_job, "Gemini interaction in_progress")
        error, text = await call(client, "answer_permission", job_id=agent_job,
                                 tool_call_id="call-1", decision="allow")
        assert not error and "allowed" in text, text
        done = json.loads(await check_until(client, agent_job, '"completed"'))
        assert done["report"] == "agent report"
        assert balancer.served[port_one] > before[port_one]
        assert balancer.served[port_two] > before[port_two]  # node 2 answered some of these

        (gemini,) = [i for i in sim.interactions.values() if i.input_text == "gemini long"]
        await polled_with(sim, gemini.id, KEYS[0])
        assert gets_with(sim, gemini.id, KEYS[1]) == 0
        assert (await owner_of(postgres_url, gemini_job))[0] == (
            await owner_of(postgres_url, orphan))[0]

        # Node 1 dies outright: no release, its leases run out.
        one.process.kill()
        await one.process.wait()
        killed_at = time.time()
        _, lease_left = await owner_of(postgres_url, gemini_job)
        assert lease_left is not None

        # Node 2 takes the Gemini job over once the lease has expired, and polls the
        # provider's interaction on; the provider's report is the job's.
        with trio.fail_after(30 + LEASE_SECONDS):
            while True:  # another process polls: nothing here to wait on
                if gets_with(sim, gemini.id, KEYS[1]):
                    break
                await trio.sleep(0.05)
        taken_at = time.time()
        owner, _ = await owner_of(postgres_url, gemini_job)
        assert owner is not None and f":{two.process.pid}:" in owner
        assert taken_at >= lease_left - 0.2  # not before the lease ran out (DB clock: here)
        sim.end_interaction(gemini.id, "completed")
        done = json.loads(await check_until(client, gemini_job, '"completed"'))
        assert done["report"] == sim.interactions[gemini.id].report
        assert f"[simulated {GEMINI_AGENT}]" in done["report"] and "gemini long" in done["report"]

        # The agent job resumes from its stored round: its tool call waits for permission again.
        text = await check_until(client, orphan, "waiting for permission")
        assert OWNER_DIED not in text and "restart" not in text, text
        assert port_one not in balancer.alive  # the client went on through node 2 alone

    log = two.log()
    assert "research.taken_over" in log and "Traceback" not in log
    assert killed_at <= taken_at
