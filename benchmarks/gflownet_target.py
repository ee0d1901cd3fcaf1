"""Where does the GFlowNet's target put its mass? Importance-weighted mean speedup per sigma.

    .venv/bin/python benchmarks/gflownet_target.py [--policy best.pt] [--prior list]
        [--samples 1000] [--ops 50] [--json out.json]

A GFlowNet trained to its optimum at temperature sigma samples schedule x with probability
proportional to R(x) = exp(U(x) / sigma) (the offset m cancels). Whether that target is a good
scheduler depends on how fast the number of schedules grows as U falls: a 50-op graph on 4
devices has at least e^97 of them. This script estimates the target's mean speedup without
training: it samples trajectories tau from a policy (P_F) and weights each by
R(x) P_B(tau | x) / P_F(tau) with the uniform P_B (self-normalized importance sampling), and
reports the weighted mean speedup and the effective sample size per sigma beside the sampler's
own mean and best. An ESS near 1 means the estimate is the best sample's speedup, a lower bound
on the target's mean. Without `--policy` the sampler is an untrained policy with `--prior`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.learning.systems.gflownet.config import GFlowNetConfig
from graphopt.learning.systems.gflownet.network import GFlowNetPolicy
from graphopt.learning.systems.gflownet.sampling import sample_trajectories
from graphopt.learning.systems.gflownet.solver import load_gflownet_policy

SIGMAS = (1.0, 0.1, 0.03, 0.01, 0.005, 0.002)
FAMILIES = ("erdos_renyi", "layered")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", type=str)
    parser.add_argument("--prior", choices=("none", "list"), default="list")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=50)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    machine = Machine(4)
    torch.manual_seed(0)
    if args.policy:
        policy, sampling_sigma, _ = load_gflownet_policy(args.policy, machine.n_devices)
    else:
        policy, sampling_sigma = GFlowNetPolicy(GFlowNetConfig(prior=args.prior)), 0.01
    policy.eval()
    results = []
    for family in FAMILIES:
        graph = generate(family, args.ops, seed=123)
        speedups, log_ratio = [], []
        for chunk in range(0, args.samples, 200):
            with torch.no_grad():
                drawn = sample_trajectories(
                    policy,
                    graph,
                    machine,
                    min(200, args.samples - chunk),
                    sampling_sigma,
                    torch.Generator().manual_seed(chunk),
                    uniform_backward=True,
                )
            speedups.append(drawn.schedules.speedups(Scorer(graph, machine)))
            log_ratio.append((drawn.log_pb - drawn.log_pf).double().numpy())
        u, base = np.concatenate(speedups), np.concatenate(log_ratio)
        row = {"graph": graph.name, "sampler_mean": float(u.mean()), "sampler_best": float(u.max())}
        print(f"{graph.name}: sampler mean {u.mean():.3f}, best {u.max():.3f}")
        for sigma in SIGMAS:
            log_w = u / sigma + base
            w = np.exp(log_w - log_w.max())
            w /= w.sum()
            mean, ess = float((w * u).sum()), float(1.0 / (w**2).sum())
            row[f"target_mean_sigma_{sigma:g}"], row[f"ess_sigma_{sigma:g}"] = mean, ess
            print(f"  sigma {sigma:g}: target mean speedup {mean:.3f} (ESS {ess:.1f})")
        results.append(row)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
