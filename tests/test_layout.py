"""The package's shape: no import cycle among its modules, and the layers it promises.

Imports are read from the source (``ast``), counting those inside functions and leaving out
``if TYPE_CHECKING:`` blocks (they never run). ``from deepgym.x import y`` is an import of the
module ``deepgym.x.y`` when that module exists, else of ``deepgym.x``. The judge package is
mounted in the sandbox as ``deepgym_judge``: its relative imports resolve inside it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import deepgym

ROOT = Path(deepgym.__file__).resolve().parent
BUILTIN = ROOT / "envs" / "builtin"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        if BUILTIN in path.parents:  # environment data (tasks, generators), not the library
            continue
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: anywhere but under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the deepgym modules it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [
                    f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem
                    for a in node.names
                ]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_walker_sees_imports_in_functions_and_skips_type_checking() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "import a\n"
        "if TYPE_CHECKING:\n    import b\nelse:\n    import c\n"
        "def f():\n    from d import e\n"
    )
    names = [n.names[0].name if isinstance(n, ast.Import) else n.module for n in _imports(tree)]
    assert names == ["typing", "a", "c", "d"]
    assert cycles({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}) == [["x", "y", "z"]]


def test_no_import_cycle_among_the_modules() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the walk found the package
    assert cycles(graph) == []


def test_the_contract_and_the_judge_stand_alone() -> None:
    graph = import_graph()
    judge = {m for m in graph if m.startswith("deepgym.judge")}
    for module in judge:  # inside the sandbox the judge is all there is
        assert graph[module] <= judge, f"{module} imports {graph[module] - judge}"

    def cli(module: str) -> bool:  # ``python -m deepgym`` is the command line too
        return module in ("deepgym.cli", "deepgym.__main__") or module.startswith("deepgym.cli.")

    for module in (m for m in graph if not cli(m)):  # the command line sits on top
        assert not any(cli(t) for t in graph[module]), f"{module} imports the CLI"
