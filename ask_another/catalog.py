"""What litellm's model map knows about the allowed models, and search over them.

The catalog is built from the `Config` allowlist and litellm's model map: the JSON file litellm
ships and loads as `litellm.model_cost` (with `LITELLM_LOCAL_MODEL_COST_MAP=True`, as the gateway
sets), read here by `model_map()` without importing litellm, so listing models costs tens of
milliseconds, not litellm's import. It never lists a model that is not allowed: search narrows
the allowlist, it does not browse litellm's 4,900 entries. The catalog keeps only what it found
for the allowed models, not the map.

A *family* is a provider (`openai`, `gemini`, ...): `search_families` lists the providers among
the allowed models, `search_models` the exact ids within one.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ask_another.config import Config, ModelEntry, is_research_agent
from ask_another.errors import ConfigError

__all__ = [
    "Catalog",
    "Family",
    "ModelInfo",
    "allowlist_text",
    "is_deep_research",
    "is_gemini_agent",
    "known_providers",
    "model_map",
    "problems_text",
    "unknown_provider",
]


def is_deep_research(model: str) -> bool:
    """Whether `model` is a deep-research model (a research job's method auto picks `provider`
    for these, and they are estimated as one research task)."""
    return "deep-research" in model.lower()


def is_gemini_agent(model: str) -> bool:
    """Whether `model` is a Gemini deep-research agent (the interactions API, no chat call)."""
    return is_research_agent(model)

_PER_MILLION = 1_000_000
MODEL_MAP_FILE = "model_prices_and_context_window_backup.json"
_NOT_MODELS = ("sample_spec", "fallback_generalizations")  # the file's own schema and rules


# The data files litellm ships that name its providers: every provider's endpoints, and the
# providers it reaches through its OpenAI-compatible adapter.
PROVIDER_FILES = ("provider_endpoints_support_backup.json", "llms/openai_like/providers.json")


def _litellm_file(name: str) -> Any:
    """One of litellm's bundled JSON files, parsed without importing litellm; None if litellm
    is not installed or the file is missing."""
    spec = importlib.util.find_spec("litellm")  # finds the package; does not import it
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / name
        if path.is_file():
            return json.loads(path.read_bytes())
    return None


def model_map() -> dict[str, Any]:
    """litellm's bundled model map (what `litellm.model_cost` holds), read from its JSON file
    without importing litellm; empty if litellm is not installed or the file is missing."""
    data = _litellm_file(MODEL_MAP_FILE)
    return _with_aliases(data) if isinstance(data, dict) else {}


def known_providers(model_cost: Mapping[str, Any]) -> frozenset[str]:
    """The provider prefixes litellm knows (`openai`, `gemini`, `ollama_chat`, ...), from its
    data files and `model_cost`'s rows; empty when the files are missing (nothing to check)."""
    endpoints = _litellm_file(PROVIDER_FILES[0])
    if not isinstance(endpoints, dict) or not isinstance(endpoints.get("providers"), dict):
        return frozenset()
    names = set(endpoints["providers"])
    adapted = _litellm_file(PROVIDER_FILES[1])
    names.update(adapted if isinstance(adapted, dict) else ())
    names.update(str(row["litellm_provider"]) for row in model_cost.values()
                 if isinstance(row, dict) and row.get("litellm_provider"))
    return frozenset(names)


def unknown_provider(entry: ModelEntry, providers: frozenset[str]) -> str | None:
    """Why `entry`'s provider would fail at its first call (litellm's "LLM Provider NOT
    provided"), with the closest provider litellm knows; None when litellm knows it (or when
    `providers` is empty: nothing to check against)."""
    if not providers or entry.provider in providers:
        return None
    close = difflib.get_close_matches(entry.provider, sorted(providers), n=1, cutoff=0.6)
    hint = (f" Did you mean {close[0]!r} ({close[0]}/{entry.model.split('/', 1)[1]})?" if close
            else " The providers: https://docs.litellm.ai/docs/providers")
    return f"{entry.variable}: litellm knows no provider {entry.provider!r}.{hint}"


