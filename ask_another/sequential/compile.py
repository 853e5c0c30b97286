"""`sequential_research_compile`: a plan plus its queries' raw results, compiled into a report.

Each successful result becomes one section (in plan order) built from its `data`: strings are
paragraphs, lists are bullet lists under a bold label, dicts are sub-lists. Sources are renumbered
`[1]`, `[2]`, ... in order of first appearance in the report, and `S1`-style references inside the
data text point at the new numbers. Failed queries become warnings. The three citation styles
differ only in how a citation is marked in the text and where the sources are listed; the
numbering, `sources`, `citations_used` and `word_count` are the same in all three.
docs/sequential.md states every rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec

from ask_another.sequential.contracts import (
    Citation,
    CitationStyle,
    CompileRequest,
    Plan,
    Query,
    RawResult,
    Report,
    Section,
    SequentialInputError,
    Source,
    Statistics,
    decode,
    revalidate,
    to_json_obj,
)
from ask_another.sequential.plan import execution_phases, focus_query_text, make_id, timestamp

_HEADINGS: dict[str, str] = {
    "definition": "Overview",
    "current_state": "Current State",
    "comparison": "Comparison",
    "types": "Types and Categories",
    "history": "History",
    "applications": "Applications",
    "challenges": "Challenges",
    "future_outlook": "Future Outlook",
}

# Bold labels for known data keys; other keys get their name in title case.
_LABELS: dict[str, str] = {
    "characteristics": "Key Characteristics",
    "examples": "Examples",
    "recent_developments": "Recent Developments",
    "key_players": "Key Players",
    "key_developments": "Key Developments",
    "challenges_and_opportunities": "Challenges and Opportunities",
    "items": "Types",
    "categories": "Categories",
    "similarities": "Key Similarities",
    "differences": "Key Differences",
    "trade_offs": "Trade-offs",
    "recommendations": "Use Case Recommendations",
    "milestones": "Key Milestones",
    "emerging_trends": "Emerging Trends",
    "open_questions": "Open Questions",
}

# String fields that carry a section's main prose: rendered as plain paragraphs, without a label.
_PROSE_FIELDS = frozenset(
    {"definition", "current_status", "origins", "outlook", "summary", "overview", "description"}
)

# A citation inside the report being built: private-use characters around the index of the
# source in `_Sources.citations`. User text is stripped of these two characters first, so a
# placeholder can only come from us; styles replace them at the very end.
_OPEN, _CLOSE = "\ue000", "\ue001"
_PLACEHOLDER_RUN = re.compile(f"(?:{_OPEN}\\d+{_CLOSE})+")
_PLACEHOLDER = re.compile(f"{_OPEN}(\\d+){_CLOSE}")
_S_REFERENCE = re.compile(r"[\[(]\s*S\d+(?:\s*[,;]\s*S\d+)*\s*[\])]")
_S_ID = re.compile(r"S\d+")
_WORD = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*")


def count_words(markdown: str) -> int:
    """Words in `markdown`: runs of letters or digits, possibly joined by an apostrophe, hyphen
    or dot (`Mach-Zehnder`, `2.5`, `don't` are one word each). Markdown punctuation (`#`, `-`,
    `**`) is not a word.

    The report's `word_count` is this count over the report body: title, executive summary and
    sections (methodology included when requested), without citation markers and without the
    list of sources (References, footnote definitions or Notes).
    """
    return len(_WORD.findall(markdown))


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def _titled(text: str) -> str:
    # Capitalise each word's first letter only: `str.title` would turn "AI chips" into "Ai Chips".
    return " ".join(word[:1].upper() + word[1:] for word in text.split())


def _scalar_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Sources:
    """The sources of successful results, and the rewriting of their ids into placeholders."""

    def __init__(self, citations: list[Citation]) -> None:
        self.citations = citations
        self.index = {citation.id: position for position, citation in enumerate(citations)}
        ids = sorted(self.index, key=len, reverse=True)
        self._pattern: re.Pattern[str] | None = None
        if ids:
            any_id = "|".join(re.escape(i) for i in ids)
            bare_ids = [i for i in ids if _S_ID.fullmatch(i)]
            # A bracketed group of known ids: "[S1]", "(S1, S3)", "[src-a; src-b]".
            group = rf"[\[(]\s*(?:{any_id})(?:\s*[,;]\s*(?:{any_id}))*\s*[\])]"
            alternatives = [group]
            if bare_ids:  # bare ids only in the S<n> form: a bare arbitrary id could be any word
                alternatives.append(rf"(?<!\w)(?:{'|'.join(re.escape(i) for i in bare_ids)})(?!\w)")
            self._pattern = re.compile("|".join(alternatives))

    def marker(self, source_id: str) -> str:
        return f"{_OPEN}{self.index[source_id]}{_CLOSE}"

    def rewrite(self, text: str) -> str:
        """`text` with every reference to a known source replaced by its placeholder."""
        text = text.replace(_OPEN, "").replace(_CLOSE, "")
        if self._pattern is None:
            return text

        def replace(match: re.Match[str]) -> str:
            found = match.group(0)
            if found[0] in "[(":
                ids = [part.strip() for part in re.split(r"[,;]", found[1:-1])]
            else:
                ids = [found]
            if not all(i in self.index for i in ids):
                return found
            return "".join(self.marker(i) for i in ids)

        return self._pattern.sub(replace, text)


class _Block:
    """One block of section content: a paragraph, or a label with a bullet list."""

    def __init__(self, first_line: str, rest: str = "") -> None:
        self.first_line = first_line
        self.rest = rest

    def text(self) -> str:
        return self.first_line + (f"\n{self.rest}" if self.rest else "")


def _bullets(value: object, depth: int, rewrite: Callable[[str], str]) -> list[str]:
    indent = "  " * depth
    if isinstance(value, Mapping):
        lines: list[str] = []
        for key, item in value.items():
            label = f"**{rewrite(_one_line(str(key)))}:**"
            if isinstance(item, (Mapping, list)):
                if item:
                    lines.append(f"{indent}- {label}")
                    lines.extend(_bullets(item, depth + 1, rewrite))
            elif item is not None:
                lines.append(f"{indent}- {label} {rewrite(_one_line(_scalar_text(item)))}")
        return lines
    if isinstance(value, list):
        lines = []
        for item in value:
            if isinstance(item, list):
                lines.extend(_bullets(item, depth + 1, rewrite))
            elif isinstance(item, Mapping) and all(
                not isinstance(v, (Mapping, list)) for v in item.values()
            ):
                # A record such as {"name": ..., "year": ...} reads best on one line.
                parts = [
                    f"**{rewrite(_one_line(str(k)))}:** {rewrite(_one_line(_scalar_text(v)))}"
                    for k, v in item.items()
                    if v is not None
                ]
                if parts:
                    lines.append(f"{indent}- " + "; ".join(parts))
            else:
                lines.extend(_bullets(item, depth, rewrite))
        return lines
    if value is None:
        return []
    return [f"{indent}- {rewrite(_one_line(_scalar_text(value)))}"]


def _blocks(
    data: Mapping[str, Any], field_order: Sequence[str], rewrite: Callable[[str], str]
) -> list[_Block]:
    keys = [k for k in field_order if k in data] + [k for k in data if k not in field_order]
    blocks: list[_Block] = []
    for key in keys:
        value = data[key]
        if value is None or value == "" or value == [] or value == {}:
            continue
        label = _LABELS.get(key) or _titled(key.replace("_", " "))
        if isinstance(value, (Mapping, list)):
            lines = _bullets(value, 0, rewrite)
            if lines:
                blocks.append(_Block(f"**{label}:**", "\n".join(lines)))
        elif isinstance(value, str) and key in _PROSE_FIELDS:
            paragraphs = [p.strip() for p in re.split(r"\n\s*\n", value) if p.strip()]
            blocks.extend(_Block(rewrite(p)) for p in paragraphs)
        else:
            blocks.append(_Block(f"**{label}:** {rewrite(_one_line(_scalar_text(value)))}"))
    return blocks


def _render_markers(text: str, style: CitationStyle | None, number: Mapping[int, int]) -> str:
    """Replace placeholder runs with the style's markers; style None removes them."""

    def run(match: re.Match[str]) -> str:
        numbers = [number[int(i)] for i in _PLACEHOLDER.findall(match.group(0))]
        if style == "inline":
            return "".join(f"[{n}]" for n in numbers)
        if style == "footnote":
            return "".join(f"[^{n}]" for n in numbers)
        return "<sup>" + ",".join(str(n) for n in numbers) + "</sup>"

    if style is None:
        return re.sub(rf"[ \t]*{_PLACEHOLDER_RUN.pattern}", "", text)
    if style in ("footnote", "endnote"):
        # Footnote and endnote marks sit directly on the word they follow.
        text = re.sub(rf"[ \t]+(?={_PLACEHOLDER_RUN.pattern})", "", text)
    return _PLACEHOLDER_RUN.sub(run, text)


