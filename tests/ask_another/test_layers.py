"""The hallway's rules, read from the source (docs/architecture.md, "Layers"): every import runs
down the layers or within one, no two packages import each other (directly or round a longer
circle), and no module below the faces names an MCP tool in a message (an error carries a hint
the face words instead; errors.py).

Imports are read with `ast` from every module's `import` and `from ... import` statements, those
under `if TYPE_CHECKING:` and inside functions included: a deferred import is still an arrow.

The source is parsed with `ast`, so only string literals count: docstrings and comments may name a
tool, and so may a hint (`hint="list_models"`, a string that is exactly an `errors.Hint`) or an
attribute (`ResearchJobs.answer_choice`, the library method of that name).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
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


# docs/architecture.md's layers, top first: a package or module imports only its own layer and
# those below it.
LAYERS = {
    "faces": ("cli", "terminal", "server", "console", "demo", "hosting", "jobhost", "__main__",
              "aio", "adapters", "connections", "rebinding"),
    "library": ("runtime",),
    "domain": ("research", "consensus", "conversations"),
    "services": ("spend", "services"),
    "parts": ("store", "gateway", "interaction", "websearch", "articles", "sequential",
              "simulator", "console_link"),
    "leaves": ("catalog", "config", "policy", "calls", "costs", "users", "limits", "errors",
               "logs", "home", "_lazy", "coldstart", "detached", "tracing"),
}


def _unit(module: str) -> str:
    """The package or top-level module of `ask_another` that `module` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_imports(root: Path = PACKAGE) -> dict[str, dict[str, list[str]]]:
    """Who imports whom among `root`'s packages and modules: importer -> imported -> the
    `file:line`s of the imports (the package face itself, "", left out)."""
    edges: dict[str, dict[str, list[str]]] = {}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).with_suffix("")
        parts = where.parts[:-1] if where.name == "__init__" else where.parts
        importer = _unit(".".join((root.name, *parts)))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from ask_another import errors` imports the module `ask_another.errors`.
                names = [f"{node.module}.{a.name}" if node.module == root.name else node.module
                         for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                imported = _unit(name)
                if name.split(".")[0] == root.name and importer and imported not in ("",
                                                                                      importer):
                    edges.setdefault(importer, {}).setdefault(imported, []).append(
                        f"{root.name}/{where.as_posix()}.py:{node.lineno}")
    return edges


def upward(edges: Mapping[str, Mapping[str, list[str]]]) -> list[str]:
    """Each import that runs up the layers, as `importer -> imported: where`."""
    rank = {unit: n for n, units in enumerate(LAYERS.values()) for unit in units}
    return [f"{a} -> {b}: {', '.join(edges[a][b][:3])}" for a in sorted(edges)
            for b in sorted(edges[a]) if rank.get(b, len(rank)) < rank.get(a, len(rank))]


def circles(edges: Mapping[str, Mapping[str, list[str]]]) -> list[list[str]]:
    """The strongly connected groups of more than one package (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for other in edges.get(unit, {}):
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == unit:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for unit in sorted(edges):
        if unit not in index:
            visit(unit)
    return found


def test_every_import_runs_down_the_layers_and_no_packages_import_each_other() -> None:
    edges = package_imports()
    placed = {unit for units in LAYERS.values() for unit in units}
    seen = set(edges) | {b for a in edges for b in edges[a]}
    assert seen <= placed, f"place these in LAYERS (and docs/architecture.md): {seen - placed}"
    assert edges["console"] and "server" not in edges["console"]  # the old circle's arrow
    assert not upward(edges), "imports up the layers:\n" + "\n".join(upward(edges))
    assert not circles(edges), f"packages that import each other: {circles(edges)}"


def test_the_import_checks_find_a_circle_and_an_upward_arrow(tmp_path: Path) -> None:
    root = tmp_path / "ask_another"
    for module, text in {"server/http.py": "from ask_another.console import ROOT\n",
                         "console/_serve.py": "def f():\n    from ask_another.server import x\n",
                         "errors.py": "import ask_another.runtime\n"}.items():
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text(text, encoding="utf-8")
    edges = package_imports(root)
    assert circles(edges) == [["console", "server"]]
    assert upward(edges) == ["errors -> runtime: ask_another/errors.py:1"]


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
