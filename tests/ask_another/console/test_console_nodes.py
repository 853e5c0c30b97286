"""Console sessions on a team service of two `serve --http` nodes on one PostgreSQL store,
sharing one home (its console key) and one tokens file: a session ends on every node at once
when its token is removed or when it logs out, and a logout outlives a restart."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from http_server import HttpServer, http_server

from ask_another.server.auth import TokensFile

pytestmark = pytest.mark.slow  # PostgreSQL and two server processes


def node_env(tmp_path: Path, database_url: str) -> dict[str, str]:
    return {"ASK_ANOTHER_HOME": str(tmp_path / "home"),  # one console key for both nodes
            "ASK_ANOTHER_DATABASE_URL": database_url,
            "ASK_ANOTHER_TOKENS_FILE": str(tmp_path / "tokens.json")}


@asynccontextmanager
async def node(tmp_path: Path, database_url: str, name: str) -> AsyncIterator[HttpServer]:
    async with http_server(node_env(tmp_path, database_url), tmp_path / f"{name}.log") as server:
        yield server


async def log_in(base: str, token: str) -> tuple[dict[str, str], str]:
    """A console session on the node at `base`: its cookie and its page's CSRF token."""
    async with httpx.AsyncClient(base_url=base) as client:
        login = await client.post("/console/login", data={"token": token},
                                  headers={"Origin": base})
        assert login.status_code == 303, login.text
        cookies = dict(login.cookies)
    async with httpx.AsyncClient(base_url=base, cookies=cookies) as client:
        page = await client.get("/console/jobs")
        assert page.status_code == 200, page.text
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found, page.text
        return cookies, found.group(1)


async def status(base: str, cookies: dict[str, str]) -> int:
    async with httpx.AsyncClient(base_url=base, cookies=cookies) as client:
        return (await client.get("/console/jobs")).status_code


async def test_token_remove_and_a_logout_end_a_session_on_every_node_and_across_a_restart(
    tmp_path: Path, postgres_url: str
):
    tokens = TokensFile(tmp_path / "tokens.json")
    tokens.add("root", admin=True)  # someone can sign in when the nodes start
    async with node(tmp_path, postgres_url, "node1") as one, \
            node(tmp_path, postgres_url, "node2") as two:
        # Regression: a login just after `token add` (the console's copy of the tokens file
        # older than the verifier's) was recorded as an OAuth-style session that nothing
        # re-checked, and outlived `token remove` by 12 hours.
        alice = tokens.add("alice")
        cookies, _ = await log_in(one.base, alice)
        assert await status(one.base, cookies) == 200
        assert await status(two.base, cookies) == 200  # the same session on the other node
        tokens.remove("alice")
        assert await status(one.base, cookies) == 303
        assert await status(two.base, cookies) == 303

        # Regression: a logout was kept in the memory of the node that took it.
        bob = tokens.add("bob")
        cookies, csrf = await log_in(one.base, bob)
        async with httpx.AsyncClient(base_url=one.base, cookies=cookies) as client:
            out = await client.post("/console/logout", data={"csrf": csrf},
                                    headers={"Origin": one.base})
            assert out.status_code == 303
        assert await status(two.base, cookies) == 303  # the cookie, sent again elsewhere
        assert await status(one.base, cookies) == 303
        still, _ = await log_in(two.base, bob)  # bob's other sessions are not ended
        assert await status(one.base, still) == 200
    async with node(tmp_path, postgres_url, "node1-again") as again:
        assert await status(again.base, cookies) == 303  # the logout outlived the restart
        assert await status(again.base, still) == 200