def _with_aliases(data: dict[str, Any]) -> dict[str, Any]:
    """The map as litellm serves it: a row with `alias_of` is its target's row, and a row's
    `aliases` are further names for it (a name already taken keeps its own row)."""
    rows = {name: row for name, row in data.items()
            if name not in _NOT_MODELS and isinstance(row, dict)}
    served: dict[str, Any] = {}
    for name, row in rows.items():
        target = row.get("alias_of")
        if isinstance(target, str):
            owner = rows.get(target)
            if owner is not None and "alias_of" not in owner:
                served[name] = owner
        else:
            served[name] = row
    for row in list(served.values()):
        for alias in row.get("aliases") or []:
            if isinstance(alias, str):
                served.setdefault(alias, row)
    return served


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One allowed model and what litellm's model map says about it (None: not known)."""

    model: str
    shorthands: tuple[str, ...]
    provider: str
    custom_endpoint: bool
    known: bool
    mode: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    input_price_per_million: float | None = None
    output_price_per_million: float | None = None
    supports_tools: bool | None = None
    supports_vision: bool | None = None
    supports_reasoning: bool | None = None
    supports_web_search: bool | None = None
    deprecation_date: str | None = None

    def describe(self) -> str:
        """One line for people and models: id, shorthands, and what is known."""
        head = f"{self.model} (shorthand: {', '.join(self.shorthands)})"
        if self.custom_endpoint:
            head += " [custom API base]"
        if not self.known:
            return f"{head}: not in litellm's model map, so context size and price are unknown"
        facts: list[str] = []
        if self.context_window:
            facts.append(f"context {self.context_window:,} tokens")
        if self.input_price_per_million is not None and self.output_price_per_million is not None:
            facts.append(f"${_money(self.input_price_per_million)} in / "
                         f"${_money(self.output_price_per_million)} out per million tokens")
        else:
            facts.append("price unknown")  # never read as free
        features = [name for name, flag in (
            ("tools", self.supports_tools), ("vision", self.supports_vision),
            ("reasoning", self.supports_reasoning), ("web search", self.supports_web_search),
        ) if flag]
        if features:
            facts.append("supports " + ", ".join(features))
        if self.deprecation_date:
            facts.append(f"deprecation date {self.deprecation_date}")
        return f"{head}: {'; '.join(facts) or 'known to litellm'}"


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    models: tuple[str, ...]


def _money(value: float) -> str:
    return f"{value:.2f}" if value >= 0.01 else f"{value:.4g}"


class Catalog:
    """The allowed models with their litellm metadata. Build with `Catalog(config, model_cost)`."""

    def __init__(self, config: Config, model_cost: Mapping[str, Mapping[str, Any]]) -> None:
        self._config = config
        self._infos = [self._info(entry, model_cost) for entry in config.models]
        providers = known_providers(model_cost)
        self._unknown = {entry.model: problem for entry in config.models
                         if (problem := unknown_provider(entry, providers)) is not None}

    def provider_problem(self, entry: ModelEntry) -> str | None:
        """Why `entry`'s provider would fail at its first call (a misspelled `openai`, say), in
        the words `ask-another doctor` uses; None when litellm knows it. Known from the model
        map's data files, so a caller can refuse before any worker imports litellm."""
        return self._unknown.get(entry.model)

    def check(self, entry: ModelEntry) -> None:
        """Raise `ConfigError` with `provider_problem(entry)` if there is one."""
        problem = self.provider_problem(entry)
        if problem is not None:
            raise ConfigError(problem)

    def provider_problems(self) -> list[str]:
        """`provider_problem` of every allowed model that has one."""
        return list(self._unknown.values())

    def all(self) -> list[ModelInfo]:
        return list(self._infos)

    def info(self, model: str) -> ModelInfo | None:
        return next((i for i in self._infos if i.model == model), None)

    def families(self, search: str | None = None) -> list[Family]:
        """Providers among the allowed models whose name or models match `search`."""
        by_provider: dict[str, list[str]] = {}
        for info in self._infos:
            by_provider.setdefault(info.provider, []).append(info.model)
        families = [Family(name, tuple(models)) for name, models in sorted(by_provider.items())]
        if not search:
            return families
        return [f for f in families
                if _matches(search, f.name, *f.models)]

    def models(self, search: str | None = None, family: str | None = None) -> list[ModelInfo]:
        """Allowed models in `family` (a provider) matching every word of `search`."""
        found = self._infos
        if family:
            found = [i for i in found if i.provider.lower() == family.strip().lower()]
        if search:
            found = [i for i in found if _matches(search, i.model, *i.shorthands)]
        return list(found)

    def _info(self, entry: ModelEntry, model_cost: Mapping[str, Mapping[str, Any]]) -> ModelInfo:
        shorthands = [entry.shorthand]
        if sum(1 for m in self._config.models if m.provider == entry.provider) == 1:
            shorthands.append(entry.provider)
        data = _lookup(entry, model_cost)
        base = dict(
            model=entry.model,
            shorthands=tuple(dict.fromkeys(shorthands)),
            provider=entry.provider,
            custom_endpoint=entry.api_base is not None,
        )
        if data is None:
            return ModelInfo(known=False, **base)  # type: ignore[arg-type]
        return ModelInfo(
            known=True,
            mode=_str(data.get("mode")),
            context_window=_int(data.get("max_input_tokens") or data.get("max_tokens")),
            max_output_tokens=_int(data.get("max_output_tokens")),
            input_price_per_million=_price(data.get("input_cost_per_token")),
            output_price_per_million=_price(data.get("output_cost_per_token")),
            supports_tools=_flag(data.get("supports_function_calling")),
            supports_vision=_flag(data.get("supports_vision")),
            supports_reasoning=_flag(data.get("supports_reasoning")),
            supports_web_search=_flag(data.get("supports_web_search")),
            deprecation_date=_str(data.get("deprecation_date")),
            **base,  # type: ignore[arg-type]
        )


