"""Safe fetching of one web page: scheme and address checks, pinned connections, size limits.

How a fetch stays on addresses it has checked (no DNS-rebinding window):

1. Before each hop (the first request and every redirect) the host is resolved once with trio's
   ``getaddrinfo`` and every address it returns is judged by ``address_block_reason``; one bad
   address refuses the hop, unless the user allowed the host (``is_host_allowed``).
2. The checked addresses are *pinned* for that ``(host, port)`` in a custom httpcore network
   backend. httpx keeps the URL as written, so the ``Host`` header, TLS SNI and certificate
   verification all use the real host name; only the TCP connect is redirected, to a pinned IP.
   A connect for a ``(host, port)`` that was never checked is refused, so no code path can
   reach an address the checks did not see, and a second, different DNS answer is never asked
   for. For https this is exactly what a browser does after its own lookup: TCP to the IP, TLS
   with the name, so certificates keep working and are verified against the name.
3. Redirects are followed by hand (``follow_redirects=False``), at most ``max_redirects`` times,
   and each new URL goes through steps 1-2 before any byte is sent to it.

Proxies from the environment are ignored (``trust_env=False``): a proxy would make the
connection to an address nobody checked. Bodies are streamed and refused as soon as they pass
``max_bytes``; a ``Content-Length`` that is already too large is refused before reading. Every
failure is a ``FetchError`` whose ``reason`` a person can act on.

Compressed bodies are decoded here, not by httpx: httpx decodes every ``Content-Encoding`` layer
of a chunk in one call, so ``gzip, gzip`` turns 2 kB on the wire into a gigabyte before any size
check sees it. ``_BodyDecoder`` runs the layers (``gzip``, ``deflate``, at most
``MAX_ENCODING_LAYERS`` of them) as a pipeline in which no layer hands on more than
``_STEP`` bytes at a time, counts the decoded bytes as they come out and stops at ``max_bytes``:
memory stays within the limit plus a few zlib windows, whatever the ratio. Decoding runs in a
worker thread, one wire chunk at a time, so the trio loop keeps answering other calls. ``br`` and
``zstd`` are not asked for and are refused if a server sends them anyway.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
import zlib
from collections.abc import AsyncGenerator, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, cast

import httpcore
import httpx
import trio

from ask_another.errors import AskAnotherError

from ._addresses import (
    ALLOW_HOSTS_SETTING,
    address_block_reason,
    is_host_allowed,
    normalize_host,
)

#: Content types read_article can turn into text; "" is a response that declared none.
TEXT_MEDIA_TYPES: Final = frozenset({"text/html", "application/xhtml+xml", "text/plain"})

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
_HEADERS: Final = {
    "User-Agent": "ask-another/0.1 (read_article)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1",
    # No brotli/zstd: their compression ratios make bigger bombs, and gzip is universal.
    "Accept-Encoding": "gzip, deflate",
}


#: Content-Encoding layers decoded at most (``gzip, gzip`` is two); more is refused.
MAX_ENCODING_LAYERS: Final = 3
# Bytes one decoding layer hands on at a time: the pipeline's memory per layer.
_STEP: Final = 64 * 1024
_WBITS: Final = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16,
                 "deflate": zlib.MAX_WBITS}


class FetchError(AskAnotherError):
    """A page could not be fetched; ``reason`` says why in words a person can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """A fetched text page: the URL it finally came from, its media type, charset and bytes."""

    url: str
    media_type: str
    charset: str | None
    body: bytes


