"""The litellm-facing code: the one module that touches litellm, used by both transports.

Every function here takes the imported `litellm` module as its first argument and runs on an
asyncio loop (the thread transport's, in this process, or the worker process's, see
_worker.py). Nothing here imports litellm at module level: importing this module is free, and
`load()` is the one place the import happens.

- `load()`: the import, with litellm quiet on stdout and its model map read from the bundled copy.
- `warm_up()`: one completion that never leaves the process, so the first real call is not the
  one paying for litellm's lazy work (the worker runs it after `load()`).
- `lighten()`: in the worker, litellm's per-call bookkeeping that nothing there reads skipped.
- `own_http_handler()`: in the worker, the OpenAI-compatible calls made by litellm's own HTTP
  handler instead of the OpenAI SDK's client, its failures read as the SDK's (`classify_failure`).
- `complete()`: one `litellm.acompletion` as a `CompletionResult`, streamed chunks delivered,
  priced from the model's cached price entry (_prices.py).
- `interact()`: one `litellm.interactions.<acreate|aget|acancel>` as an `InteractionState`.
- `search()`: one `litellm.asearch` as a `SearchResult`, priced per query from the model map.
- `classify_failure()`: a litellm/provider exception as a `ProviderError` class, scrubbed text and
  HTTP status.
- `close_clients()`: close litellm's cached HTTP clients before the loop closes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import functools
import inspect
import json
import math
import os
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from contextvars import ContextVar
from types import ModuleType
from typing import Any, Final

from ask_another.errors import (
    AuthenticationFailed,
    BadRequest,
    MalformedResponse,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    ProviderUnreachable,
    RateLimited,
)
from ask_another.gateway._prices import PriceBook
from ask_another.gateway._results import (
    CompletionResult,
    InteractionState,
    SearchHit,
    SearchResult,
    ToolCall,
    Usage,
)
from ask_another.logs import quiet_litellm_loggers, scrub_provider_text, silence_litellm

Deliver = Callable[[str], None]

# For every interaction created with background=True, litellm starts a poll task of its own on
# the loop: it GETs the interaction every 5 s, doubling up to 60 s, for up to an hour, only to log
# its cost to litellm's callbacks (its proxy's billing; we register none, and read the usage from
# our own polls). That doubles the GETs each job sends the provider (and, on the simulator, each
# GET moves the interaction along its script), keeps litellm's logging object of the create alive
# for the interaction's whole life, and costs CPU. Off, unless litellm's own variable says
# otherwise (litellm reads it at its import, as documented).
COST_POLLING_ENV = "BACKGROUND_INTERACTION_COST_POLLING_ENABLED"


UNAWAITED_PRELUDE: Final = (
    r"coroutine '(InteractionsHTTPHandler\.async_\w+|OpenAIChatCompletion\.(acompletion"
    r"|async_streaming)|BaseLLMHTTPHandler\.(async_completion|acompletion_stream_function)"
    r"|VertexLLM\.async_(completion|streaming))' was never awaited")
"""The coroutines litellm's preludes return, which a cancel between prelude and await leaves
unawaited (pyproject.toml's filterwarnings repeats it for the tests)."""


def load(*, quick: bool = False) -> ModuleType:
    """Import litellm (seconds) and silence it. `quick`: with pydantic's validator building
    deferred to first use (coldstart.py), which halves the import; only in a process whose other
    threads do not define pydantic models meanwhile (the worker)."""
    # Must be set before the import: litellm fetches its cost map from the network otherwise.
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    # And in its default "DEV" mode litellm's import loads a `.env` file found from the working
    # directory upwards into the environment: a client starts us in the user's project, whose
    # .env (other keys, LITELLM_LOG=DEBUG, proxies) is not ours to read. Explicit settings win.
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    # A provider's key variable pasted with a space (OPENAI_API_KEY=" sk-...") would go out as
    # it is, and the provider's 401 would not say why; doctor notes it (config.key_notes).
    from ask_another.config import trim_provider_keys

    trim_provider_keys(os.environ)
    quiet_litellm_loggers()
    if quick:
        from ask_another.coldstart import quick_import

        with quick_import():
            import litellm
    else:
        import litellm
    silence_litellm(litellm)
    # litellm's acompletion and interactions.acreate/aget/acancel run a sync function (in an
    # executor, or inline: InlinePrelude) that returns the request's coroutine, and await it on
    # the next turn of the loop: a cancel (a cancelled job) in between leaves it never awaited.
    # No request was sent, so the RuntimeWarning it prints is noise.
    warnings.filterwarnings("ignore", category=RuntimeWarning, message=UNAWAITED_PRELUDE)
    return litellm


# A priced model (in litellm's bundled map), so the warm-up's price lookup succeeds: an unpriced
# one would have litellm format a traceback for its debug log and read ~40 source files (2 MiB).
WARM_UP_MODEL = "openai/gpt-4o-mini"


def warm_up(litellm: ModuleType) -> None:
    """One chat completion answered by litellm itself (`mock_response`: nothing is sent, no key
    is needed). litellm's first completion imports more of litellm (its proxy's file-id helpers,
    provider configs) and builds the validators of its request and response models: about 80 ms
    of CPU and 11 MiB that the first real call would otherwise wait for (measured: first call
    95-128 ms of CPU without it, 17-20 ms after it). The worker runs it before it says `Ready`;
    the thread transport does not (it serves tests and embedders, whose first call is rarely
    timed, and it would hold their process's GIL for that long once more)."""
    try:
        litellm.completion(model=WARM_UP_MODEL, messages=[{"role": "user", "content": "warm up"}],
                           mock_response="ok", api_key="unused", max_retries=0, num_retries=0)
    except Exception:  # the first real call does that work instead; nothing else depends on it
        return


# litellm's call types of a chat completion, the ones priced by `PriceBook` instead.
_CHAT_CALLS: Final = frozenset({"completion", "acompletion"})


def lighten(litellm: ModuleType) -> bool:
    """Skip litellm's per-call bookkeeping that nothing reads in a process with no litellm
    callbacks (the worker): pricing each chat response again for `_hidden_params` (we price it
    from the model's cached entry, `PriceBook`) and building its success-logging payload for
    callbacks there are none of. With 100-200 calls in flight that was about 30% of the
    worker's CPU per call (cost 17-19%, success logging 6-12%). Each skip checks at call time
    that no callback is registered, so one registered later gets litellm's full behaviour.

    litellm has no setting for either (only `disable_streaming_logging`, set here too), so
    these are two functions of litellm replaced; True when both were found (this litellm's
    names: a test pins them, so an upgrade that renames them fails there, not silently).

    litellm's own HTTP handler for the OpenAI-compatible providers is chosen apart, by
    `own_http_handler()`."""
    litellm.disable_streaming_logging = True  # type: ignore[attr-defined]
    logging_module = sys.modules.get("litellm.litellm_core_utils.litellm_logging")
    utils = sys.modules.get("litellm.utils")
    logging_class = getattr(logging_module, "Logging", None)
    calculator = getattr(logging_class, "response_cost_calculator", None)
    dispatch = getattr(utils, "dispatch_success_logging", None)
    if calculator is None or dispatch is None or getattr(dispatch, "_lightened", False):
        return calculator is not None and dispatch is not None

    def no_callbacks() -> bool:
        return not any(getattr(litellm, name, None) for name in _CALLBACK_LISTS)

    def response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "call_type", None) in _CHAT_CALLS and no_callbacks():
            return None  # read by nobody here: `PriceBook` prices the response
        return calculator(self, *args, **kwargs)

    def dispatch_success_logging(*args: Any, **kwargs: Any) -> None:
        if not no_callbacks():
            dispatch(*args, **kwargs)

    dispatch_success_logging._lightened = True  # type: ignore[attr-defined]
    logging_class.response_cost_calculator = response_cost_calculator  # type: ignore[union-attr]
    utils.dispatch_success_logging = dispatch_success_logging  # type: ignore[union-attr]
    return True


