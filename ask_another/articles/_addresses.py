"""Which network addresses read_article may connect to, and which hosts the user has allowed.

The rule is "public unicast only": an address is refused when it is loopback, private,
link-local, unspecified, multicast, reserved, otherwise not globally routable, or one of the
well-known cloud metadata endpoints. IPv6 forms that embed an IPv4 address (IPv4-mapped
``::ffff:a.b.c.d``, 6to4 ``2002::/16``, NAT64 ``64:ff9b::/96``) are judged by the IPv4 address
inside, because that is where a dual-stack socket or a translator would really connect.

A host the user named in the allowlist (``host`` or ``host:port``, as in
``ASK_ANOTHER_ALLOW_HOSTS``) skips the address rule; it is matched on the URL's host name, never
on the addresses it resolves to, so allowing ``intranet`` does not allow every name that
happens to resolve to the same private address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: The setting that lists the hosts the user allows (``host`` or ``host:port``, comma-separated).
ALLOW_HOSTS_SETTING: Final = "ASK_ANOTHER_ALLOW_HOSTS"

# Instance metadata services hand out credentials to anything that can reach them: an
# article fetcher is a classic way to reach them (SSRF). Some sit in ranges the generic rules
# already refuse; 168.63.129.16 (Azure) is in public space, so it must be named.
METADATA_ADDRESSES: Final[frozenset[IPAddress]] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task metadata
        "168.63.129.16",  # Azure wire server
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS IMDS over IPv6
    )
)

_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_block_reason(address: str | IPAddress) -> str | None:
    """Why read_article must not connect to ``address``, or None when it is a public address.

    The reason reads as a noun phrase for an error message, e.g. ``"a loopback address"``.
    A string that is not an IP address at all is refused as ``"an unparseable address"``
    (fail closed). An IPv6 zone suffix (``fe80::1%eth0``) is ignored.
    """
    if isinstance(address, str):
        try:
            ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return "an unparseable address"
    else:
        ip = address
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            return address_block_reason(inner)
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private:
        return "a private address"
    if ip.is_reserved:
        return "a reserved address"
    if not ip.is_global:
        # e.g. 100.64.0.0/10, carrier-grade NAT space: not private by the RFC, still internal.
        return "a non-public address"
    return None


def normalize_host(host: str) -> str:
    """The form hosts are compared in: lower case, no IPv6 brackets, no trailing dot."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.rstrip(".")


def _parse_entry(entry: str) -> tuple[str, int | None] | None:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port`` or bare IPv6; None when malformed."""
    entry = entry.strip()
    if not entry:
        return None
    port_text: str | None = None
    if entry.startswith("["):
        host, sep, rest = entry[1:].partition("]")
        if not sep:
            return None
        if rest:
            if not rest.startswith(":"):
                return None
            port_text = rest[1:]
    elif entry.count(":") == 1:
        host, _, port_text = entry.partition(":")
    else:
        host = entry  # a plain name, or a bare IPv6 address (several colons)
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return None
        return normalize_host(host), int(port_text)
    return normalize_host(host), None


def is_host_allowed(host: str, port: int, allow_hosts: Collection[str]) -> bool:
    """True when ``host`` (any port) or ``host:port`` appears in ``allow_hosts``.

    Malformed entries (``host:notaport``) never match anything.
    """
    wanted = normalize_host(host)
    for entry in allow_hosts:
        parsed = _parse_entry(entry)
        if parsed is None:
            continue
        entry_host, entry_port = parsed
        if entry_host == wanted and entry_port in (None, port):
            return True
    return False


def url_is_allowed(url: str, allow_hosts: Collection[str]) -> bool:
    """True when ``url`` is an http(s) URL whose host (and port) ``allow_hosts`` names: a host
    the user allowed for themselves, which a model needs permission to read."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return False
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return False
    if port is None:
        port = 443 if parts.scheme.lower() == "https" else 80
    return is_host_allowed(parts.hostname, port, allow_hosts)