def human_size(n: int) -> str:
    """``5000000`` -> ``"5 MB"``, ``260222`` -> ``"260 kB"`` (three significant digits)."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.3g} MB"
    if n >= 1_000:
        return f"{n / 1_000:.3g} kB"
    return f"{n} bytes"


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to addresses pinned for a ``(host, port)`` after they were checked."""

    def __init__(self) -> None:
        self._inner = httpcore.TrioBackend()
        self._pins: dict[tuple[str, int], tuple[str, ...]] = {}

    def pin(self, host: str, port: int, addresses: Iterable[str]) -> None:
        self._pins[(normalize_host(host), port)] = tuple(addresses)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = self._pins.get((normalize_host(host), port))
        if not addresses:
            # Unreachable through fetch_page; kept so a future code path fails closed.
            raise httpcore.ConnectError(f"refusing to connect to unchecked host {host}:{port}")
        last_error: Exception | None = None
        for address in addresses:  # in resolver order, like a normal client
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("read_article does not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs milliseconds; one verified context serves every fetch.
    return httpx.create_ssl_context(trust_env=False)


class _PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport, with its connection pool rebuilt on the pinned backend.

    httpx 0.28 has no public parameter for httpcore's ``network_backend``, so the pool is
    replaced after construction. If httpx ever renames that attribute, construction fails
    instead of silently connecting without pins.
    """

    def __init__(self, backend: _PinnedBackend, context: ssl.SSLContext) -> None:
        super().__init__(verify=context, trust_env=False, retries=0)
        if not isinstance(getattr(self, "_pool", None), httpcore.AsyncConnectionPool):
            raise RuntimeError("httpx transport internals changed; refusing unpinned fetches")
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=4,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )


def open_pinned_client(
    backend: _PinnedBackend, timeout: float, ssl_context: ssl.SSLContext | None = None
) -> httpx.AsyncClient:
    """An httpx client that connects only through ``backend``'s pins and never follows redirects.

    ``ssl_context`` defaults to a verifying context with the certifi CA bundle; tests pass one
    that trusts their own CA.
    """
    return httpx.AsyncClient(
        transport=_PinnedTransport(backend, ssl_context or _ssl_context()),
        follow_redirects=False,
        trust_env=False,
        timeout=httpx.Timeout(timeout),
        headers=_HEADERS,
    )


def check_url(url: httpx.URL, *, raw: str) -> None:
    """Refuse anything but an absolute http(s) URL with a host."""
    if url.scheme not in _DEFAULT_PORTS:
        if not url.scheme:
            hint = f"; did you mean https://{raw}?" if "://" not in raw else ""
            raise FetchError(f"the URL has no scheme; only http and https URLs can be read{hint}")
        raise FetchError(
            f"{url.scheme}: URLs are not supported; only http and https URLs can be read"
        )
    if not url.host:
        raise FetchError("the URL has no host")


def _allow_hint(url: httpx.URL, port: int) -> str:
    host = url.host if ":" not in url.host else f"[{url.host}]"
    entry = host if port == _DEFAULT_PORTS[url.scheme] else f"{host}:{port}"
    return f"to allow it, add {entry} to {ALLOW_HOSTS_SETTING}"


async def check_and_pin(
    url: httpx.URL, allow_hosts: Collection[str], backend: _PinnedBackend
) -> None:
    """Resolve ``url``'s host, refuse it if any address is internal, else pin the addresses."""
    host = url.raw_host.decode("ascii")
    port = url.port or _DEFAULT_PORTS[url.scheme]
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    except OSError as exc:  # socket.gaierror: no such name, no network, ...
        raise FetchError(f"the host name {url.host} could not be resolved ({exc})") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise FetchError(f"the host name {url.host} could not be resolved")
    allowed = is_host_allowed(url.host, port, allow_hosts) or is_host_allowed(
        host, port, allow_hosts
    )
    if not allowed:
        for address in addresses:
            reason = address_block_reason(address)
            if reason is None:
                continue
            if normalize_host(url.host) == normalize_host(address):
                what = f"{url.host} is {reason}"
            else:
                what = f"{url.host} resolves to {reason} ({address})"
            raise FetchError(f"{what}; {_allow_hint(url, port)}")
    backend.pin(host, port, addresses)


def _parse_content_type(value: str | None) -> tuple[str, str | None]:
    if not value:
        return "", None
    media_type, *params = value.split(";")
    charset = None
    for param in params:
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip("'\"") or None
    return media_type.strip().lower(), charset


class _Layer:
    """One ``gzip`` or ``deflate`` layer; ``decode`` yields its output ``_STEP`` bytes at most at
    a time (zlib's ``max_length``), so a bomb never expands in one piece."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.wbits = _WBITS[coding]
        self.inflater = zlib.decompressobj(self.wbits)
        self.started = False

    def decode(self, data: bytes) -> Iterator[bytes]:
        while data:
            try:
                out = self.inflater.decompress(data, _STEP)
            except zlib.error as exc:
                if self.coding == "deflate" and not self.started:
                    # Servers send raw deflate under this name too (httpx accepts both).
                    self.wbits, self.inflater = -zlib.MAX_WBITS, zlib.decompressobj(-zlib.MAX_WBITS)
                    self.started = True
                    continue
                raise FetchError(f"its {self.coding} compression is corrupt ({exc})") from exc
            self.started = True
            data = self.inflater.unconsumed_tail
            if self.inflater.eof and self.inflater.unused_data:
                # Another member follows (concatenated gzip streams are one body).
                data = self.inflater.unused_data
                self.inflater = zlib.decompressobj(self.wbits)
            if out:
                yield out


class _BodyDecoder:
    """Decodes a body's ``Content-Encoding`` layers as it streams; refuses more than
    ``max_bytes`` of decoded bytes. ``feed`` is blocking (CPU): run it in a worker thread."""

    def __init__(self, codings: list[str], max_bytes: int) -> None:
        # The header lists the codings in the order they were applied: undo them last first.
        self.layers = [_Layer(c) for c in reversed(codings)]
        self.max_bytes = max_bytes
        self.total = 0

    def feed(self, raw: bytes) -> bytes:
        out: list[bytes] = []
        for piece in self._through(0, raw):
            self.total += len(piece)
            if self.total > self.max_bytes:
                raise FetchError(f"the page is larger than the {human_size(self.max_bytes)} "
                                 "limit (after decompression)")
            out.append(piece)
        return b"".join(out)

    def _through(self, index: int, data: bytes) -> Iterator[bytes]:
        if index == len(self.layers):
            yield data
            return
        for piece in self.layers[index].decode(data):
            yield from self._through(index + 1, piece)


def _codings(response: httpx.Response) -> list[str]:
    """The response's content codings, in the order they were applied (identity left out)."""
    codings = [c.strip().lower()
               for value in response.headers.get_list("content-encoding")
               for c in value.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    unknown = sorted({c for c in codings if c not in _WBITS})
    if unknown:
        raise FetchError(f"its content encoding {', '.join(unknown)} is not supported "
                         "(only gzip and deflate are read)")
    if len(codings) > MAX_ENCODING_LAYERS:
        raise FetchError(f"it is compressed {len(codings)} times over; at most "
                         f"{MAX_ENCODING_LAYERS} layers of compression are read")
    return codings


async def _read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise FetchError(
            f"the page is {human_size(int(declared))}, over the {human_size(max_bytes)} limit"
        )
    codings = _codings(response)
    decoder = _BodyDecoder(codings, max_bytes) if codings else None
    chunks: list[bytes] = []
    total = 0
    # The raw bytes, undecoded (see the module docstring). httpx types aiter_raw as an iterator,
    # but it is an async generator: close it promptly.
    stream = cast(AsyncGenerator[bytes, None], response.aiter_raw())
    async with contextlib.aclosing(stream) as body:
        async for raw in body:
            if decoder is None:
                chunk = raw
            else:
                chunk = await trio.to_thread.run_sync(decoder.feed, raw)
            total += len(chunk)
            if total > max_bytes:
                raise FetchError(f"the page is larger than the {human_size(max_bytes)} limit")
            chunks.append(chunk)
    return b"".join(chunks)


async def fetch_page(
    raw_url: str,
    *,
    allow_hosts: Collection[str],
    max_bytes: int,
    operation_timeout: float,
    max_redirects: int,
) -> FetchedPage:
    """GET ``raw_url`` safely, following up to ``max_redirects`` redirects, each one checked.

    Raises ``FetchError`` for every anticipated failure. ``operation_timeout`` bounds each
    network operation (connect, each read); the caller bounds the whole fetch.
    Cancellation closes the connection.
    """
    try:
        url = httpx.URL(raw_url)
    except httpx.InvalidURL as exc:
        raise FetchError(f"the URL is not valid ({exc})") from exc
    check_url(url, raw=raw_url)
    backend = _PinnedBackend()
    try:
        async with open_pinned_client(backend, operation_timeout) as client:
            for hop in range(max_redirects + 1):
                try:
                    await check_and_pin(url, allow_hosts, backend)
                except FetchError as exc:
                    if hop == 0:
                        raise
                    raise FetchError(f"it redirects to {url}, but {exc.reason}") from exc
                async with client.stream("GET", url) as response:
                    if response.status_code in _REDIRECT_STATUSES:
                        url = _redirect_target(url, response)
                        continue
                    if not response.is_success:
                        raise FetchError(
                            f"the server answered {response.status_code} "
                            f"{response.reason_phrase}".rstrip()
                        )
                    media_type, charset = _parse_content_type(response.headers.get("content-type"))
                    if media_type and media_type not in TEXT_MEDIA_TYPES:
                        raise FetchError(
                            f"its content type is {media_type}; only web pages and plain text "
                            "(text/html, application/xhtml+xml, text/plain) can be read"
                        )
                    body = await _read_capped(response, max_bytes)
                    if not media_type and b"\x00" in body[:1024]:
                        raise FetchError("the page declares no content type and looks binary")
                    return FetchedPage(str(url), media_type, charset, body)
    except httpx.TimeoutException as exc:
        raise FetchError(f"the server did not answer within {operation_timeout:g} s") from exc
    except httpx.ConnectError as exc:
        raise FetchError(connect_failure_reason(exc, url.host)) from exc
    except httpx.HTTPError as exc:
        raise FetchError(f"the connection failed ({type(exc).__name__}: {exc})") from exc
    raise FetchError(f"it redirected more than {max_redirects} times")


def connect_failure_reason(exc: BaseException, host: str) -> str:
    """Words for a failed connect; httpx wraps TLS failures in exceptions with empty messages."""
    detail = ""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"the TLS certificate of {host} could not be verified "
                f"({cause.verify_message or cause.reason})"
            )
        if isinstance(cause, ssl.SSLError):
            return f"the TLS handshake with {host} failed ({cause.reason or cause})"
        detail = detail or str(cause)
        cause = cause.__cause__ or cause.__context__
    return f"could not connect to {host} ({detail or type(exc).__name__})"


def _redirect_target(url: httpx.URL, response: httpx.Response) -> httpx.URL:
    location = response.headers.get("location")
    if not location:
        raise FetchError(f"the server answered {response.status_code} without a Location")
    try:
        target = url.join(location)
    except httpx.InvalidURL as exc:
        raise FetchError(f"it redirects to an invalid URL ({exc})") from exc
    try:
        check_url(target, raw=str(target))
    except FetchError as exc:
        raise FetchError(f"it redirects to {target}, but {exc.reason}") from exc
    return target
