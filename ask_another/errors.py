"""Every error ask-another raises on purpose, under one base class; the one error-to-text mapping.

    AskAnotherError
    ├── ConfigError                  a setting or MODEL_* variable is unusable
    ├── ModelError                   the model named in a request cannot be used
    │   ├── ModelNotAllowed          not in the allowlist (similar allowed models suggested)
    │   └── AmbiguousModel           a shorthand that matches several allowed models
    ├── InvalidArgument              a tool argument out of range (temperature, timeout, ...)
    ├── LimitReached                 a per-user rate limit (tool calls a minute, running jobs)
    ├── WrongEventLoop               the trio face used from asyncio, or asyncio's from trio
    ├── ProviderError                the provider (through litellm) failed; keeps its own message
    │   ├── ProviderTimeout          no answer within the timeout
    │   ├── RateLimited              HTTP 429 or a quota message
    │   ├── AuthenticationFailed     HTTP 401/403: a wrong or missing API key
    │   ├── BadRequest               HTTP 400/404/422: the provider refused the request
    │   ├── ProviderUnavailable      HTTP 5xx, a dropped connection
    │   │   └── ProviderUnreachable  no connection at all (refused, no route): names the URL tried
    │   └── MalformedResponse        an answer that could not be parsed
    └── StoreError                   the store (SQLite or PostgreSQL) failed
        ├── StoreUnavailable         the database cannot be reached now (down, restarting)
        └── StoreFull                the disk holding the database is full

Other modules add their own subclasses next to the failure they own (the article reader, research
jobs); they all end up here through `AskAnotherError`.

`error_text(exc)` is the one place an error becomes text for a person: tool errors, the CLI and the
logs all use it. Only what may be a bug of ours (an unexpected exception, an answer we could not
read, a provider failure we could not classify, a store that failed) ends with `FEEDBACK_POINTER`:
asking for a bug report after "the prompt is empty" or "rate limited" sends people nowhere.

An error may carry a structured next step, its `hint` (`ModelNotAllowed`: "list_models"), rather
than naming a tool or a command in its text: each face words the hint for its audience
(`error_text(exc, words)`; the MCP server: the tool to call, `server/wording.py`; the CLI: the
command to run; `str(exc)` and `error_text(exc)`: `PLAIN`, words for a program embedding the
library). No module below the faces names an MCP tool in a message
(tests/ask_another/test_layers.py checks it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

FEEDBACK_POINTER = "If this seems like a bug, call the feedback tool to report it."

Hint = Literal["list_models", "list_jobs", "free_a_job", "check_job", "answer_choice",
               "answer_permission", "run_research"]
"""The next step an error points to, named for no face."""

PLAIN: Final[Mapping[Hint, str]] = {
    "list_models": "The allowed models are the ones the MODEL_* variables name.",
    "list_jobs": "`ResearchJobs.list` gives every job you may see.",
    "free_a_job": "Retry when one finishes, or cancel one.",
    "check_job": "`ResearchJobs.get` gives the job's state.",
    "answer_choice": "Answer it with `ResearchJobs.answer_choice`.",
    "answer_permission": "Answer it with `ResearchJobs.answer_permission`.",
    "run_research": "Use it for research instead (a research job of method auto or "
                    "provider).",
}


class AskAnotherError(Exception):
    """Base class: catch this to catch every anticipated ask-another failure."""

    # Whether the message asks for a bug report: a mistake in the request, the configuration
    # or at the provider is not ours, and the message already says how to fix it.
    may_be_a_bug = False
    hint: Hint | None = None

    def __init__(self, *args: object, hint: Hint | None = None) -> None:
        super().__init__(*args)
        if hint is not None:
            self.hint = hint

    @property
    def fact(self) -> str:
        """The message without its next step."""
        return super().__str__().strip()

    def said(self, words: Mapping[Hint, str] = PLAIN) -> str:
        """The message, with its next step (if any) worded by `words`."""
        if self.hint is None:
            return self.fact
        return f"{_sentence(self.fact)} {words[self.hint]}"

    def __str__(self) -> str:
        return self.said()


class ConfigError(AskAnotherError):
    """A setting or `MODEL_*` variable is unusable."""


class ModelError(AskAnotherError):
    """The model named in a request cannot be used."""


class ModelNotAllowed(ModelError):
    """The model is not in the allowlist built from the `MODEL_*` variables."""

    def __init__(self, model: str, suggestions: list[str] | None = None) -> None:
        self.model = model
        self.suggestions = list(suggestions or [])
        message = f"Model not allowed: {model!r}."
        if self.suggestions:
            message += f" Similar allowed models: {', '.join(self.suggestions)}."
        super().__init__(message, hint=None if self.suggestions else "list_models")


class AmbiguousModel(ModelError):
    """A shorthand that matches more than one allowed model."""

    def __init__(self, model: str, candidates: list[str]) -> None:
        self.model = model
        self.candidates = list(candidates)
        super().__init__(
            f"Model {model!r} is ambiguous: it matches {', '.join(self.candidates)}. "
            "Use one of these exact ids or shorthands."
        )


class InvalidArgument(AskAnotherError):
    """A tool or API argument is out of range or of the wrong shape."""


class LimitReached(AskAnotherError):
    """A per-user limit (HTTP would say 429): the message names the limit, the setting, the
    current count and when to retry; `retry_after` is in seconds (None: when something of the
    user's finishes)."""

    def __init__(self, message: str, retry_after: float | None = None, *,
                 hint: Hint | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message, hint=hint)


class WrongEventLoop(AskAnotherError):
    """A face used under the other event loop: `ask_another.open_runtime` (trio) from asyncio
    code, or `ask_another.aio` from trio code. The message names the face to use."""


class ProviderError(AskAnotherError):
    """The provider failed. `message` keeps the provider's own text, scrubbed of API keys."""

    kind = "Provider error"
    may_be_a_bug = True  # a failure none of the subclasses below classifies

    def __init__(
        self, message: str, *, model: str | None = None, status: int | None = None
    ) -> None:
        self.model = model
        self.status = status
        self.provider_message = message
        where = f" ({model})" if model else ""
        super().__init__(f"{self.kind}{where}: {message}")


class ProviderTimeout(ProviderError):
    kind = "Timed out waiting for an answer"
    may_be_a_bug = False


class RateLimited(ProviderError):
    kind = "Rate limited"
    may_be_a_bug = False


class AuthenticationFailed(ProviderError):
    kind = "Authentication failed, check the API key in the MODEL_* variable"
    may_be_a_bug = False


class BadRequest(ProviderError):
    kind = "The provider refused the request"
    may_be_a_bug = False


class ProviderUnavailable(ProviderError):
    kind = "The provider is unavailable"
    may_be_a_bug = False


class ProviderUnreachable(ProviderUnavailable):
    """No connection could be made: there is no HTTP status, and the message names the URL."""

    kind = "The provider could not be reached"


class MalformedResponse(ProviderError):
    kind = "The provider sent an answer that could not be read"
    may_be_a_bug = True  # or our reading of it


class StoreError(AskAnotherError):
    """The store failed (disk full, locked, unreadable file, a refused statement)."""

    may_be_a_bug = True


class StoreUnavailable(StoreError):
    """The database cannot be reached now (a server down or restarting, a dropped connection):
    worth waiting for, unlike a statement the database refused (store/outage.py)."""

    may_be_a_bug = False


class StoreFull(StoreError):
    """The disk (or quota) holding the database is full: SQLite's SQLITE_FULL, PostgreSQL's
    disk_full. Background work (a research job and its ledger rows) waits for space as for an
    outage (store/outage.py); a person's call is told at once."""

    may_be_a_bug = False


def error_text(exc: BaseException, words: Mapping[Hint, str] = PLAIN) -> str:
    """The message a person sees for `exc`, its next step worded by `words` (the face's), ending
    with the feedback pointer where it may be a bug.

    Anticipated errors keep their own message; anything else is named by type only, so an
    unexpected exception never leaks a traceback or internal state into a tool result.
    """
    if isinstance(exc, AskAnotherError):
        text = exc.said(words) or type(exc).__name__
        bug = exc.may_be_a_bug
    else:
        text = f"Internal error ({type(exc).__name__})."
        bug = True
    text = _sentence(text)
    return f"{text} {FEEDBACK_POINTER}" if bug else text


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."
