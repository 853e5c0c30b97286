"""How check_research names a job: a consensus run as a job is not called research."""

from __future__ import annotations

import time

from ask_another.research.methods import CONSENSUS_METHOD
from ask_another.server.tools.research import background_text, job_text
from ask_another.store.jobs import JobRecord


def test_an_unfinished_consensus_job_is_called_a_consensus_job():
    now = time.time()
    consensus = JobRecord(id="r-0123456789", model="sim", query="Is 1 prime?",
                          method=CONSENSUS_METHOD, status="in_progress", created_at=now,
                          started_at=now)
    research = JobRecord(id="r-abcdefabcd", model="sim", query="Why tides?",
                         status="in_progress", created_at=now, started_at=now)
    assert job_text(consensus).startswith("Consensus job r-0123456789 (sim) is in progress.")
    assert background_text(consensus, 90).startswith("Consensus job r-0123456789 (sim) is still")
    assert job_text(research).startswith("Research job r-abcdefabcd (sim) is in progress.")
