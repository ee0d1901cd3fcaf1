"""A classical placement for GDP's policy to start from: the best of a few METIS splits.

An untrained per-op policy has no reason to keep the ops that exchange big tensors together,
and a policy that must discover it one op at a time needs far more samples than this machine
can score (GDP-one stayed behind METIS on gpt2-tiny and bert-tiny after 150 PPO steps). So the
policy is given, as one more input, the placement that strong classical methods find cheaply:
METIS splits balanced by runtime and by memory at two imbalances (and, under a capacity, by
memory weights that count activations partly), the placements of HEFT's three timeline
variants (insertion, lookahead, both: on lstm-lm-unrolled-32's training graph on 8 devices the
lookahead one is the only fitting candidate under 8 ms), and every op on one device (the best
choice when links are slow against the ops), each scored in the placement environment (its
schedulers), the fastest feasible kept (the least over capacity if none fits). Its devices
are numbered in the order of the mean topological position of their ops, so device k is the
k-th pipeline stage. The network adds a learned multiple of this hint to its logits
(`GDPConfig.partition_prior`) and learns where to leave it.
"""

from __future__ import annotations

import numpy as np

from graphopt.learning.placement.env import PlacementEnv
from graphopt.solvers.list_scheduling import HEFT_VARIANTS, heft_timeline
from graphopt.solvers.partition import memory_weights, metis_partition

HINT_BALANCES = ("runtime", "memory")
"""What the METIS candidates balance."""

HINT_IMBALANCES = (0.05, 0.2)
"""Allowed relative excess of a device's load over the mean, per candidate."""

HINT_ACTIVATION_SCALES = (0.0, 0.1, 1.0)
"""Under a capacity, also METIS splits balancing `memory_weights` at these activation scales
(persistent bytes in full, activations scaled), at 5 % imbalance: the runtime- and byte-balanced
splits often leave one device over (lstm-lm-unrolled-32 on 2 devices at 0.6 x its one-device
peak: all of them over, scale 0.1 fits)."""


def partition_hint(env: PlacementEnv) -> np.ndarray:
    """[n_ops] int32: the fastest feasible candidate (the least over capacity if none fits)."""
    graph, n_devices = env.graph, env.n_devices
    candidates = [np.zeros(graph.n_ops, dtype=np.int32)]
    if n_devices > 1 and graph.n_ops:
        for balance in HINT_BALANCES:
            for imbalance in HINT_IMBALANCES:
                parts = metis_partition(graph, n_devices, balance, 0, imbalance=imbalance)
                candidates.append(_stage_numbered(graph.topological_order, parts, n_devices))
        if env.machine.capacity is not None:
            for scale in HINT_ACTIVATION_SCALES:
                weights = memory_weights(graph, scale)
                parts = metis_partition(graph, n_devices, weights, 0, imbalance=0.05)
                candidates.append(_stage_numbered(graph.topological_order, parts, n_devices))
        for variant, (insertion, lookahead) in HEFT_VARIANTS.items():
            timed = (
                env.heft  # the insertion variant, which the env keeps for its reference
                if variant == "insertion"
                else heft_timeline(graph, env.machine, insertion=insertion, lookahead=lookahead)
            )
            candidates.append(_stage_numbered(graph.topological_order, timed.placement, n_devices))
    outcome = env.step(np.stack(candidates))
    best = np.lexsort((outcome.makespan, outcome.excess))[0]
    return candidates[best]


def _stage_numbered(order: np.ndarray, parts: np.ndarray, n_devices: int) -> np.ndarray:
    """`parts` relabelled so that devices run in the order of their ops' mean position."""
    position = np.empty(len(order), dtype=np.float64)
    position[order] = np.arange(len(order))
    count = np.bincount(parts, minlength=n_devices)
    mean = np.bincount(parts, weights=position, minlength=n_devices) / np.maximum(count, 1)
    mean[count == 0] = np.inf  # empty devices go last
    label = np.empty(n_devices, dtype=np.int32)
    label[np.argsort(mean, kind="stable")] = np.arange(n_devices)
    return label[parts]
