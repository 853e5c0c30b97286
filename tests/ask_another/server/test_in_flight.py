"""The bounds of requests in flight on a `serve --http` node (server/in_flight.py): how they are
planned from the open-files limit and the settings, and how the middleware counts, in memory
with an ASGI app that holds each request until the test lets it go. The same bound through a
real server, its files and another user's calls is in test_hostile_http.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from ask_another.config import Config
from ask_another.server.in_flight import InFlight, InFlightBounds, reserved_files


@pytest.mark.parametrize(("open_files", "settings", "planned"), [
    # The usual soft limit, had it not been raised: a quarter kept back.
    (1024, {}, InFlightBounds(per_user=512, per_address=768, total=768)),
    (20000, {}, InFlightBounds(per_user=512, per_address=1024, total=15000)),
    # A small limit keeps 128 files back, never more than half.
    (256, {}, InFlightBounds(per_user=128, per_address=128, total=128)),
    (100, {}, InFlightBounds(per_user=50, per_address=50, total=50)),
    # 0: no bound of that kind but the node's.
    (20000, {"ASK_ANOTHER_REQUESTS_PER_USER": "0", "ASK_ANOTHER_REQUESTS_PER_ADDRESS": "0"},
     InFlightBounds(per_user=15000, per_address=15000, total=15000)),
    (20000, {"ASK_ANOTHER_REQUESTS_PER_USER": "24", "ASK_ANOTHER_REQUESTS_PER_ADDRESS": "40"},
     InFlightBounds(per_user=24, per_address=40, total=15000)),
])
def test_the_bounds_sit_below_the_open_files_limit(open_files: int, settings: dict[str, str],
                                                  planned: InFlightBounds):
    config = Config.from_env(settings)
    assert config.problems == ()
    assert InFlightBounds.plan(config, open_files) == planned
    assert planned.total + reserved_files(open_files) == open_files


def test_a_bad_bound_setting_is_a_problem_and_the_default_is_used():
    config = Config.from_env({"ASK_ANOTHER_REQUESTS_PER_USER": "many"})
    assert [problem.variable for problem in config.problems] == ["ASK_ANOTHER_REQUESTS_PER_USER"]
    assert config.requests_per_user == 512


class Held:
    """An ASGI app that answers 200 once the test releases the request's path."""

    def __init__(self) -> None:
        self.release: dict[str, trio.Event] = {}
        self.entered = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.entered += 1
        await self.release.setdefault(scope["path"], trio.Event()).wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def user(name: str) -> AuthenticatedUser:
    return AuthenticatedUser(AccessToken(token=f"t-{name}", client_id=name, subject=name,
                                         scopes=[]))


async def request(app: InFlight, path: str, address: str, who: AuthenticatedUser | None,
                  answers: list[tuple[str, int, dict[bytes, bytes], bytes]]) -> None:
    scope = {"type": "http", "method": "GET", "path": path, "headers": [],
             "client": (address, 40000), **({"user": who} if who else {})}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start, body = sent[0], b"".join(message.get("body", b"") for message in sent[1:])
    answers.append((path, start["status"], dict(start["headers"]), body))


async def test_requests_over_a_bound_are_refused_uncounted_and_health_never():
    held = Held()
    app = InFlight(held, InFlightBounds(per_user=2, per_address=3, total=4),
                   exempt=frozenset({"/health"}))
    answers: list[tuple[str, int, dict[bytes, bytes], bytes]] = []
    async with trio.open_nursery() as nursery:
        mallory, alice = user("mallory"), user("alice")
        for _ in range(3):  # the third is over mallory's 2
            nursery.start_soon(request, app, "/mcp", "10.0.0.9", mallory, answers)
        await trio.testing.wait_all_tasks_blocked()
        # The address holds 2 of its 3: one more from alice there, then it is full.
        nursery.start_soon(request, app, "/mcp", "10.0.0.9", alice, answers)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(request, app, "/mcp", "10.0.0.9", alice, answers)
        await trio.testing.wait_all_tasks_blocked()
        # A fourth from elsewhere fills the node; the fifth is refused for the node.
        nursery.start_soon(request, app, "/mcp", "10.0.0.8", None, answers)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(request, app, "/console/", "10.0.0.7", None, answers)
        # /health on a full node is served, not counted.
        nursery.start_soon(request, app, "/health", "10.0.0.9", mallory, answers)
        await trio.testing.wait_all_tasks_blocked()
        held.release["/health"].set()
        await trio.testing.wait_all_tasks_blocked()
        assert held.entered == 5  # 4 counted, and /health
        refused = [(status, json.loads(body)["error"]["message"], headers)
                   for _, status, headers, body in answers if status != 200]
        assert [status for status, _, _ in refused] == [429, 429, 503]
        assert "this token's user: at most 2 at once (ASK_ANOTHER_REQUESTS_PER_USER)" \
            in refused[0][1]
        assert "this client address: at most 3 at once (ASK_ANOTHER_REQUESTS_PER_ADDRESS)" \
            in refused[1][1]
        assert "this node has 4 requests in flight" in refused[2][1]
        assert all(headers[b"retry-after"] == b"1" and headers[b"connection"] == b"close"
                   for _, _, headers in refused)
        assert ("/health", 200) in [(path, status) for path, status, _, _ in answers]
        # The held ones end: their places are free again (refused ones took none).
        held.release["/mcp"].set()
        await trio.testing.wait_all_tasks_blocked()
        assert app.held == {}
        answers.clear()
        held.release.clear()
        for _ in range(2):
            nursery.start_soon(request, app, "/mcp", "10.0.0.9", mallory, answers)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [] and held.entered == 7
        held.release["/mcp"].set()
    assert [status for _, status, _, _ in answers] == [200, 200]