# litellm's switch from the OpenAI SDK's client to its own HTTP handler for the OpenAI-compatible
# providers; litellm reads it from the environment at each call.
OWN_HTTP_HANDLER_ENV: Final = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"


def own_http_handler(litellm: ModuleType) -> bool:
    """In the worker: the OpenAI-compatible providers' calls made by litellm's own HTTP handler
    (`BaseLLMHTTPHandler`: its httpx client on aiohttp, the answer read by litellm's
    transformation) instead of the OpenAI SDK's client, which builds its own request, response
    and model objects around the same exchange: about a quarter of the worker's CPU per call
    less (measured in docs/server.md, *litellm's own HTTP handler*). Unless the variable is
    already set (`false` keeps the SDK's client). Returns whether the handler is on.

    Its failures read as the SDK's do by `classify_failure()` (the provider's message out of
    its JSON error body, "Connection error." for a connection refused or dropped), except one
    thing it does differently: a streamed event that is not JSON is skipped, so a stream of
    nothing readable ended as an empty answer. `_reject_unreadable_events` makes such an event
    fail the stream, as the SDK's client does. Its first call also loads litellm's default
    tokenizer (a third of a second of CPU), loaded here instead, before `Ready`."""
    os.environ.setdefault(OWN_HTTP_HANDLER_ENV, "true")
    on = os.environ[OWN_HTTP_HANDLER_ENV].strip().lower() == "true"  # as litellm's get_secret_bool
    if on:
        _reject_unreadable_events()
        _sdk_client_when_asked(litellm)
        with contextlib.suppress(Exception):  # the first call loads it instead
            getattr(litellm.main, "encoding", None)
    return on


