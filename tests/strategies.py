"""Hypothesis strategies shared by the tests: random graphs, pins, machines and valid solutions."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, random_schedule, topological_schedule
from graphopt.solvers.base import Problem
from graphopt.solvers.bounds import peak_memory_lower_bound


def random_graph(rng: np.random.Generator, n_ops: int, density: float) -> Graph:
    """A random DAG with the awkward cases the rules mention.

    Ops get 0-3 outputs; consumers come after the producer in a random rank (so op indices are
    not a topological order); some tensors are zero-size, persistent, consumed by no op, graph
    outputs (held to the end; drawn last, so the other draws of a seed stay as they were), or
    list the same consumer twice.
    """
    rank = rng.permutation(n_ops)
    by_rank = np.argsort(rank)
    tensor_names, sizes, producers, persistent, ptr, consumers = [], [], [], [], [0], []
    for op in range(n_ops):
        for k in range(int(rng.integers(0, 4))):
            later = by_rank[rank[op] + 1 :]
            chosen = later[rng.random(later.shape[0]) < density].tolist()
            if chosen and rng.random() < 0.2:
                chosen.append(chosen[0])
            tensor_names.append(f"t{op}_{k}")
            sizes.append(0 if rng.random() < 0.15 else int(rng.integers(1, 1000)))
            producers.append(op)
            persistent.append(bool(rng.random() < 0.15))
            consumers.extend(chosen)
            ptr.append(len(consumers))
    runtime = np.where(rng.random(n_ops) < 0.1, 0.0, rng.random(n_ops) * 5)
    temp = np.where(rng.random(n_ops) < 0.7, 0, rng.integers(0, 500, n_ops))
    output = ~np.array(persistent, dtype=bool) & (rng.random(len(tensor_names)) < 0.15)
    return Graph.from_arrays(
        "random",
        [f"op{i}" for i in range(n_ops)],
        runtime,
        tensor_names,
        sizes,
        producers,
        ptr,
        consumers,
        op_temp_memory=temp,
        tensor_persistent=persistent,
        tensor_output=output,
    )


def random_pins(rng: np.random.Generator, n_ops: int, n_devices: int) -> np.ndarray:
    """[n_ops] pins: about 30% of the ops on a random device, the rest -1 (free)."""
    pinned = np.full(n_ops, -1)
    chosen = rng.random(n_ops) < 0.3
    pinned[chosen] = rng.integers(0, n_devices, int(chosen.sum()))
    return pinned


@st.composite
def graphs(draw: st.DrawFn, max_ops: int = 25) -> Graph:
    """Random graphs of 1..max_ops ops."""
    seed = draw(st.integers(0, 2**32 - 1))
    n_ops = draw(st.integers(1, max_ops))
    density = draw(st.sampled_from([0.05, 0.15, 0.3, 0.6]))
    return random_graph(np.random.default_rng(seed), n_ops, density)


@st.composite
def machines(draw: st.DrawFn, max_devices: int = 5) -> Machine:
    """Machines with 1..max_devices devices, both transfer modes, free and costly transfers."""
    return Machine(
        n_devices=draw(st.integers(1, max_devices)),
        capacity=draw(st.one_of(st.none(), st.integers(0, 5000))),
        latency=draw(st.sampled_from([0.0, 0.5, 2.0])),
        bandwidth=draw(st.sampled_from([float("inf"), 100.0, 1000.0])),
        mode=draw(st.sampled_from(["sync", "async"])),
    )


@st.composite
def problems(
    draw: st.DrawFn, max_ops: int = 25, spreads: tuple[str, ...] = ("random", "one", "blocks")
) -> tuple[Graph, Machine, Solution]:
    """A graph, a machine and a valid solution: random placement, random or topological order."""
    graph = draw(graphs(max_ops))
    machine = draw(machines())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    d = machine.n_devices
    spread = draw(st.sampled_from(spreads))
    if spread == "random":
        placement = rng.integers(0, d, graph.n_ops)
    elif spread == "one":
        placement = np.full(graph.n_ops, int(rng.integers(0, d)))
    else:
        placement = (np.arange(graph.n_ops) * d) // max(graph.n_ops, 1)
    if draw(st.booleans()):
        solution = random_schedule(graph, placement, d, rng)
    else:
        solution = topological_schedule(graph, placement, d)
    return graph, machine, solution


def solvable(problem: Problem) -> bool:
    """Whether a search runs at all: a capacity below the peak lower bound is refused at once."""
    capacity = problem.machine.capacity
    return capacity is None or capacity >= peak_memory_lower_bound(
        problem.graph, problem.machine.n_devices
    )


def with_fusion(graph: Graph, rng: np.random.Generator) -> Graph:
    """The graph with fusion fields (section 7): classes (a fifth none), compute times, kernel.

    Compute times sit around the runtimes and the bandwidth around the sizes, so that groups
    are bound by compute on some draws and by memory traffic on others.
    """
    classes = ("none", "elementwise", "elementwise", "reduction", "contraction")
    attrs = [
        {
            **extra,
            "fusion": classes[int(rng.integers(0, len(classes)))],
            "compute_time": float(runtime * rng.choice([0.0, 0.3, 1.0])),
        }
        for extra, runtime in zip(graph.op_attrs, graph.op_runtime, strict=True)
    ]
    kernel = {
        "memory_bandwidth": float(rng.choice([100.0, 1000.0, 1e6])),
        "launch_overhead": float(rng.choice([0.0, 0.1, 1.0])),
    }
    return graph.with_op_attrs(attrs).with_attrs(kernel=kernel)


def random_groups(graph: Graph, solution: Solution, rng: np.random.Generator) -> Solution:
    """The solution with random legal fusion groups: runs of consecutive op events.

    While a run is open, an op that may join it (same device, may fuse, at most one contraction
    and 64 ops, consumes a tensor the run produces, so the run stays connected) and is ready is
    pulled forward to join it, with probability 0.8. A run of consecutive events of a valid
    order is convex, and pulling a ready op forward keeps the order valid.
    """
    classes = graph.op_fusion
    d = solution.n_devices
    place = solution.placement
    group = np.full(graph.n_ops, -1, dtype=np.int32)
    pending = [int(c) for c in solution.order]
    order: list[int] = []
    ran: set[int] = set()
    moved: set[tuple[int, int]] = set()
    run: list[int] = []
    made: set[int] = set()
    n_groups = 0

    def ready(op: int) -> bool:
        for t in graph.inputs(op):
            producer = int(graph.tensor_producer[t])
            if place[producer] == place[op] and producer not in ran:
                return False
            if place[producer] != place[op] and (int(t), int(place[op])) not in moved:
                return False
        return True

    def joins(op: int) -> bool:
        return (
            op < graph.n_ops
            and classes[op] != 0
            and place[op] == place[run[0]]
            and len(run) < 64
            and not (classes[op] == 3 and any(classes[o] == 3 for o in run))
            and bool(made.intersection(int(t) for t in graph.inputs(op)))
            and ready(op)
        )

    while pending:
        pick = 0
        if run and rng.random() < 0.8:
            pick = next((i for i, code in enumerate(pending) if joins(code)), 0)
        code = pending.pop(pick)
        order.append(code)
        if not (run and joins(code)):
            if len(run) >= 2:
                group[run] = n_groups
                n_groups += 1
            run.clear()
            made.clear()
        if code >= graph.n_ops:
            moved.add(divmod(code - graph.n_ops, d))
            continue
        ran.add(code)
        if classes[code] != 0:
            run.append(code)
            made.update(int(t) for t in graph.outputs(code))
    if len(run) >= 2:
        group[run] = n_groups
    return replace(solution, order=np.array(order, dtype=np.int64), fusion=group)


@st.composite
def fused_problems(draw: st.DrawFn, max_ops: int = 25) -> tuple[Graph, Machine, Solution]:
    """A graph with fusion fields, a machine and a valid solution with random legal groups.

    Half the placements put every op on one device, where most groups form; draws without a
    group are rejected.
    """
    graph, machine, solution = draw(problems(max_ops, ("random", "one", "one", "blocks")))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    graph = with_fusion(graph, rng)
    fused = random_groups(graph, solution, rng)
    assume(fused.n_groups > 0)
    return graph, machine, fused


def with_recomputation(
    graph: Graph, solution: Solution, rng: np.random.Generator, extra: int
) -> Solution:
    """The solution made to recompute (section 15): `extra` events run again at random places.

    Each repeated event is a recomputable op or a transfer, inserted anywhere after its first
    run, where everything it reads exists on its device; so the result stays valid.
    """
    order = [int(code) for code in solution.order]
    again = [c for c in order if c >= graph.n_ops or graph.op_recomputable[c]]
    for _ in range(extra if again else 0):
        code = again[int(rng.integers(len(again)))]
        order.insert(int(rng.integers(order.index(code) + 1, len(order) + 1)), code)
    return replace(solution, order=np.array(order, dtype=np.int64), remat=True)


@st.composite
def remat_problems(draw: st.DrawFn, max_ops: int = 25) -> tuple[Graph, Machine, Solution]:
    """A problem of `problems` whose solution recomputes 0-12 events; some ops may not be."""
    graph, machine, solution = draw(problems(max_ops))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        marked = rng.random(graph.n_ops) < 0.2
        graph = graph.with_op_attrs([{"recomputable": False} if m else {} for m in marked.tolist()])
    return graph, machine, with_recomputation(graph, solution, rng, draw(st.integers(0, 12)))


CORRUPTIONS = ("swap", "drop", "repeat", "foreign_transfer", "unknown_code", "placement")
"""What `corrupt` does to a solution."""


def corrupt(solution: Solution, graph: Graph, rng: np.random.Generator, how: str) -> Solution:
    """The solution broken one way of `CORRUPTIONS` (or left valid by chance), its flags kept."""
    order = solution.order.copy()
    placement = solution.placement.copy()
    d = solution.n_devices
    n = order.shape[0]
    if how == "swap" and n >= 2:
        i, j = rng.choice(n, 2, replace=False)
        order[[i, j]] = order[[j, i]]
    elif how == "drop" and n >= 1:
        order = np.delete(order, rng.integers(n))
    elif how == "repeat" and n >= 1:
        order = np.insert(order, rng.integers(n + 1), order[rng.integers(n)])
    elif how == "foreign_transfer" and graph.n_tensors:
        code = graph.n_ops + int(rng.integers(graph.n_tensors)) * d + int(rng.integers(d))
        order = np.insert(order, rng.integers(n + 1), code)
    elif how == "unknown_code":
        order = np.insert(
            order, rng.integers(n + 1), rng.choice([-1, graph.n_ops + graph.n_tensors * d])
        )
    elif how == "placement":
        placement[rng.integers(graph.n_ops)] = rng.choice([-1, d, int(rng.integers(d))])
    return replace(solution, placement=placement, order=order)
