"""The one parser of the environment: allowed models, their keys, and every `ASK_ANOTHER_*` setting.

`Config.from_env()` reads the process environment once, at start-up. A malformed variable never
stops the server: it becomes a `ConfigProblem` (named in the start-up log, in `list_models`, in the
server instructions and by `ask-another doctor`) and the valid models keep working.

Models come from `MODEL_<NAME>="provider/model;api-key[;api_base]"`; web-search engines, the same
way, from `SEARCH_<NAME>="provider;api-key[;api_base]"` (a provider of litellm's search API:
tavily, searxng, exa_ai, brave, serper, ...). A request may name a model by
its exact id (`openai/gpt-4o`), by its shorthand (the variable's suffix in lower case, `gpt4` for
`MODEL_GPT4`) or by its provider (`openai`) when exactly one allowed model has that provider.

The store is a SQLite file under ASK_ANOTHER_HOME unless ASK_ANOTHER_DATABASE_URL names a
PostgreSQL server (`DatabaseUrl`). A malformed URL is a `ConfigProblem` like any other, and the
store then refuses to open with that reason: falling back to a private SQLite file would quietly
split a team's jobs across nodes.

API keys are held in `Secret` values whose `repr` and `str` are masked; only the gateway calls
`reveal()`, to hand the key to litellm for one call.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from ask_another.errors import AmbiguousModel, InvalidArgument, ModelNotAllowed
from ask_another.policy import Policy, PolicyError

MODEL_PREFIX: Final = "MODEL_"
DEFAULT_TIMEOUT: Final = 60.0
DEFAULT_POLL_SECONDS: Final = 5.0
DEFAULT_RESEARCH_DEADLINE: Final = 3600.0  # a Gemini deep-research interaction, polled
DEFAULT_RESEARCH_TIMEOUT: Final = 1800.0  # one completion of another deep-research model
DEFAULT_PERMISSION_TIMEOUT: Final = 600.0  # how long a tool call waits for a person's answer
DEFAULT_START_WAIT: Final = 90.0  # start_research's default wait (Claude Code backgrounds >120 s)
DEFAULT_TASK_POLL: Final = 5.0  # the poll interval an MCP Task of a job suggests (server/tasks/)
DEFAULT_LEASE_SECONDS: Final = 15.0  # a research job's lease; its owner renews it every third
DEFAULT_MAX_PROMPT_CHARS: Final = 1_000_000  # a prompt or a system prompt, in characters
DEFAULT_MAX_FEEDBACK_CHARS: Final = 20_000  # one piece of feedback, in characters
DEFAULT_GATEWAY_IDLE: Final = 900.0  # the gateway worker exits after this long without a call
DEFAULT_HOST_LINGER: Final = 60.0  # the job host exits after this long with no unfinished job
DEFAULT_CONFIRM_USD: Final = 1.00  # estimates above this ask a person to confirm
DEFAULT_SHUTDOWN_SECONDS: Final = 20.0  # serve --http: how long in-flight calls may finish
DEFAULT_BODY_SECONDS: Final = 30.0  # serve --http: how long a request's body may take to arrive
DEFAULT_WRITE_SECONDS: Final = 30.0  # serve --http: how long one write to a client may wait
# serve --http: requests in flight at once (server/in_flight.py), well above a team's bursts (200
# clients of one token calling at once, each with a call and perhaps an event stream).
DEFAULT_REQUESTS_PER_USER: Final = 512
DEFAULT_REQUESTS_PER_ADDRESS: Final = 1024
# Per-user limits of a shared service (limits.py); never applied to the local user of stdio.
DEFAULT_RATE_PER_MINUTE: Final = 120  # tool calls a user may make in any 60 s, per node
DEFAULT_MAX_JOBS_PER_USER: Final = 10  # research jobs a user may have running at once
DEFAULT_DATABASE_POOL_SIZE: Final = 10  # PostgreSQL connections per node for writes (and reads)
DATABASE_URL_SCHEMES: Final = ("postgresql", "postgres")
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")
MODEL_FORMAT: Final = "provider/model;api-key[;api_base]"
SEARCH_PREFIX: Final = "SEARCH_"
SEARCH_FORMAT: Final = "provider;api-key[;api_base]"
SEARCH_PROVIDERS: Final = frozenset({
    # litellm's SearchProviders (litellm/types/utils.py, 1.110): checked here without importing it.
    "perplexity", "tavily", "parallel_ai", "exa_ai", "brave", "google_pse", "dataforseo",
    "firecrawl", "fastcrw", "searxng", "linkup", "duckduckgo", "searchapi", "serper", "you_com",
    "apiserpent", "tinyfish", "agentcore", "nimble", "bing_grounding", "deepseek", "xai",
})


@dataclass(frozen=True, slots=True, eq=False)
class Secret:
    """A value that must not be shown: masked in `repr` and `str`, readable only by `reveal()`."""

    _value: str

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "Secret('********')" if self._value else "Secret('')"

    def __str__(self) -> str:
        return "********" if self._value else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One allowed model, from one `MODEL_*` variable."""

    variable: str  # "MODEL_GPT4"
    shorthand: str  # "gpt4"
    model: str  # "openai/gpt-4o", exactly as litellm wants it
    api_key: Secret = field(repr=True)
    api_base: str | None = None

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0]


