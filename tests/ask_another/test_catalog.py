"""The catalog: litellm's model map facts for allowed models, and search over the allowlist."""

from __future__ import annotations

from ask_another.catalog import Catalog
from ask_another.config import Config

MODEL_COST = {
    "gpt-4o": {"litellm_provider": "openai", "max_input_tokens": 128000,
               "input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05,
               "supports_function_calling": True, "supports_vision": True, "mode": "chat"},
    "gemini/gemini-2.5-pro": {"litellm_provider": "gemini", "max_input_tokens": 1048576,
                              "supports_reasoning": True, "supports_web_search": True},
    "mistral-large": {"litellm_provider": "mistral", "max_input_tokens": 1},
}


def catalog(**env: str) -> Catalog:
    return Catalog(Config.from_env({"ASK_ANOTHER_HOME": "/tmp/x", **env}), MODEL_COST)


def test_facts_come_from_the_bare_or_prefixed_key_of_the_right_provider():
    cat = catalog(MODEL_GPT4="openai/gpt-4o;k", MODEL_GEM="gemini/gemini-2.5-pro;k",
                  MODEL_AZ="azure/mistral-large;k")
    gpt, gem, az = (cat.info(m) for m in ("openai/gpt-4o", "gemini/gemini-2.5-pro",
                                          "azure/mistral-large"))
    assert gpt is not None and gpt.known and gpt.context_window == 128000
    assert (gpt.input_price_per_million, gpt.output_price_per_million) == (2.5, 10.0)
    assert gpt.supports_tools and gpt.supports_vision and gpt.supports_reasoning is None
    assert gem is not None and gem.supports_reasoning and gem.supports_web_search
    assert az is not None and not az.known  # the bare name belongs to another provider
    assert "not in litellm's model map" in az.describe()


def test_describe_is_one_readable_line():
    line = catalog(MODEL_GPT4="openai/gpt-4o;k").all()[0].describe()
    assert line == ("openai/gpt-4o (shorthand: gpt4, openai): context 128,000 tokens; "
                    "$2.50 in / $10.00 out per million tokens; supports tools, vision")
    # Known to litellm without a price: said so, not left out (nor shown as $0).
    line = catalog(MODEL_GEM="gemini/gemini-2.5-pro;k").all()[0].describe()
    assert line == ("gemini/gemini-2.5-pro (shorthand: gem, gemini): context 1,048,576 tokens; "
                    "price unknown; supports reasoning, web search")


def test_families_and_model_search_stay_within_the_allowlist():
    cat = catalog(MODEL_A="openai/gpt-4o;k", MODEL_B="openai/gpt-4o-mini;k",
                  MODEL_GEM="gemini/gemini-2.5-pro;k")
    assert [(f.name, len(f.models)) for f in cat.families()] == [("gemini", 1), ("openai", 2)]
    assert [f.name for f in cat.families("4o")] == ["openai"]
    assert [m.model for m in cat.models(family="OpenAI")] == ["openai/gpt-4o",
                                                                "openai/gpt-4o-mini"]
    assert [m.model for m in cat.models("4o mini")] == ["openai/gpt-4o-mini"]
    assert cat.models("claude") == []
    # A provider shared by two models is not a shorthand for either.
    assert cat.info("openai/gpt-4o").shorthands == ("a",)  # type: ignore[union-attr]
