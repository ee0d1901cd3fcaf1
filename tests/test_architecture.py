"""The package's layering (docs/architecture.md): no import cycles, and each layer imports only
the layers below it (so nothing in `ir/`, `costmodels/` or `solvers/` imports `learning/`).

Every import counts, including those inside functions and under `TYPE_CHECKING`: an import that
is hidden in a function still makes the two modules depend on each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import graphopt

PACKAGE = Path(graphopt.__file__).parent
BASE = {"graphopt", "errors", "_messages", "limits", "progress", "configs"}
"""Modules every layer may import: errors, messages, limits, progress bars, the config loader,
the version."""
_MODELS = BASE | {"ir", "costmodels"}
_EVALUATION = _MODELS | {
    "importers",
    "solvers",
    "optimize",
    "datasets",
    "learning",
    "pictures",
    "execution",
}
"""What `evaluation` may import; `papers` may import it too, and `evaluation` itself."""
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "_messages": {"errors"},
    "limits": set(),
    "progress": set(),
    "configs": {"errors", "_messages"},
    "ir": BASE,
    "costmodels": BASE | {"ir"},
    "importers": _MODELS,
    "solvers": _MODELS,
    "optimize": _MODELS | {"solvers"},
    "datasets": _MODELS | {"importers"},
    "learning": _MODELS | {"importers", "solvers", "datasets"},
    "execution": _MODELS | {"importers", "solvers", "optimize"},
    "api": _MODELS | {"importers", "solvers", "optimize", "execution"},
    "warmup": _MODELS | {"solvers", "optimize"},
    "pictures": _MODELS,
    "evaluation": _EVALUATION,
    "papers": _EVALUATION | {"evaluation"},
    "cli": _MODELS
    | {
        "importers",
        "solvers",
        "optimize",
        "datasets",
        "learning",
        "evaluation",
        "papers",
        "warmup",
        "pictures",
        "execution",
    },
    "__main__": {"cli"},
}
"""Layer (the first name under `graphopt`) -> the other layers it may import."""


def _module_name(path: Path) -> str:
    parts = ("graphopt", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(top_level: bool = False) -> nx.DiGraph:
    """module -> graphopt module it imports (a `from pkg import name` names `pkg.name` when
    that is a module, else `pkg`).

    With `top_level`, only what a module runs when it is imported: no imports inside functions
    or under `TYPE_CHECKING`, and a `from pkg import name` also names `pkg`, whose `__init__`
    runs too.
    """
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body if top_level else ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, path.name == "__init__.py", node)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
                if top_level:
                    targets.append(base)
            else:
                continue
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target.startswith("graphopt") and target != module:
                    graph.add_edge(module, target)
    return graph


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_walk_sees_imports_inside_functions() -> None:
    imports = _imports()
    assert imports.number_of_nodes() > 50
    assert imports.has_edge("graphopt.optimize", "graphopt.solvers.registry")
    assert imports.has_edge("graphopt.ir.graph", "graphopt.ir._algorithms")


def test_no_import_cycles() -> None:
    imports = _imports()
    # A package's __init__ re-exporting its modules is not a cycle of design: drop the edges
    # from a package to its own modules before looking for cycles.
    own = [(a, b) for a, b in imports.edges if _within(b, a)]
    imports.remove_edges_from(own)
    cycles = [sorted(c) for c in nx.strongly_connected_components(imports) if len(c) > 1]
    assert cycles == []


def _layer(module: str) -> str:
    return module.split(".")[1] if "." in module else "graphopt"


def test_every_module_belongs_to_a_known_layer() -> None:
    layers = {_layer(module) for module in _imports().nodes} - {"graphopt", "policies"}
    assert layers <= set(ALLOWED)


def test_layers_import_only_the_layers_below_them() -> None:
    upward = [
        (a, b)
        for a, b in _imports().edges
        if _layer(a) != _layer(b) and _layer(a) in ALLOWED and _layer(b) not in ALLOWED[_layer(a)]
    ]
    assert upward == []


def test_library_layers_do_not_import_learning() -> None:
    assert not any(
        _within(b, "graphopt.learning")
        for a, b in _imports().edges
        if _layer(a) in ("ir", "costmodels", "solvers")
    )


SYSTEMS = "graphopt.learning.systems"
SYSTEM_IMPORTS = {("go", "gdp")}
"""The systems that may import another: GO is GDP's placer with two more heads (paper 002)."""
SEARCH_IS_TRAINING = {"hdp"}
"""Systems without a trained policy, whose every solve trains from scratch (its trainer is its
search), so their solver imports their trainer."""


def _system(module: str) -> str | None:
    """The learned system a module belongs to (`learning/systems/<name>/`), or None."""
    parts = module.split(".")
    return parts[3] if _within(module, SYSTEMS) and len(parts) > 3 else None


def _systems() -> list[str]:
    return sorted(path.name for path in (PACKAGE / "learning" / "systems").iterdir()
                  if (path / "solver.py").is_file())  # fmt: skip


def test_every_system_has_the_layout_of_docs_architecture() -> None:
    systems = _systems()
    assert systems == ["gdp", "gflownet", "go", "hdp", "regal"]
    for name in systems:
        files = {path.name for path in (PACKAGE / "learning" / "systems" / name).glob("*.py")}
        assert {"config.py", "network.py", "train.py", "solver.py"} <= files, name


def test_systems_import_the_platform_and_not_each_other() -> None:
    imports = _imports()
    crossing = [
        (a, b)
        for a, b in imports.edges
        if _system(a) and _system(b) and _system(a) != _system(b)
        and (_system(a), _system(b)) not in SYSTEM_IMPORTS
    ]  # fmt: skip
    assert crossing == []
    platform = [
        (a, b)
        for a, b in imports.edges
        if _within(a, "graphopt.learning") and not _within(a, SYSTEMS) and _system(b)
    ]
    assert platform == []


def test_no_solver_imports_a_trainer() -> None:
    """Inference never loads a trainer: fine-tuning lives in `finetune.py`, imported on demand."""
    imports = _imports()
    for name in _systems():
        if name in SEARCH_IS_TRAINING:
            continue
        solver = f"{SYSTEMS}.{name}.solver"
        assert not any(b.endswith(".train") for b in imports.successors(solver)), name


def test_importing_a_solver_loads_no_trainer() -> None:
    imports = _imports(top_level=True)
    for name in _systems():
        if name in SEARCH_IS_TRAINING:
            continue
        loaded = nx.descendants(imports, f"{SYSTEMS}.{name}.solver")
        assert not [m for m in loaded if m.endswith(".train")], name


def test_evaluation_imports_no_system() -> None:
    assert [(a, b) for a, b in _imports().edges if _layer(a) == "evaluation" and _system(b)] == []


CLI_FUNCTION_LINES = 80
"""The most lines a function of `cli/` may span, decorators included: a command parses, calls
the library and prints; what is longer hides a helper (typer's option declarations go in
module-level `Annotated` aliases)."""


def test_no_cli_function_is_longer_than_80_lines() -> None:
    long = []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if node.end_lineno - first + 1 > CLI_FUNCTION_LINES:
                    long.append(f"{path.name}: {node.name}, {node.end_lineno - first + 1} lines")
    assert long == []