def is_research_agent(model: str) -> bool:
    """Whether `model` is a Gemini deep-research agent: it runs only through the interactions
    API (a research job of method provider) and takes no chat call."""
    return model.startswith("gemini/deep-research")


def no_chat_call(model: str) -> str:
    """What a chat call to a research agent is told instead of the provider's bare Not Found
    (raised with the hint "run_research", which each face words)."""
    return (f"{model} is a deep-research agent, and this kind of model takes no chat call: it "
            "only runs research jobs of its own; choose another model here")


@dataclass(frozen=True, slots=True)
class SearchEntry:
    """One web-search engine, from one `SEARCH_*` variable (litellm's search API)."""

    variable: str  # "SEARCH_TAVILY"
    shorthand: str  # "tavily"
    provider: str  # litellm's search_provider: "tavily", "searxng", ...
    api_key: Secret = field(repr=True)
    api_base: str | None = None


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    """`serve --http` as an OAuth 2.1 resource server: JWTs of `issuer`, checked on its JWKS."""

    issuer: str  # ASK_ANOTHER_OAUTH_ISSUER, compared with each token's `iss`
    audience: str | None = None  # ASK_ANOTHER_OAUTH_AUDIENCE; None: the server's public URL
    jwks_url: str | None = None  # ASK_ANOTHER_OAUTH_JWKS_URL; None: from the issuer's metadata
    user_claim: str = "sub"  # ASK_ANOTHER_OAUTH_USER_CLAIM: the claim naming the user
    admin_scope: str = "ask-another:admin"  # ASK_ANOTHER_OAUTH_ADMIN_SCOPE: a scope making admins
    console_client_id: str | None = None  # ASK_ANOTHER_OAUTH_CONSOLE_CLIENT_ID: the console's
    # client at the issuer (public, PKCE), for its "Log in with ISSUER"; None: pasted tokens only


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    """ASK_ANOTHER_DATABASE_URL: the PostgreSQL server of the store. The URL may hold a password,
    so it is a `Secret`; `shown` is the URL with the password masked, for every message."""

    url: Secret = field(repr=False)
    shown: str
    pool_size: int = DEFAULT_DATABASE_POOL_SIZE
    problem: str | None = None  # why the URL cannot be used (the store refuses to open)

    @property
    def password(self) -> str:
        """The password in the URL, revealed: for scrubbing logs, never for display. Found the
        way `redact_url` finds it, without `urlsplit` (which raises on a malformed URL, and
        splits a password holding `/`, `?` or `#` in two)."""
        raw = self.url.reveal()
        query = re.search(r"[?&]password=([^&#]*)", raw)
        span = _password_span(raw)
        return (raw[span[0]:span[1]] if span else "") or (query.group(1) if query else "")


def _password_span(url: str) -> tuple[int, int] | None:
    """Where the password of `scheme://user:password@host...` is in `url`, or None. Up to the
    last `@` of the URL, so a password holding `/ ? # @` (not percent-encoded, as libpq would
    need it) is masked whole; a URL with no password but an `@` in its query is masked too
    much, which is harmless."""
    scheme_end = url.find("://")
    if scheme_end < 0:
        return None
    start = scheme_end + 3
    at = url.rfind("@", start)
    colon = url.find(":", start, at) if at >= 0 else -1
    if colon < 0 or "/" in url[start:colon]:
        return None  # no user:password part (a `:` after a `/` is not one)
    return colon + 1, at


def redact_url(url: str) -> str:
    """`url` with any password (in the user part or a `password=` parameter) masked."""
    span = _password_span(url)
    if span is not None:
        url = url[:span[0]] + "****" + url[span[1]:]
    return re.sub(r"(?<=[?&])password=[^&#]*", "password=****", url)


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """A variable that could not be used, and why (never quoting its value: it may hold a key)."""

    variable: str
    message: str

    def __str__(self) -> str:
        return f"{self.variable}: {self.message}"


