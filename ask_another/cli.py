"""The `ask-another` console script.

    ask-another                  serve MCP over stdio (what an MCP client runs)
    ask-another serve --http     serve MCP over Streamable HTTP for a team (bearer tokens)
    ask-another token add NAME   make a token for serve --http (printed once; hashes stored)
    ask-another console          the jobs, approvals and spending of this home in a browser
    ask-another models           the allowed models and what litellm knows of each
    ask-another ask MODEL PROMPT one completion, streamed to stdout (a progress line until then)
    ask-another ask M1,M2 PROMPT a consensus: every model at once, replies side by side
    ask-another research MODEL QUERY  a research job with live progress; the report to stdout
    ask-another doctor           check the configuration; exit 1 naming every problem once
    ask-another feedback TEXT    record feedback (or a bug) in the local store, as the MCP tool does
    ask-another usage [PERIOD]   what the provider calls cost: by day, model and tool
    ask-another demo             the whole stack against the simulator, no API keys needed

Serving writes nothing to stdout but the protocol; the people commands print their answer on
stdout and their errors on stderr, in words for a person at a terminal (`ask-another models`,
not "call list_models"), without log lines unless ASK_ANOTHER_LOG_LEVEL=DEBUG. Heavy modules
(mcp, litellm) are imported only by the commands that need them.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import trio

from ask_another import tracing
from ask_another.coldstart import quick_import
from ask_another.config import Config
from ask_another.errors import FEEDBACK_POINTER, AskAnotherError, Hint, error_text
from ask_another.home import home_problem
from ask_another.logs import configure_logging

if TYPE_CHECKING:
    from ask_another.research import ResearchJobs
    from ask_another.runtime import Runtime
    from ask_another.terminal import Progress

# The reference ships in --help: a wheel install has no docs/ folder to point at.
REFERENCE = """\
configuration (environment variables, read once at start):
  MODEL_<NAME>="provider/model;api-key[;api_base]"
                    one allowed model; <NAME> in lower case is its shorthand
                    (MODEL_GPT4="openai/gpt-4o;sk-..." is "gpt4"); the server calls nothing else
  ASK_ANOTHER_HOME  the SQLite store and tokens.json (default: the user state directory)
  ASK_ANOTHER_TIMEOUT               completion timeout in seconds (60)
  ASK_ANOTHER_POLL_SECONDS          research pacing: first Gemini poll wait, retry unit (5)
  ASK_ANOTHER_RESEARCH_DEADLINE     seconds a Gemini research job may run (3600)
  ASK_ANOTHER_RESEARCH_TIMEOUT      seconds other deep-research completions may take (1800)
  ASK_ANOTHER_PERMISSIONS           tool policy for research agents (read=allow,effect=ask,
                                    internal=ask,after_internal=ask)
  ASK_ANOTHER_PERMISSION_TIMEOUT    seconds a permission request waits for a person (600)
  ASK_ANOTHER_CONFIRM_USD           estimates above this ask you to confirm first (1.00)
  ASK_ANOTHER_BUDGET_DAY_USD, ASK_ANOTHER_BUDGET_MONTH_USD
                                    spending ceilings per UTC day / month (unset: none)
  ASK_ANOTHER_ALLOW_HOSTS           internal hosts read_article may fetch (host or host:port)
  SEARCH_<NAME>="provider;api-key[;api_base]"
                    a web-search engine for research (tavily, searxng, exa_ai, brave, ...)
  ASK_ANOTHER_SEARXNG_URL           a SearXNG instance for research web search
  ASK_ANOTHER_LOG_LEVEL             DEBUG, INFO, WARNING or ERROR (server log on stderr)
  ASK_ANOTHER_GATEWAY_PROCESS       1: completions in a litellm worker process (server
                                    default); 0: in a thread of the one process
  ASK_ANOTHER_TOKENS_FILE           serve --http: the tokens file (default tokens.json in
                                    the home); `ask-another token add NAME` fills it
  ASK_ANOTHER_SHUTDOWN_SECONDS      serve --http: seconds calls may finish after SIGTERM (20)
  ASK_ANOTHER_PUBLIC_URL            serve --http: the MCP URL as clients reach it, behind a
                                    proxy (https://ask.example.com/mcp)
  ASK_ANOTHER_OAUTH_ISSUER          serve --http: accept JWTs of this OAuth issuer too (also
                                    _AUDIENCE, _JWKS_URL, _USER_CLAIM, _ADMIN_SCOPE)
  ASK_ANOTHER_RATE_PER_MINUTE       serve --http: tool calls per user a minute (120; 0: off)
  ASK_ANOTHER_MAX_JOBS_PER_USER     serve --http: unfinished jobs per user (10; 0: off)
  ASK_ANOTHER_DATABASE_URL          postgresql://user:password@host:port/database: the store
                                    on PostgreSQL (several nodes) instead of the SQLite file
  ASK_ANOTHER_DATABASE_POOL_SIZE    connections per pool to that database (10)
  ASK_ANOTHER_LEASE_SECONDS         how soon another node takes over a dead node's jobs (15)
  ASK_ANOTHER_HOST_LINGER           seconds the job host stays with no unfinished job (60)

an MCP client runs `ask-another` with no command (stdio). Try it without keys: `ask-another demo`.
Full documentation: README.md and docs/ in the source tree (a team service: docs/deploy.md)."""

# Said to a person at a terminal instead of to an MCP client.
CLI_POINTER = ('If this seems like a bug, record it with `ask-another feedback "what happened"` '
               "and include the output of `ask-another doctor`.")
# An error's next step (`errors.Hint`) as the command to run.
CLI_WORDS: Final[Mapping[Hint, str]] = {
    "list_models": "Run `ask-another models` to see the allowed models.",
    "list_jobs": "The console (`ask-another console`) lists every job.",
    "free_a_job": "Retry when one finishes, or cancel one in the console (`ask-another "
                  "console`).",
    "check_job": "The console (`ask-another console`) shows the job's state.",
    "answer_choice": "Answer it as a choice.",
    "answer_permission": "Answer it with allow or deny.",
    "run_research": "Use it for research instead (`ask-another research MODEL QUERY`).",
}

TTY_HELLO = """\
ask-another is an MCP server: an MCP client (Claude Code, Claude Desktop, Gemini CLI) starts it
and speaks the protocol on its stdin and stdout. It is waiting on stdin now; Ctrl-C ends it.
To try it by hand:  ask-another demo              (the whole stack, simulated, no API keys)
                    ask-another ask MODEL "..."   (one question to a MODEL_<NAME> model)
                    ask-another --help            (every command and setting)"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ask-another",
        description="Ask other models for a second opinion. With no command: serve MCP on stdio.",
        epilog=REFERENCE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve MCP over stdio (the default), or over "
                                "Streamable HTTP with --http")
    serve.add_argument("--http", action="store_true",
                       help="serve Streamable HTTP at http://HOST:PORT/mcp (bearer tokens: see "
                            "`ask-another token`); SIGTERM stops it gracefully")
    # Defaults applied in main(): None tells an option given without --http.
    serve.add_argument("--host", default=None, help="--http: address to listen on "
                       "(default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="--http: port (default 8765; 0 "
                       "picks a free one, named in the log)")
    serve.add_argument("--console-allow-stop", action="store_true", default=None,
                       help="--http: the console's admins may stop a process of the runtime")
    serve.add_argument("--no-auth", action="store_true", help="--http: no tokens (allowed "
                       "only on a loopback host)")
    console = commands.add_parser("console", help="the console in a browser, for this home: "
                                  "jobs, approvals, spending, runtime (a one-time login link)")
    console.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any "
                         "free one)")
    console.add_argument("--no-browser", action="store_true", help="print the login link only")
    console.add_argument("--allow-stop", action="store_true",
                         help="let the runtime page stop a process")
    token = commands.add_parser("token", help="the bearer tokens of serve --http (the tokens "
                                "file holds only their hashes)")
    token_commands = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    token_add = token_commands.add_parser("add", help="make a token for a user and print it once")
    token_add.add_argument("name", help="the user's name (letters, digits, . _ @ -)")
    token_add.add_argument("--admin", action="store_true",
                           help="an admin sees every user's jobs, conversations and usage")
    token_commands.add_parser("list", help="the users that have a token")
    token_rotate = token_commands.add_parser(
        "rotate", help="replace a user's token with a new one (printed once); the user keeps "
                       "their jobs and conversations")
    token_rotate.add_argument("name")
    token_remove = token_commands.add_parser(
        "remove", help="revoke a user's token (a user added later under the name is another "
                       "user)")
    token_remove.add_argument("name")
    commands.add_parser("models", help="list the allowed models and what is known of each")
    ask = commands.add_parser("ask", help="ask one model (or several: m1,m2,m3) one question; "
                              "the answer goes to stdout")
    ask.add_argument("model", help="a shorthand (e.g. gpt4, openai) or an exact model id; "
                                   "2-8 of them separated by commas ask them all at once")
    ask.add_argument("prompt", help="the question")
    ask.add_argument("--system", help="a system prompt")
    ask.add_argument("--temperature", type=float, help="0.0 to 2.0 (sent only when given)")
    ask.add_argument("--timeout", type=float, help="seconds to wait (default: ASK_ANOTHER_TIMEOUT "
                                                   "or 60)")
    ask.add_argument("--stance", action="append", default=[], metavar="MODEL=STANCE",
                     help="several models: MODEL's stance (for, against, neutral or your own "
                          "words); repeatable")
    ask.add_argument("--synthesize", metavar="MODEL",
                     help="several models: this model compares their replies afterwards")
    ask.add_argument("--conversation", metavar="ID", help="continue this conversation")
    research = commands.add_parser("research", help="run a research job with live progress "
                                   "(permission requests asked here); the report goes to stdout")
    research.add_argument("model", help="a deep-research model, or any model for the agent and "
                                        "sequential methods")
    research.add_argument("query", help="the research question, with any context")
    research.add_argument("--method", default="auto",
                          choices=["auto", "provider", "agent", "sequential"],
                          help="auto (default): provider for deep-research models, sequential "
                               "for the others; agent: one model with tools, whose permission "
                               "requests and questions are asked at this terminal")
    research.add_argument("--depth", default="standard", choices=["shallow", "standard", "deep"],
                          help="how many queries the local pipeline plans (default standard)")
    doctor = commands.add_parser("doctor", help="check the configuration; exit 1 if anything is "
                                 "wrong")
    doctor.add_argument("--stop-workers", action="store_true",
                        help="first stop the home's job host (naming the jobs it runs: they "
                             "resume at the next start) and every shared gateway worker of the "
                             "home (the next provider call starts one again)")
    feedback = commands.add_parser("feedback", help="record feedback or a bug report in the "
                                   "local store (what the MCP feedback tool does)")
    feedback.add_argument("issue", help="what happened, or what could work better")
    usage = commands.add_parser("usage", help="what the provider calls cost, by day, model "
                                "and tool")
    usage.add_argument("period", nargs="?", default="month",
                       help="today, month (default), Nd (the last N days, e.g. 7d) or all")
    commands.add_parser("demo", help="the whole stack against a local simulated provider "
                        "(no API keys needed)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    config = Config.from_env()
    command = args.command or "serve"
    http = command == "serve" and getattr(args, "http", False)
    if command == "serve" and not http:
        given = [option for option, name in (("--host", "host"), ("--port", "port"),
                                             ("--no-auth", "no_auth"),
                                             ("--console-allow-stop", "console_allow_stop"))
                 if getattr(args, name, None) not in (None, False)]  # absent: no `serve` word
        if given:  # it would serve stdio and ignore them: not what anyone typing them wants
            parser.error(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} for "
                         "--http only (without --http, serve speaks MCP on stdio): add --http")
    by_hand = command == "serve" and not http and sys.stdin.isatty()
    configure_logging(_log_level(config, command, by_hand))
    tracing.configure()  # OTEL_* settings: spans exported from here on (docs/server.md, "Traces")
    if command not in ("serve", "doctor", "demo"):
        # The people commands log nothing a person would read: a malformed variable (skipped)
        # is said here, once, as doctor would say it. Serving logs it; doctor prints it; the
        # demo runs on its own settings.
        for problem in config.problems:
            print(f"ask-another: {problem} (skipped; `ask-another doctor` checks the "
                  "configuration)", file=sys.stderr)
    if command in ("ask", "research", "usage", "feedback") or (
            command == "token" and config.tokens_file is None):  # tokens.json in the home
        # The store (or the tokens file) would find out too, as an errno from deep inside
        # ("File exists.", "Not a directory."); say it as doctor does.
        unusable = home_problem(config.home)
        if unusable is not None:
            print(unusable, file=sys.stderr)
            return 1
    try:
        if http:
            # As for stdio: the SDK's import is most of the start (about 0.6 s of CPU of 1.3).
            with quick_import():
                from ask_another.server.http import serve_http

            trio.run(partial(serve_http, config, args.host or "127.0.0.1",
                             8765 if args.port is None else args.port, no_auth=args.no_auth,
                             console_allow_stop=bool(args.console_allow_stop)))
            return 0
        if command == "console":
            from ask_another.console._serve import serve_console

            trio.run(partial(serve_console, config, port=args.port,
                             open_browser=not args.no_browser, allow_stop=args.allow_stop,
                             say=lambda text: print(text, flush=True)))
            return 0
        if command == "token":
            return _token(config, args)
        if command == "serve":
            if by_hand:
                print(TTY_HELLO, file=sys.stderr, flush=True)
            trio.run(_serve, config)
            return 0
        if command == "models":
            return trio.run(_models, config)
        if command in ("ask", "research"):
            person = (_research if command == "research" else
                      _consensus if "," in args.model else _ask)
            # A person's command is a trace of its own, as a client's call is (the MCP SDK's
            # request span): its provider calls, made in the worker, below it.
            with tracing.span(f"ask-another {command}"):
                return trio.run(person, config, args)
        if command == "doctor":
            return trio.run(_doctor, config, args.stop_workers)
        if command == "usage":
            return trio.run(_usage, config, args.period)
        if command == "feedback":
            return trio.run(_feedback, config, args.issue)
        from ask_another.demo import run_demo

        return run_demo()
    except AskAnotherError as exc:
        print(person_text(exc), file=sys.stderr)
        return 1
    except BaseException as exc:
        # Ctrl-C: trio delivers KeyboardInterrupt inside whatever nurseries were open, so it
        # may arrive wrapped in exception groups; a person pressed it, no traceback for that.
        if _only(exc, KeyboardInterrupt):
            return 130
        # A refused request (a mistyped model, an empty query) raised inside the runtime's
        # nursery arrives wrapped the same way: its one line, not a traceback.
        mistake = _first(exc, AskAnotherError)
        if mistake is not None and _only(exc, AskAnotherError):
            print(person_text(mistake), file=sys.stderr)
            return 1
        raise


