"""Fine-tuning a trained GO policy on the one graph a solve decides.

GDP's fine-tuning (`gdp.finetune`) with GO's trainer; the solver imports this module only when
asked to fine-tune, so that a zero-shot solve never loads a trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch

from graphopt.learning.systems.gdp.finetune import fine_tune as fine_tune_gdp
from graphopt.learning.systems.go.env import GOGraphs
from graphopt.learning.systems.go.train import CentredGOTrainer, GOTrainer


def fine_tune(
    policy: torch.nn.Module,
    graphs: GOGraphs,
    trained: Any,
    steps: int,
    rng: np.random.Generator,
    offer: Callable[[np.ndarray], None],
    candidates: np.ndarray,
    explore: float | None,
    learn: bool,
) -> GOTrainer:
    """`steps` PPO steps of GO on the graph alone, offering each sample; returns the trainer.

    Args:
        policy: the checkpoint's network, trained in place.
        graphs: the solve's one graph, with GO's environment.
        trained: the checkpoint's training config (PPO and optimizer settings).
        steps: PPO steps.
        rng: the solve's generator (seeds the run).
        offer: takes each step's sampled decisions [S, 3, n_ops].
        candidates: [k, 3, n_ops] decisions already offered (undecided tasks -1); with
            `explore`, the search is centred on the best of them (`CentredGOTrainer`).
        explore: decisions changed per task around the centre; None: sample the policy's own
            priors, as GO's paper does.
        learn: take PPO's updates (False: the same search on the unchanging network).
    """
    trainer: Callable[..., GOTrainer] = GOTrainer
    if explore is not None:
        rewards = graphs.env("train", 0).score(candidates).reward
        first = int(np.argmax(rewards))
        trainer = partial(
            CentredGOTrainer, centre=candidates[first], reward=float(rewards[first]),
            explore=explore, learn=learn,
        )  # fmt: skip
    tuner = fine_tune_gdp(policy, graphs, trained, steps, rng, offer, trainer)
    assert isinstance(tuner, GOTrainer)
    return tuner
