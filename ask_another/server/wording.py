"""Our errors worded for an MCP client: each next step (`errors.Hint`) as the tool to call.

The domain modules name no tool: an error carries its next step as a hint, and this is the one
table that says it in the MCP server's terms (the CLI has its own, in commands; `errors.PLAIN`
is the embedding library's). `tool_text(exc)` is `errors.error_text` with these words, for every
`ToolError`, resource error and Tasks error the server raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ask_another.errors import Hint, error_text

__all__ = ["MCP_WORDS", "tool_text"]

MCP_WORDS: Final[Mapping[Hint, str]] = {
    "list_models": "Call list_models to see the allowed models.",
    "list_jobs": "Call check_research without a job_id to list every job.",
    "free_a_job": "Retry when one finishes (check_research lists them), or stop one with "
                  "cancel_research.",
    "check_job": "Call check_research to see the job's state.",
    "answer_choice": "To answer it, use answer_choice.",
    "answer_permission": "To answer it, use answer_permission.",
    "run_research": "Use it for research instead (start_research with method auto or "
                    "provider).",
}


def tool_text(exc: BaseException) -> str:
    """`error_text(exc)` for an MCP client: the next step as the tool to call."""
    return error_text(exc, MCP_WORDS)
