"""Classical placements scheduled for makespan: METIS splits, HEFT's placements, one device.

`gp-metis` orders each device depth first, a memory order; HEFT decides placement and order
together. The placements that strong classical methods find cheaply are worth more when each is
scheduled for makespan: here every candidate is ordered by critical-path ready queues and by
insertion timelines on its upward ranks, both offered. The candidates: every op on one device
(best when links are slow against the ops), METIS splits balanced by runtime and by memory at
two imbalances (and, under a capacity, by memory weights that count activations partly), and
the placements of HEFT's three timeline variants. Their devices are numbered in the order of
the mean topological position of their ops, so device k is the k-th pipeline stage.

This is GDP's partition hint (`learning.placement.hint`, which scores the same candidates in
its environment), as a solver of its own: on held-out zoo models `auto`'s makespan baselines
and 20,000 evaluations of its search stayed behind it by up to 17 % (resnet18's training step
on 4 devices, issue 45), so `auto` runs it too.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, Tracker
from graphopt.solvers.go_decoder import decode
from graphopt.solvers.list_scheduling import (
    HEFT_VARIANTS,
    TimedSchedule,
    heft_timeline,
    offer_timed,
    placement_order,
    timeline_schedule,
)
from graphopt.solvers.partition import memory_weights, metis_partition
from graphopt.solvers.ready_queue import offer_placements

HINT_BALANCES = ("runtime", "memory")
"""What the METIS candidates balance."""

HINT_IMBALANCES = (0.05, 0.2)
"""Allowed relative excess of a device's load over the mean, per candidate."""

FUSION_LEVELS = 8
"""Fusion levels of the decoder's priorities (GO's default); the top one fuses every legal merge."""

HINT_ACTIVATION_SCALES = (0.0, 0.1, 1.0)
"""Under a capacity, also METIS splits balancing `memory_weights` at these activation scales
(persistent bytes in full, activations scaled), at 5 % imbalance: the runtime- and byte-balanced
splits often leave one device over (lstm-lm-unrolled-32 on 2 devices at 0.6 x its one-device
peak: all of them over, scale 0.1 fits)."""


def hint_candidates(
    graph: Graph, machine: Machine, heft: Mapping[str, TimedSchedule] | None = None
) -> list[np.ndarray]:
    """The candidate placements [n_ops] int32, one device's first (see the module docstring).

    Args:
        graph: the graph.
        machine: devices, capacity and transfers.
        heft: HEFT's unpinned timeline schedules by variant (`HEFT_VARIANTS`) that the caller
            has already; the others are computed (on a 47k-op graph each takes 8-12 s).
    """
    n_devices = machine.n_devices
    candidates = [np.zeros(graph.n_ops, dtype=np.int32)]
    if n_devices == 1 or not graph.n_ops:
        return candidates
    order = graph.topological_order
    for balance in HINT_BALANCES:
        for imbalance in HINT_IMBALANCES:
            parts = metis_partition(graph, n_devices, balance, 0, imbalance=imbalance)
            candidates.append(stage_numbered(order, parts, n_devices))
    if machine.capacity is not None:
        for scale in HINT_ACTIVATION_SCALES:
            weights = memory_weights(graph, scale)
            parts = metis_partition(graph, n_devices, weights, 0, imbalance=0.05)
            candidates.append(stage_numbered(order, parts, n_devices))
    for variant, (insertion, lookahead) in HEFT_VARIANTS.items():
        timed = (heft or {}).get(variant) or heft_timeline(
            graph, machine, insertion=insertion, lookahead=lookahead
        )
        candidates.append(stage_numbered(order, timed.placement, n_devices))
    return candidates


def offer_fused_placements(problem: Problem, tracker: Tracker, placements: np.ndarray) -> None:
    """Offers placements [B, n_ops] fused as GO's decoder fuses them without learned decisions.

    Each is scheduled by critical-path ready queues, then fused twice: by GO's priority decoder
    with every op at the top fusion level (every legal merge, the untrained GO policy's choice
    in effect) and by the compiler's default (XLA-like) fusion. Which placement is fastest
    depends on fusion: on the held-out models at 2 s, GO's pipeline from these candidates was
    62 % ahead of `auto --fusion search`, whose starts were placed for unfused makespan, and
    still 14 % ahead with the default fusion alone (`docs/results/learned-vs-auto/`).
    """
    top = np.full(placements.shape, FUSION_LEVELS - 1, dtype=np.int64)
    for levels, compiler in ((top, "none"), (None, "default")):
        decoded = decode(
            problem.graph, problem.machine, placements, fusion_levels=levels,
            n_levels=FUSION_LEVELS, compiler_fusion=compiler, scorer=problem.scorer,
        )  # fmt: skip
        excess, value = problem.fitness(decoded.peaks, decoded.makespans)
        tracker.offer_population(
            decoded.placements, decoded.orders, decoded.lengths, excess, value, decoded.groups
        )


def stage_numbered(order: np.ndarray, parts: np.ndarray, n_devices: int) -> np.ndarray:
    """`parts` relabelled so that devices run in the order of their ops' mean position."""
    position = np.empty(len(order), dtype=np.float64)
    position[order] = np.arange(len(order))
    count = np.bincount(parts, minlength=n_devices)
    mean = np.bincount(parts, weights=position, minlength=n_devices) / np.maximum(count, 1)
    mean[count == 0] = np.inf  # empty devices go last
    label = np.empty(n_devices, dtype=np.int32)
    label[np.argsort(mean, kind="stable")] = np.arange(n_devices)
    return label[parts]


class PlacementHints(Solver):
    """Each hint candidate scheduled by ready queues and by insertion timelines, all offered.

    When the problem searches fusion, each is also offered fused as GO's decoder fuses it.

    Args:
        heft: HEFT's timeline schedules of the problem by variant, filled by a `HeftScheduler`
            that ran first in the same solve (`auto`): used when nothing is pinned (HEFT's
            then equal the unpinned ones the candidates take), not computed twice.
    """

    name = "partition-hint"
    objectives = frozenset({Objective.MAKESPAN})

    def __init__(self, heft: Mapping[str, TimedSchedule] | None = None) -> None:
        self.heft = heft

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Offers every distinct candidate twice: ready-queue order, then timeline schedule."""
        graph, machine = problem.graph, problem.machine
        heft = self.heft if problem.pinned is None else None
        placements = np.unique(np.stack(hint_candidates(graph, machine, heft)), axis=0)
        if problem.pinned is not None:
            pins = np.asarray(problem.pinned, dtype=np.int32)
            placements = np.unique(np.where(pins >= 0, pins, placements), axis=0)
        placements = np.ascontiguousarray(placements, dtype=np.int32)
        offer_placements(problem, tracker, placements)
        if problem.fusion:
            offer_fused_placements(problem, tracker, placements)
        for placement in placements:
            order = placement_order(graph, machine, placement)
            offer_timed(problem, tracker, timeline_schedule(graph, machine, order, placement))