_SDK_CLIENT: ContextVar[bool] = ContextVar("ask_another_sdk_client", default=False)
"""Set around a call that must take the OpenAI SDK's client though the handler is on; litellm
runs `completion()` in a copy of the caller's context, so the call sees it."""


def _sdk_client_when_asked(litellm: ModuleType) -> None:
    """litellm reads the handler's setting per call, through `litellm.main.get_secret_bool`:
    answer False there for a call made under `_SDK_CLIENT`."""
    original = litellm.main.get_secret_bool
    if getattr(original, "ask_another", False):
        return

    def get_secret_bool(key: str, *args: Any, **kwargs: Any) -> Any:
        if key == OWN_HTTP_HANDLER_ENV and _SDK_CLIENT.get():
            return False
        return original(key, *args, **kwargs)

    get_secret_bool.ask_another = True  # type: ignore[attr-defined]
    litellm.main.get_secret_bool = get_secret_bool


def _reject_unreadable_events() -> bool:
    """Make a streamed `data:` event that is not JSON (nor `[DONE]`) raise, where litellm's
    OpenAI streaming iterator took it as an empty chunk; True when its method was found (a test
    pins the name, so an upgrade that renames it fails there)."""
    module = sys.modules.get("litellm.llms.openai.chat.gpt_transformation")
    handler = getattr(module, "OpenAIChatCompletionStreamingHandler", None)
    original = getattr(handler, "_handle_string_chunk", None)
    if original is None or getattr(original, "_strict", False):
        return original is not None

    def _handle_string_chunk(self: Any, str_line: str) -> Any:
        chunk = original(self, str_line)
        # What litellm returns for a line it could not parse: an empty generic chunk (a dict).
        if isinstance(chunk, dict) and not chunk.get("is_finished") and not chunk.get("text"):
            data = str_line.strip()
            if data.startswith("data:"):
                data = data[len("data:"):].strip()
                if data and data != "[DONE]":
                    json.loads(data)  # JSONDecodeError: read as a MalformedResponse
        return chunk

    _handle_string_chunk._strict = True  # type: ignore[attr-defined]
    handler._handle_string_chunk = _handle_string_chunk  # type: ignore[union-attr]
    return True


