"""The `ask-another` console script.

    ask-another                  serve MCP over stdio (what an MCP client runs)
    ask-another models           the allowed models and what litellm knows of each
    ask-another ask MODEL PROMPT one completion, streamed to stdout
    ask-another doctor           check the configuration; exit 1 naming every malformed variable
    ask-another demo             the whole stack against the simulator, no API keys needed

Serving writes nothing to stdout but the protocol; the people commands print their answer on
stdout and their logs and errors on stderr. Heavy modules (mcp, litellm) are imported only by the
commands that need them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import trio

from ask_another.coldstart import quick_import
from ask_another.config import Config
from ask_another.errors import AskAnotherError, error_text
from ask_another.logs import configure_logging


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ask-another",
        description="Ask other models for a second opinion. With no command: serve MCP on stdio.",
        epilog='Models come from MODEL_<NAME>="provider/model;api-key[;api_base]" variables. '
               "See docs/server.md.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("serve", help="serve MCP over stdio (the default)")
    commands.add_parser("models", help="list the allowed models and what is known of each")
    ask = commands.add_parser("ask", help="ask one model one question; the answer goes to stdout")
    ask.add_argument("model", help="a shorthand (e.g. gpt4, openai) or an exact model id")
    ask.add_argument("prompt", help="the question")
    ask.add_argument("--system", help="a system prompt")
    ask.add_argument("--temperature", type=float, help="0.0 to 2.0 (sent only when given)")
    ask.add_argument("--timeout", type=float, help="seconds to wait (default: ASK_ANOTHER_TIMEOUT "
                                                   "or 60)")
    commands.add_parser("doctor", help="check the configuration; exit 1 if anything is malformed")
    commands.add_parser("demo", help="the whole stack against a local simulated provider "
                        "(no API keys needed)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    config = Config.from_env()
    command = args.command or "serve"
    # Serving logs at the configured level; the people commands keep stderr to warnings.
    configure_logging(config.log_level if command == "serve" else "WARNING")
    try:
        if command == "serve":
            with quick_import():  # the MCP SDK's import is most of the cold start
                from ask_another.server import serve_stdio
            trio.run(serve_stdio, config)
            return 0
        if command == "models":
            return trio.run(_models, config)
        if command == "ask":
            return trio.run(_ask, config, args)
        if command == "doctor":
            return trio.run(_doctor, config)
        from ask_another.demo import run_demo

        return run_demo()
    except KeyboardInterrupt:
        return 130
    except AskAnotherError as exc:
        print(error_text(exc), file=sys.stderr)
        return 1


async def _models(config: Config) -> int:
    from ask_another.catalog import allowlist_text
    from ask_another.runtime import open_runtime

    async with open_runtime(config, prewarm_after=0) as runtime:
        print(allowlist_text(await runtime.catalog(), config))
    return 0


async def _ask(config: Config, args: argparse.Namespace) -> int:
    from ask_another.runtime import open_runtime

    streamed = False

    async def show(text: str) -> None:
        nonlocal streamed
        streamed = True
        sys.stdout.write(text)
        sys.stdout.flush()

    async with open_runtime(config, prewarm_after=0) as runtime:
        try:
            result = await runtime.complete(
                args.model, args.prompt, system=args.system, temperature=args.temperature,
                timeout=args.timeout, on_delta=show,
            )
        except AskAnotherError as exc:
            if streamed:
                print()
            print(error_text(exc), file=sys.stderr)
            return 1
    if not streamed:
        sys.stdout.write(result.text)
    print()
    for n, url in enumerate(result.citations, 1):
        print(f"[{n}] {url}")
    print(f"— {result.model} · {result.usage.describe()}", file=sys.stderr)
    return 0


async def _doctor(config: Config) -> int:
    from ask_another.catalog import Catalog
    from ask_another.runtime import open_runtime

    print(f"home: {config.home}")
    print(f"timeout: {config.timeout:g} s, poll: {config.poll_seconds:g} s, "
          f"allowed hosts: {', '.join(sorted(config.allow_hosts)) or '(none)'}")
    ok = True
    try:
        async with open_runtime(config, prewarm_after=0) as runtime:
            database = await runtime.database()
            print(f"database: {database.path} (schema version "
                  f"{await database.schema_version()})")
            catalog: Catalog = await runtime.catalog()
    except AskAnotherError as exc:
        print(f"PROBLEM: {exc}")
        return 1
    if not config.models:
        ok = False
        print('PROBLEM: no models are allowed; set MODEL_<NAME>="provider/model;api-key"')
    for info in catalog.all():
        print(f"model: {info.describe()}")
    for entry in config.models:
        if not entry.api_key:
            print(f"note: {entry.variable} has an empty API key (fine for local providers)")
    for problem in config.problems:
        ok = False
        print(f"PROBLEM: {problem}")
    print("configuration OK" if ok else "configuration has problems (see above)")
    return 0 if ok else 1
