"""The hallway's rules, read from the source: no module below the faces names an MCP tool in a
message (an error carries a hint the face words instead; docs/architecture.md, errors.py).

The source is parsed with `ast`, so only string literals count: docstrings and comments may name a
tool, and so may a hint (`hint="list_models"`, a string that is exactly an `errors.Hint`) or an
attribute (`ResearchJobs.answer_choice`, the library method of that name).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

import ask_another
from ask_another.errors import Hint

PACKAGE = Path(ask_another.__file__).parent

# The faces word things for their audience: the MCP server and the console, the CLI and the
# terminal, and the demo (an MCP client calling the tools by name).
FACES = ("server/", "console/", "cli.py", "terminal.py", "demo.py")

MCP_TOOLS = ("check_research", "answer_permission", "answer_choice", "list_models",
             "start_research", "cancel_research", "search_models", "search_families")

# Data, not messages: the usage ledger's `tool` column books a job's provider calls to the tool
# that started it (`ask-another usage` groups by it).
ALLOWED = {("research/job.py", "start_research")}

_NAMED = re.compile(r"(?<![\w.])(" + "|".join(MCP_TOOLS) + r")(?!\w)")


def _domain_modules() -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py"))
            if not path.relative_to(PACKAGE).as_posix().startswith(FACES)]


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for statement in body:  # a docstring, or a bare string under an attribute
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    found.add(id(statement.value))
    return found


def tool_names_in_messages(path: Path, root: Path = PACKAGE) -> list[str]:
    """Each string literal of `path` that names an MCP tool, as `file:line: the name: text`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    where = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) \
                or id(node) in docstrings:
            continue
        text = node.value
        if text in get_args(Hint) or (where, text) in ALLOWED:
            continue
        named = _NAMED.search(text)
        if named is not None:
            found.append(f"ask_another/{where}:{node.lineno}: {named.group(1)}: {text[:80]!r}")
    return found


def test_no_domain_module_names_an_mcp_tool_in_a_message() -> None:
    modules = _domain_modules()
    assert len(modules) > 50 and not any(m.name == "http.py" for m in modules)  # faces left out
    found = [line for path in modules for line in tool_names_in_messages(path)]
    assert not found, ("a module below the faces names an MCP tool; raise with a hint "
                       "(errors.Hint) the faces word instead:\n" + "\n".join(found))


def test_the_check_finds_a_tool_named_in_a_message(tmp_path: Path) -> None:
    # The rule can fail: a message naming a tool is found, with its line; a docstring, a hint
    # and a library method's name are not.
    planted = tmp_path / "research" / "planted.py"
    planted.parent.mkdir()
    planted.write_text('"""Call check_research: a docstring may say so."""\n'
                       'HINT = "list_models"\n'
                       'METHOD = "see `ResearchJobs.answer_choice`"\n'
                       'SAID = f"job {HINT} is gone; call check_research to list them"\n',
                       encoding="utf-8")
    assert tool_names_in_messages(planted, tmp_path) == [
        "ask_another/research/planted.py:4: check_research: ' is gone; call check_research to "
        "list them'"]