def _lookup(
    entry: ModelEntry, model_cost: Mapping[str, Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The model map entry for `entry`: keyed by the full id, or by the bare name + provider."""
    if entry.model in model_cost:
        return model_cost[entry.model]
    bare = entry.model.split("/", 1)[1]
    data = model_cost.get(bare)
    if data is not None and str(data.get("litellm_provider", "")).startswith(entry.provider):
        return data
    return None


def _matches(search: str, *fields: str) -> bool:
    haystack = " ".join(fields).lower()
    return all(word in haystack for word in search.lower().split())


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and value > 0 else None


def _price(value: Any) -> float | None:
    return float(value) * _PER_MILLION if isinstance(value, int | float) else None


def _flag(value: Any) -> bool | None:
    return bool(value) if value is not None else None


def _str(value: Any) -> str | None:
    return str(value) if value else None


def problems_text(config: Config, catalog: Catalog | None = None) -> str:
    """The configuration problems as a paragraph (empty when there are none): the variables
    that were ignored, and (with the `catalog`) the allowed models whose calls would fail."""
    text = ""
    if config.problems:
        lines = "\n".join(f"- {p}" for p in config.problems)
        text += ("\n\nConfiguration problems (these variables were ignored; the other models "
                 "work):\n" + lines)
    failing = catalog.provider_problems() if catalog is not None else []
    if failing:
        text += ("\n\nModels whose every call would fail (fix the variable):\n"
                 + "\n".join(f"- {p}" for p in failing))
    return text


def allowlist_text(catalog: Catalog, config: Config) -> str:
    """Every allowed model with what is known of it, then the configuration problems."""
    infos = catalog.all()
    if not infos:
        text = ("No models are allowed: set MODEL_<NAME>=\"provider/model;api-key\" in the "
                "server's environment (for example MODEL_GPT4=\"openai/gpt-4o;sk-...\").")
    else:
        text = f"Allowed models ({len(infos)}):\n" + "\n".join(f"- {i.describe()}" for i in infos)
    return text + "\n\n" + search_text(config) + problems_text(config, catalog)


def search_text(config: Config) -> str:
    """The web-search engines research turns may use (`search_web`), first the one they use."""
    if not config.searches:
        return ("Web search: none configured (research finds sources only through read_article "
                "on URLs the model knows); set SEARCH_<NAME>=\"provider;api-key[;api_base]\", "
                "for example SEARCH_TAVILY=\"tavily;tvly-...\".")
    lines = [f"- {s.shorthand}: {s.provider} ({s.variable})"
             + (" [custom API base]" if s.api_base else "")
             + (" — used by research turns" if i == 0 else "")
             for i, s in enumerate(config.searches)]
    return f"Web search engines ({len(config.searches)}, through litellm):\n" + "\n".join(lines)