@dataclass(frozen=True)
class Config:
    """Everything ask-another reads from the environment. Build with `Config.from_env()`."""

    models: tuple[ModelEntry, ...] = ()
    problems: tuple[ConfigProblem, ...] = ()
    home: Path = field(default_factory=lambda: _default_home())
    timeout: float = DEFAULT_TIMEOUT
    poll_seconds: float = DEFAULT_POLL_SECONDS
    research_deadline: float = DEFAULT_RESEARCH_DEADLINE
    research_timeout: float = DEFAULT_RESEARCH_TIMEOUT
    allow_hosts: frozenset[str] = frozenset()
    log_level: str = "INFO"
    permissions: Policy = field(default_factory=Policy)
    permission_timeout: float = DEFAULT_PERMISSION_TIMEOUT
    searches: tuple[SearchEntry, ...] = ()
    """Web-search engines, by variable name; research turns search with the first."""
    start_wait: float = DEFAULT_START_WAIT
    # MCP Tasks over jobs (server/tasks/): the ttl they state (None: unlimited, as jobs are
    # kept) and the poll interval they suggest, in seconds.
    task_ttl: float | None = None
    task_poll: float = DEFAULT_TASK_POLL
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS
    max_feedback_chars: int = DEFAULT_MAX_FEEDBACK_CHARS
    # Provider calls in the gateway's worker process (the default, None or True) or in a thread
    # of this process (False); see runtime.py and gateway/.
    gateway_process: bool | None = None
    # One worker for every server on this home (gateway/_shared.py): True, False, or None (unset:
    # the face decides; shared for the stdio server and the people commands, runtime.py).
    gateway_shared: bool | None = None
    gateway_idle: float = DEFAULT_GATEWAY_IDLE
    host_linger: float = DEFAULT_HOST_LINGER  # the job host's (jobhost.py)
    # Claude Code channel events of a job's end or wait (server/channel.py); off unless set.
    claude_channel: bool = False
    confirm_usd: float = DEFAULT_CONFIRM_USD
    budget_day_usd: float | None = None  # None: no daily ceiling
    budget_month_usd: float | None = None
    # serve --http (server/http.py, server/auth.py)
    tokens_file: Path | None = None  # ASK_ANOTHER_TOKENS_FILE; None: tokens.json in the home
    oauth: OAuthSettings | None = None
    public_url: str | None = None  # ASK_ANOTHER_PUBLIC_URL: the MCP endpoint as clients see it
    shutdown_seconds: float = DEFAULT_SHUTDOWN_SECONDS
    body_seconds: float = DEFAULT_BODY_SECONDS
    write_seconds: float = DEFAULT_WRITE_SECONDS
    requests_per_user: int = DEFAULT_REQUESTS_PER_USER  # 0: only the node's bound
    requests_per_address: int = DEFAULT_REQUESTS_PER_ADDRESS  # 0: only the node's bound
    rate_per_minute: int = DEFAULT_RATE_PER_MINUTE  # 0: no limit
    max_jobs_per_user: int = DEFAULT_MAX_JOBS_PER_USER  # 0: no limit
    database_url: DatabaseUrl | None = None  # None: SQLite under `home`

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        env = os.environ if environ is None else environ
        problems: list[ConfigProblem] = []
        models = _parse_models(env, problems)
        home = _parse_home(env, problems)
        timeout = _parse_positive(env, "ASK_ANOTHER_TIMEOUT", DEFAULT_TIMEOUT, problems)
        poll = _parse_positive(env, "ASK_ANOTHER_POLL_SECONDS", DEFAULT_POLL_SECONDS, problems)
        deadline = _parse_positive(env, "ASK_ANOTHER_RESEARCH_DEADLINE",
                                   DEFAULT_RESEARCH_DEADLINE, problems)
        research_timeout = _parse_positive(env, "ASK_ANOTHER_RESEARCH_TIMEOUT",
                                           DEFAULT_RESEARCH_TIMEOUT, problems)
        allow_hosts = _parse_hosts(env, problems)
        log_level = _parse_log_level(env, problems)
        permissions = _parse_permissions(env, problems)
        permission_timeout = _parse_positive(env, "ASK_ANOTHER_PERMISSION_TIMEOUT",
                                             DEFAULT_PERMISSION_TIMEOUT, problems)
        searches = _parse_searches(env, problems)
        start_wait = _parse_positive(env, "ASK_ANOTHER_START_WAIT", DEFAULT_START_WAIT, problems)
        task_ttl = _parse_positive(env, "ASK_ANOTHER_TASK_TTL", 0, problems) or None
        task_poll = _parse_positive(env, "ASK_ANOTHER_TASK_POLL_SECONDS", DEFAULT_TASK_POLL,
                                    problems)
        lease_seconds = _parse_positive(env, "ASK_ANOTHER_LEASE_SECONDS", DEFAULT_LEASE_SECONDS,
                                        problems)
        gateway_process = _parse_switch(env, "ASK_ANOTHER_GATEWAY_PROCESS", problems)
        gateway_shared = _parse_switch(env, "ASK_ANOTHER_GATEWAY_SHARED", problems)
        claude_channel = _parse_switch(env, "ASK_ANOTHER_CLAUDE_CHANNEL", problems) or False
        max_prompt = _parse_count(env, "ASK_ANOTHER_MAX_PROMPT_CHARS", DEFAULT_MAX_PROMPT_CHARS,
                                  problems)
        max_feedback = _parse_count(env, "ASK_ANOTHER_MAX_FEEDBACK_CHARS",
                                    DEFAULT_MAX_FEEDBACK_CHARS, problems)
        gateway_idle = _parse_positive(env, "ASK_ANOTHER_GATEWAY_IDLE", DEFAULT_GATEWAY_IDLE,
                                       problems)
        host_linger = _parse_positive(env, "ASK_ANOTHER_HOST_LINGER", DEFAULT_HOST_LINGER,
                                      problems)
        confirm_usd = _parse_usd(env, "ASK_ANOTHER_CONFIRM_USD", DEFAULT_CONFIRM_USD, problems)
        budget_day = _parse_usd(env, "ASK_ANOTHER_BUDGET_DAY_USD", None, problems)
        budget_month = _parse_usd(env, "ASK_ANOTHER_BUDGET_MONTH_USD", None, problems)
        tokens_raw = env.get("ASK_ANOTHER_TOKENS_FILE", "").strip()
        shutdown_seconds = _parse_positive(env, "ASK_ANOTHER_SHUTDOWN_SECONDS",
                                           DEFAULT_SHUTDOWN_SECONDS, problems)
        body_seconds = _parse_positive(env, "ASK_ANOTHER_BODY_SECONDS", DEFAULT_BODY_SECONDS,
                                       problems)
        write_seconds = _parse_positive(env, "ASK_ANOTHER_WRITE_SECONDS", DEFAULT_WRITE_SECONDS,
                                        problems)
        requests_per_user = _parse_limit(env, "ASK_ANOTHER_REQUESTS_PER_USER",
                                         DEFAULT_REQUESTS_PER_USER, problems)
        requests_per_address = _parse_limit(env, "ASK_ANOTHER_REQUESTS_PER_ADDRESS",
                                            DEFAULT_REQUESTS_PER_ADDRESS, problems)
        rate_per_minute = _parse_limit(env, "ASK_ANOTHER_RATE_PER_MINUTE",
                                       DEFAULT_RATE_PER_MINUTE, problems)
        max_jobs = _parse_limit(env, "ASK_ANOTHER_MAX_JOBS_PER_USER", DEFAULT_MAX_JOBS_PER_USER,
                                problems)
        database_url = _parse_database_url(env, problems)
        # Parsed before `problems` is frozen into the Config below: theirs must be in it.
        oauth = _parse_oauth(env, problems)
        public_url = _parse_url(env, "ASK_ANOTHER_PUBLIC_URL", problems)
        return cls(
            models=tuple(models),
            problems=tuple(problems),
            home=home,
            timeout=timeout,
            poll_seconds=poll,
            research_deadline=deadline,
            research_timeout=research_timeout,
            allow_hosts=allow_hosts,
            log_level=log_level,
            permissions=permissions,
            permission_timeout=permission_timeout,
            searches=tuple(searches),
            start_wait=start_wait,
            task_ttl=task_ttl,
            task_poll=task_poll,
            lease_seconds=lease_seconds,
            gateway_process=gateway_process,
            gateway_shared=gateway_shared,
            claude_channel=claude_channel,
            max_prompt_chars=max_prompt,
            max_feedback_chars=max_feedback,
            gateway_idle=gateway_idle,
            host_linger=host_linger,
            confirm_usd=DEFAULT_CONFIRM_USD if confirm_usd is None else confirm_usd,
            budget_day_usd=budget_day,
            budget_month_usd=budget_month,
            tokens_file=Path(tokens_raw).expanduser() if tokens_raw else None,
            oauth=oauth,
            public_url=public_url,
            shutdown_seconds=shutdown_seconds,
            body_seconds=body_seconds,
            write_seconds=write_seconds,
            requests_per_user=requests_per_user,
            requests_per_address=requests_per_address,
            rate_per_minute=rate_per_minute,
            max_jobs_per_user=max_jobs,
            database_url=database_url,
        )

    @property
    def database_path(self) -> Path:
        return self.home / "ask-another.sqlite3"

    @property
    def tokens_path(self) -> Path:
        """The tokens file of `serve --http` (hashes only; server/auth.py)."""
        return self.tokens_file if self.tokens_file is not None else self.home / "tokens.json"

    @property
    def database(self) -> Path | DatabaseUrl:
        """Where the store is: the PostgreSQL server of ASK_ANOTHER_DATABASE_URL, or else the
        SQLite file under the home."""
        return self.database_url if self.database_url is not None else self.database_path

    @property
    def search(self) -> SearchEntry | None:
        """The search engine research turns use (`search_web`): the first `SEARCH_*` by name."""
        return self.searches[0] if self.searches else None

    def secrets(self) -> list[str]:
        """Every non-empty API key, revealed: for scrubbing text, never for display."""
        keys = [m.api_key.reveal() for m in self.models if m.api_key]
        return keys + [s.api_key.reveal() for s in self.searches if s.api_key]

    def resolve(self, name: str) -> ModelEntry:
        """The allowed model `name` refers to: exact id, then shorthand, then unique provider.

        Raises `AmbiguousModel` (listing the candidates) or `ModelNotAllowed` (suggesting
        similar allowed models).
        """
        wanted = name.strip()
        lowered = wanted.lower()
        by_id = [m for m in self.models if m.model == wanted]
        if not by_id:
            by_id = [m for m in self.models if m.model.lower() == lowered]
        if len(by_id) == 1:
            return by_id[0]
        if len(by_id) > 1:
            raise AmbiguousModel(wanted, [f"{m.shorthand} ({m.model})" for m in by_id])
        for m in self.models:
            if m.shorthand == lowered:
                return m
        by_provider = [m for m in self.models if m.provider.lower() == lowered]
        if len(by_provider) == 1:
            return by_provider[0]
        if len(by_provider) > 1:
            raise AmbiguousModel(wanted, [f"{m.shorthand} ({m.model})" for m in by_provider])
        raise ModelNotAllowed(wanted, self.similar(wanted))

    def check_size(self, what: str, text: str | None, *, feedback: bool = False) -> None:
        """Raise `InvalidArgument` when `text` (a prompt, a system prompt, feedback) is longer
        than its configured cap, naming the setting that raises it."""
        limit, setting = ((self.max_feedback_chars, "ASK_ANOTHER_MAX_FEEDBACK_CHARS") if feedback
                          else (self.max_prompt_chars, "ASK_ANOTHER_MAX_PROMPT_CHARS"))
        if text is not None and len(text) > limit:
            raise InvalidArgument(f"the {what} is {len(text):,} characters long, over the limit "
                                  f"of {limit:,} (set {setting} to raise it)")

    def stored_entry(self, model: str, variable: str | None) -> ModelEntry:
        """The entry a stored conversation or job was made with: the `MODEL_*` variable it
        names (`variable`) while that variable still holds `model`, else `model` resolved.

        Two variables may hold the same model id with different keys or bases; a stored id alone
        would then be ambiguous, so conversations and jobs keep the variable's name too.
        """
        if variable:
            for m in self.models:
                if m.variable == variable and m.model == model:
                    return m
        return self.resolve(model)

    def similar(self, name: str, limit: int = 3) -> list[str]:
        """Allowed model ids like `name`: shared substrings first, then close spellings."""
        lowered = name.lower()
        bare = lowered.split("/", 1)[-1]
        found = [m.model for m in self.models
                 if bare and (bare in m.model.lower() or m.shorthand in lowered)]
        names = {m.model.lower(): m.model for m in self.models}
        names |= {m.shorthand: m.model for m in self.models}
        close = difflib.get_close_matches(lowered, list(names), n=limit, cutoff=0.5)
        found.extend(names[c] for c in close)
        return list(dict.fromkeys(found))[:limit]


