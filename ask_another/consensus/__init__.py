"""Several models at once: one prompt to a panel of 2-8 allowed models, replies side by side.

`runtime.consensus.ask(models, prompt, ...)` asks every model at once, each call a task of one
nursery (`panel_call`), and returns a
`ConsensusResult`: an `Answer` per seat (answered, failed or timed out), an optional synthesis,
and the conversation the replies were stored in; `consensus_text` formats it. An estimate above
ASK_ANOTHER_CONFIRM_USD is put to the caller's `Confirm` first (`Consensus.estimate` gives it
without asking anything). See docs/server.md (consensus, spending).
"""

from ._consensus import SYNTHESIS_PROMPT as SYNTHESIS_PROMPT
from ._consensus import Confirm as Confirm
from ._consensus import Consensus as Consensus
from ._consensus import OnAnswer as OnAnswer
from ._consensus import panel_text as panel_text
from ._panel import MAX_MODELS as MAX_MODELS
from ._panel import MIN_MODELS as MIN_MODELS
from ._panel import STANCES as STANCES
from ._panel import Answer as Answer
from ._panel import ConsensusResult as ConsensusResult
from ._panel import Seat as Seat
from ._text import answer_heading as answer_heading
from ._text import consensus_text as consensus_text

__all__ = [
    "MAX_MODELS",
    "MIN_MODELS",
    "STANCES",
    "SYNTHESIS_PROMPT",
    "Answer",
    "Confirm",
    "Consensus",
    "ConsensusResult",
    "OnAnswer",
    "Seat",
    "answer_heading",
    "consensus_text",
    "panel_text",
]