# Where litellm keeps registered callbacks (litellm/__init__.py): any of them set, and litellm
# keeps its own pricing and success logging for them.
_CALLBACK_LISTS: Final = ("callbacks", "success_callback", "_async_success_callback",
                          "failure_callback", "_async_failure_callback", "input_callback",
                          "service_callback", "audit_log_callbacks")


async def close_clients(litellm: ModuleType) -> None:
    """Close litellm's cached HTTP clients (async and sync): the loop they are bound to is about
    to close, and a later loop in the same process must build fresh ones."""
    from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

    with contextlib.suppress(Exception):
        await close_litellm_async_clients()  # type: ignore[no-untyped-call]
    cache = getattr(litellm, "in_memory_llm_clients_cache", None)
    # litellm's helper closes only async clients; the cache is process-wide, so it may also hold
    # sync clients (litellm's sync API, used by embedders and tests). Dropping them open leaves
    # their sockets to the garbage collector.
    for handler in list(getattr(cache, "cache_dict", {}).values()):
        client = getattr(handler, "_client", None) or getattr(handler, "client", None)
        for target in (handler, client):
            close = getattr(target, "close", None)
            if close is not None and not inspect.iscoroutinefunction(close):
                with contextlib.suppress(Exception):
                    close()
    with contextlib.suppress(Exception):
        cache.flush_cache()  # type: ignore[union-attr]


# ----- the executor hop -------------------------------------------------------------------------

# Providers whose `completion()` prelude does no I/O of its own: the key is a header, there is no
# credential to fetch or refresh (Vertex, Bedrock and Azure AD tokens are fetched there, over
# the network, so those keep the thread).
INLINE_PROVIDERS: Final = frozenset({
    "openai", "anthropic", "gemini", "groq", "mistral", "deepseek", "xai", "openrouter",
    "perplexity", "together_ai", "fireworks_ai", "cohere", "cerebras", "hosted_vllm",
})


class InlinePrelude(concurrent.futures.ThreadPoolExecutor):
    """The default executor of the loop litellm runs on.

    `litellm.acompletion` hands the synchronous `completion()` to the loop's default executor
    only to get back the coroutine it returns (building the request is CPU work, no I/O, for
    the providers in `INLINE_PROVIDERS`), then awaits that coroutine on the loop. With one
    loop and no other thread, that hop is pure overhead: a thread handoff, a GIL handoff back
    and a wake-up of the loop through its self-pipe, per call; under 200 calls in flight it was
    about a fifth of the worker's CPU samples. So those calls run their prelude inline, and the
    returned future is already done. Everything else (other providers, `getaddrinfo`, whatever
    else a library submits) still goes to the threads.
    """

    def __init__(self, completion: Callable[..., Any]) -> None:
        super().__init__(thread_name_prefix="litellm")
        self._completion = completion
        self.inline = 0  # calls run inline (statistics, for the tests)

    def submit(self, fn: Callable[..., Any], /, *args: Any,
               **kwargs: Any) -> concurrent.futures.Future[Any]:
        # acompletion submits partial(context.run, partial(completion, **request)).
        inner = fn.args[0] if isinstance(fn, functools.partial) and fn.args else None
        if (isinstance(inner, functools.partial) and inner.func is self._completion
                and _provider(inner.keywords) in INLINE_PROVIDERS):
            self.inline += 1
            done: concurrent.futures.Future[Any] = concurrent.futures.Future()
            try:
                done.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # raised where acompletion awaits the future
                done.set_exception(exc)
            return done
        return super().submit(fn, *args, **kwargs)


def _provider(request: dict[str, Any]) -> str | None:
    explicit = request.get("custom_llm_provider")
    if isinstance(explicit, str):
        return explicit
    model = request.get("model")
    if isinstance(model, str) and "/" in model:
        return model.split("/", 1)[0]
    return None  # litellm infers it: not guessed here


def inline_prelude(litellm: ModuleType, loop: asyncio.AbstractEventLoop) -> InlinePrelude:
    """Make `loop`'s default executor an `InlinePrelude` for this litellm."""
    executor = InlinePrelude(litellm.main.completion)
    loop.set_default_executor(executor)
    return executor


