"""The package's shape: no import cycle among its modules, and the layers it promises.

Imports are read from the source (``ast``), counting those inside functions and leaving out
``if TYPE_CHECKING:`` blocks (they never run). ``from deepgym.x import y`` is an import of the
module ``deepgym.x.y`` when that module exists, else of ``deepgym.x``. The judge package is
mounted in the sandbox as ``deepgym_judge``: its relative imports resolve inside it.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Callable
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


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the deepgym modules it imports (read once: every rule reads the same tree)."""
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


# -- the layers (DESIGN.md, "Layers") ------------------------------------------------------
# Rules name packages and top-level modules, never a module inside a package, so that
# renaming or splitting a module keeps them true.

LAYERS: dict[str, int] = {  # top to bottom; a module may import only its own layer or lower ones
    "deepgym.integrations": 7,  # trainer adapters
    "deepgym.chat_agent": 7,  # an agent loop
    "deepgym.reward_function": 6,  # rewards
    "deepgym.grpo": 6,
    "deepgym.envs.qa": 6,  # environment QA: it drives a client
    "deepgym.envs.harbor": 6,  # Harbor's import and export (the QA's reference agent)
    "deepgym.client": 5,  # the client facade
    "deepgym.session": 5,
    "deepgym.eval": 5,  # evaluating a model: the client's eval_model
    "deepgym.engines": 4,
    "deepgym.envs": 4,  # environment folders, the registry, benchmark importers
    "deepgym.scheduling": 3,  # the scheduler and its per-environment time limits
    "deepgym.time_limits": 3,
    "deepgym.sandbox": 2,  # sandbox backends, and the raw run -> RunResult they hand up
    "deepgym.images": 2,  # the roots some sandboxes run on
    "deepgym.runtimes": 2,  # the packages some answers run with
    "deepgym.results": 2,
    "deepgym.judge": 1,
}
# Beside the stack, on top of it: nothing in the stack imports these.
BESIDE_ON_TOP = (
    "deepgym.server",
    "deepgym.store",
    "deepgym.cli",
    "deepgym.__main__",
    "deepgym.latency",
)
# Beside the stack, under all of it: helpers any layer may import, which import only each other
# and the contract.
HELPERS = (
    "deepgym.blocking",
    "deepgym.completions",
    "deepgym.home",
    "deepgym.identity",
    "deepgym.languages",
    "deepgym.protocol",
    "deepgym.retry",
)
# The contract: pure modules that import only each other (and pydantic).
PURE = (
    "deepgym.exceptions",
    "deepgym.validation",
    "deepgym.text",
    "deepgym.verdict",
    "deepgym.models",
    "deepgym.types",
    "deepgym.judge.codes",  # the closed set of error types, standard library only
)
SHIPPED = (
    "deepgym.envs.verifiers",
    "deepgym.envs.harbor.verifier",
    "deepgym.envs.harbor.runner",
)
"""Files that run inside a sandbox, as the judge does (besides ``_*.py`` child scripts)."""


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


FACADE = 7
"""The layer of ``deepgym`` itself, the public API (its names load lazily): the adapters' only
way in."""


def _layer(module: str) -> int | None:
    """The layer of the most specific package or module of ``LAYERS`` that holds ``module``."""
    if module == "deepgym":
        return FACADE
    homes = [p for p in LAYERS if _under(module, p)]
    return LAYERS[max(homes, key=len)] if homes else None


def _home(module: str) -> str | None:
    """Where ``module`` stands: a layer, beside the stack (on top, or as a helper), or the
    contract; None where no rule places it."""
    if module in PURE:
        return "contract"
    if _layer(module) is not None:
        return "stack"
    if any(_under(module, h) for h in HELPERS):
        return "helper"
    if any(_under(module, p) for p in BESIDE_ON_TOP):
        return "on top"
    return None


def _external(path: Path) -> set[str]:
    """The top-level names of the absolute imports in ``path`` that are not deepgym."""
    out = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out - {"deepgym"}


def _violations(graph: dict[str, set[str]], rule: Callable[[str, str], bool]) -> list[str]:
    found = []
    for module in sorted(graph):
        for target in sorted(graph[module]):
            if rule(module, target):
                found.append(f"{module} imports {target}")
    return found


def test_every_module_has_a_place() -> None:
    # a new module or package joins a layer, the helpers, or the top, by name
    unplaced = sorted(m for m in import_graph() if _home(m) is None)
    assert unplaced == [], f"no layer for {unplaced}: add each to LAYERS, HELPERS or BESIDE_ON_TOP"


def test_the_helpers_import_only_each_other_and_the_contract() -> None:
    def rule(module: str, target: str) -> bool:
        return _home(module) == "helper" and _home(target) not in ("helper", "contract")

    assert _violations(import_graph(), rule) == []


