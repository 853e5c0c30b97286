"""``python -m ask_another.simulator [--port N] [--latency S]``: serve the simulator standalone.

Logs one ``simulator.listening`` event (JSON, on stderr) with its URLs, then serves until
interrupted (Ctrl-C: exit status 130, no traceback) or terminated (SIGTERM: 0), and logs
``simulator.stopped``. A port in use is said in one plain line naming ``--port`` (status 2).
Nothing is written to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import signal
import sys

import structlog

from ._app import SimulatorState
from ._server import SimulatorURLs, bind_socket, make_server

EPILOG = """\
base URLs (PORT is --port, or the free port named in the simulator.listening event on stderr):
  http://127.0.0.1:PORT/v1   OpenAI-compatible chat completions (JSON and SSE), for
                             MODEL_SIM="openai/m1;any-key;http://127.0.0.1:PORT/v1"
                             and MODEL_PPLX="perplexity/sonar-deep-research;any-key;<same>"
  http://127.0.0.1:PORT      Gemini interactions (deep research), for
                             MODEL_GDR="gemini/deep-research-pro-preview-12-2025;any-key;<this>"
  any model name is answered "[simulated MODEL] answer to: PROMPT"

directives (markers in the last user message; removed from the echoed prompt):
  [[sim:fail=429]]  [[sim:fail=503 upstream overloaded]]   answer with that HTTP error
  [[sim:delay=0.5]]                 wait that many extra seconds first
  [[sim:drop]]                      close the connection without a response
  [[sim:malformed]]                 answer 200 with a body that is not JSON
  [[sim:tool=NAME {"arg": "..."}]]  ask for that tool call (repeatable), answer once results
                                    are back
  [[sim:polls=N]]  [[sim:status=failed]]   interactions: in progress for N polls, then that
                                    end status (completed by default)
a malformed directive gets a 400 naming it."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ask_another.simulator",
        description="Serve the ask-another simulated LLM provider (a simulation, not a real "
        "model) on 127.0.0.1.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds to wait before every answer"
    )
    args = parser.parse_args(argv)
    if args.latency < 0:
        parser.error("--latency must be 0 or more seconds")
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    log = structlog.get_logger("ask_another.simulator")
    try:
        sock = bind_socket(port=args.port)
    except OSError as exc:
        # Said to the person who typed the command (Quick start's second terminal), not logged.
        reason = exc.strerror or str(exc)
        parser.exit(2, f"{parser.prog}: port {args.port} on 127.0.0.1 is in use ({reason}): use "
                       "--port N for another port, or --port 0 for any free one\n"
                    if exc.errno == errno.EADDRINUSE else
                    f"{parser.prog}: cannot listen on 127.0.0.1 port {args.port} ({reason}); "
                    "--port 0 picks any free one\n")
    urls = SimulatorURLs(f"http://127.0.0.1:{sock.getsockname()[1]}")
    state = SimulatorState(args.latency)
    state.base_url = urls.url
    server = make_server(state)
    # SIGTERM (how Simulator.process stops us) and Ctrl-C end the server the same way, from
    # before it listens: uvicorn catches both while it serves and raises them again when it is
    # done, which, left to Python's handler, printed a KeyboardInterrupt traceback.
    stopped_by: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopped_by.append(signum)
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info(
        "simulator.listening",
        url=urls.url,
        openai_base=urls.openai_base,
        gemini_base=urls.gemini_base,
        latency=args.latency,
        note="simulated LLM provider: answers are not from a real model",
    )
    asyncio.run(server.serve(sockets=[sock]))
    interrupted = signal.SIGINT in stopped_by
    log.info("simulator.stopped", url=urls.url, by="Ctrl-C" if interrupted else "SIGTERM")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
