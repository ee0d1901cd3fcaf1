"""Fine-tuning a trained PPO policy on the one graph a solve places (GDP's and GO's).

The solvers import this module only when asked to fine-tune, so that a zero-shot solve never
loads a trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from graphopt.learning.systems.gdp.env import Graphs
from graphopt.learning.systems.gdp.train import GDPTrainer


def fine_tune(
    policy: torch.nn.Module,
    graphs: Graphs,
    trained: Any,
    steps: int,
    rng: np.random.Generator,
    offer: Callable[[np.ndarray], None],
    trainer: Callable[..., GDPTrainer] = GDPTrainer,
) -> GDPTrainer:
    """`steps` PPO steps on the graph alone with the checkpoint's settings, offering each sample.

    GDP's fine-tuning ("in under 50 steps", paper 003) and GO's, seeded by the solve; `trainer`
    (GDP's by default) makes the trainer from (policy, graphs, train ids, config), which is
    returned.
    """
    run = replace(trained.run, steps=steps, seed=int(rng.integers(2**62)))
    tuner = trainer(policy, graphs, np.zeros(1, dtype=np.int64),
                    replace(trained, graphs_per_step=1, run=run))  # fmt: skip
    for step in range(steps):
        tuner.step(step)
        for _, sampled, _ in tuner.sampled:
            offer(sampled)
    return tuner