def _autolink(url: str) -> str:
    # Whitespace or angle brackets would end a markdown autolink early.
    url = re.sub(r"\s+", "%20", url.strip()).replace("<", "%3C").replace(">", "%3E")
    return f"<{url}>" if url else ""


def _source_list(sources: Sequence[tuple[int, Citation]], style: CitationStyle) -> str:
    """The list of sources that closes the markdown report, in the style's form."""
    lines: list[str] = []
    for number, citation in sources:
        title = _one_line(citation.title)
        link = _autolink(citation.url) if citation.url else ""
        url = f" {link}" if link else ""
        if style == "inline":
            lines.append(f"- **[{number}]**: {title}{url}")
        elif style == "footnote":
            accessed = f" (accessed {citation.accessed_date})" if citation.accessed_date else ""
            lines.append(f"[^{number}]: {title}{url}{accessed}")
        else:
            parts = [f"{number}. {title}."]
            if link:
                parts.append(f"{link}.")
            if citation.accessed_date:
                parts.append(f"Accessed {citation.accessed_date}.")
            if citation.excerpt:
                parts.append(f"“{_one_line(citation.excerpt)}”")
            lines.append(" ".join(parts))
    if style == "inline":
        return "---\n\n### References\n\n" + "\n".join(lines)
    if style == "footnote":
        return "---\n\n" + "\n".join(lines)
    return "---\n\n## Notes\n\n" + "\n".join(lines)