def _default_home() -> Path:
    import platformdirs  # small, but only needed when ASK_ANOTHER_HOME is unset

    return Path(platformdirs.user_state_dir("ask-another", appauthor=False))


def _parse_models(env: Mapping[str, str], problems: list[ConfigProblem]) -> list[ModelEntry]:
    models: list[ModelEntry] = []
    seen: dict[str, str] = {}  # shorthand -> variable that claimed it
    for variable in sorted(k for k in env if k.startswith(MODEL_PREFIX)):
        entry = _parse_model(variable, env[variable], problems)
        if entry is None:
            continue
        if entry.shorthand in seen:
            problems.append(ConfigProblem(
                variable,
                f"duplicate name: {seen[entry.shorthand]} already defines the shorthand "
                f"{entry.shorthand!r}; this one is ignored",
            ))
            continue
        seen[entry.shorthand] = variable
        models.append(entry)
    return models


# Keys as providers issue them: a value that may be a key is never echoed in a message.
_KEY_PREFIXES: Final = ("sk-", "sk_", "aiza", "gsk_", "xai-", "pplx-", "tvly-", "key-", "api-")


def _provider_example(value: str) -> str:
    """How `value` (a model name alone, like 'nope') would read with its provider, in its own
    words rather than a canned 'gpt-4o'; a value that could be a key is not repeated."""
    shown = value.strip()
    # Model names are short words and dates ('claude-3-5-sonnet-20241022'); keys hold long
    # random runs (a key glued to a name, 'nokeysk-test-0123456789abcdef', included).
    if (len(shown) <= 40 and re.fullmatch(r"[A-Za-z0-9._:-]+", shown)
            and not re.search(r"[A-Za-z0-9]{12}", shown)
            and not shown.lower().startswith(_KEY_PREFIXES)):
        return f"'openai/{shown}' for an OpenAI model, not '{shown}'"
    return "like 'openai/gpt-4o'"


