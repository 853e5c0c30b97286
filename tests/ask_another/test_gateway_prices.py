"""A completion's price from the model's cached entry (gateway/_prices.py) is litellm's own
`completion_cost`, and the worker's `lighten()` skips litellm's per-call pricing and success
logging only while no litellm callback is registered."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ask_another.gateway import _litellm
from ask_another.gateway._prices import PriceBook
from ask_another.simulator import Reply, Simulator

# The simulator's models as the tests and the bench name them: priced plainly (gpt-4o and
# gpt-4o-mini), priced in ways only litellm computes (Perplexity's deep research), unmapped.
MODELS = ["openai/gpt-4o", "openai/gpt-4o-mini", "perplexity/sonar-deep-research", "openai/m1"]


def _call(litellm: Any, sim: Simulator, model: str, stream: bool) -> tuple[Any, dict[str, Any]]:
    name = model.split("/", 1)[1]
    sim.script(name, [Reply("priced", usage={"prompt_tokens": 1234, "completion_tokens": 567})])
    kwargs: dict[str, Any] = {"model": model, "api_base": sim.openai_base, "api_key": "sk-price",
                              "messages": [{"role": "user", "content": "price?"}],
                              "max_retries": 0, "num_retries": 0}
    if not stream:
        return litellm.completion(**kwargs), kwargs
    chunks = list(litellm.completion(**kwargs, stream=True,
                                     stream_options={"include_usage": True}))
    return litellm.stream_chunk_builder(chunks, messages=kwargs["messages"]), kwargs


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("model", MODELS)
def test_the_price_is_litellms_completion_cost(sim: Simulator, model: str, stream: bool):
    litellm = _litellm.load()
    book = PriceBook(litellm)
    response, kwargs = _call(litellm, sim, model, stream)
    try:
        expected: float | None = litellm.completion_cost(completion_response=response,
                                                         model=model)
    except Exception:  # unmapped: litellm cannot price it
        expected = None
    assert book.cost(response, model, kwargs) == pytest.approx(expected)
    assert book.cost(response, model, kwargs) == pytest.approx(expected)  # from the cache
    if model == "openai/m1":
        assert expected is None
    else:
        assert expected is not None and expected > 0


@pytest.mark.parametrize(("model", "usage", "extra"), [
    # cached prompt tokens are half price for gpt-4o
    ("openai/gpt-4o", {"prompt_tokens": 1000, "completion_tokens": 100,
                       "prompt_tokens_details": {"cached_tokens": 600}}, {}),
    # a prompt past Gemini 2.5 Pro's 200k tier costs twice as much per token
    ("gemini/gemini-2.5-pro", {"prompt_tokens": 300_000, "completion_tokens": 10}, {}),
    # the priority tier, asked for in the request
    ("openai/gpt-4o", {"prompt_tokens": 1000, "completion_tokens": 100},
     {"service_tier": "priority"}),
])
def test_what_a_plain_price_cannot_say_is_priced_by_litellm(model: str, usage: dict[str, Any],
                                                            extra: dict[str, Any]):
    litellm = _litellm.load()
    response = litellm.ModelResponse(model=model.split("/", 1)[1],
                                     usage=litellm.Usage(**usage))
    if extra.get("service_tier"):
        response.service_tier = extra["service_tier"]
    expected = litellm.completion_cost(completion_response=response, model=model, **extra)
    info = litellm.get_model_info(model=model)
    plain = (usage["prompt_tokens"] * info["input_cost_per_token"]
             + usage["completion_tokens"] * info["output_cost_per_token"])
    assert expected != pytest.approx(plain)  # so the case is one the plain price gets wrong
    assert PriceBook(litellm).cost(response, model, {"model": model, **extra}) == pytest.approx(
        expected)


# Run in a fresh process: `lighten` changes litellm for the whole process, as in the worker.
LIGHTENED = """
import asyncio, json, sys
from ask_another.gateway import _litellm

litellm = _litellm.load()
base = sys.argv[1]
found = _litellm.lighten(litellm)
seen = []

from litellm.integrations.custom_logger import CustomLogger

class Seen(CustomLogger):
    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        seen.append(kwargs.get("response_cost"))

async def main():
    out = {"found": found}
    request = {"api_key": "sk-light", "api_base": base, "max_retries": 0, "num_retries": 0,
               "messages": [{"role": "user", "content": "light?"}]}
    for key in ("quiet", "callback"):
        if key == "callback":
            litellm.callbacks = [Seen()]
        response = await litellm.acompletion(model="openai/gpt-4o", **request)
        result = await _litellm.complete(litellm, {"model": "openai/gpt-4o", **request},
                                         "openai/gpt-4o", lambda text: None)
        out[key] = {"litellm_priced": response._hidden_params.get("response_cost"),
                    "ours": result.usage.cost_usd,
                    "litellms_price": litellm.completion_cost(completion_response=response,
                                                              model="openai/gpt-4o")}
        for _ in range(100):
            if seen or key == "quiet":
                break
            await asyncio.sleep(0.05)
    out["callback_saw"] = seen[:1]
    await _litellm.close_clients(litellm)
    print(json.dumps(out))

asyncio.run(main())
"""


@pytest.mark.slow  # a fresh process importing litellm
def test_the_worker_skips_litellms_pricing_and_logging_only_without_callbacks(sim: Simulator):
    done = subprocess.run([sys.executable, "-c", LIGHTENED, sim.openai_base],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["found"] is True  # this litellm's functions are where lighten looks for them
    quiet, called = out["quiet"], out["callback"]
    # No callback: litellm did not price the response; ours is litellm's figure all the same.
    assert quiet["litellm_priced"] is None
    assert quiet["ours"] == pytest.approx(quiet["litellms_price"]) and quiet["ours"] > 0
    # A callback registered: litellm prices and logs as it always does.
    assert called["litellm_priced"] == pytest.approx(called["litellms_price"])
    assert called["ours"] == pytest.approx(called["litellms_price"])
    assert out["callback_saw"] and out["callback_saw"][0] == pytest.approx(
        called["litellms_price"])


def test_the_tests_ignore_the_same_unawaited_preludes_as_the_worker():
    # A cancel between litellm's prelude and its await leaves the request's coroutine unawaited
    # (test_a_result_arriving_after_cancel_never_flips_the_state met it under load): the worker
    # ignores that warning, and pytest, which turns warnings into errors, must ignore the same.
    import tomllib

    from ask_another.gateway._litellm import UNAWAITED_PRELUDE

    config = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    ignored = config["tool"]["pytest"]["ini_options"]["filterwarnings"]
    assert f"ignore:{UNAWAITED_PRELUDE}:RuntimeWarning" in ignored
    assert re.match(UNAWAITED_PRELUDE, "coroutine 'OpenAIChatCompletion.acompletion' was never "
                    "awaited")
