"""A misbehaving OAuth issuer on loopback (issue 42): a JWKS that is not JSON, empty, 40 MB, or
that drips a byte every 2 s. Each fetch pauses the next ones (a flood of tokens naming made-up
keys, which anyone can send, fetches once), reads at most 1 MiB, ends within its deadline in
all, holds no request past `KEYS_WAIT`, and never holds a cancellation (shutdown)."""

from __future__ import annotations

from typing import Any

import jwt
import pytest
import structlog
import trio
from cryptography.hazmat.primitives.asymmetric import rsa
from loopback_pages import Page, PageServer

from ask_another.config import OAuthSettings
from ask_another.server.auth import JWKS_MAX_BYTES, KEYS_WAIT, JwtVerifier

ISSUER = "https://issuer.example"
AUDIENCE = "https://ask.example/mcp"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def forged(kid: str) -> str:
    return jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": 2_000_000_000},
                      KEY, algorithm="RS256", headers={"kid": kid})


@pytest.mark.parametrize(("body", "reason"), [
    (b"<html>not a key set</html>", "is not a JWKS with usable keys"),
    (b'{"keys": []}', "is not a JWKS with usable keys"),
    (b'{"keys": [{"kty": "RSA", "kid": "k1", "n": "AQAB"}]}', "is not a JWKS with usable keys"),
    (b'{"keys": "' + b"x" * (40 << 20) + b'"}', f"sent more than {JWKS_MAX_BYTES} bytes"),
], ids=["not-json", "empty", "no-usable-key", "40-MB"])
async def test_a_useless_key_set_is_fetched_once_then_paused(body: bytes, reason: str,
                                                             nursery: Any):
    # Before, the pause followed connection errors only: each of these was fetched again for
    # every request naming an unknown kid (a 40 MB one read whole each time: 100-385 MB).
    pages = await PageServer().start(nursery)
    url = pages.add("/jwks.json", Page(body, content_type="application/json"))
    verifier = JwtVerifier(OAuthSettings(ISSUER, jwks_url=url), AUDIENCE)
    with structlog.testing.capture_logs() as logs:
        for n in range(5):
            assert await verifier.verify_token(forged(f"made-up-{n}")) is None
    assert [r.target for r in pages.requests] == ["/jwks.json"]
    unavailable = [entry for entry in logs if entry["event"] == "auth.jwks_unavailable"]
    assert len(unavailable) == 1 and reason in unavailable[0]["reason"], unavailable


async def test_a_dripping_key_set_holds_no_request_past_its_wait_nor_a_shutdown(nursery: Any):
    # Before: PyJWKClient's timeout bounds each read, which a byte every 2 s meets, so every
    # request naming an unknown kid waited on that one fetch (300 unanswered), and its thread
    # could not be cancelled: SIGTERM no longer stopped the node.
    pages = await PageServer().start(nursery)
    url = pages.add("/jwks.json", Page(b'{"keys": []}' + b" " * 1000, drip=2.0,
                                       content_type="application/json"))
    verifier = JwtVerifier(OAuthSettings(ISSUER, jwks_url=url), AUDIENCE)
    with trio.fail_after(60):
        # Cancelled as shutdown cancels it: at once, the fetch's thread abandoned.
        began = trio.current_time()
        with trio.move_on_after(0.5):
            await verifier.verify_token(forged("k1"))
        assert trio.current_time() - began < 5
        # Requests meanwhile wait at most KEYS_WAIT each, and are refused.
        refused: list[float] = []

        async def one(kid: str) -> None:
            began = trio.current_time()
            assert await verifier.verify_token(forged(kid)) is None
            refused.append(trio.current_time() - began)

        async with trio.open_nursery() as requests:
            for n in range(20):
                requests.start_soon(one, f"k{n}")
    assert len(refused) == 20 and max(refused) < KEYS_WAIT + 5, refused
    assert len(pages.requests) == 1  # the cut-short fetch paused the next ones
