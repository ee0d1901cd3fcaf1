"""Every example script runs and produces what it says."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from graphopt.costmodels.score import score
from graphopt.ir.generators import generate
from graphopt.ir.io import read_graph, read_solution, write_graph

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trivial_solution_writes_a_valid_scored_solution(tmp_path) -> None:
    graph_path, solution_path = tmp_path / "g.json", tmp_path / "s.json"
    write_graph(generate("layered", 60, seed=1), graph_path)
    load("trivial_solution").main([str(graph_path), str(solution_path), "--devices", "3"])
    graph = read_graph(graph_path)
    solution = read_solution(solution_path, graph)
    claimed = json.loads(solution_path.read_text())["objective"]
    assert solution.n_devices == 3
    assert score(graph, solution).disagreements(claimed) == []


def test_compare_solvers_runs_every_solver_on_the_same_budget(tmp_path) -> None:
    graph_path = tmp_path / "g.json"
    write_graph(generate("layered", 40, seed=1), graph_path)
    results = load("compare_solvers").main([str(graph_path), "--budget", "300"])
    assert set(results) == {"auto", "brkga", "xla-dfs", "compiler-best", "gp-metis"}
    assert results["brkga"].evaluations == 300
    assert results["auto"].value <= results["compiler-best"].value


def test_readme_python_examples_run_in_order(tmp_path, monkeypatch) -> None:
    """The README's Python blocks, run one after another as a reader pastes them."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    assert read_solution(tmp_path / "solution.json", namespace["graph"]).n_devices == 2
    assert namespace["result"].evaluations == 5000
