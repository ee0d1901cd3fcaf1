"""One policy inference: a graph's features in, BRKGA's per-gene distributions out."""

from __future__ import annotations

import numpy as np
import torch

from graphopt.learning.batching import make_batch
from graphopt.learning.features import GraphFeatures
from graphopt.learning.systems.regal.actions import gene_distributions
from graphopt.learning.systems.regal.checkpoints import TrainedPolicy
from graphopt.learning.systems.regal.network import greedy_actions, sample_actions
from graphopt.learning.threads import one_torch_thread
from graphopt.solvers.base import SolverError
from graphopt.solvers.brkga import GeneDistributions
from graphopt.solvers.random_keys import RandomKeyDecoder


def predict_genes(
    policy: TrainedPolicy,
    features: GraphFeatures,
    decoder: RandomKeyDecoder,
    greedy: bool,
    rng: np.random.Generator,
) -> GeneDistributions:
    """The per-gene distributions the policy picks for one graph.

    Args:
        policy: the trained policy.
        features: the graph's features.
        decoder: the problem's decoder (chromosome layout and graph).
        greedy: take each op's most likely actions instead of sampling them.
        rng: seeds the sampling (unused when greedy).
    """
    with torch.inference_mode(), one_torch_thread():
        logits = policy.network(make_batch([features]))
    if not bool(torch.isfinite(logits).all()):
        raise SolverError(
            "the policy's outputs overflowed on this graph (non-finite logits): its weights are "
            "too large for it; retrain it or use another policy"
        )
    if greedy:
        actions = greedy_actions(logits)
    else:
        generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        actions = sample_actions(logits, generator)[0]
    return gene_distributions(
        actions.numpy(),
        policy.config.actions,
        decoder.layout,
        decoder.problem.graph.tensor_producer,
        policy.inner.config(decoder.problem.objective.value),
    )
