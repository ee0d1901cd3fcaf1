"""Exhaustive oracle for tiny problems: every placement, every valid event order, reference-scored.

Only for graphs of a handful of ops on one or two devices: the number of orders grows like a
factorial. `all_scores` enumerates and scores everything once; `optimum` then picks the best
under any capacity and objective, so one enumeration answers many questions.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, implied_transfers


class TooMany(Exception):
    """More orders than the caller's limit."""


@dataclass(frozen=True)
class Scored:
    """One solution with its reference score."""

    placement: tuple[int, ...]
    order: tuple[int, ...]
    peak: int
    makespan: float


def placements(graph: Graph, n_devices: int, pinned: np.ndarray | None = None) -> Iterator[tuple]:
    """Every placement that honours the pins."""
    choices = [
        range(n_devices) if pinned is None or pinned[j] < 0 else [int(pinned[j])]
        for j in range(graph.n_ops)
    ]
    return itertools.product(*choices)


def orders(graph: Graph, placement: tuple[int, ...], n_devices: int) -> Iterator[tuple[int, ...]]:
    """Every valid total order of the ops and the transfers the placement implies."""
    n = graph.n_ops
    events = [*range(n), *(int(c) for c in implied_transfers(graph, placement, n_devices))]
    needs: dict[int, set[int]] = {e: set() for e in events}
    for j in range(n):
        for t in graph.inputs(j):
            producer = int(graph.tensor_producer[t])
            if placement[producer] == placement[j]:
                needs[j].add(producer)
            else:
                needs[j].add(n + int(t) * n_devices + placement[j])
    for e in events[n:]:
        needs[e].add(int(graph.tensor_producer[(e - n) // n_devices]))

    prefix: list[int] = []
    done: set[int] = set()

    def extend() -> Iterator[tuple[int, ...]]:
        if len(prefix) == len(events):
            yield tuple(prefix)
            return
        for e in events:
            if e not in done and needs[e] <= done:
                prefix.append(e)
                done.add(e)
                yield from extend()
                done.discard(e)
                prefix.pop()

    return extend()


def all_scores(
    graph: Graph, machine: Machine, pinned: np.ndarray | None = None, limit: int = 20_000
) -> list[Scored]:
    """Every (placement, order) with its reference peak memory and makespan.

    Raises:
        TooMany: more than `limit` solutions.
    """
    d = machine.n_devices
    found = []
    for placement in placements(graph, d, pinned):
        for order in orders(graph, placement, d):
            if len(found) == limit:
                raise TooMany
            score = reference_score(graph, Solution(placement, order, d), machine)
            found.append(Scored(placement, order, score.peak_memory, score.makespan))
    return found


def optimum(scored: list[Scored], objective: str, capacity: int | None = None) -> Scored | None:
    """The best solution for the objective among those within the capacity (None if none)."""
    feasible = [s for s in scored if capacity is None or s.peak <= capacity]
    if not feasible:
        return None
    if objective == "peak-memory":
        return min(feasible, key=lambda s: s.peak)
    return min(feasible, key=lambda s: s.makespan)