def _check(request: CompileRequest) -> dict[str, Query]:
    """Apply the contract's validation rules; the plan's queries by id."""
    plan = request.plan
    if not plan.topic.strip():
        raise SequentialInputError("plan.topic", "plan.topic is empty")
    queries: dict[str, Query] = {}
    for index, query in enumerate(plan.queries):
        if query.query_id in queries:
            raise SequentialInputError(
                f"plan.queries[{index}].query_id",
                f"plan.queries[{index}].query_id {query.query_id!r} is used by two queries",
            )
        queries[query.query_id] = query
    result_of: dict[str, int] = {}
    source_of: dict[str, int] = {}
    for index, result in enumerate(request.raw_results):
        where = f"raw_results[{index}]"
        if result.query_id not in queries:
            known = ", ".join(queries) or "none"
            raise SequentialInputError(
                f"{where}.query_id",
                f"{where}.query_id {result.query_id!r} is not a query of plan {plan.plan_id} "
                f"(its queries: {known})",
            )
        if result.query_id in result_of:
            raise SequentialInputError(
                f"{where}.query_id",
                f"{where}.query_id {result.query_id!r} already has a result "
                f"(raw_results[{result_of[result.query_id]}]); give one result per query",
            )
        result_of[result.query_id] = index
        if result.success and not result.data:
            raise SequentialInputError(
                f"{where}.data",
                f"{where}.data is required when success is true "
                f"(query {result.query_id} reported success without data)",
            )
        if not result.success and not (result.error or "").strip():
            raise SequentialInputError(
                f"{where}.error",
                f"{where}.error must explain why query {result.query_id} failed (success is false)",
            )
        for position, citation in enumerate(result.sources):
            field = f"{where}.sources[{position}].id"
            if not citation.id.strip():
                raise SequentialInputError(field, f"{field} is empty")
            if citation.id in source_of:
                first = source_of[citation.id]
                raise SequentialInputError(
                    field,
                    f"source id {citation.id!r} is used twice, in raw_results[{first}] and "
                    f"{where}; source ids must be unique across all results",
                )
            source_of[citation.id] = index
    return queries


