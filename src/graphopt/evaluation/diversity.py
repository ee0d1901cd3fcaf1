"""How different a set of schedules is: the diversity measures of paper 004 (E.2).

A schedule is read as a placement and the order its ops run in; transfers do not matter here.

- GED: graph edit distance between the two schedules' chain graphs (one chain per device,
  linking each op to the next op on its device), as the edges in one and not the other over
  the edges of both: 0 for the same chains, 1 when they share no edge.
- d_inv: the L2 distance between the ops' proxy start times (paper 004 eq. 2: an op starts when
  its device is free and its inputs have arrived, a transfer's duration after the producer
  finishes when it crosses devices). Devices are interchangeable, so this ignores which is which.
- d_sen: the same with each op's device appended to its start time, so that placing the same
  timetable on other devices counts.

`pairwise_diversity` averages each over all pairs of a set (paper 004: the top 100 candidates).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import NamedTuple

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph


class Diversity(NamedTuple):
    """Mean pairwise distances of a set of schedules (0 for fewer than two)."""

    ged: float
    d_inv: float
    d_sen: float


def op_order(events: np.ndarray, n_ops: int) -> np.ndarray:
    """The ops of an event order, in the order they run (transfers dropped)."""
    events = np.asarray(events)
    return events[events < n_ops]


def chain_edges(placement: np.ndarray, order: np.ndarray) -> set[tuple[int, int]]:
    """The chain graph's edges: each op to the next op run on its device."""
    last: dict[int, int] = {}
    edges = set()
    for op in order.tolist():
        device = int(placement[op])
        if device in last:
            edges.add((last[device], op))
        last[device] = op
    return edges


def proxy_start_times(
    graph: Graph, machine: Machine, placement: np.ndarray, order: np.ndarray
) -> np.ndarray:
    """[n_ops] start time of each op when each device runs its ops in `order` (eq. 2).

    An op starts when its device is free and every input has arrived: at its producer's finish
    on the same device, latency + size / bandwidth later from another (the contract's async
    rule, the paper's proxy). It is the rule the GFlowNet environment's steps hold, written
    again here over plain arrays so that a metric of any solver's schedules needs no learned
    system (`tests/test_diversity.py` compares the two).
    """
    durations = machine.latency + graph.tensor_size / machine.bandwidth
    start = np.zeros(graph.n_ops)
    finish = np.zeros(graph.n_ops)
    device_free = np.zeros(machine.n_devices)
    ptr, tensors, producer = graph.op_input_ptr, graph.op_input_tensor, graph.tensor_producer
    for op in order.tolist():
        device = int(placement[op])
        begin = device_free[device]
        for t in tensors[ptr[op] : ptr[op + 1]].tolist():
            source = int(producer[t])
            arrival = finish[source] + (durations[t] if placement[source] != device else 0.0)
            begin = max(begin, arrival)
        start[op] = begin
        finish[op] = device_free[device] = begin + graph.op_runtime[op]
    return start


def pairwise_diversity(
    graph: Graph, machine: Machine, schedules: Sequence[tuple[np.ndarray, np.ndarray]]
) -> Diversity:
    """Mean GED, d_inv and d_sen over all pairs of (placement, event order) schedules."""
    if len(schedules) < 2:
        return Diversity(0.0, 0.0, 0.0)
    chains, starts, places = [], [], []
    for placement, events in schedules:
        order = op_order(events, graph.n_ops)
        chains.append(chain_edges(placement, order))
        starts.append(proxy_start_times(graph, machine, placement, order))
        places.append(np.asarray(placement, dtype=np.float64))
    ged, d_inv, d_sen = [], [], []
    for a, b in combinations(range(len(schedules)), 2):
        total = len(chains[a]) + len(chains[b])
        ged.append(len(chains[a] ^ chains[b]) / total if total else 0.0)
        timing = float(np.linalg.norm(starts[a] - starts[b]))
        d_inv.append(timing)
        d_sen.append(math.hypot(timing, float(np.linalg.norm(places[a] - places[b]))))
    return Diversity(float(np.mean(ged)), float(np.mean(d_inv)), float(np.mean(d_sen)))
