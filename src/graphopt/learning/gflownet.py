"""The GFlowNet scheduler as a solver: sample many schedules from a trained policy, keep the best.

Paper 004's candidate sampler (section 5): the policy, conditioned on a low temperature, samples
`samples` schedules of the graph (zero-shot: any graph, any size); a policy trained by the PPO
baseline samples at the one temperature it was trained at. Each schedule is scored by the
problem's proxy and offered to the tracker, which keeps the best (and counts one evaluation per
schedule, so an evaluation or time budget stops the sampling early). The schedules sampled are
kept for `top_candidates` (`solvers.candidates`), the K best distinct ones that `graphopt optimize
--candidates` writes and re-scores on target models (`graphopt.evaluation.candidates`).

Without a `policy`, the one shipped for the machine's device count is used
(`graphopt/policies/gflownet-makespan-d<d>.pt`). The topological attention is dense, so a step
costs O(B n^2): schedules are sampled in chunks whose attention scores fit `CHUNK_SCORES`, which
also bounds how long the budget waits for a chunk to finish on large graphs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

from graphopt.ir.solution import Solution
from graphopt.learning.encoders.topoformer import relation_masks
from graphopt.learning.formats import CheckpointError, shipped_policy_path
from graphopt.learning.networks.gflownet import GFlowNetPolicy, sample_trajectories
from graphopt.learning.networks.gflownet_config import GFLOWNET_FORMAT, GFlowNetConfig
from graphopt.learning.runs import stored_configs
from graphopt.learning.saving import load_weights, read_checkpoint
from graphopt.learning.train_gflownet import TrainConfig
from graphopt.solvers.base import Objective, Problem, Solver, SolverError, Tracker
from graphopt.solvers.candidates import top_candidates

CHUNK = 125
"""Most schedules sampled per policy batch: 125 sampled 1,000 schedules of a 100-op graph faster
than 250, 500 or 1,000 on 2 cores."""
CHUNK_SCORES = CHUNK * 4 * 100 * 100
"""Most attention scores (B x heads x n x n) per policy batch: 125 schedules of a 100-op graph
with 4 heads (20 MB). A 1,000-op graph samples one schedule per batch."""


def chunk_size(n_ops: int, heads: int) -> int:
    """Schedules per policy batch for a graph of `n_ops` ops (at least 1, at most `CHUNK`)."""
    return max(1, min(CHUNK, CHUNK_SCORES // max(heads * n_ops * n_ops, 1)))


@dataclass(frozen=True)
class GFlowNetSamplerConfig:
    """How the trained policy is used.

    Attributes:
        policy: path of a GFlowNet checkpoint (best.pt of `graphopt train gflownet`).
        samples: schedules sampled (paper 004: 1,000).
        sigma: the temperature they are sampled at; None: the checkpoint's
            (`TrainConfig.inference_sigma`: its validation temperature, paper 004's 0.005 by
            default, or a PPO policy's training temperature).
    """

    policy: str | None = None
    samples: int = 1000
    sigma: float | None = None

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise SolverError(f"samples must be >= 1, got {self.samples}")
        if self.sigma is not None and not self.sigma > 0:
            raise SolverError(f"temperature sigma must be > 0, got {self.sigma}")


SHIPPED_DEVICES = 4
"""The device count of the shipped policy (paper 004's setting)."""


@cache
def load_gflownet_policy(path: str, n_devices: int) -> tuple[GFlowNetPolicy, float]:
    """A GFlowNet checkpoint's policy for `n_devices` devices, and its default temperature.

    Loaded once per process; the temperature is `TrainConfig.inference_sigma` of the run.

    Raises:
        CheckpointError: not a GFlowNet checkpoint, malformed, or for another device count.
    """
    record = read_checkpoint(path, GFLOWNET_FORMAT)
    trained, config = stored_configs(record, path, TrainConfig.from_dict, GFlowNetConfig)
    if config.n_devices != n_devices:
        raise CheckpointError(
            f"{path} is a policy for {config.n_devices} devices, the machine has {n_devices}"
        )
    policy = GFlowNetPolicy(config)
    load_weights(
        policy, lambda: GFlowNetPolicy(config), record["model_state"], f"{path}: model_state"
    )
    return policy.eval(), trained.inference_sigma


class GFlowNet(Solver):
    """Schedules sampled from a trained GFlowNet policy at a low temperature (paper 004).

    Args:
        config: the checkpoint, the number of samples and the temperature.
    """

    name = "gflownet"
    objectives = frozenset({Objective.MAKESPAN})

    def __init__(self, config: GFlowNetSamplerConfig | None = None) -> None:
        self.config = config or GFlowNetSamplerConfig()
        self.sampled: list[tuple[np.ndarray, np.ndarray]] = []

    def policy(self, problem: Problem) -> tuple[GFlowNetPolicy, float]:
        """The trained policy for this problem's device count, and the temperature to sample at.

        Raises:
            SolverError: no checkpoint given and none shipped for the device count, or a
                checkpoint that does not fit.
        """
        d = problem.machine.n_devices
        path = self.config.policy or shipped_policy_path("gflownet", "makespan", d)
        if path is None:
            raise SolverError(
                f"no shipped gflownet policy for makespan on {d} devices (shipped: "
                f"{SHIPPED_DEVICES}); train one with `graphopt train gflownet CONFIG` and pass "
                "it with --policy"
            )
        try:
            policy, sigma = load_gflownet_policy(path, d)
        except CheckpointError as error:
            raise SolverError(str(error)) from None
        return policy, sigma if self.config.sigma is None else self.config.sigma

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        """Offers each sampled schedule, scored by the problem's scorer, batch after batch.

        Every schedule offered is also kept in `sampled` (so a run the budget cut short still
        leaves its candidates). No batch starts once the budget is spent, and none asks for more
        schedules than the evaluations left.
        """
        self.sampled = []
        for batch in self.batches(problem, rng, lambda: tracker.remaining):
            for placement, events in batch:
                self.sampled.append((placement, events))
                peaks, makespan, _ = problem.scorer.evaluate(placement, events)
                tracker.offer(placement, events, peaks, makespan)
            tracker.check()

    def batches(
        self,
        problem: Problem,
        rng: np.random.Generator,
        remaining: Callable[[], int] | None = None,
    ) -> Iterator[list[tuple[np.ndarray, np.ndarray]]]:
        """The sampled schedules as (placement, events) pairs, `chunk_size` at a time.

        Args:
            problem: the graph, machine and pins.
            rng: seeds each batch.
            remaining: evaluations left (a tracker's), so the last batch samples no more.
        """
        policy, sigma = self.policy(problem)
        graph, machine = problem.graph, problem.machine
        masks = relation_masks(graph)
        chunk = chunk_size(graph.n_ops, policy.config.heads)
        left = self.config.samples
        while left > 0:
            batch = min(chunk, left, remaining() if remaining is not None else left)
            generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
            with torch.no_grad():
                sampled = sample_trajectories(
                    policy,
                    graph,
                    machine,
                    max(batch, 1),
                    sigma,
                    generator,
                    masks,
                    problem.pinned,
                )
            placements, events = sampled.schedules.solutions()
            yield list(zip(placements, events, strict=True))
            left -= batch

    def max_candidates(self) -> int:
        """The schedules a run samples at most."""
        return self.config.samples

    def top_candidates(self, problem: Problem, k: int) -> list[Solution]:
        """The `k` best distinct schedules of the last run, by the problem's proxy."""
        return top_candidates(problem, self.sampled, min(k, len(self.sampled)))


def gflownet(policy: str | None = None) -> GFlowNet:
    """The GFlowNet sampler with the checkpoint at `policy` (None: the shipped one)."""
    return GFlowNet(GFlowNetSamplerConfig(policy=policy))
