"""partition-hint: classical placements scheduled for makespan, re-scored, and part of auto."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Budget, Problem, Tracker
from graphopt.solvers.list_scheduling import placement_order, timeline_schedule
from graphopt.solvers.placement_hints import PlacementHints, hint_candidates
from graphopt.solvers.ready_queue import ready_queue_orders
from graphopt.solvers.registry import make_solver

MACHINES = [
    Machine(2, latency=1e-3, bandwidth=1e7),
    Machine(4, latency=1e-5, bandwidth=2.5e10),
    Machine(3, latency=1e-3, bandwidth=1e6, capacity=40_000_000),
]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("family", "seed"), [("layered", 1), ("sbm", 2), ("erdos_renyi", 3)])
def test_every_offer_rescores_exactly_and_the_best_is_the_best_candidate(family, seed, machine):
    graph = generate(family, 80, seed=seed)
    problem = Problem(graph, machine, "makespan")
    offered: list[tuple[Solution, float]] = []
    tracker = Tracker(problem, Budget(evaluations=1000))
    offer, offer_population = tracker.offer, tracker.offer_population

    def spy(placement, order, peaks, makespan, *rest):
        offered.append((Solution(placement, order, machine.n_devices), makespan))
        return offer(placement, order, peaks, makespan, *rest)

    def spy_population(placements, orders, lengths, excess, value, *rest):
        for b, placement in enumerate(placements):
            solution = Solution(placement, orders[b, : lengths[b]], machine.n_devices)
            offered.append((solution, value[b]))
        return offer_population(placements, orders, lengths, excess, value, *rest)

    tracker.offer, tracker.offer_population = spy, spy_population
    PlacementHints().run(problem, tracker, np.random.default_rng(0), ())
    candidates = np.unique(np.stack(hint_candidates(graph, machine)), axis=0)
    assert len(offered) == 2 * len(candidates)  # ready queues, then timelines, each distinct one
    for solution, makespan in offered:
        assert reference_score(graph, solution, machine).makespan == pytest.approx(makespan)
    # an independent twin: each candidate scheduled both ways, by the plain functions
    expected = []
    for placement in candidates:
        orders, lengths = ready_queue_orders(graph, machine, placement[None])
        ready = Solution(placement, orders[0, : lengths[0]], machine.n_devices)
        order = placement_order(graph, machine, placement)
        timed = timeline_schedule(graph, machine, order, placement)
        for solution in (ready, Solution(placement, timed.events, machine.n_devices)):
            score = reference_score(graph, solution, machine)
            peaks = np.asarray(score.peak_memory_per_device)[None]
            expected.append((machine.excess(peaks)[0], score.makespan))
    assert tracker.best_key == pytest.approx(min(expected))


def test_pins_are_kept_and_auto_is_never_worse_than_the_hints() -> None:
    graph = generate("layered", 120, seed=5)
    machine = Machine(4, latency=1e-5, bandwidth=2.5e10)
    pins = np.full(graph.n_ops, -1)
    pins[[0, 7, 30]] = [3, 1, 2]
    problem = Problem(graph, machine, "makespan", pins)
    hints = make_solver("partition-hint").solve(problem, Budget(evaluations=1000), seed=0)
    assert (hints.solution.placement[[0, 7, 30]] == [3, 1, 2]).all()
    auto = make_solver("auto").solve(problem, Budget(evaluations=3000), seed=0)
    assert auto.value <= hints.value
    assert reference_score(graph, auto.solution, machine).makespan == pytest.approx(auto.value)


def test_one_device_has_one_candidate() -> None:
    graph = generate("layered", 30, seed=1)
    assert len(hint_candidates(graph, Machine(1))) == 1
    result = make_solver("partition-hint").solve(
        Problem(graph, Machine(1), "makespan"), Budget(evaluations=10)
    )
    assert result.evaluations == 2
    assert result.value == pytest.approx(float(graph.op_runtime.sum()))


@pytest.mark.parametrize("pinned", [False, True])
def test_auto_computes_each_heft_timeline_once_and_the_hints_stay_the_same(monkeypatch, pinned):
    """auto's partition hints take HEFT's schedules from its HEFT baseline (8-12 s each on a
    47k-op graph), and offer the same candidates as computing them anew; with pins they differ
    from the unpinned ones the hints need, so those are computed."""
    import graphopt.solvers.placement_hints as hints

    graph = generate("layered", 60, seed=4)
    pins = np.full(graph.n_ops, -1, dtype=np.int32)
    pins[:3] = 1
    problem = Problem(graph, MACHINES[1], "makespan", pinned=pins if pinned else None)
    calls = []
    real = hints.heft_timeline

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(hints, "heft_timeline", counted)
    shared = make_solver("auto").solve(problem, Budget(evaluations=3000), seed=1)
    assert len(calls) == (3 if pinned else 0)
    heft = make_solver("heft")
    heft.run(problem, Tracker(problem, Budget(evaluations=100)), np.random.default_rng(0), ())
    fresh = hint_candidates(graph, problem.machine)
    reused = hint_candidates(graph, problem.machine, None if pinned else heft.schedules)
    assert all(np.array_equal(a, b) for a, b in zip(fresh, reused, strict=True))
    assert shared.feasible


def test_with_fusion_searched_each_candidate_is_also_offered_fused_as_go_decodes_it() -> None:
    """auto's fusion search starts from the hint placements fused as GO's decoder fuses them
    (every legal merge, and XLA-like default fusion): the best of each, decoded and scored
    independently here, bounds its result."""
    from graphopt.importers.zoo import export_graph
    from graphopt.solvers.go_decoder import decode

    graph = export_graph("gpt2-tiny", training=True)
    problem = Problem(graph, MACHINES[1], "makespan", fusion=True)
    hints = make_solver("partition-hint").solve(problem, Budget(evaluations=1000), seed=0)
    placements = np.unique(np.stack(hint_candidates(graph, problem.machine)), axis=0)
    assert hints.solution.n_groups > 0
    for fused in (
        decode(graph, problem.machine, placements, compiler_fusion="default"),
        decode(graph, problem.machine, placements, fusion_levels=np.full(placements.shape, 7)),
    ):
        assert hints.value <= fused.makespans.min() * (1 + 1e-12)
        best = fused.solution(int(np.argmin(fused.makespans)), problem.machine.n_devices)
        assert reference_score(graph, best, problem.machine).makespan == pytest.approx(
            fused.makespans.min(), rel=1e-9
        )
    auto = make_solver("auto").solve(problem, Budget(evaluations=3000), seed=0)
    assert auto.value <= hints.value * (1 + 1e-12)
