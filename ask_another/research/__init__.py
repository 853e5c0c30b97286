"""Research jobs as supervised actors, one owner process each: start, check, cancel, survive
restarts and other processes on the same home (docs/research.md).

`ResearchJobs` is the face the MCP tools and embedding programs use; `research_spec` is the
subtree the runtime adds under its root supervisor; `METHODS` holds the research methods
(research/methods/).
"""

from ask_another.research.job import DEFAULT_MAX_ATTEMPTS as DEFAULT_MAX_ATTEMPTS
from ask_another.research.job import ResearchJob as ResearchJob
from ask_another.research.job import Services as Services
from ask_another.research.job import job_name as job_name
from ask_another.research.jobs import ResearchJobs as ResearchJobs
from ask_another.research.jobs import UnknownJob as UnknownJob
from ask_another.research.lease import Lease as Lease
from ask_another.research.messages import AwaitResult as AwaitResult
from ask_another.research.messages import Cancel as Cancel
from ask_another.research.messages import CancelOutcome as CancelOutcome
from ask_another.research.messages import ChoiceAnswer as ChoiceAnswer
from ask_another.research.messages import JobUpdate as JobUpdate
from ask_another.research.messages import NotWaiting as NotWaiting
from ask_another.research.messages import PermissionAnswer as PermissionAnswer
from ask_another.research.messages import Status as Status
from ask_another.research.messages import Subscribe as Subscribe
from ask_another.research.methods import METHODS as METHODS
from ask_another.research.methods import JobContext as JobContext
from ask_another.research.methods import Method as Method
from ask_another.research.methods import ResearchFailed as ResearchFailed
from ask_another.research.methods import ResearchResult as ResearchResult
from ask_another.research.supervisor import INTERRUPTED as INTERRUPTED
from ask_another.research.supervisor import OWNER_DIED as OWNER_DIED
from ask_another.research.supervisor import research_spec as research_spec

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "INTERRUPTED",
    "METHODS",
    "OWNER_DIED",
    "AwaitResult",
    "Cancel",
    "CancelOutcome",
    "ChoiceAnswer",
    "JobContext",
    "JobUpdate",
    "Lease",
    "Method",
    "NotWaiting",
    "PermissionAnswer",
    "ResearchFailed",
    "ResearchJob",
    "ResearchJobs",
    "ResearchResult",
    "Services",
    "Status",
    "Subscribe",
    "UnknownJob",
    "job_name",
    "research_spec",
]
