"""How much each REINFORCE variance-reduction switch raises REGAL's gradient signal-to-noise ratio.

    .venv/bin/python benchmarks/regal_gradient_snr.py DATASET [--config regal-campaign-peak-memory]
        [--policy SNAPSHOT.pt] [--estimates 48] [--json out.json]

At one policy (the config's step-0 network, or a run's snapshot), each variant computes
`--estimates` independent gradients of REINFORCE's policy term, each from one training step's
rollouts (steps 0, 1, ...: the same graphs and search seeds for every variant, so variants are
compared on the same draws). With g_k the estimates and g their mean, the noise is
N = mean_k |g_k - g|^2 and the signal S = |g|^2 - N / K (|g|^2 less its expected noise), and
SNR = S / N is the signal-to-noise ratio of one step's gradient: the number of steps whose
average points as much along the true gradient as across it. Also printed: the mean cosine
between pairs of estimates (0 when steps agree on nothing). Variants: the paper's learned
baseline; the leave-one-out baseline ('sample-mean', the shipped one) with common random
numbers; with per-graph reward normalization; with antithetic pairs; with both; and with twice
the samples per graph. Normalization rescales gradients, which SNR ignores by construction.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.progress import track
from rich.table import Table

from graphopt.learning.runs import select_graphs
from graphopt.learning.systems.regal.checkpoints import load_policy
from graphopt.learning.systems.regal.env import EnvSpec, RolloutEnv
from graphopt.learning.systems.regal.network import RegalPolicy
from graphopt.learning.systems.regal.train import TrainConfig, prepare_graphs, step_loss
from graphopt.learning.workers import make_workers


def variants(base: TrainConfig) -> dict[str, TrainConfig]:
    """The switches measured, each applied to `base`."""

    def switched(advantage="sample-mean", normalize=False, antithetic=False, factor=1):
        samples = base.rollouts.samples_per_graph * factor
        return dataclasses.replace(
            base,
            reinforce=dataclasses.replace(base.reinforce, advantage=advantage, normalize=normalize),
            rollouts=dataclasses.replace(
                base.rollouts, antithetic=antithetic, samples_per_graph=samples
            ),
        )

    return {
        "learned baseline b(G) (paper)": switched(advantage="baseline"),
        "leave-one-out + CRN (shipped)": switched(),
        "+ per-graph normalization": switched(normalize=True),
        "+ antithetic pairs": switched(antithetic=True),
        "+ antithetic + normalization": switched(normalize=True, antithetic=True),
        "leave-one-out, 2x samples": switched(factor=2),
    }


def gradient_stats(gradients: np.ndarray) -> dict[str, float]:
    """SNR of one estimate and the mean pairwise cosine of [K, parameters] gradients."""
    k = len(gradients)
    mean = gradients.mean(axis=0)
    noise = float(np.mean(np.sum((gradients - mean) ** 2, axis=1)))
    signal = float(np.sum(mean**2)) - noise / k
    unit = gradients / np.maximum(np.linalg.norm(gradients, axis=1, keepdims=True), 1e-30)
    cosines = unit @ unit.T
    pairwise = float((cosines.sum() - np.trace(cosines)) / (k * (k - 1)))
    return {"snr": signal / noise if noise > 0 else float("nan"), "cosine": pairwise}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", type=Path, help="a built dataset (graphopt dataset build)")
    parser.add_argument("--config", default="regal-campaign-peak-memory")
    parser.add_argument("--policy", type=Path, help="a snapshot or best.pt (default: step 0)")
    parser.add_argument("--estimates", type=int, default=48)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    base = dataclasses.replace(TrainConfig.load(args.config), dataset=str(args.dataset))
    torch.manual_seed(base.run.seed)
    network = RegalPolicy(base.policy)
    if args.policy is not None:
        network.load_state_dict(load_policy(args.policy).network.state_dict())
    network.train()
    train_ids, _ = select_graphs(args.dataset, base.run.max_train_ops, 1)
    spec = EnvSpec(
        str(args.dataset),
        base.policy.n_devices,
        base.objective,
        base.search,
        base.feature_evaluations,
        base.policy.actions,
        base.inner,
    )
    rollouts = make_workers(partial(RolloutEnv, spec), 0, None)
    evaluations = base.rollouts.train_evaluations
    train_set = prepare_graphs(rollouts, args.dataset, "train", train_ids, evaluations, base)
    results = {}
    for name, config in variants(base).items():
        gradients = []
        start = time.perf_counter()
        for k in track(range(args.estimates), description=name[:30]):
            network.zero_grad()
            loss, _, _ = step_loss(config, network, rollouts, train_ids, train_set, k)
            loss.policy.backward()
            gradients.append(
                torch.cat([p.grad.flatten() for p in network.parameters() if p.grad is not None])
                .double()
                .numpy()
            )
        results[name] = {
            **gradient_stats(np.stack(gradients)),
            "seconds_per_estimate": (time.perf_counter() - start) / args.estimates,
        }
    table = Table(title=f"REINFORCE gradient SNR, {args.config}, {args.estimates} estimates")
    for column in ("variant", "SNR of one step", "mean cosine", "s / estimate"):
        table.add_column(column)
    for name, row in results.items():
        table.add_row(
            name, f"{row['snr']:.4f}", f"{row['cosine']:.4f}", f"{row['seconds_per_estimate']:.2f}"
        )
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
