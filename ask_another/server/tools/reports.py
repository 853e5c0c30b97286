"""Resources and prompts: a research job's report as `research://JOB_ID` (and the caller's
recent reports in resources/list), and a `second_opinion` prompt, so the capabilities the server
advertises offer something.

resources/list is served on the low-level server (`MCPServer` lists only fixed resources): the
caller's `RECENT` latest completed jobs, newest first, each a `research://JOB_ID` a client can
read or subscribe to; the template stays for any other job id.
"""

from __future__ import annotations

from typing import Any, Final

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError

from ask_another.errors import AskAnotherError
from ask_another.runtime import Runtime
from ask_another.server.context import runtime_of, user_of
from ask_another.server.lifespan import ServerState
from ask_another.server.wording import tool_text
from ask_another.store.jobs import JobRecord

RECENT: Final = 20
"""Completed jobs resources/list shows, newest first."""
LOOKED_AT: Final = 100
"""Latest jobs read to find them (a user's running and failed ones are among them)."""

REPORT = """The report of a finished research job (start_research, check_research), as markdown \
with its sources. A job still running, failed or cancelled is an error saying so."""

SECOND_OPINION = """Ask another model for a second opinion on a question, then compare its \
answer with your own."""


def report_markdown(report: str, citations: list[dict[str, str]]) -> str:
    """The report, then its sources: `[n] title — url` (the URL alone when it is the title)."""
    sources = "".join(
        f"\n[{n}] {c['url']}" if (c.get("title") or c["url"]) == c["url"]
        else f"\n[{n}] {c['title']} — {c['url']}" for n, c in enumerate(citations, 1))
    return f"{report}\n\nSources:{sources}\n" if citations else f"{report}\n"


def _resource(record: JobRecord) -> types.Resource:
    query = " ".join(record.query.split())
    return types.Resource(uri=f"research://{record.id}", name=f"research_report {record.id}",
                          title=f"Research report: {query[:80]}",
                          description=f"The report of research job {record.id} "
                                      f"({record.model}) on: {query[:300]}",
                          mime_type="text/markdown")


async def list_reports(ctx: ServerRequestContext[ServerState, Any],
                       params: types.PaginatedRequestParams) -> types.ListResourcesResult:
    """resources/list: the caller's recent reports (none where the runtime is not running)."""
    state = ctx.lifespan_context
    runtime = state.opened if isinstance(state, ServerState) else None
    if not isinstance(runtime, Runtime):
        return types.ListResourcesResult(resources=[])
    records = await runtime.jobs_for(user_of()).list(LOOKED_AT)
    done = [r for r in records if r.status == "completed"][:RECENT]
    return types.ListResourcesResult(resources=[_resource(r) for r in done])


def register(server: MCPServer[ServerState]) -> None:
    server._lowlevel_server.add_request_handler("resources/list", types.PaginatedRequestParams,
                                                list_reports)

    @server.resource("research://{job_id}", name="research_report", title="Research report",
                     description=REPORT, mime_type="text/markdown")
    async def research_report(job_id: str, ctx: Context[ServerState]) -> str:
        try:
            record = await runtime_of(ctx).jobs_for(user_of(ctx)).get(job_id.strip())
        except AskAnotherError as exc:
            raise ResourceError(tool_text(exc)) from None
        except Exception as exc:  # a ToolError from runtime_of (the server is not working)
            raise ResourceError(str(exc)) from None
        if record.status != "completed" or record.report is None:
            why = f": {record.error}" if record.error else ""
            raise ResourceError(tool_text(AskAnotherError(
                f"Research job {record.id} is {record.status}{why}; its report is a resource "
                "once it has completed")))
        return report_markdown(record.report, record.citations)

    @server.prompt(name="second_opinion", title="Second opinion", description=SECOND_OPINION)
    def second_opinion(question: str, model: str = "") -> str:
        whom = f"the model {model!r}" if model.strip() else "another model (call list_models)"
        return (f"Get a second opinion from {whom} with the completion tool on the question "
                "below. Then give me your own answer and theirs, and say where they agree, "
                f"where they differ and which you find better supported.\n\nQuestion: {question}")