def _token(config: Config, args: argparse.Namespace) -> int:
    from ask_another.server.tokens import TokensFile

    tokens = TokensFile(config.tokens_path)
    if args.token_command == "add":
        token = tokens.add(args.name, admin=args.admin)
        print(token)
        print(f"token for {args.name}{' (admin)' if args.admin else ''} added to "
              f"{config.tokens_path}; it is shown only this once: give it to {args.name} "
              "(the file keeps its hash, not the token)", file=sys.stderr)
    elif args.token_command == "list":
        users = tokens.users()
        for user in users:
            print(f"{user.name}{' (admin)' if user.admin else ''}  id {user.principal}"
                  f"{f'  added {user.created}' if user.created else ''}")
        if not users:
            print(f"no tokens in {config.tokens_path}; `ask-another token add NAME` makes one",
                  file=sys.stderr)
    elif args.token_command == "rotate":
        token = tokens.rotate(args.name)
        print(token)
        print(f"token of {args.name} replaced in {config.tokens_path}; the old one is refused "
              f"from a running server's next request; the new one is shown only this once",
              file=sys.stderr)
    else:
        tokens.remove(args.name)
        print(f"token of {args.name} removed; a running server refuses it from its next request",
              file=sys.stderr)
    return 0


async def _serve(config: Config) -> None:
    # The lifespan (the runtime) opens before the MCP SDK is imported: the gateway's worker
    # process starts with it and imports litellm (about 1.3 s of CPU) on the other core while
    # this process imports the SDK (about 0.4 s), so the first completion waits that much less.
    from ask_another.hosting import until_signalled
    from ask_another.server.lifespan import open_lifespan

    async def serve() -> None:
        async with open_lifespan(config, per_session=True) as opened:
            with quick_import():  # the MCP SDK's import is most of the cold start
                from ask_another.server import serve_stdio
            await serve_stdio(config, opened)

    # A client ends a session by closing stdin, terminating the process group or hanging up:
    # each ends it in order, so the jobs started here move to the job host at once.
    await until_signalled((signal.SIGTERM, signal.SIGHUP), serve)