# litellm reads a provider's key from the provider's own variable (OPENAI_API_KEY,
# ANTHROPIC_API_KEY, GEMINI_API_KEY, TAVILY_API_KEY, ...) when a MODEL_ variable gives none.
PROVIDER_KEY_SUFFIX: Final = "_API_KEY"


def _padding(value: str) -> str | None:
    """How `value` has spaces (or tabs, line breaks) around it, in words; None: it has none."""
    before, after = value != value.lstrip(), value != value.rstrip()
    if not value.strip() or not (before or after):
        return None
    return ("has spaces around it" if before and after
            else "starts with a space" if before else "ends with a space")


def key_notes(env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """What doctor says of the keys in `env` (never their values): notes on keys that have
    spaces around them, which are sent without (a MODEL_ variable's fields are trimmed, and the
    gateway worker trims `trim_provider_keys`), and problems: a key with a space inside, which
    no provider issues (a key pasted in two pieces), so the provider would refuse it."""
    notes: list[str] = []
    problems: list[str] = []
    for variable in sorted(env):
        value = env[variable]
        if variable.startswith(MODEL_PREFIX):
            fields = value.split(";")
            if len(fields) not in (2, 3):
                continue  # malformed: a problem of its own
            key, where = fields[1], f"{variable}: the API key"
        elif variable.endswith(PROVIDER_KEY_SUFFIX):
            key, where = value, variable
        else:
            continue
        if any(c.isspace() for c in key.strip()):
            problems.append(f"{where} has a space inside it; provider keys have none, so the "
                            "provider would refuse it (was it pasted in two pieces?)")
        elif (padding := _padding(key)) is not None:
            notes.append(f"{where} {padding} (as pasted?); it is sent without")
    return notes, problems


def trim_provider_keys(environ: MutableMapping[str, str]) -> list[str]:
    """Trim the spaces around each provider key variable in `environ` (the process litellm
    reads them from: " sk-..." would be sent as it is, and refused); the names trimmed."""
    trimmed = [name for name, value in environ.items()
               if name.endswith(PROVIDER_KEY_SUFFIX) and _padding(value) is not None]
    for name in trimmed:
        environ[name] = environ[name].strip()
    return trimmed


def _parse_model(variable: str, value: str, problems: list[ConfigProblem]) -> ModelEntry | None:
    def bad(message: str) -> None:
        problems.append(ConfigProblem(variable, f"{message} (expected {MODEL_FORMAT!r})"))

    suffix = variable[len(MODEL_PREFIX):]
    if not suffix.strip():
        bad("the variable needs a name after MODEL_, like MODEL_GPT4")
        return None
    if not value.strip():
        bad("is blank")
        return None
    if value.strip()[0] in "\"'":
        # `docker run --env-file` keeps a line's quotes in the value (systemd and shells strip
        # them): the model would be '"openai/gpt-4o' and every call would fail.
        bad("starts with a quote, which is part of the value: write it without quotes "
            "(docker run --env-file keeps them)")
        return None
    fields = value.split(";")
    if len(fields) == 1:
        missing = "missing ';api-key' after the model"
        if "/" not in value:  # "gpt-4o": both parts are missing, name both at once
            missing = (f"missing the provider before the model ({_provider_example(value)}) "
                       "and ';api-key' after it")
        bad(f"{missing} (write 'provider/model;' for a provider without a key)")
        return None
    if len(fields) > 3:
        bad(f"has {len(fields)} ';'-separated fields, at most 3 are allowed")
        return None
    model, key = fields[0].strip(), fields[1].strip()
    base = fields[2].strip() if len(fields) == 3 else ""
    provider, slash, rest = model.partition("/")
    if not slash or not provider or not rest:
        bad("the model must be 'provider/model-name', like 'openai/gpt-4o'")
        return None
    if any(c.isspace() for c in model):
        bad("the model id contains whitespace")
        return None
    if len(fields) == 3:
        if not base.startswith(("http://", "https://")) or len(base.split("://", 1)[1]) == 0:
            bad("the third field must be an http:// or https:// API base URL")
            return None
    return ModelEntry(
        variable=variable,
        shorthand=suffix.lower(),
        model=model,
        api_key=Secret(key),
        api_base=base.rstrip("/") or None,
    )


def _parse_home(env: Mapping[str, str], problems: list[ConfigProblem]) -> Path:
    raw = env.get("ASK_ANOTHER_HOME", "").strip()
    if not raw:
        return _default_home()
    return Path(raw).expanduser()


def _parse_database_url(env: Mapping[str, str], problems: list[ConfigProblem]
                        ) -> DatabaseUrl | None:
    raw = env.get("ASK_ANOTHER_DATABASE_URL", "").strip()
    pool_size = _parse_count(env, "ASK_ANOTHER_DATABASE_POOL_SIZE", DEFAULT_DATABASE_POOL_SIZE,
                             problems)
    if not raw:
        return None
    shown = redact_url(raw)
    problem = _database_url_problem(raw)
    if problem is not None:
        # Named without the URL itself: even masked, a mangled one may show its password.
        problems.append(ConfigProblem("ASK_ANOTHER_DATABASE_URL", problem))
    return DatabaseUrl(url=Secret(raw), shown=shown, pool_size=pool_size, problem=problem)


def _database_url_problem(raw: str) -> str | None:
    expected = "expected postgresql://user:password@host:port/database"
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        # Not urlsplit's words: "Port could not be cast ... as 'Ab'" quotes the start of a
        # password that holds a `/`.
        return (f"is not a valid URL; {expected}, a port that is a number, and any / ? # @ : "
                "in the password percent-encoded (/ as %2F, @ as %40)")
    if parts.scheme.lower() not in DATABASE_URL_SCHEMES:
        return (f"must be a postgresql:// URL, got {parts.scheme or 'no'} scheme; {expected} "
                "(unset it for the SQLite file under ASK_ANOTHER_HOME)")
    if not parts.path.strip("/"):
        return f"names no database; {expected}"
    return None


def _finite(raw: str) -> float | None:
    """`raw` as a finite number, or None (not a number, NaN, an infinity)."""
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _parse_positive(
    env: Mapping[str, str], variable: str, default: float, problems: list[ConfigProblem]
) -> float:
    raw = env.get(variable, "").strip()
    if not raw:
        return default
    value = _finite(raw)
    if value is None or not value > 0:
        problems.append(ConfigProblem(
            variable, f"must be a positive number of seconds, got {raw!r}; using {default:g}"
        ))
        return default
    return value


def _parse_count(
    env: Mapping[str, str], variable: str, default: int, problems: list[ConfigProblem]
) -> int:
    raw = env.get(variable, "").strip().replace("_", "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        problems.append(ConfigProblem(
            variable, f"must be a positive whole number, got {raw!r}; using {default}"))
        return default
    return int(raw)


