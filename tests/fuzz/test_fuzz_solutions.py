"""Fuzzing solution files, `graphopt.solution/1` JSON (issue 15, item 1).

Seeds: valid solutions of a hand-made graph on 1, 2 and 3 devices (transfers in both
directions, a `machine` record, claimed objectives), mutated as documents and written as JSON
text, or mutated as bytes. Every mutant must be refused with the project's one-line error, or
be read, and then the fast and the reference scorer must either both refuse it with the same
message (a schedule that breaks a rule) or agree on every number. A sample also goes through
`graphopt score`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz.harness import (
    FAST_EXAMPLES,
    SLOW_EXAMPLES,
    Defect,
    fuzz_settings,
    outcome,
    record,
    run_cli,
)
from fuzz.mutators import mutated_bytes, mutated_json
from fuzz.test_fuzz_graphs import SEED_GRAPHS
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.io import read_solution, solution_to_json, write_graph
from graphopt.ir.solution import Solution, random_schedule

GRAPH = SEED_GRAPHS[0]
SOLUTION_WORDS = (
    "format",
    "graph",
    "devices",
    "placement",
    "schedule",
    "objective",
    "solver",
    "machine",
    "fusion",
    "op",
    "transfer",
    "to",
    "capacity",
    "latency",
    "bandwidth",
    "mode",
    "sync",
    "async",
    "peak_memory",
    "makespan",
    "graphopt.solution/1",
    *GRAPH.op_names,
    *GRAPH.tensor_names,
)


def _seed(devices: int, seed: int, machine: Machine) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    placement = rng.integers(0, devices, GRAPH.n_ops)
    draft = random_schedule(GRAPH, placement, devices, rng)
    score = Scorer(GRAPH, machine).score(draft)
    solution = Solution(
        draft.placement,
        draft.order,
        devices,
        objective={"peak_memory": score.peak_memory, "makespan": score.makespan},
        solver={"name": "random", "seed": seed},
        machine=machine.to_json(),
    )
    return solution_to_json(GRAPH, solution)


SEED_DOCUMENTS = (
    _seed(1, 0, Machine()),
    _seed(2, 1, Machine(n_devices=2, capacity=10_000)),
    _seed(3, 2, Machine(n_devices=3, latency=0.5, bandwidth=1000.0, mode="async")),
)
solution_mutants = st.one_of(
    st.sampled_from(SEED_DOCUMENTS).flatmap(lambda seed: mutated_json(seed, SOLUTION_WORDS)),
    st.sampled_from(SEED_DOCUMENTS).flatmap(
        lambda seed: mutated_bytes(json.dumps(seed, indent=1).encode())
    ),
)


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        path = Path(name)
        write_graph(GRAPH, path / "graph.json")
        yield path


def _write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return path


def check_solution_file(folder: Path, data: str | bytes) -> None:
    """Reads a mutant; an accepted one is scored alike by both scorers, or refused alike."""
    read = outcome(read_solution, _write(folder / "mutant.json", data), GRAPH)
    record(read)
    if not read.accepted:
        return
    solution: Solution = read.value
    recorded = dict(solution.machine)
    machine = outcome(
        Machine,
        n_devices=solution.n_devices,
        capacity=recorded.get("capacity"),
        latency=recorded.get("latency", 0.0),
        bandwidth=float("inf") if recorded.get("bandwidth") is None else recorded["bandwidth"],
        mode=recorded.get("mode", "sync"),
    )
    if not machine.accepted:
        return
    fast = outcome(Scorer(GRAPH, machine.value).score, solution)
    reference = outcome(reference_score, GRAPH, solution, machine.value)
    if fast.accepted != reference.accepted:
        raise Defect(f"fast {fast} vs reference {reference}")
    if not fast.accepted:
        if str(fast.error) != str(reference.error):
            raise Defect(f"messages differ: {fast.error} / {reference.error}")
        return
    for field in ("peak_memory_per_device", "makespan", "speedup", "feasible"):
        if getattr(fast.value, field) != getattr(reference.value, field):
            raise Defect(f"{field}: fast {fast.value} != reference {reference.value}")


@fuzz_settings(FAST_EXAMPLES)
@given(data=solution_mutants)
def test_solution_mutants(folder: Path, data: str | bytes) -> None:
    check_solution_file(folder, data)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=solution_mutants)
def test_solution_mutants_long(folder: Path, data: str | bytes) -> None:
    check_solution_file(folder, data)


def _check_cli(folder: Path, data: str | bytes) -> None:
    """`graphopt score`: 0 (agrees), 1 (a claim disagrees) or 2 with one error line."""
    path = _write(folder / "cli.json", data)
    run_cli("score", folder / "graph.json", path, "--json", expected=(0, 1, 2))


@fuzz_settings(4)
@given(data=solution_mutants)
def test_solution_mutants_through_the_cli(folder: Path, data: str | bytes) -> None:
    _check_cli(folder, data)


@pytest.mark.slow
@fuzz_settings(200)
@given(data=solution_mutants)
def test_solution_mutants_through_the_cli_long(folder: Path, data: str | bytes) -> None:
    _check_cli(folder, data)