def _only(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `exc` is `kind`, or exception groups holding nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only(e, kind) for e in exc.exceptions)
    return isinstance(exc, kind)


def _first(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first `kind` in `exc` or the exception groups around it."""
    if isinstance(exc, BaseExceptionGroup):
        return next((found for e in exc.exceptions if (found := _first(e, kind))), None)
    return exc if isinstance(exc, kind) else None


def _log_level(config: Config, command: str, by_hand: bool) -> str:
    """Served to a client: the configured level. A person at a terminal reads the command's own
    messages, so the log stays quiet (errors only while serving by hand, nothing for the people
    commands) unless ASK_ANOTHER_LOG_LEVEL=DEBUG asks for everything."""
    if config.log_level == "DEBUG":
        return "DEBUG"
    if command == "serve":
        return "ERROR" if by_hand else config.log_level
    return "CRITICAL"


def person_text(exc: BaseException) -> str:
    """`error_text(exc)` for a person at a terminal: the commands to run instead of the tools to
    call, and the bug pointer to the feedback command."""
    return error_text(exc, CLI_WORDS).replace(FEEDBACK_POINTER, CLI_POINTER)


async def _models(config: Config) -> int:
    # litellm's model map, read as data: no runtime, no gateway, no litellm import.
    from ask_another.catalog import Catalog, allowlist_text, model_map

    catalog = await trio.to_thread.run_sync(lambda: Catalog(config, model_map()))
    print(allowlist_text(catalog, config))
    return 0


async def _ask(config: Config, args: argparse.Namespace) -> int:
    from ask_another.runtime import open_runtime
    from ask_another.terminal import open_progress

    streamed = False

    # prewarm_after=None: a mistake (an unknown model, an empty prompt, a misspelled provider)
    # is refused before any worker starts; the call starts it.
    async with (open_runtime(config, prewarm_after=None, per_session=True) as runtime,
                open_progress() as progress):
        progress.set(f"asking {args.model}")

        async def show(text: str) -> None:
            nonlocal streamed
            if not streamed:
                progress.stop()  # the answer takes the line from here
            streamed = True
            sys.stdout.write(text)
            sys.stdout.flush()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_say_while_the_worker_starts, runtime, progress,
                                   f"asking {args.model}")
                result = await runtime.complete(
                    args.model, args.prompt, system=args.system, temperature=args.temperature,
                    timeout=args.timeout, on_delta=show, tool="ask",
                )
                nursery.cancel_scope.cancel()
        except AskAnotherError as exc:
            progress.stop()
            if streamed:
                print()
            print(person_text(exc), file=sys.stderr)
            return 1
        progress.stop()
    if not streamed:
        sys.stdout.write(result.text)
    print()
    for n, url in enumerate(result.citations, 1):
        print(f"[{n}] {url}")
    print(f"— {result.model} · {result.usage.describe()}", file=sys.stderr)
    return 0


async def _say_while_the_worker_starts(runtime: Runtime, progress: Progress, doing: str) -> None:
    """While the call waits for a gateway worker to start (litellm's import: seconds), the
    status line says so, with how long the last start took here; then `doing` again."""
    from ask_another.gateway import last_start_seconds

    gateway = await runtime.gateway()
    # Said only for a worker being started: a running one can take a while to answer on a busy
    # machine, and "starting" would be untrue then.
    while not (now := gateway.statistics()).starting:
        if now.ready:
            return
        await trio.sleep(0.05)
    last = last_start_seconds(runtime.config.home.absolute())
    took = f", {last:.0f} s last time" if last is not None else ""
    progress.set(f"starting the model worker (it imports litellm{took}), then {doing}")
    while not gateway.statistics().ready:  # noqa: ASYNC110 - a statistic; no event to await
        await trio.sleep(0.1)
    progress.set(doing)


async def _research(config: Config, args: argparse.Namespace) -> int:
    from ask_another.console_link import approval_url, running_console
    from ask_another.research import JobUpdate
    from ask_another.research.usage import usage_text
    from ask_another.runtime import open_runtime
    from ask_another.terminal import TerminalPerson, open_progress

    async with (open_runtime(config, prewarm_after=None, per_session=True) as runtime,
                open_progress() as progress):
        await _refuse_unknown_providers(runtime, [args.model])
        jobs = runtime.jobs
        job = await jobs.start(args.model, args.query, args.method, depth=args.depth)
        print(f"research job {job.id} ({job.model}, method {job.method})", file=sys.stderr)
        progress.set(f"{job.id} pending")
        person = TerminalPerson(progress)

        async def update(change: JobUpdate) -> None:
            status = change.status.replace("_", " ")
            step = f": {change.step}" if change.step and change.step != change.status else ""
            progress.set(f"{change.job_id} {status}{step}")

        async def answer_questions() -> None:
            # What the job waits for is in its record (`waiting_for`, `Question` values):
            # a spend confirmation above ASK_ANOTHER_CONFIRM_USD, an agent's permission
            # requests and ask_user questions.
            asked: set[str] = set()
            while True:
                record = await jobs.get(job.id)
                for question in record.waiting_for:
                    call_id = question.tool_call_id
                    if call_id in asked:
                        continue
                    asked.add(call_id)
                    # An `ask-another console` on this home answers it too (console_link.py).
                    root = running_console(config.home)
                    link = approval_url(root, job.id, call_id) if root is not None else None
                    try:
                        with trio.CancelScope() as asking:
                            async with trio.open_nursery() as watching:
                                watching.start_soon(_cancel_when_settled, jobs, job.id,
                                                    call_id, asking)
                                if question.kind == "choice":
                                    answer: Any = await person.choice(question, link)
                                else:
                                    answer = await person.permission(question, link)
                                watching.cancel_scope.cancel()
                        if asking.cancelled_caught:  # answered in the console, or expired
                            person.withdrawn("answered in the console" if link is not None
                                             else "no longer asked: it expired")
                        elif question.kind == "choice":
                            if answer is not None:
                                await jobs.answer_choice(job.id, call_id, answer,
                                                         face="terminal")
                        else:
                            await jobs.answer_permission(job.id, call_id, answer,
                                                         face="terminal")
                    except AskAnotherError as exc:  # expired meanwhile, say
                        print(person_text(exc), file=sys.stderr)
                await trio.sleep(0.2)

        final = None
        async with trio.open_nursery() as nursery:

            async def cancel_on_ctrl_c() -> None:
                with trio.open_signal_receiver(signal.SIGINT) as presses:
                    async for _ in presses:
                        nursery.cancel_scope.cancel()  # final stays None: interrupted
                        return

            nursery.start_soon(cancel_on_ctrl_c)
            nursery.start_soon(answer_questions)
            final = await jobs.wait(job.id, timeout=float("inf"), on_progress=update)
            nursery.cancel_scope.cancel()
        progress.stop()
        if final is None:
            outcome = await jobs.cancel(job.id)
            remote = f"; {outcome.remote}" if outcome.remote else ""
            print(f"research job {job.id} cancelled (Ctrl-C){remote}", file=sys.stderr)
            return 130
    if final.status != "completed" or final.report is None:
        reason = f": {final.error}" if final.error else ""
        print(person_text(AskAnotherError(f"Research job {final.id} {final.status}{reason}")),
              file=sys.stderr)
        return 1
    print(final.report)
    # A report of the local pipeline lists its sources itself (References, Notes): only the
    # ones it does not name are listed after it, each once.
    for n, cited in enumerate(final.citations, 1):
        if cited["url"] in final.report:
            continue
        title = cited.get("title") or cited["url"]
        print(f"[{n}] {title} — {cited['url']}" if title != cited["url"] else f"[{n}] {title}")
    usage = final.detail.get("usage")
    spent = f" · {usage_text(usage)}" if isinstance(usage, dict) else ""
    print(f"— {final.id} · {final.model} · completed in {final.elapsed(final.ended_at or 0):.0f} s"
          f"{spent}", file=sys.stderr)
    return 0


async def _cancel_when_settled(jobs: ResearchJobs, job_id: str, call_id: str,
                               asking: trio.CancelScope) -> None:
    """Cancel `asking` once job `job_id` no longer waits for `call_id` (answered in a console,
    expired): the terminal stops asking a question nobody waits for."""
    while True:
        await trio.sleep(0.5)
        record = await jobs.get(job_id)
        if all(q.tool_call_id != call_id for q in record.waiting_for):
            asking.cancel()
            return


async def _consensus(config: Config, args: argparse.Namespace) -> int:
    from ask_another.consensus import Answer, answer_heading, consensus_text
    from ask_another.interaction.types import ALLOW, Decision, Deny
    from ask_another.runtime import open_runtime
    from ask_another.spend.estimate import Estimate

    stances: dict[str, str] = {}
    for item in args.stance:
        model, sep, stance = item.partition("=")
        if not sep or not model.strip() or not stance.strip():
            print(f"--stance wants MODEL=STANCE, got {item!r}", file=sys.stderr)
            return 2
        stances[model.strip()] = stance.strip()

    async def progress(answer: Answer, ended: int, total: int) -> None:
        print(f"[{ended}/{total}] {answer_heading(answer)}", file=sys.stderr)

    async def confirm(estimate: Estimate) -> Decision:
        # Above ASK_ANOTHER_CONFIRM_USD: the person at the terminal says yes or no (end of
        # input, or no answer within ASK_ANOTHER_PERMISSION_TIMEOUT, is no).
        print(f"Confirm the consensus's estimated cost, {estimate.describe()}? [y/N] ", end="",
              file=sys.stderr, flush=True)
        with trio.move_on_after(config.permission_timeout):
            line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            return ALLOW if line.strip().lower() in ("y", "yes") else Deny("rejected")
        print("(no answer in time)", file=sys.stderr, flush=True)
        return Deny("expired")

    async with open_runtime(config, prewarm_after=None, per_session=True) as runtime:
        await _refuse_unknown_providers(runtime, args.model.split(",")
                                        + ([args.synthesize] if args.synthesize else []))
        result = await runtime.consensus.ask(
            args.model.split(","), args.prompt, system=args.system, stances=stances,
            synthesize=args.synthesize, conversation_id=args.conversation,
            temperature=args.temperature, timeout=args.timeout, on_answer=progress,
            confirm=confirm)
    print(consensus_text(result))
    return 0 if result.answered else 1


async def _refuse_unknown_providers(runtime: Runtime, names: Sequence[str]) -> None:
    """Raise doctor's words for a misspelled provider among `names` (models as typed), as
    `Runtime.complete` does for one: before any worker starts, not in litellm's words."""
    catalog = await runtime.catalog()
    for name in names:
        try:
            entry = runtime.config.resolve(name.strip())
        except AskAnotherError:
            continue  # not allowed, ambiguous: the call itself says so
        catalog.check(entry)


async def _usage(config: Config, period: str) -> int:
    from ask_another.runtime import open_runtime
    from ask_another.spend.report import usage_report

    async with open_runtime(config, prewarm_after=None, per_session=True) as runtime:
        print(await usage_report(runtime.services, period))
    return 0


async def _doctor(config: Config, stop_workers: bool = False) -> int:
    """Each problem once, on a PROBLEM line (the runtime's log lines are off for this command)."""
    from ask_another.catalog import Catalog
    from ask_another.config import key_notes as config_key_notes
    from ask_another.gateway import home_workers
    from ask_another.gateway import stop_workers as stop
    from ask_another.runtime import describe_gateway, open_runtime

    home = config.home.absolute()
    if stop_workers:
        await _stop_host(config)
        for worker, gone in await trio.to_thread.run_sync(stop, home):
            print(f"{'stopped' if gone else 'asked to stop (still running)'}: worker "
                  f"{worker.describe(home)}")

    print(f"home: {config.home}")
    print(f"timeout: {config.timeout:g} s, poll: {config.poll_seconds:g} s, "
          f"allowed hosts: {', '.join(sorted(config.allow_hosts)) or '(none)'}")
    problems = [f"{p}" for p in config.problems]
    # litellm's provider list, read from its data files (this process never imports litellm):
    # a misspelled provider passes every other check and fails only at the first call.
    from ask_another.catalog import known_providers, model_map, unknown_provider

    providers = await trio.to_thread.run_sync(lambda: known_providers(model_map()))
    problems.extend(p for entry in config.models
                    if (p := unknown_provider(entry, providers)) is not None)
    if not config.models:
        problems.append('no models are allowed; set MODEL_<NAME>="provider/model;api-key"')
    unusable = await trio.to_thread.run_sync(home_problem, config.home)
    if unusable is not None:
        problems.insert(0, unusable)
    elif config.database_url is not None and config.database_url.problem is not None:
        pass  # a malformed URL: already a problem above, and the store would only repeat it
    else:
        try:
            # prewarm_after=None: no gateway worker (litellm) starts; the catalog reads the map.
            # start_host=False: doctor looks at the job host, it never starts one.
            async with open_runtime(config, prewarm_after=None, per_session=True,
                                    start_host=False) as runtime:
                database = await runtime.database()
                print(f"database: {database.where} (schema version "
                      f"{await database.schema_version()})")
                catalog: Catalog = await runtime.catalog()
                host_line = await _host_line(runtime)
        except AskAnotherError as exc:
            problems.insert(0, str(exc))
        else:
            for info in catalog.all():
                print(f"model: {info.describe()}")
            print(f"provider calls: {describe_gateway(config)}")
            # Every worker of the home, whichever environment started it: a client's sessions
            # may have another than this terminal's (`--stop-workers` stops them all).
            for worker in await trio.to_thread.run_sync(home_workers, home):
                print(f"worker: {worker.describe(home)}")
            print(host_line)
    traces, trace_problems = tracing.describe()
    print(traces)
    problems.extend(trace_problems)
    key_notes, key_problems = config_key_notes(os.environ)
    problems.extend(key_problems)
    for note in key_notes:
        print(f"note: {note}")
    for entry in config.models:
        if not entry.api_key:
            print(f"note: {entry.variable} has an empty API key (fine for local providers; "
                  "litellm then reads the provider's own variable, such as OPENAI_API_KEY)")
        if entry.api_base:
            refused = await _unreachable(entry.api_base)
            if refused:
                problems.append(f"{entry.variable}: cannot connect to {entry.api_base} "
                                f"({refused}); is the server at that address running?")
    for search in config.searches:
        print(f"search: {search.shorthand}: {search.provider} ({search.variable})"
              + (" — used by research turns" if search is config.search else ""))
        if search.api_base:
            refused = await _unreachable(search.api_base)
            if refused:
                problems.append(f"{search.variable}: cannot connect to {search.api_base} "
                                f"({refused}); is the search engine at that address running?")
    if not config.searches:
        print('search: none (set SEARCH_<NAME>="provider;api-key[;api_base]" for web search)')
    if config.oauth is not None:
        from ask_another.server.auth import check_jwks

        try:
            keys = await trio.to_thread.run_sync(check_jwks, config.oauth)
        except AskAnotherError as exc:
            problems.append(f"ASK_ANOTHER_OAUTH_ISSUER: {exc}")
        else:
            print(f"oauth (serve --http): issuer {config.oauth.issuer}, {keys}")
    # In an unusable home the tokens file is unusable too: its problem says it once.
    tokens = _tokens_status(config) if unusable is None or config.tokens_file else ""
    if tokens.startswith("PROBLEM: "):
        problems.append(tokens.removeprefix("PROBLEM: "))
    elif tokens:
        print(tokens)
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("configuration OK" if not problems else "configuration has problems (see above)")
    return 0 if not problems else 1


async def _host_jobs(runtime: Runtime, pid: int) -> list[str]:
    """The ids of the unfinished jobs the job host `pid` holds."""
    from ask_another.research.lease import owner_prefix
    from ask_another.store.jobs import job_store

    prefix = owner_prefix(pid)
    return [job.id for job in await job_store(await runtime.database()).unfinished()
            if job.owner is not None and job.owner.startswith(prefix)]


async def _host_line(runtime: Runtime) -> str:
    """doctor's line on the home's job host (research/host.py): its pid and its jobs."""
    from ask_another.research.host import running_host

    if runtime.config.database_url is not None:
        return "job host: none on PostgreSQL (the serve --http nodes run each other's jobs)"
    pid = await trio.to_thread.run_sync(running_host, runtime.config.home)
    if pid is None:
        return ("job host: not running (a session on this home starts it when it starts, "
                "holds or finds an unfinished job)")
    jobs = await _host_jobs(runtime, pid)
    held = f"running {len(jobs)} job(s): {', '.join(jobs)}" if jobs else "running no job"
    return f"job host: pid {pid}, {held}; log {runtime.config.home / 'jobs' / 'host.log'}"


async def _stop_host(config: Config) -> None:
    """`doctor --stop-workers`: say which jobs stopping the job host interrupts, then stop it
    (it hands them back; the next host takes them over)."""
    from ask_another.research.host import running_host, stop_host
    from ask_another.runtime import open_runtime

    pid = await trio.to_thread.run_sync(running_host, config.home)
    if pid is None:
        return
    async with open_runtime(config, prewarm_after=None, per_session=True,
                            start_host=False) as runtime:
        jobs = await _host_jobs(runtime, pid)
    if jobs:
        print(f"stopping the job host (pid {pid}) interrupts {len(jobs)} job(s): "
              f"{', '.join(jobs)}; they resume from their last step at the next start (the "
              "next session on this home starts a host)")
    stopped = await trio.to_thread.run_sync(stop_host, config.home)
    if stopped is not None:
        print(f"{'stopped' if stopped[1] else 'asked to stop (still running)'}: job host "
              f"pid {stopped[0]}")


def _tokens_status(config: Config) -> str:
    """The tokens line of `doctor`: who could sign in to `serve --http`, or a `PROBLEM: ` line
    for a tokens file that `serve --http` would refuse to start with."""
    from ask_another.server.tokens import TokensFile

    path = config.tokens_path
    try:
        users = TokensFile(path).users()
    except AskAnotherError as exc:
        return f"PROBLEM: {exc}"
    oauth = "; OAuth tokens too" if config.oauth is not None else ""
    if not users and config.oauth is None and config.tokens_file is not None \
            and not path.exists():
        return (f"PROBLEM: ASK_ANOTHER_TOKENS_FILE names {path}, which does not exist; "
                "`ask-another token add NAME` makes it")
    if not users:
        return f"tokens (serve --http): none in {path}{oauth}"
    admins = sum(u.admin for u in users)
    return (f"tokens (serve --http): {len(users)} user(s) in {path}, {admins} admin(s)"
            f"{oauth}")


async def _unreachable(api_base: str) -> str | None:
    """Why a TCP connection to `api_base`'s host fails, or None when one opens (nothing is sent:
    checking a key would cost a request)."""
    url = urlsplit(api_base)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        connection = await trio.to_thread.run_sync(
            socket.create_connection, (url.hostname or "", port), 5.0)
    except TimeoutError:
        return "no answer within 5 s"
    except OSError as exc:
        return (exc.strerror or type(exc).__name__).lower()
    connection.close()
    return None


async def _feedback(config: Config, issue: str) -> int:
    from ask_another.runtime import open_runtime

    async with open_runtime(config, prewarm_after=None, per_session=True) as runtime:
        record = await runtime.add_feedback(issue, "cli")
        where = (await runtime.database()).where
    # The project has no public tracker (README): say where the text is, not where to send it.
    print(f"Thank you: feedback #{record.id} recorded at {record.created_at} in {where}. "
          "It stays there (nothing is sent anywhere): whoever looks after your ask-another "
          "reads it there.")
    return 0