# ----- connection slots ------------------------------------------------------------------------

class ConnectionSlots:
    """At most as many provider calls in flight to one destination (and in all) as litellm's
    aiohttp pool has connections for (`AIOHTTP_CONNECTOR_LIMIT_PER_HOST`, 500, and
    `AIOHTTP_CONNECTOR_LIMIT`, 1,000); the others wait here, before litellm has done any work
    for them. Past those limits aiohttp queued them itself, and logged "aiohttp connection pool
    saturated" for every request that waited over a second: thousands of lines in a burst of
    research jobs. A destination is the call's `api_base`, else its provider."""

    def __init__(self, per_destination: int, total: int) -> None:
        self.per_destination = per_destination
        self._total = asyncio.Semaphore(total) if total > 0 else None
        self._each: dict[str, asyncio.Semaphore] = {}

    @contextlib.asynccontextmanager
    async def held(self, kwargs: dict[str, Any]) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if self._total is not None:
                await stack.enter_async_context(self._total)
            if self.per_destination > 0:
                key = str(kwargs.get("api_base") or _provider(kwargs) or "")
                slot = self._each.setdefault(key, asyncio.Semaphore(self.per_destination))
                await stack.enter_async_context(slot)
            yield


def connection_slots(litellm: ModuleType) -> ConnectionSlots:
    """Slots sized to this litellm's aiohttp pool (its constants, read from the environment at
    its import)."""
    constants = litellm.constants
    return ConnectionSlots(int(getattr(constants, "AIOHTTP_CONNECTOR_LIMIT_PER_HOST", 0) or 0),
                           int(getattr(constants, "AIOHTTP_CONNECTOR_LIMIT", 0) or 0))


# ----- completions -----------------------------------------------------------------------------

async def complete(litellm: ModuleType, kwargs: dict[str, Any], model: str,
                   deliver: Deliver) -> CompletionResult:
    """One `litellm.acompletion(**kwargs)` as a `CompletionResult`.

    Streamed (`kwargs["stream"]`): each text chunk goes to `deliver` as it arrives.
    """
    if not kwargs.get("stream"):
        response = await litellm.acompletion(**kwargs)
        return _result(litellm, response, model, kwargs)
    # litellm's own HTTP handler drops the top-level `citations` of Perplexity's streamed
    # chunks: a streamed Perplexity answer takes the OpenAI SDK's client (see `_sdk_client`).
    token = _SDK_CLIENT.set(model.startswith("perplexity/"))
    try:
        wrapper = await litellm.acompletion(**kwargs)
    finally:
        _SDK_CLIENT.reset(token)
    chunks = []
    async for chunk in wrapper:
        chunks.append(chunk)
        choices = getattr(chunk, "choices", None) or []
        delta = getattr(choices[0], "delta", None) if choices else None
        text = getattr(delta, "content", None)
        if text:
            deliver(text)
    if not chunks:
        raise MalformedResponse("the stream ended without any chunk", model=model)
    response = litellm.stream_chunk_builder(chunks, messages=kwargs["messages"])
    # Perplexity's chunks carry the answer's sources (`citations`), which the response built
    # from them drops: a streamed answer (every `ask` at a terminal) lost its references.
    cited = next((c.citations for c in reversed(chunks) if getattr(c, "citations", None)), None)
    if cited and not getattr(response, "citations", None):
        response.citations = cited
    return _result(litellm, response, model, kwargs)


_BOOKS: dict[int, PriceBook] = {}


def _price_book(litellm: ModuleType) -> PriceBook:
    """This litellm's prices, read once per model (one litellm per process, in practice)."""
    book = _BOOKS.get(id(litellm))
    if book is None:
        book = _BOOKS[id(litellm)] = PriceBook(litellm)
    return book


