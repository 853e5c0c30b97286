"""Constants and helpers shared by the research tests (imported by module name)."""

from __future__ import annotations

from pathlib import Path

GEMINI = "gemini/deep-research-pro-preview-12-2025"
GEMINI_AGENT = GEMINI.split("/", 1)[1]
PPLX = "perplexity/sonar-deep-research"
FAKE_KEY = "sk-test-RESEARCH-9f8e7d"


def research_env(sim_url: str, home: Path, poll: float = 0.05) -> dict[str, str]:
    """The environment of a server with a Gemini agent and a Perplexity model on the simulator."""
    return {
        "ASK_ANOTHER_HOME": str(home),
        "ASK_ANOTHER_POLL_SECONDS": str(poll),
        # A simulated Gemini task is estimated at about $1.22: these jobs run unconfirmed.
        "ASK_ANOTHER_CONFIRM_USD": "1000",
        # Short leases, so a killed server's jobs are taken over within seconds.
        "ASK_ANOTHER_LEASE_SECONDS": "3",
        "MODEL_GDR": f"{GEMINI};{FAKE_KEY};{sim_url}",
        "MODEL_PPLX": f"{PPLX};{FAKE_KEY};{sim_url}/v1",
        "MODEL_SIM": f"openai/m1;{FAKE_KEY};{sim_url}/v1",
    }