def _parse_limit(env: Mapping[str, str], variable: str, default: int,
                 problems: list[ConfigProblem]) -> int:
    """A per-user limit: a whole number, 0 for no limit; `default` when unset or malformed."""
    raw = env.get(variable, "").strip().replace("_", "")
    if not raw:
        return default
    if not raw.isdigit():
        problems.append(ConfigProblem(
            variable, f"must be a whole number (0 for no limit), got {raw!r}; using {default}"))
        return default
    return int(raw)


def _parse_usd(env: Mapping[str, str], variable: str, default: float | None,
               problems: list[ConfigProblem]) -> float | None:
    """An amount of US dollars (0 or more); `default` when unset or malformed."""
    raw = env.get(variable, "").strip().removeprefix("$")
    if not raw:
        return default
    value = _finite(raw)
    if value is None or not value >= 0:
        fallback = "no ceiling" if default is None else f"{default:.2f}"
        problems.append(ConfigProblem(
            variable, f"must be an amount of US dollars such as 5.00, got {raw!r}; using "
                      f"{fallback}"))
        return default
    return value


def _parse_hosts(env: Mapping[str, str], problems: list[ConfigProblem]) -> frozenset[str]:
    raw = env.get("ASK_ANOTHER_ALLOW_HOSTS", "")
    hosts: set[str] = set()
    for item in raw.split(","):
        host = item.strip().lower()
        if not host:
            continue
        name, _, port = host.rpartition(":") if ":" in host else (host, "", "")
        malformed = "/" in host or any(c.isspace() for c in host) or not name
        if malformed or (port and not port.isdigit()):
            problems.append(ConfigProblem(
                "ASK_ANOTHER_ALLOW_HOSTS", f"{item.strip()!r} is not a host or host:port; ignored"
            ))
            continue
        hosts.add(host)
    return frozenset(hosts)


