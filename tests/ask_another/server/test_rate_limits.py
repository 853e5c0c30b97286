"""The per-user tool-call rate (ASK_ANOTHER_RATE_PER_MINUTE), enforced for every tool in the
server's one `call_tool`, on trio's MockClock.

The user comes from the request's verified access token (server/context.py `user_of`). Here
the token is put into the SDK's request context variable in-process, as its auth middleware
does for an HTTP request, so the window can be moved on a MockClock; the same limit through a
real HTTP server with real tokens is in test_users_http.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from mcp import Client
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from tool_results import call
from trio.testing import MockClock

from ask_another.config import Config
from ask_another.server import build_server
from ask_another.server.context import user_of
from ask_another.users import LOCAL_USER, User


@pytest.fixture
def as_alice() -> Iterator[None]:
    token = auth_context_var.set(AuthenticatedUser(AccessToken(
        token="t-alice", client_id="alice-laptop", subject="alice", scopes=[])))
    try:
        yield
    finally:
        auth_context_var.reset(token)


def test_the_user_is_the_tokens_subject_or_client_and_admin_by_scope() -> None:
    assert user_of() == LOCAL_USER
    for token, user in [
        (AccessToken(token="t", client_id="c", subject="alice", scopes=[]), User("alice", False)),
        (AccessToken(token="t", client_id="c", scopes=["ask-another:admin"]), User("c", True)),
    ]:
        reset = auth_context_var.set(AuthenticatedUser(token))
        try:
            assert user_of() == user
        finally:
            auth_context_var.reset(reset)


async def test_calls_over_the_rate_are_refused_with_when_to_retry_until_the_minute_moves_on(
    make_config: Callable[..., Config], mock_clock: MockClock, as_alice: None
):
    config = make_config(ASK_ANOTHER_RATE_PER_MINUTE="3")
    async with Client(build_server(config), mode="legacy") as client:
        for n in range(3):
            error, text = await call(client, "feedback", issue=f"note {n}")
            assert not error, text
        mock_clock.jump(20)
        # Every tool counts, whatever it is: one place checks them all.
        for tool, arguments in [("check_research", {}), ("list_models", {}),
                                ("feedback", {"issue": "x"})]:
            error, text = await call(client, tool, **arguments)
            assert error
            assert text.startswith(
                "Rate limit reached: at most 3 tool calls a minute per user "
                "(ASK_ANOTHER_RATE_PER_MINUTE); you made 3 in the last 60 s. Retry in 40 s."), \
                text
        mock_clock.jump(40)
        error, text = await call(client, "check_research")
        assert not error, text
        assert text.startswith("No research jobs yet")


async def test_the_local_user_is_never_rate_limited(
    make_config: Callable[..., Config], mock_clock: MockClock
):
    config = make_config(ASK_ANOTHER_RATE_PER_MINUTE="2")
    async with Client(build_server(config), mode="legacy") as client:
        for n in range(5):
            error, text = await call(client, "feedback", issue=f"note {n}")
            assert not error, text