def _result(litellm: ModuleType, response: Any, model: str,
            kwargs: dict[str, Any]) -> CompletionResult:
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise MalformedResponse("the answer had no choices", model=model)
    message = getattr(choices[0], "message", None)
    if message is None:
        raise MalformedResponse("the answer had no message", model=model)
    tool_calls = tuple(
        ToolCall(id=str(tc.id or ""), name=str(tc.function.name or ""),
                 arguments=str(tc.function.arguments or ""))
        for tc in (getattr(message, "tool_calls", None) or [])
    )
    usage_obj = getattr(response, "usage", None)
    usage = Usage(
        prompt_tokens=getattr(usage_obj, "prompt_tokens", None),
        completion_tokens=getattr(usage_obj, "completion_tokens", None),
        cost_usd=_price_book(litellm).cost(response, model, kwargs),
    )
    # A refusal comes as the message's `refusal`, its content empty (OpenAI's chat API): it is
    # the model's answer, and the caller read an empty one.
    return CompletionResult(
        text=str(getattr(message, "content", None) or getattr(message, "refusal", None) or ""),
        model=str(getattr(response, "model", None) or model),
        usage=usage,
        tool_calls=tool_calls,
        citations=_citations(response, message),
        finish_reason=getattr(choices[0], "finish_reason", None),
    )


def _citations(response: Any, message: Any) -> tuple[str, ...]:
    found = [item if isinstance(item, str) else str(item.get("url", item))
             for item in getattr(response, "citations", None) or []]
    for note in getattr(message, "annotations", None) or []:
        citation = note.get("url_citation") if isinstance(note, dict) else getattr(
            note, "url_citation", None)
        url = citation.get("url") if isinstance(citation, dict) else getattr(citation, "url", None)
        if url:
            found.append(str(url))
    return tuple(dict.fromkeys(found))


# ----- web search ------------------------------------------------------------------------------

async def search(litellm: ModuleType, kwargs: dict[str, Any]) -> SearchResult:
    """One `litellm.asearch(**kwargs)` (`query`, `search_provider`, ...) as a `SearchResult`."""
    response = await litellm.asearch(**kwargs)
    query, provider = str(kwargs["query"]), str(kwargs["search_provider"])
    hits = tuple(
        SearchHit(title=str(getattr(r, "title", "") or getattr(r, "url", "")),
                  url=str(r.url), snippet=str(getattr(r, "snippet", "") or ""))
        for r in getattr(response, "results", None) or [] if getattr(r, "url", None))
    hidden = getattr(response, "_hidden_params", None)
    cost: float | None = None
    if isinstance(hidden, dict) and isinstance(hidden.get("response_cost"), int | float):
        cost = float(hidden["response_cost"])
    else:
        price = (litellm.model_cost.get(f"{provider}/search") or {}).get("input_cost_per_query")
        cost = float(price) if isinstance(price, int | float) else None
    return SearchResult(query=query, provider=provider, hits=hits, usage=Usage(cost_usd=cost))


# ----- Gemini interactions ---------------------------------------------------------------------

INTERACTION_CALLS = frozenset({"acreate", "aget", "acancel"})


async def interact(litellm: ModuleType, name: str, kwargs: dict[str, Any],
                   model: str = "") -> InteractionState:
    """`litellm.interactions.<name>(**kwargs)` (acreate, aget or acancel) as plain data, its
    reported usage priced as `model` (see `_interaction_cost`)."""
    if name not in INTERACTION_CALLS:
        raise ValueError(f"not an interactions call: {name!r}")
    call = getattr(litellm.interactions, name)
    _without_litellm_cost_polling()
    response = await call(**kwargs)
    return _interaction_state(response, _interaction_cost(litellm, response, model))


