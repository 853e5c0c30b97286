"""Users across the real HTTP server: `python -m ask_another serve --http` with a tokens file
(two users and an admin), `mcp.Client` over Streamable HTTP in both protocol eras, the
simulator as the provider.

Every tool that takes a job or a conversation id is tried by another user and answered as for an
id that does not exist, changing nothing; the listings are each user's own; the admin sees
and acts on everything; and the per-user limits (tool calls a minute, running jobs) refuse with
the limit, the count and when to retry.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
import trio
from cryptography.hazmat.primitives.asymmetric import rsa
from http_server import http_client_for, http_server, run_cli
from loopback_pages import Page, PageServer
from mcp import Client
from tool_results import call

from ask_another.server.auth import TokensFile
from ask_another.simulator import Simulator
from ask_another.store.jobs import TERMINAL

pytestmark = pytest.mark.slow  # starts a real server process

FAKE_KEY = "sk-test-USERS-3c1d0e"
GEMINI = "gemini/deep-research-pro-preview-12-2025"
ERAS = (("auto", "2026-07-28"), ("legacy", "2025-11-25"))
RATE = 40


def server_env(sim: Simulator, home: Path) -> dict[str, str]:
    return {
        "ASK_ANOTHER_HOME": str(home),
        "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim.openai_base}",
        "MODEL_SIM2": f"openai/m2;{FAKE_KEY};{sim.openai_base}",
        # A simulated Gemini task is estimated at about $1.22, above the default
        # ASK_ANOTHER_CONFIRM_USD: each job waits for its user to confirm (a real permission
        # request, tool call id confirm-spend), so it stays unfinished until answered.
        "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim.url}",
        "ASK_ANOTHER_MAX_JOBS_PER_USER": "2",
        "ASK_ANOTHER_RATE_PER_MINUTE": str(RATE),
    }


async def finished_in_store(home: Path, job_id: str) -> None:
    def status() -> str:
        with sqlite3.connect(home / "ask-another.sqlite3") as conn:
            (found,) = conn.execute("SELECT status FROM research_jobs WHERE id = ?",
                                    (job_id,)).fetchone()
        return str(found)

    with trio.fail_after(30):
        while True:  # another process writes it: nothing here to wait on
            if await trio.to_thread.run_sync(status) in TERMINAL:
                return
            await trio.sleep(0.05)


def elapsed_out(text: str) -> str:
    return re.sub(r"Elapsed: [^;]*;", "", text)


async def forbidden(client: Client, tool: str, what: str, **arguments: object) -> None:
    """Another user's job or conversation: the answer for an id that does not exist ("Forbidden"
    told that it does)."""
    error, text = await call(client, tool, **arguments)
    assert error, (tool, text)
    kind, wanted = what.rsplit(" ", 1)
    made_up = "r-0000000000" if kind == "research job" else "c-0000000000"
    arguments = {k: made_up if k in ("job_id", "conversation_id") else v
                 for k, v in arguments.items()}
    missing, nothing = await call(client, tool, **arguments)
    assert missing and text == nothing.replace(made_up, wanted), (tool, text)
    assert "alice" not in text and "carol" not in text, text  # the owner is never named


async def test_every_tool_with_a_job_or_conversation_id_refuses_another_users_in_both_eras(
    sim: Simulator, tmp_path: Path
):
    home = tmp_path / "home"
    tokens = TokensFile(home / "tokens.json")
    alice, bob, root, carol = (tokens.add("alice"), tokens.add("bob"),
                               tokens.add("root", admin=True), tokens.add("carol"))
    async with http_server(server_env(sim, home), tmp_path / "stderr.log") as server:
        async with http_client_for(server.url, alice, "legacy") as client:
            error, text = await call(client, "start_research", model="gdr",
                                     query="alice's question", timeout=0)
            assert not error, text
            job = text.split("Research job ", 1)[1].split(" ", 1)[0]
            error, text = await call(client, "completion", model="sim", prompt="alice's plan")
            assert not error, text
            conversation = text.rsplit("conversation_id: ", 1)[1].strip()
            error, waiting = await call(client, "check_research", job_id=job)
            assert not error and "confirm-spend" in waiting, waiting

        for mode, era in ERAS:
            async with http_client_for(server.url, bob, mode) as client:
                assert client.protocol_version == era
                what = f"research job {job}"
                await forbidden(client, "check_research", what, job_id=job)
                await forbidden(client, "cancel_research", what, job_id=job)
                await forbidden(client, "cancel_research", what, job_id=job,
                                tool_call_id="confirm-spend")
                await forbidden(client, "answer_permission", what, job_id=job,
                                tool_call_id="confirm-spend", decision="allow")
                await forbidden(client, "answer_choice", what, job_id=job,
                                tool_call_id="confirm-spend", option_id="a")
                with pytest.raises(Exception, match=f"No research job has the id '{job}'"):
                    await client.read_resource(f"research://{job}")
                what = f"conversation {conversation}"
                await forbidden(client, "completion", what, model="sim", prompt="and?",
                                conversation_id=conversation)
                await forbidden(client, "discuss", what, url="http://127.0.0.1:9/a",
                                model="sim", conversation_id=conversation)
                await forbidden(client, "consensus", what, models=["sim", "sim2"],
                                prompt="and?", conversation_id=conversation)
                # The listings are bob's own: empty.
                error, text = await call(client, "check_research")
                assert not error and text.startswith("No research jobs yet"), text
                error, text = await call(client, "usage", period="all")
                assert not error and text.startswith("No provider calls recorded"), text
                error, text = await call(client, "feedback", issue=f"bob {era}")
                assert not error, text

        async with http_client_for(server.url, alice) as client:
            # Nothing bob sent reached the job or the conversation.
            error, text = await call(client, "check_research", job_id=job)
            assert not error and "confirm-spend" in text, text
            assert elapsed_out(text) == elapsed_out(waiting)
            error, text = await call(client, "answer_permission", job_id=job,
                                     tool_call_id="confirm-spend", decision="deny")
            assert not error, text
            # The answer returns once the job has it; the job ends after. Until the store says
            # so it counts as running, and under load the second of the starts below was
            # refused. Waited on in the store: calls would count against the rate.
            await finished_in_store(home, job)
            error, text = await call(client, "usage", period="all")
            assert not error and "over 1 provider call" in text, text
            error, text = await call(client, "check_research")
            assert job in text and "| user |" not in text, text

            # At most 2 unfinished jobs per user, counted in the store.
            for n in range(2):
                error, text = await call(client, "start_research", model="gdr",
                                         query=f"more {n}", timeout=0)
                assert not error, text
            error, text = await call(client, "start_research", model="gdr", query="one too many",
                                     timeout=0)
            assert error and text.startswith(
                "Error executing tool start_research: Limit reached: at most 2 jobs (research or "
                "consensus) running at once per user (ASK_ANOTHER_MAX_JOBS_PER_USER); you have 2 "
                "running."), text

        async with http_client_for(server.url, root) as client:
            # The admin sees every job, with its user, and acts on any.
            error, table = await call(client, "check_research")
            assert not error and "| user |" in table and "| token:alice:" in table, table
            error, text = await call(client, "check_research", job_id=job)
            assert not error and "not started: its estimated cost" in text, text
            running = [line.split("|")[1].strip() for line in table.splitlines()
                       if "more 1" in line]
            error, text = await call(client, "cancel_research", job_id=running[0])
            assert not error and "was cancelled" in text, text
            error, text = await call(client, "completion", model="sim", prompt="admin here",
                                     conversation_id=conversation)
            assert not error, text
            error, text = await call(client, "usage", period="all")
            assert not error and "over 2 provider calls" in text, text

        async with http_client_for(server.url, alice) as client:
            # One of her jobs finished (cancelled by the admin): she may start another.
            error, text = await call(client, "start_research", model="gdr", query="again",
                                     timeout=0)
            assert not error, text

        async with http_client_for(server.url, carol, "legacy") as client:
            for _ in range(RATE):
                error, text = await call(client, "list_models")
                assert not error, text
            error, text = await call(client, "check_research")
            assert error and text.startswith(
                f"Rate limit reached: at most {RATE} tool calls a minute per user "
                f"(ASK_ANOTHER_RATE_PER_MINUTE); you made {RATE} in the last 60 s. Retry in "), \
                text
        async with http_client_for(server.url, bob) as client:
            error, text = await call(client, "check_research")  # carol's limit is hers
            assert not error, text

    with sqlite3.connect(home / "ask-another.sqlite3") as conn:
        owners = dict(conn.execute("SELECT query, user_id FROM research_jobs").fetchall())
        conversations = conn.execute("SELECT user_id FROM conversations").fetchall()
        feedback = conn.execute("SELECT DISTINCT user_id FROM feedback").fetchall()
        usage = conn.execute("SELECT user_id FROM usage ORDER BY id").fetchall()
    ids = {u.name: u.principal for u in tokens.users()}  # token:NAME:ID
    assert set(owners.values()) == {ids["alice"]}
    assert conversations == [(ids["alice"],)]
    assert feedback == [(ids["bob"],)]
    assert usage == [(ids["alice"],), (ids["root"],)]


async def test_a_removed_users_jobs_and_conversations_go_to_no_later_user_of_her_name(
        sim: Simulator, tmp_path: Path, nursery: Any):
    # After `token remove carol`, an issuer's user whose claim was "carol" read and acted on
    # carol's jobs and conversations (rows carried the name). Rows carry a principal id now, no
    # later user can take it, and another user's id is answered as an id that does not exist.
    issuer, key = "https://issuer.example", rsa.generate_private_key(65537, 2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    pages = await PageServer().start(nursery)
    jwks_url = pages.add("/jwks.json", Page(json.dumps({"keys": [{**public, "kid": "k1"}]})
                                            .encode(), content_type="application/json"))
    home = tmp_path / "home"
    env = {**server_env(sim, home), "ASK_ANOTHER_OAUTH_ISSUER": issuer,
           "ASK_ANOTHER_OAUTH_JWKS_URL": jwks_url}
    carol = TokensFile(home / "tokens.json").add("carol")
    async with http_server(env, tmp_path / "stderr.log") as server:
        claimed_carol = jwt.encode({"iss": issuer, "aud": server.url, "sub": "carol",
                                    "exp": int(time.time()) + 600}, key, algorithm="RS256",
                                   headers={"kid": "k1"})
        async with http_client_for(server.url, carol) as client:
            error, text = await call(client, "start_research", model="gdr",
                                     query="carol's question", timeout=0)
            assert not error, text
            job = text.split("Research job ", 1)[1].split(" ", 1)[0]
            error, text = await call(client, "completion", model="sim", prompt="carol's plan")
            assert not error, text
            conversation = text.rsplit("conversation_id: ", 1)[1].strip()
            error, waiting = await call(client, "check_research", job_id=job)
            assert not error and "confirm-spend" in waiting, waiting

        async def as_someone_else(token: str) -> None:
            async with http_client_for(server.url, token) as client:
                for tool, arguments in (("check_research", {}), ("cancel_research", {}),
                                        ("answer_permission", {"tool_call_id": "confirm-spend",
                                                               "decision": "allow"})):
                    await forbidden(client, tool, f"research job {job}", job_id=job,
                                    **arguments)
                await forbidden(client, "completion", f"conversation {conversation}",
                                model="sim", prompt="and?", conversation_id=conversation)
                error, text = await call(client, "check_research")
                assert not error and text.startswith("No research jobs yet"), text
                error, text = await call(client, "usage", period="all")
                assert not error and text.startswith("No provider calls recorded"), text

        removed = run_cli(env, "token", "remove", "carol")
        assert removed.returncode == 0, removed.stderr
        await as_someone_else(claimed_carol)
        added = run_cli(env, "token", "add", "carol")  # someone else, under her name
        assert added.returncode == 0, added.stderr
        await as_someone_else(added.stdout.strip())
        await as_someone_else(claimed_carol)

    with sqlite3.connect(home / "ask-another.sqlite3") as conn:
        (status,) = conn.execute("SELECT status FROM research_jobs WHERE id = ?",
                                 (job,)).fetchone()
        owners = {r[0] for r in conn.execute("SELECT user_id FROM research_jobs UNION "
                                             "SELECT user_id FROM conversations")}
    assert status in ("pending", "in_progress")  # nothing the others sent reached it
    assert len(owners) == 1 and owners.pop().startswith("token:carol:")
