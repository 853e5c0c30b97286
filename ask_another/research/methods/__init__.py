"""Research methods: how a job's work is done, one module per method behind one `Method` type.

- "provider" (provider.py): the model's own provider researches (a Gemini deep-research
  interaction, or one long completion);
- "agent" (agent.py): one router turn in which the model may use the built-in tools;
- "sequential" (sequential.py): the local pipeline (plan, query workers, compile; the plan and
  compile contracts are in `ask_another.sequential`).

`METHODS` maps a method's name to its `Method`: the ones start_research offers. `JOB_METHODS`
adds "consensus" (consensus.py): a consensus run as a job, started only as an MCP Task
(server/tasks.py). The job actor and the takeover look a job's method up in `JOB_METHODS`.

The types the methods and the job share (`JobContext`, `ResearchResult`, `Cited`,
`ResearchFailed`, `DEPTHS`) are in method.py, so no method imports another.
"""

from __future__ import annotations

from typing import Final

from ask_another.research.methods.agent import AGENT
from ask_another.research.methods.consensus import CONSENSUS, CONSENSUS_METHOD
from ask_another.research.methods.method import DEPTHS as DEPTHS
from ask_another.research.methods.method import Cited as Cited
from ask_another.research.methods.method import JobContext as JobContext
from ask_another.research.methods.method import Method as Method
from ask_another.research.methods.method import ResearchFailed as ResearchFailed
from ask_another.research.methods.method import ResearchResult as ResearchResult
from ask_another.research.methods.provider import PROVIDER
from ask_another.research.methods.sequential import SEQUENTIAL

__all__ = [
    "CONSENSUS_METHOD",
    "DEPTHS",
    "JOB_METHODS",
    "METHODS",
    "Cited",
    "JobContext",
    "Method",
    "ResearchFailed",
    "ResearchResult",
]

METHODS: Final[dict[str, Method]] = {
    "provider": PROVIDER,
    "agent": AGENT,
    "sequential": SEQUENTIAL,
}
"""Every research method by name."""

JOB_METHODS: Final[dict[str, Method]] = {**METHODS, CONSENSUS_METHOD: CONSENSUS}
"""Every method a job may run: the research methods, and a consensus (a task's)."""
