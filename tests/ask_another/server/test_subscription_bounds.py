"""Every subscription table has a per-user bound below the node's cap, and a session's entries
go when the session ends (issue 42, item 5).

Before: 10,000 legacy `research://` subscriptions per node with no per-user bound, never freed
when a session closed (one user's closed session kept every other 2025-11-25 client from
subscribing until a restart); 1,024 `subscriptions/listen` streams per node (the SDK's cap)
against 512 requests in flight per user, so two users filled it. In memory, with the bounds
made small so a test reaches them.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from tool_results import call

from ask_another.config import Config
from ask_another.server import build_server
from ask_another.server.tasks import updates as tasks
from ask_another.simulator import Simulator


async def _finished_jobs(client: Client, n: int) -> list[str]:
    jobs = []
    for i in range(n):
        error, text = await call(client, "start_research", model="pplx", query=f"Tides {i}?",
                                 timeout=60)
        assert not error, text
        jobs.append(json.loads(text)["job_id"])
    return jobs


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed:UserWarning")
async def test_legacy_subscriptions_are_bounded_per_user_and_go_with_their_session(
        make_config: Callable[..., Config], sim: Simulator, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tasks, "MAX_LEGACY_PER_USER", 2)
    config = make_config(MODEL_PPLX=f"perplexity/sonar-deep-research;k;{sim.openai_base}")
    server = build_server(config, prewarm_after=None)
    updates = server.updates  # type: ignore[attr-defined]
    async with Client(server, mode="legacy") as client:
        one, two, three = await _finished_jobs(client, 3)
        await client.subscribe_resource(f"research://{one}")
        await client.subscribe_resource(f"research://{one}")  # again: held once
        await client.subscribe_resource(f"research://{two}")
        with pytest.raises(MCPError, match=r"you hold 2 on this server \(at most 2\)"):
            await client.subscribe_resource(f"research://{three}")
        assert updates.statistics()["legacy_subscriptions"] == 2
        await client.unsubscribe_resource(f"research://{two}")
        await client.subscribe_resource(f"research://{three}")  # room again
    # The session ended: its subscriptions with it (they were kept until a restart).
    assert updates.statistics()["legacy_subscriptions"] == 0
    async with Client(server, mode="legacy") as again:
        await again.subscribe_resource(f"research://{one}")
        await again.subscribe_resource(f"research://{two}")
        assert updates.statistics()["legacy_subscriptions"] == 2


async def test_listen_streams_are_bounded_per_user(make_config: Callable[..., Config],
                                                   sim: Simulator,
                                                   monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tasks, "MAX_LISTENS_PER_USER", 2)
    config = make_config(MODEL_PPLX=f"perplexity/sonar-deep-research;k;{sim.openai_base}")
    server = build_server(config, prewarm_after=None)
    updates = server.updates  # type: ignore[attr-defined]
    assert tasks.MAX_LISTENS_PER_USER < 1024 and tasks.MAX_LEGACY_PER_USER < \
        tasks.MAX_LEGACY_SUBSCRIPTIONS
    async with Client(server) as client:
        [job] = await _finished_jobs(client, 1)
        uri = [f"research://{job}"]
        async with client.listen(resource_subscriptions=uri), \
                client.listen(resource_subscriptions=uri):
            assert updates.statistics()["listeners"] == 2
            with pytest.raises(MCPError, match=r"2 are open for you on this server"):
                async with client.listen(resource_subscriptions=uri):
                    pass
        with trio.fail_after(10):  # the server ends a stream once it hears the client left
            while updates.statistics()["listeners"]:  # noqa: ASYNC110 - the SDK's task
                await trio.sleep(0.01)
        async with client.listen(resource_subscriptions=uri):  # room again
            assert updates.statistics()["listeners"] == 1
