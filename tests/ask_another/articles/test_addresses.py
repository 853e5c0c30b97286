"""The address rule and the allowlist matcher, checked address by address."""

from __future__ import annotations

import pytest

from ask_another.articles._addresses import address_block_reason, is_host_allowed


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.45.6.7", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),  # IPv4-mapped IPv6
        ("10.0.0.1", "a private address"),
        ("172.16.5.4", "a private address"),
        ("192.168.1.1", "a private address"),
        ("::ffff:10.1.2.3", "a private address"),
        ("2002:c0a8:0101::1", "a private address"),  # 6to4 wrapping 192.168.1.1
        ("64:ff9b::a00:1", "a private address"),  # NAT64 wrapping 10.0.0.1
        ("fc00::1", "a private address"),
        ("fd12:3456::1", "a private address"),
        ("169.254.169.254", "a cloud metadata address"),
        ("::ffff:169.254.169.254", "a cloud metadata address"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("169.254.170.2", "a cloud metadata address"),
        ("168.63.129.16", "a cloud metadata address"),
        ("100.100.100.200", "a cloud metadata address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fe80::1%eth0", "a link-local address"),
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("224.0.0.1", "a multicast address"),
        ("239.255.255.250", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("240.0.0.1", "a private address"),  # Python files 240/4 under is_private
        ("100.64.0.1", "a non-public address"),  # carrier-grade NAT
        ("not-an-ip", "an unparseable address"),
    ],
)
def test_internal_addresses_are_refused(address: str, reason: str) -> None:
    assert address_block_reason(address) == reason


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "1.1.1.1", "8.8.8.8", "2606:4700:4700::1111", "::ffff:1.1.1.1"]
)
def test_public_addresses_pass(address: str) -> None:
    assert address_block_reason(address) is None


@pytest.mark.parametrize(
    ("host", "port", "entries", "allowed"),
    [
        ("intranet", 8080, ["intranet"], True),
        ("intranet", 8080, ["intranet:8080"], True),
        ("intranet", 8081, ["intranet:8080"], False),
        ("INTRANET.", 80, [" intranet "], True),
        ("wiki.corp", 80, ["intranet", "wiki.corp:80"], True),
        ("::1", 8000, ["[::1]:8000"], True),
        ("::1", 8000, ["::1"], True),
        ("::1", 8000, ["[::1]:9000"], False),
        ("intranet", 80, ["intranet:http"], False),  # malformed entries match nothing
        ("intranet", 80, ["intranet:0"], False),
        ("intranet", 80, [""], False),
        ("evil.example", 80, ["intranet"], False),
        ("intranet", 80, [], False),
    ],
)
def test_allowlist_matches_host_or_host_and_port(
    host: str, port: int, entries: list[str], allowed: bool
) -> None:
    assert is_host_allowed(host, port, entries) is allowed
