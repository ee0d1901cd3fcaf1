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
(`GDPConfig.partition_prior`) and learns where to leave it. The candidates are
`solvers.placement_hints`', whose `partition-hint` solver offers them all to classical searches.
"""

from __future__ import annotations

import numpy as np

from graphopt.learning.placement.env import PlacementEnv
from graphopt.solvers.placement_hints import hint_candidates


def partition_hint(env: PlacementEnv) -> np.ndarray:
    """[n_ops] int32: the fastest feasible candidate (the least over capacity if none fits)."""
    known = {"insertion": env.heft} if env.n_devices > 1 and env.graph.n_ops else None
    candidates = hint_candidates(env.graph, env.machine, known)  # the env keeps HEFT's
    outcome = env.step(np.stack(candidates))
    best = np.lexsort((outcome.makespan, outcome.excess))[0]
    return candidates[best]
