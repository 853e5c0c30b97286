"""``python -m ask_another.simulator [--port N] [--latency S]``: serve the simulator standalone.

Logs one ``simulator.listening`` event (JSON, on stderr) with its URLs, then serves until
interrupted or terminated. Nothing is written to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
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
        log.error("simulator.bind_failed", port=args.port, error=str(exc))
        return 2
    urls = SimulatorURLs(f"http://127.0.0.1:{sock.getsockname()[1]}")
    state = SimulatorState(args.latency)
    state.base_url = urls.url
    server = make_server(state)
    # SIGTERM (how Simulator.process stops us) ends the server as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    log.info(
        "simulator.listening",
        url=urls.url,
        openai_base=urls.openai_base,
        gemini_base=urls.gemini_base,
        latency=args.latency,
        note="simulated LLM provider: answers are not from a real model",
    )
    asyncio.run(server.serve(sockets=[sock]))
    log.info("simulator.stopped", url=urls.url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
