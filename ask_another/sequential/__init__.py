"""Sequential research: the plan and compile contracts as plain library functions.

`sequential_research_plan(arguments)` and `sequential_research_compile(arguments)` take and return
plain JSON-compatible dicts (what an MCP tool handler holds); `build_plan` and `compile_report` are
the typed variants on the msgspec Structs. Invalid input raises `SequentialInputError`, whose
`.field` names the offending field. See docs/sequential.md.
"""

from ask_another.sequential.compile import compile_report as compile_report
from ask_another.sequential.compile import count_words as count_words
from ask_another.sequential.compile import (
    sequential_research_compile as sequential_research_compile,
)
from ask_another.sequential.contracts import Citation as Citation
from ask_another.sequential.contracts import CitationStyle as CitationStyle
from ask_another.sequential.contracts import CompileRequest as CompileRequest
from ask_another.sequential.contracts import Depth as Depth
from ask_another.sequential.contracts import FieldSpec as FieldSpec
from ask_another.sequential.contracts import OutputFormat as OutputFormat
from ask_another.sequential.contracts import Plan as Plan
from ask_another.sequential.contracts import PlanMetadata as PlanMetadata
from ask_another.sequential.contracts import PlanRequest as PlanRequest
from ask_another.sequential.contracts import Priority as Priority
from ask_another.sequential.contracts import Query as Query
from ask_another.sequential.contracts import RawResult as RawResult
from ask_another.sequential.contracts import Report as Report
from ask_another.sequential.contracts import ResultSchema as ResultSchema
from ask_another.sequential.contracts import Section as Section
from ask_another.sequential.contracts import SequentialInputError as SequentialInputError
from ask_another.sequential.contracts import Source as Source
from ask_another.sequential.contracts import SourceType as SourceType
from ask_another.sequential.contracts import Statistics as Statistics
from ask_another.sequential.plan import build_plan as build_plan
from ask_another.sequential.plan import execution_phases as execution_phases
from ask_another.sequential.plan import sequential_research_plan as sequential_research_plan

__all__ = [
    "Citation",
    "CitationStyle",
    "CompileRequest",
    "Depth",
    "FieldSpec",
    "OutputFormat",
    "Plan",
    "PlanMetadata",
    "PlanRequest",
    "Priority",
    "Query",
    "RawResult",
    "Report",
    "ResultSchema",
    "Section",
    "SequentialInputError",
    "Source",
    "SourceType",
    "Statistics",
    "build_plan",
    "compile_report",
    "count_words",
    "execution_phases",
    "sequential_research_compile",
    "sequential_research_plan",
]