def _interaction_cost(litellm: ModuleType, response: Any, model: str) -> float | None:
    """The price of an interaction's reported usage, by litellm (`completion_cost` reads the
    Interactions usage: input and tool-use tokens in, output and thought tokens out), or None
    (no usage yet, or no price for `model` in litellm's map). The provider reports tokens, not
    dollars, and litellm's own pricing of a background interaction is its cost polling, which
    this module turns off (`_without_litellm_cost_polling`): without this, every Gemini job of
    a priced model read "cost unknown"."""
    if not model or not getattr(response, "usage", None):
        return None
    # Only a model the map has an entry for: litellm prices an unknown gemini/ model at $0
    # (get_model_info answers it with zero prices), and unknown is never $0 (costs.py). The
    # same lookup as the estimates' (spend/estimate.py).
    entries = [litellm.model_cost.get(key) for key in (model, model.split("/", 1)[-1])]
    if not any(isinstance(e, dict) and e.get("input_cost_per_token") is not None
               for e in entries):
        return None
    try:
        return float(litellm.completion_cost(completion_response=response, model=model))
    except Exception:  # not in litellm's map: the price is unknown, which is not an error
        return None


def _without_litellm_cost_polling() -> None:
    if os.environ.get(COST_POLLING_ENV) is not None:
        return  # set explicitly: litellm read it at its import
    module = sys.modules.get("litellm.interactions.background_cost_polling")
    if module is not None:
        # Read at call time by litellm's `maybe_schedule_background_interaction_cost_polling`.
        module.BACKGROUND_INTERACTION_COST_POLLING_ENABLED = False  # type: ignore[attr-defined]


def _interaction_state(response: Any, cost_usd: float | None = None) -> InteractionState:
    dump = getattr(response, "model_dump", None)
    data: dict[str, Any] = dump() if callable(dump) else dict(response or {})

    def items(key: str) -> list[dict[str, Any]] | None:
        value = data.get(key)
        return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else None

    def mapping(key: str) -> dict[str, Any] | None:
        value = data.get(key)
        return value if isinstance(value, dict) else None

    status, ident = data.get("status"), data.get("id")
    return InteractionState(
        id=str(ident) if ident else None, status=str(status) if status else None,
        steps=items("steps"), outputs=items("outputs"), usage=mapping("usage"),
        error=mapping("error"), cost_usd=cost_usd)


# ----- failures --------------------------------------------------------------------------------

def classify_failure(litellm: ModuleType | None, exc: BaseException,
                     secrets: Sequence[str] | None = None
                     ) -> tuple[type[ProviderError], str, int | None]:
    """For a litellm/provider exception: its `ProviderError` class (`ProviderError` itself when
    litellm is not loaded), the provider's message scrubbed of `secrets` (default: the
    registered ones), and the HTTP status if there was one."""
    if isinstance(exc, ProviderError):  # raised by our own parsing (MalformedResponse)
        return type(exc), scrub_provider_text(exc.provider_message, secrets), exc.status
    if _no_connection(exc):
        # litellm reports a refused connection as an InternalServerError with status 500; no
        # request reached anyone, so there is no status to show.
        return (ProviderUnreachable,
                scrub_provider_text(_provider_text(exc, ProviderUnreachable), secrets), None)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    kind = ProviderError if litellm is None else _classify(litellm, exc, status)
    message = scrub_provider_text(_provider_text(exc, kind), secrets)
    if kind is RateLimited and (wait := _retry_after(exc)) is not None:
        message += f" (the provider asks to retry in {wait:g} s)"
    return kind, message, status


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the provider's `Retry-After` header asks to wait (seconds or an HTTP date)."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        raw = headers.get("retry-after") if headers is not None else None
    except Exception:  # a headers object of a shape we do not know: no hint, not a failure
        return None
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, round(seconds, 1)) if math.isfinite(seconds) else None