def _phase_numbers(plan: Plan) -> dict[str, int]:
    phases = plan.execution_order
    if not phases:
        try:
            phases = execution_phases(plan.queries)
        except SequentialInputError:
            return {}
    return {query_id: n for n, phase in enumerate(phases, start=1) for query_id in phase}


def _methodology(
    plan: Plan, results: Mapping[str, RawResult], executed: int, succeeded: int
) -> str:
    phase = _phase_numbers(plan)
    phase_count = len(set(phase.values()))
    failed = executed - succeeded
    intro = (
        f"This report draws on {executed} of the {len(plan.queries)} planned queries of plan "
        f"{plan.plan_id} ({plan.metadata.depth} depth"
        + (f", {_plural(phase_count, 'phase')}" if phase_count else "")
        + f"): {succeeded} succeeded and {failed} failed. Each query ran after the queries it "
        "depends on; failed and unexecuted queries contribute nothing to the findings."
    )
    lines = []
    for query in plan.queries:
        prefix = f"- Phase {phase[query.query_id]} · " if query.query_id in phase else "- "
        result = results.get(query.query_id)
        if result is None:
            outcome = "not executed"
        elif result.success:
            outcome = f"succeeded, {_plural(len(result.sources), 'source')}"
        else:
            outcome = f"failed: {_one_line(result.error or '')}"
        notes = result.execution_notes if result else None
        note = f" ({_one_line(notes)})" if notes else ""
        lines.append(
            f"{prefix}{query.query_id} ({query.query_type}): "
            f"{_one_line(query.query_text)} — {outcome}{note}"
        )
    return f"{intro}\n\n**Queries:**\n" + "\n".join(lines)