def test_images_never_import_an_environment_folder() -> None:
    def rule(module: str, target: str) -> bool:
        return _under(module, "deepgym.images") and _under(target, "deepgym.envs")

    assert _violations(import_graph(), rule) == []


def test_the_layer_rules_catch_what_they_forbid() -> None:
    assert _layer("deepgym.sandbox.sessions") == 2 and _layer("deepgym.judge") == 1
    assert _layer("deepgym.sandboxes") is None and _layer("deepgym.models") is None
    assert _layer("deepgym.envs.qa.check") == 6 and _layer("deepgym.envs.registry") == 4
    assert _home("deepgym.newthing") is None and _home("deepgym.retry") == "helper"
    assert _home("deepgym") == "stack" and _home("deepgym.models") == "contract"
    graph = {"deepgym.judge.rpc": {"deepgym.engines.local"}, "deepgym.engines.x": {"deepgym.judge"}}
    assert _violations(graph, _upward) == ["deepgym.judge.rpc imports deepgym.engines.local"]


def _upward(module: str, target: str) -> bool:
    low, high = _layer(module), _layer(target)
    return low is not None and high is not None and high > low


def test_no_layer_imports_a_higher_one() -> None:
    # e.g. the sandbox and the judge never import the engines, the client or the integrations;
    # the engines never import the client, the rewards or the integrations
    assert _violations(import_graph(), _upward) == []


def test_the_stack_never_imports_the_service_the_store_the_cli_or_latency() -> None:
    def rule(module: str, target: str) -> bool:
        return _layer(module) is not None and _home(target) == "on top"

    assert _violations(import_graph(), rule) == []


def test_the_sandbox_and_the_judge_know_no_environment_folder() -> None:
    def rule(module: str, target: str) -> bool:
        low = _layer(module)
        return low is not None and low <= 2 and _under(target, "deepgym.envs")

    assert _violations(import_graph(), rule) == []


def _shipped(module: str, path: Path) -> bool:
    """Whether ``module`` runs inside a sandbox: the judge, a verifier or runner shipped into
    one, or a ``_*.py`` child script (started with ``python -I -S``)."""
    child = path.name.startswith("_") and path.name not in ("__init__.py", "__main__.py")
    return _under(module, "deepgym.judge") or any(_under(module, s) for s in SHIPPED) or child


def test_what_runs_in_a_sandbox_needs_only_the_standard_library() -> None:
    # it runs under ``python -I -S``: no site-packages, no deepgym outside the judge (which a
    # sandbox mounts as ``deepgym_judge``)
    graph = import_graph()
    modules = {m: p for m, p in _modules().items() if _shipped(m, p)}
    assert {"deepgym.judge", "deepgym.envs.verifiers.differential", "deepgym.images._mapped"} <= (
        set(modules)
    )
    for module, path in sorted(modules.items()):
        outside = _external(path) - set(sys.stdlib_module_names) - {"deepgym_judge"}
        assert not outside, f"{module} imports {sorted(outside)}"
        beyond = {t for t in graph[module] if not _under(t, "deepgym.judge")}
        assert not beyond, f"{module} imports {sorted(beyond)}"


def test_no_integration_imports_another() -> None:
    # each adapter stands on the shared ``integrations.reward``, never on another adapter
    shared = ("deepgym.integrations", "deepgym.integrations.reward")

    def rule(module: str, target: str) -> bool:
        both = _under(module, "deepgym.integrations") and _under(target, "deepgym.integrations")
        return both and target not in shared and target.split(".")[2] != module.split(".")[2]

    assert _violations(import_graph(), rule) == []


def test_the_contract_and_the_wire_format_import_nothing_heavy() -> None:
    # models, exceptions, verdict and their helpers (and protocol, which a remote-only client
    # loads) import only each other, the standard library and pydantic
    graph = import_graph()
    modules = _modules()
    for module in sorted(m for m in graph if m in PURE or m == "deepgym.protocol"):
        heavy = {t for t in graph[module] if t not in PURE}
        assert not heavy, f"{module} imports {sorted(heavy)}"
        outside = _external(modules[module]) - set(sys.stdlib_module_names) - {"pydantic"}
        assert not outside, f"{module} imports {sorted(outside)}"


def test_the_remote_engine_loads_no_sandbox() -> None:
    # a remote-only client talks http: nothing it loads, however deep, is a sandbox module
    graph = import_graph()
    seen: set[str] = set()
    todo = ["deepgym.engines.remote"]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    assert sorted(m for m in seen if _under(m, "deepgym.sandbox")) == []