def _classify(litellm: ModuleType, exc: BaseException, status: int | None) -> type[ProviderError]:
    table: list[tuple[tuple[type[BaseException], ...], type[ProviderError]]] = [
        ((litellm.Timeout,), ProviderTimeout),
        ((litellm.RateLimitError,), RateLimited),
        ((litellm.AuthenticationError, litellm.PermissionDeniedError), AuthenticationFailed),
        ((litellm.APIResponseValidationError, json.JSONDecodeError), MalformedResponse),
        ((litellm.BadRequestError, litellm.NotFoundError, litellm.UnprocessableEntityError),
         BadRequest),
        ((litellm.ServiceUnavailableError, litellm.InternalServerError, litellm.BadGatewayError,
          litellm.APIConnectionError), ProviderUnavailable),
    ]
    undecodable = any(isinstance(e, json.JSONDecodeError) for e in _chain(exc))
    if undecodable or "Expecting value" in str(exc):
        # litellm wraps an unparseable body as a generic API error with status 500.
        return MalformedResponse
    for types_, kind in table:
        if isinstance(exc, types_):
            return kind
    by_status = {408: ProviderTimeout, 429: RateLimited, 401: AuthenticationFailed,
                 403: AuthenticationFailed, 400: BadRequest, 404: BadRequest, 422: BadRequest}
    if status in by_status:
        return by_status[status]
    if status is not None and status >= 500:
        return ProviderUnavailable
    if isinstance(exc, (ValueError, KeyError, TypeError, AttributeError)):
        # litellm's parsers raise these on a body that is not the shape it expects.
        return MalformedResponse
    return ProviderError


def _no_connection(exc: BaseException) -> bool:
    """Whether `exc` comes from a connection that was never made (refused, no route, DNS)."""
    import httpx  # already imported wherever litellm is

    return any(isinstance(e, (httpx.ConnectError, ConnectionRefusedError)) for e in _chain(exc))


def _connection_lost(chain: Sequence[BaseException]) -> bool:
    """Whether aiohttp (litellm's transport) lost or never made the connection, not by a
    timeout (a timeout is a `ProviderTimeout`, with litellm's text)."""
    aiohttp = sys.modules.get("aiohttp")
    lost = getattr(aiohttp, "ClientConnectionError", None)
    return lost is not None and any(isinstance(e, lost) and not isinstance(e, TimeoutError)
                                    for e in chain)


def _error_body_message(text: str) -> str | None:
    """The message of an OpenAI-style JSON error body (`{"error": {"message": ...}}`,
    `{"error": "..."}` or `{"message": ...}`), or None when `text` is not one."""
    if not text.startswith("{"):
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    error = body.get("error", body)
    if isinstance(error, str) and error.strip():
        return error.strip()
    message = error.get("message") if isinstance(error, dict) else None
    return message.strip() if isinstance(message, str) and message.strip() else None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _provider_text(exc: BaseException, kind: type[ProviderError] = ProviderError) -> str:
    """The provider's own message, without litellm's stacked class-name prefixes, read the same
    from the OpenAI SDK's client and from litellm's own HTTP handler (`own_http_handler`): the
    handler gives an error's whole JSON body where the SDK gives its message, aiohttp's text
    where the SDK says "Connection error.", and wraps an unreadable body in text of its own."""
    chain = _chain(exc)
    if kind is MalformedResponse:
        undecodable = next((e for e in chain if isinstance(e, json.JSONDecodeError)), None)
        if undecodable is not None:
            return str(undecodable)  # "Expecting value: line 1 column 1 (char 0)"
    if issubclass(kind, ProviderUnavailable) and _connection_lost(chain):
        return "Connection error."  # the OpenAI SDK's words for a refused or dropped connection
    text = str(getattr(exc, "message", None) or exc).strip() or type(exc).__name__
    for _ in range(3):
        head, sep, tail = text.partition(": ")
        prefix = head.startswith("litellm.") or head.endswith(("Error", "Exception", "Timeout"))
        if sep and prefix:
            text = tail.strip()
    # "OpenAIException - <the provider's message>"
    head, sep, tail = text.partition(" - ")
    if sep and head.endswith("Exception") and " " not in head:
        text = tail.strip()
    text = _error_body_message(text) or text
    # Drop litellm's pointer to its own docs and debug hints: noise for the person reading.
    for marker in ("\nReceived Model Group", "LiteLLM Retried:", "\nAvailable Model Group"):
        text = text.split(marker, 1)[0].strip()
    return text  # cut by scrub_provider_text, after the keys are out