def compile_report(request: CompileRequest, *, now: datetime | None = None) -> Report:
    """Typed `sequential_research_compile`: validate `request` and return its `Report`."""
    request = revalidate(request)
    queries = _check(request)
    plan = request.plan
    topic = " ".join(plan.topic.split())
    style = request.citation_style
    warnings: list[str] = []

    results = {result.query_id: result for result in request.raw_results}
    successful = [results[q] for q in queries if q in results and results[q].success]
    failed = [r for r in request.raw_results if not r.success]
    for result in failed:
        count = len(result.sources)
        dropped = (
            f" (its {_plural(count, 'source')} {'is' if count == 1 else 'are'} not cited)"
            if count
            else ""
        )
        warnings.append(
            f"Query {result.query_id} failed and was skipped in the report: "
            f"{_one_line(result.error or '')}{dropped}"
        )
    if not request.raw_results:
        warnings.append(
            "No data: raw_results is empty, so the report has no findings and 0 sources."
        )
    elif not successful:
        warnings.append(
            f"No data: all {_plural(len(failed), 'executed query', 'executed queries')} failed, "
            "so the report has no findings."
        )
    else:
        missing = [q for q in queries if q not in results]
        if missing:
            warnings.append(
                "Planned queries with no result, absent from the report: " + ", ".join(missing)
            )

    sources = _Sources([c for result in successful for c in result.sources])
    schema_fields = {
        schema.query_id: [f.field_name for f in schema.required_fields]
        for schema in plan.result_schemas
    }

    # Sections with placeholders for citations.
    drafts: list[tuple[str, str]] = []
    used_headings: set[str] = set()
    for result in successful:
        query = queries[result.query_id]
        fields = schema_fields.get(query.query_id, [])
        data = result.data or {}
        absent = [f for f in fields if f not in data]
        if absent:
            warnings.append(
                f"Query {query.query_id} data lacks field(s) of its result schema: "
                + ", ".join(absent)
            )
        blocks = _blocks(data, fields, sources.rewrite)
        content = "\n\n".join(block.text() for block in blocks)
        cited = {int(i) for i in _PLACEHOLDER.findall(content)}
        own = "".join(
            sources.marker(c.id) for c in result.sources if sources.index[c.id] not in cited
        )
        if own:
            if not blocks:
                blocks = [_Block("")]
            # The example puts the section's citations after its first paragraph; for a section
            # opening with a list, after that list's label.
            blocks[0].first_line = (blocks[0].first_line + " " + own).lstrip()
            content = "\n\n".join(block.text() for block in blocks)
        leftover = sorted(set(_S_REFERENCE.findall(content)))
        if leftover:
            warnings.append(
                f"Query {query.query_id} data cites {', '.join(leftover)}, which match no source "
                "of a successful result; left as written"
            )
        heading = (
            _titled(query.query_text[len(focus_query_text(topic, "")) :])
            if query.query_text.startswith(focus_query_text(topic, ""))
            and len(query.query_text) > len(focus_query_text(topic, ""))
            else _HEADINGS.get(query.query_type) or _titled(query.query_type.replace("_", " "))
        )
        if heading in used_headings:
            heading = f"{heading} ({query.query_id})"
        used_headings.add(heading)
        drafts.append((heading, content))

    # Number sources in order of first appearance in the report.
    number: dict[int, int] = {}
    for _, content in drafts:
        for index in _PLACEHOLDER.findall(content):
            number.setdefault(int(index), len(number) + 1)
    ordered = sorted(number, key=number.__getitem__)
    numbered = [(number[i], sources.citations[i]) for i in ordered]

    marker_style: CitationStyle | None = style if request.include_sources else None
    sections: list[Section] = []
    for heading, content in drafts:
        used = list(dict.fromkeys(int(i) for i in _PLACEHOLDER.findall(content)))
        sections.append(
            Section(
                heading=heading,
                level=2,
                content=content,  # placeholders until the body is assembled below
                citations_used=(
                    [f"[{number[i]}]" for i in used] if request.include_sources else []
                ),
            )
        )
    headings = [section.heading for section in sections]

    executed = len(request.raw_results)
    if successful:
        summary = (
            f"This report presents research findings on **{topic}**. The analysis covers "
            f"{_plural(len(successful), 'research query', 'research queries')} across "
            f"{_plural(len(sections), 'section')}. Key topics include: {', '.join(headings)}."
        )
    else:
        if not executed:
            reason = "no results were provided"
        elif executed == 1:
            reason = "the one executed query failed"
        else:
            reason = f"all {executed} executed queries failed"
        summary = (
            f"This report presents research findings on **{topic}**. No research data was "
            f"available ({reason}), so the report has no findings."
        )
    if request.include_methodology:
        sections.append(
            Section(
                heading="Methodology",
                level=2,
                content=_methodology(plan, results, executed, len(successful)),
                citations_used=[],
            )
        )

    title = f"Research Report: {topic}"

    def body(markers: CitationStyle | None) -> str:
        text = f"# {title}\n\n## Executive Summary\n\n{summary}"
        for section in sections:
            text += f"\n\n{'#' * section.level} {section.heading}"
            if section.content:
                text += "\n\n" + _render_markers(section.content, markers, number)
        return text

    markdown = body(marker_style)
    if request.include_sources and numbered:
        markdown += "\n\n" + _source_list(numbered, style)
    word_count = count_words(body(None))
    for section in sections:
        section.content = _render_markers(section.content, marker_style, number)

    compiled_at, epoch_ms = timestamp(now)
    return Report(
        report_id=make_id(
            "report", epoch_ms, plan.plan_id.encode() + msgspec.json.encode(request.raw_results)
        ),
        plan_id=plan.plan_id,
        title=title,
        compiled_at=compiled_at,
        executive_summary=summary,
        sections=sections,
        markdown_report=markdown,
        sources=(
            [
                Source(
                    id=f"[{n}]",
                    source_type=c.source_type,
                    title=c.title,
                    url=c.url,
                    accessed_date=c.accessed_date,
                    excerpt=c.excerpt,
                )
                for n, c in numbered
            ]
            if request.include_sources
            else []
        ),
        statistics=Statistics(
            queries_executed=executed,
            queries_succeeded=len(successful),
            queries_failed=len(failed),
            total_sources=len(numbered),
            word_count=word_count,
        ),
        warnings=warnings,
    )


def sequential_research_compile(
    arguments: Mapping[str, Any], *, now: datetime | None = None
) -> dict[str, Any]:
    """The compile contract on plain data: tool arguments in, the report object (with
    `warnings`) as a JSON-ready dict.

    Raises `SequentialInputError` naming the offending field for invalid arguments.
    """
    return to_json_obj(compile_report(decode(arguments, CompileRequest), now=now))