def _parse_searches(env: Mapping[str, str], problems: list[ConfigProblem]) -> list[SearchEntry]:
    found: list[SearchEntry] = []
    for variable in sorted(k for k in env if k.startswith(SEARCH_PREFIX)):
        entry = _parse_search(variable, env[variable], problems)
        if entry is not None:
            found.append(entry)
    # The older setting: a SearXNG instance, now searched through litellm like any engine.
    raw = env.get("ASK_ANOTHER_SEARXNG_URL", "").strip()
    if raw:
        scheme, sep, rest = raw.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
            problems.append(ConfigProblem(
                "ASK_ANOTHER_SEARXNG_URL",
                f"{raw!r} is not an http(s) URL such as http://localhost:8888; ignored"))
        else:
            found.append(SearchEntry(variable="ASK_ANOTHER_SEARXNG_URL", shorthand="searxng",
                                     provider="searxng", api_key=Secret(""),
                                     api_base=raw.rstrip("/")))
    return found


def _parse_search(variable: str, value: str, problems: list[ConfigProblem]
                  ) -> SearchEntry | None:
    def bad(message: str) -> None:
        problems.append(ConfigProblem(variable, f"{message} (expected {SEARCH_FORMAT!r})"))

    suffix = variable[len(SEARCH_PREFIX):]
    if not suffix.strip():
        bad("the variable needs a name after SEARCH_, like SEARCH_TAVILY")
        return None
    fields = [f.strip() for f in value.split(";")]
    if not value.strip() or len(fields) < 2 or len(fields) > 3:
        bad("needs 'provider;api-key' and optionally ';api_base' "
            "(write 'searxng;;http://host:8888' for an engine without a key)")
        return None
    provider, key = fields[0].lower(), fields[1]
    base = fields[2] if len(fields) == 3 else ""
    if provider not in SEARCH_PROVIDERS:
        bad(f"{provider!r} is not a search provider of litellm; use one of "
            f"{', '.join(sorted(SEARCH_PROVIDERS))}")
        return None
    if base and not (base.startswith(("http://", "https://")) and base.split("://", 1)[1]):
        bad("the third field must be an http:// or https:// API base URL")
        return None
    if provider == "searxng" and not base:
        bad("searxng needs the instance's URL as the third field")
        return None
    return SearchEntry(variable=variable, shorthand=suffix.lower(), provider=provider,
                       api_key=Secret(key), api_base=base.rstrip("/") or None)


