"""Timeline HEFT variants and the critical-path makespan search: exact scores, pins, never worse."""

from __future__ import annotations

import numpy as np
import pytest

from brute_force import all_scores, optimum
from builders import graph, op, tensor
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, random_schedule
from graphopt.solvers.base import Budget, BudgetExhausted, Objective, Problem, Tracker
from graphopt.solvers.events import events_from_op_order
from graphopt.solvers.list_scheduling import (
    BLOCKS_FROM,
    HEFT_VARIANTS,
    HeftScheduler,
    heft_schedule,
    heft_timeline,
    most_critical_children,
    upward_ranks,
)
from graphopt.solvers.makespan_search import CriticalPathSearch
from strategies import random_graph

FAMILIES = ("layered", "erdos_renyi", "barabasi_albert", "watts_strogatz")


def random_problem(seed: int, max_ops: int = 24) -> Problem:
    """A seeded graph (awkward random DAG or generator family), machine and optional pins."""
    rng = np.random.default_rng(seed)
    n_ops = int(rng.integers(1, max_ops + 1))
    if seed % 2:
        g = random_graph(rng, n_ops, float(rng.choice([0.05, 0.15, 0.3, 0.6])))
    else:
        g = generate(FAMILIES[seed // 2 % len(FAMILIES)], max(n_ops, 8), seed=seed)
    machine = Machine(
        n_devices=int(rng.integers(1, 5)),
        capacity=None if rng.random() < 0.8 else int(rng.integers(0, 3000)),
        latency=float(rng.choice([0.0, 0.0, 0.3, 2.0])),
        bandwidth=float(rng.choice([np.inf, 100.0, 1000.0])),
        mode=str(rng.choice(["sync", "async"])),
    )
    pinned = None
    if rng.random() < 0.3:
        share = rng.choice([0.3, 1.0])
        devices = rng.integers(0, machine.n_devices, g.n_ops)
        pinned = np.where(rng.random(g.n_ops) < share, devices, -1)
    return Problem(g, machine, Objective.MAKESPAN, pinned)


def key(problem: Problem, placement: np.ndarray, events: np.ndarray) -> tuple[int, float]:
    """The tracker's ranking key (bytes over capacity, makespan) of a solution."""
    peaks, makespan, _ = problem.scorer.evaluate(placement, events)
    excess, value = problem.fitness(peaks[None], np.array([makespan]))
    return int(excess[0]), float(value[0])


def plain_heft(problem: Problem) -> tuple[int, float]:
    """Key of what the `heft` solver found before the timeline variants."""
    g, machine = problem.graph, problem.machine
    placement, order = heft_schedule(g, machine, problem.pinned)
    return min(
        key(problem, placement, events_from_op_order(g, placement, order, machine.n_devices, mode))
        for mode in ("lazy", "eager")
    )


def assert_exact(problem: Problem, placement: np.ndarray, events: np.ndarray, makespan: float):
    """The solution is valid, honours the pins, and its exact score has this makespan."""
    score = problem.scorer.score(Solution(placement, events, problem.machine.n_devices))
    assert score.makespan == makespan
    if problem.pinned is not None:
        pinned = problem.pinned >= 0
        assert np.array_equal(placement[pinned], problem.pinned[pinned])
    return score


class RecordingTracker(Tracker):
    """A tracker that checks every offered candidate against the exact scorer."""

    def offer(self, placement, order, peaks, makespan) -> bool:
        score = assert_exact(self.problem, placement, order, makespan)
        assert score.peak_memory_per_device == tuple(int(p) for p in peaks)
        self.offered = getattr(self, "offered", 0) + 1
        return super().offer(placement, order, peaks, makespan)


def run(solver, problem: Problem, evaluations: int, initial=()) -> RecordingTracker:
    tracker = RecordingTracker(problem, Budget(evaluations=evaluations))
    try:
        solver.run(problem, tracker, np.random.default_rng(0), initial)
    except BudgetExhausted:
        pass
    return tracker


def gap() -> Graph:
    """a -> b across devices; c is independent and listed after b, on b's device."""
    return graph(
        [op("a"), op("b"), op("c")],
        [tensor("a:0", 10, "a", "b"), tensor("b:0", 1, "b"), tensor("c:0", 1, "c")],
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_insertion_fills_the_gap_before_a_receive(mode: str) -> None:
    # b waits for a's copy until 3 (a finishes at 1, the transfer takes 2); without insertion c
    # runs after b (4 to 5), with it c runs at 0 in the idle gap. In sync mode the receive
    # occupies b's device from 1 to 3, and the gap is 0 to 1.
    g = gap()
    machine = Machine(n_devices=2, latency=2.0, mode=mode)
    problem = Problem(g, machine, Objective.MAKESPAN, np.array([0, 1, 1]))
    plain = heft_timeline(g, machine, problem.pinned, insertion=False)
    filled = heft_timeline(g, machine, problem.pinned, insertion=True)
    assert (plain.makespan, filled.makespan) == (5.0, 4.0)
    assert filled.finish.tolist() == [1.0, 4.0, 1.0]
    for timed in (plain, filled):
        assert_exact(problem, timed.placement, timed.events, timed.makespan)


def test_lookahead_keeps_a_receive_off_the_critical_child() -> None:
    # u (4 s) and v (1 s) feed w. Plain HEFT puts v on the idle device; w then receives v's
    # output on u's device (2 s, blocking it in sync mode): 7 s. Lookahead sees where w, u's
    # most critical child, can finish and keeps v with u: 6 s.
    g = graph(
        [op("u", 4.0), op("v", 1.0), op("w", 1.0)],
        [tensor("u:0", 1, "u", "w"), tensor("v:0", 1, "v", "w"), tensor("w:0", 1, "w")],
    )
    machine = Machine(n_devices=2, latency=2.0)
    assert most_critical_children(g, upward_ranks(g, machine)).tolist() == [2, 2, -1]
    plain = heft_timeline(g, machine, insertion=False)
    ahead = heft_timeline(g, machine, insertion=False, lookahead=True)
    assert (plain.makespan, ahead.makespan) == (7.0, 6.0)
    assert (plain.placement.tolist(), ahead.placement.tolist()) == ([0, 1, 0], [0, 0, 0])


def test_timeline_makespan_is_the_scorers_and_heft_never_worse_than_plain() -> None:
    for seed in range(600):
        problem = random_problem(seed)
        g, machine = problem.graph, problem.machine
        for insertion in (False, True):
            for lookahead in (False, True):
                timed = heft_timeline(
                    g, machine, problem.pinned, insertion=insertion, lookahead=lookahead
                )
                assert_exact(problem, timed.placement, timed.events, timed.makespan)
        tracker = run(HeftScheduler(), problem, 100)
        assert tracker.best_key <= plain_heft(problem)
        assert tracker.offered <= 2 + len(HEFT_VARIANTS)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_large_graphs_insert_through_block_gaps_exactly(mode: str) -> None:
    # 5,000 ops and 5,000 tensors: above BLOCKS_FROM, gaps are found through the blocks.
    g = generate("erdos_renyi", 5000, seed=1)
    assert g.n_ops + g.n_tensors >= BLOCKS_FROM
    machine = Machine(n_devices=4, latency=0.05, bandwidth=1e4, mode=mode)
    problem = Problem(g, machine, Objective.MAKESPAN)
    appended = heft_timeline(g, machine, insertion=False)
    for lookahead in (False, True):
        timed = heft_timeline(g, machine, insertion=True, lookahead=lookahead)
        assert_exact(problem, timed.placement, timed.events, timed.makespan)
    assert timed.makespan < appended.makespan


def test_search_offers_exact_solutions_and_never_ends_worse_than_its_start() -> None:
    for seed in range(150):
        problem = random_problem(1000 + seed, max_ops=16)
        g, d = problem.graph, problem.machine.n_devices
        rng = np.random.default_rng(seed)
        pinned = problem.pinned
        placement = rng.integers(0, d, g.n_ops)
        if pinned is not None:
            placement = np.where(pinned >= 0, pinned, placement)
        start = random_schedule(g, placement, d, rng)
        tracker = run(CriticalPathSearch(), problem, 150, [start])
        assert tracker.best_key <= key(problem, start.placement, start.order)
        # Without a start it begins from HEFT, and never ends worse than it.
        alone = run(CriticalPathSearch(), problem, 100)
        assert alone.best_key <= run(HeftScheduler(), problem, 100).best_key


def test_search_reaches_the_optimum_where_heft_misses_it() -> None:
    # Four-op graphs on two devices with 0.3 s transfers, where every HEFT variant is
    # beaten by the optimum (all solutions enumerated by brute force).
    machine = Machine(n_devices=2, latency=0.3)
    for seed in (2, 3, 24, 29):
        g = generate("layered", 4, seed=seed)
        problem = Problem(g, machine, Objective.MAKESPAN)
        best = optimum(all_scores(g, machine), "makespan").makespan
        heft = HeftScheduler().solve(problem, Budget(evaluations=100)).value
        assert best < heft - 1e-9
        found = CriticalPathSearch().solve(problem, Budget(evaluations=300))
        assert found.value == pytest.approx(best, rel=1e-12)


def test_search_honours_pins_and_a_fixed_placement() -> None:
    g = generate("layered", 40, seed=3)
    machine = Machine(n_devices=3, latency=0.2)
    rng = np.random.default_rng(0)
    for share in (0.5, 1.0):
        pinned = np.where(rng.random(g.n_ops) < share, rng.integers(0, 3, g.n_ops), -1)
        problem = Problem(g, machine, Objective.MAKESPAN, pinned)
        tracker = run(CriticalPathSearch(), problem, 400)
        assert tracker.offered > 1
        result = CriticalPathSearch().solve(problem, Budget(evaluations=400))
        assert result.value <= HeftScheduler().solve(problem, Budget(evaluations=100)).value


def reference_upward_ranks(g: Graph, delay: np.ndarray, placement: np.ndarray | None) -> list:
    """Upward ranks in plain Python: the reference of the compiled kernel."""
    rank = [0.0] * g.n_ops
    for j in reversed(g.topological_order.tolist()):
        tail = 0.0
        for t in g.op_output_tensor[g.op_output_ptr[j] : g.op_output_ptr[j + 1]].tolist():
            for s in g.consumer_op[g.consumer_ptr[t] : g.consumer_ptr[t + 1]].tolist():
                apart = placement is None or placement[s] != placement[j]
                tail = max(tail, (float(delay[t]) if apart else 0.0) + rank[s])
        rank[j] = float(g.op_runtime[j]) + tail
    return rank


@pytest.mark.parametrize("seed", range(40))
def test_compiled_upward_ranks_equal_the_reference(seed: int) -> None:
    problem = random_problem(seed)
    g, machine = problem.graph, Machine(n_devices=3, latency=0.5, bandwidth=100.0)
    placement = np.random.default_rng(seed).integers(0, 3, g.n_ops).astype(np.int32)
    delay = machine.latency + g.tensor_size / machine.bandwidth
    for fixed in (None, placement):
        assert upward_ranks(g, machine, fixed).tolist() == reference_upward_ranks(g, delay, fixed)
