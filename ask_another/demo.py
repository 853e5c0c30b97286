"""`ask-another demo`: the whole stack, on a machine with no API keys, in under a minute.

It starts the simulated provider (ask_another.simulator: a SIMULATION, not a real model) on
127.0.0.1, starts the real ask-another server as a subprocess over stdio with models pointing at
the simulator and a throw-away home directory, connects as an MCP client, and runs the tools one
after the other, printing what happens: list_models, completion, start_research with progress
(a Gemini deep-research agent, then the local pipeline with an ordinary model: its plan, web
search through the simulator's Tavily endpoint, a cited report and the job's usage), a research
job left in the background by a short timeout, check_research and cancel_research.

This module is the demo process, not the server: it prints to stdout for the person watching.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

__all__ = ["run_demo"]

GEMINI = "gemini/deep-research-pro-preview-12-2025"
AGENT = GEMINI.split("/", 1)[1]
WIDTH = 96


def _say(text: str = "") -> None:
    print(text, flush=True)  # noqa: T201 - the demo talks to the person running it


def _section(title: str) -> None:
    _say()
    _say(f"── {title} " + "─" * max(0, WIDTH - len(title) - 4))


def _show(text: str, limit: int = 1200) -> None:
    if len(text) > limit:
        text = text[:limit] + f"\n… ({len(text) - limit} more characters)"
    for line in text.splitlines() or [""]:
        _say(f"   │ {line}".rstrip())


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


# What the server process needs of the user's environment to run at all; everything else (their
# MODEL_*, SEARCH_* and ASK_ANOTHER_* settings, provider keys such as OPENAI_API_KEY, LITELLM_*,
# proxies) stays out: the demo promises that nothing leaves the machine.
_KEPT = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "TMPDIR", "TZ", "SYSTEMROOT",
         "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONPYCACHEPREFIX",
         "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8", "NO_COLOR")


def _server_env(sim_url: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _KEPT or k.startswith("LC_")}
    env.update({
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_POLL_SECONDS": "0.4",
        "ASK_ANOTHER_LOG_LEVEL": "WARNING",
        # Its own worker, gone with it: the throw-away home is removed at the end, and a shared
        # worker would outlive the demo until it noticed.
        "ASK_ANOTHER_GATEWAY_SHARED": "0",
        # The simulator bills nothing: no confirmation of the deep-research estimate.
        "ASK_ANOTHER_CONFIRM_USD": "1000000",
        "MODEL_SIM": f"openai/sim-chat;demo-key;{sim_url}/v1",
        "MODEL_GDR": f"{GEMINI};demo-key;{sim_url}",
        "MODEL_PPLX": f"perplexity/sonar-deep-research;demo-key;{sim_url}/v1",
        "SEARCH_SIM": f"tavily;demo-key;{sim_url}",
    })
    return env


async def _session(sim: Any, home: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "ask_another"],
                                   env=_server_env(sim.url, home))
    began = time.monotonic()
    with (home / "server-stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            _section("connected")
            tools = [t.name for t in (await client.list_tools()).tools]
            _say(f"   ask-another over stdio (protocol {client.protocol_version}), "
                 f"{len(tools)} tools: {', '.join(tools)}")

            _section("list_models")
            _show(_text(await client.call_tool("list_models", {})))

            _section("completion (model 'sim')")
            _show(_text(await client.call_tool(
                "completion", {"model": "sim", "prompt": "Is 1729 the smallest taxicab number?"})))

            _section("start_research (a Gemini deep-research agent, with progress)")
            sim.script_interaction(AGENT, statuses=["queued", "in_progress", "in_progress",
                                                    "completed"])

            # Parameters named as in mcp's ProgressFnT protocol, which `call_tool` is typed with.
            async def show_progress(progress: float, total: float | None,
                                    message: str | None) -> None:
                _say(f"   · progress {progress:4.1f}/{total or 0:g} s  {message}")

            result = await client.call_tool(
                "start_research",
                {"model": "gdr", "query": "How do deep-research agents cite their sources?",
                 "timeout": 60},
                progress_callback=show_progress)
            _result(json.loads(_text(result)))

            _section("start_research (model 'sim': the local pipeline, plan → search → cited "
                     "report)")
            result = await client.call_tool(
                "start_research",
                {"model": "sim", "query": "Compare SQLite and PostgreSQL for an embedded "
                 "analytics product", "depth": "shallow", "timeout": 60},
                progress_callback=show_progress)
            _result(json.loads(_text(result)), 1400)

            _section("start_research with timeout=1: the job continues in the background")
            sim.script_interaction(AGENT, statuses=["in_progress"] * 60 + ["completed"])
            text = _text(await client.call_tool(
                "start_research", {"model": "gdr", "query": "A very long investigation",
                                   "timeout": 1}))
            _show(text)
            job_id = text.split("Research job ", 1)[1].split(" ", 1)[0]

            _section(f"check_research job_id={job_id}")
            _show(_text(await client.call_tool("check_research", {"job_id": job_id})))

            _section("check_research (every job)")
            _show(_text(await client.call_tool("check_research", {})))

            _section(f"cancel_research job_id={job_id}")
            _show(_text(await client.call_tool("cancel_research", {"job_id": job_id})))
            cancelled = [i for i in sim.interactions.values()
                         if i.input_text == "A very long investigation"]
            if cancelled:
                _say(f"   the simulator saw the cancel: interaction {cancelled[0].id} is "
                     f"{cancelled[0].status}")

            _section(f"check_research job_id={job_id} after the cancel")
            _show(_text(await client.call_tool("check_research", {"job_id": job_id})))
    _section("done")
    _say(f"   the whole session took {time.monotonic() - began:.1f} s; every answer above came "
         "from the SIMULATOR.")


def _result(body: dict[str, Any], limit: int = 600) -> None:
    _say(f"   completed in {body['elapsed_seconds']} s with "
         f"{len(body['citations'])} citations; usage: {body.get('usage_text', 'not reported')}")
    _show(body["report"], limit)
    for n, cited in enumerate(body["citations"], 1):
        query = f"  (for: {cited['query']})" if cited.get("query") else ""
        _say(f"   [{n}] {cited['title']} — {cited['url']}{query}")


def run_demo() -> int:
    """Run the demo; returns the exit status (0 when every step worked)."""
    from ask_another.simulator import Simulator

    _say("ask-another demo — everything below runs against a SIMULATED provider on 127.0.0.1.")
    _say("No real model is called, no API key is needed, nothing leaves this machine.")
    with tempfile.TemporaryDirectory(prefix="ask-another-demo-") as tmp, \
            Simulator.running(latency=0.05) as sim:
        _say(f"simulator: {sim.url} (simulation)   server home: {tmp} (temporary)")
        try:
            trio.run(_session, sim, Path(tmp))
        except Exception as exc:  # the demo must explain a failure, not dump a traceback
            _say()
            _say(f"The demo failed: {type(exc).__name__}: {exc}")
            log = Path(tmp) / "server-stderr.log"
            if log.exists():
                _say("Last lines of the server's log:")
                _show("\n".join(log.read_text().splitlines()[-15:]))
            return 1
    return 0