def _parse_switch(env: Mapping[str, str], variable: str, problems: list[ConfigProblem]
                  ) -> bool | None:
    raw = env.get(variable, "").strip().lower()
    if not raw:
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    problems.append(ConfigProblem(variable, "must be 1 or 0 (true/false, yes/no, on/off); "
                                            "using the default"))
    return None


def _parse_log_level(env: Mapping[str, str], problems: list[ConfigProblem]) -> str:
    raw = env.get("ASK_ANOTHER_LOG_LEVEL", "").strip().upper()
    if not raw:
        return "INFO"
    if raw not in LOG_LEVELS:
        problems.append(ConfigProblem(
            "ASK_ANOTHER_LOG_LEVEL", f"must be one of {', '.join(LOG_LEVELS)}; using INFO"
        ))
        return "INFO"
    return raw


def _parse_permissions(env: Mapping[str, str], problems: list[ConfigProblem]) -> Policy:
    try:
        return Policy.parse(env.get("ASK_ANOTHER_PERMISSIONS"))
    except PolicyError as exc:
        problems.append(ConfigProblem(
            "ASK_ANOTHER_PERMISSIONS", f"{exc}; using the default {Policy()}"
        ))
        return Policy()


def _parse_url(env: Mapping[str, str], variable: str, problems: list[ConfigProblem]
               ) -> str | None:
    raw = env.get(variable, "").strip()
    if not raw:
        return None
    scheme, sep, rest = raw.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
        problems.append(ConfigProblem(variable, f"{raw!r} is not an http(s) URL; ignored"))
        return None
    return raw


def _parse_oauth(env: Mapping[str, str], problems: list[ConfigProblem]) -> OAuthSettings | None:
    issuer = _parse_url(env, "ASK_ANOTHER_OAUTH_ISSUER", problems)
    if issuer is None:
        return None
    defaults = OAuthSettings(issuer)
    return OAuthSettings(
        issuer=issuer,
        audience=env.get("ASK_ANOTHER_OAUTH_AUDIENCE", "").strip() or None,
        jwks_url=_parse_url(env, "ASK_ANOTHER_OAUTH_JWKS_URL", problems),
        user_claim=env.get("ASK_ANOTHER_OAUTH_USER_CLAIM", "").strip() or defaults.user_claim,
        admin_scope=env.get("ASK_ANOTHER_OAUTH_ADMIN_SCOPE", "").strip() or defaults.admin_scope,
        console_client_id=env.get("ASK_ANOTHER_OAUTH_CONSOLE_CLIENT_ID", "").strip() or None,
    )
