"""The GFlowNet scheduler as a solver: sample many schedules from a trained policy, keep the best.

Paper 004's candidate sampler (section 5): the policy, conditioned on a low temperature, samples
up to `samples` schedules of the graph (zero-shot: any graph, any size); a policy trained by the
PPO baseline samples at the one temperature it was trained at. Schedules are sampled in batches,
every schedule of a batch is scored by the problem's proxy, and the batch is offered to the
tracker as one (one evaluation per schedule), so nothing sampled is lost when the budget ends.
The schedules sampled are kept for `top_candidates` (`solvers.candidates`), the K best distinct
ones that `graphopt optimize --candidates` writes and re-scores on target models
(`graphopt.evaluation.candidates`).

Under a time budget the first batch holds one schedule; each batch's seconds then fit a + b B
(`BatchTimes`: the policy's n steps, plus each schedule), and each next batch is as large as
fits what is left of the time and at most `GROWTH` times the largest so far, so sampling ends
within the budget rather than a whole batch after it. Under an evaluation budget alone the
batches are the same for every run (repeatable with a seed). Batches are also capped by memory
(`chunk_size`): the paper's per-state policy attends densely, a step costs O(B n^2) and its
attention scores must fit `CHUNK_SCORES`; a per-graph policy's state arrays are [B, n] and must
fit `STATE_ENTRIES`. The policy runs on one torch thread (`learning.threads`): beside numba's
runtime, two threads made each step up to 26x slower on 2 busy cores.

Under `optimize`'s default budget the solver takes `DEFAULT_SECONDS`, not the default budget's
10 s: a sampler has no stall rule to end it sooner.

HEFT's schedules are scored first and offered as candidates beside the samples: plain HEFT and
its timeline variants (`HEFT_VARIANTS`: HEFT's insertion policy, a lookahead, both), which the
`heft` solver offers too, four evaluations in milliseconds. So the solver is never worse than
the `heft` solver; its note says whether a sampled schedule beat HEFT's best, and by how much.

Without a `policy`, the shipped one is used (`graphopt/policies/gflownet-makespan.pt`, a
per-graph policy that serves any device count; a `gflownet-makespan-d<d>.pt` would take
precedence for its count). Paper 004's per-state policy ships beside it as
`gflownet-paper-makespan-d4.pt`, and the per-graph network trained by PPO as
`gflownet-ppo-makespan.pt`, both for `--policy`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import numpy as np
import torch

from graphopt.ir.solution import Solution
from graphopt.learning.formats import CheckpointError, shipped_policy_path
from graphopt.learning.runs import stored_configs
from graphopt.learning.saving import load_weights, read_checkpoint
from graphopt.learning.systems.gflownet.config import (
    GFLOWNET_FORMAT,
    PLAIN,
    Decoding,
    GFlowNetConfig,
    TrainConfig,
)
from graphopt.learning.systems.gflownet.network import GraphEncodedPolicy, Policy, build_policy
from graphopt.learning.systems.gflownet.sampling import sample_trajectories
from graphopt.learning.threads import one_torch_thread
from graphopt.solvers.base import (
    BudgetExhausted,
    Initial,
    Objective,
    Problem,
    Rng,
    Solver,
    SolverError,
    Tracker,
)
from graphopt.solvers.candidates import top_candidates
from graphopt.solvers.list_scheduling import heft_events, heft_timelines

CHUNK = 125
"""Most schedules sampled per policy batch: 125 sampled 1,000 schedules of a 100-op graph faster
than 250, 500 or 1,000 on 2 cores."""
CHUNK_SCORES = CHUNK * 4 * 100 * 100
"""Most attention scores (B x heads x n x n) per policy batch: 125 schedules of a 100-op graph
with 4 heads (20 MB). A 1,000-op graph samples one schedule per batch."""

DEFAULT_SECONDS = 1.5
"""The solver's time under `optimize`'s default budget (`Solver.default_seconds`): the policy's
set-up, HEFT and as many samples as fit, so that a default CLI run on a 200-op graph answers in
under 5 s on 2 cores, torch's import included (`benchmarks/bench_gflownet.py`, row D).
`--time` or `--budget` sample longer, up to `samples`."""

SAFETY = 1.15
"""A batch starts only when this multiple of its predicted seconds fits in the time left."""
BATCH_SHARE = 0.5
"""Once `BatchTimes` has a fit, no batch is predicted to take more than this share of the time
budget, so that a batch slower than predicted (the machine got busier) overruns it by little.
Before, its bound overestimates any larger batch, and the time left is the only limit."""

GROWTH = 4
"""Under a time budget no batch holds more than this many times the largest batch timed so far:
a fit on small batches underestimates large ones (a step's cost per schedule grows with the
batch's memory), so a 200-op graph's fourth batch of 346, predicted at 0.44 s, took 1.56 s and
the default 1.5 s became 2.6 s. Growing by 4 keeps every prediction near measured sizes."""

Schedules = list[tuple[np.ndarray, np.ndarray]]
"""Sampled schedules as (placement, events) pairs."""


CHUNK_PER_GRAPH = 1000
"""Most schedules per batch of a per-graph policy, whose steps cost O(B x ready x d)."""
STATE_ENTRIES = 5_000_000
"""Most B x n entries of a per-graph policy's batch: its partial schedules' [B, n] arrays (a
few hundred MB in all)."""


def chunk_size(n_ops: int, config: GFlowNetConfig) -> int:
    """Schedules per policy batch for a graph of `n_ops` ops (at least 1).

    The paper's policy is bounded by its dense attention's scores, a per-graph one by its
    partial schedules' arrays.
    """
    if config.encoding == "per-graph":
        return max(1, min(CHUNK_PER_GRAPH, STATE_ENTRIES // max(n_ops, 1)))
    return max(1, min(CHUNK, CHUNK_SCORES // max(config.heads * n_ops * n_ops, 1)))


class BatchTimes:
    """Seconds a batch of B schedules takes, a + b B, fitted on the batches timed so far.

    a is what the policy's n steps cost whatever B (a step's fixed overhead), b what each
    schedule adds. The first batch also pays for warming up (loading kernels), so only the
    batches after it are fitted once there are any. Below the smallest batch fitted, the fit is
    not extrapolated (small batches cost more per schedule than a line through larger ones
    says: a batch of 1 of a 200-op graph took up to twice its prediction): a smaller batch is
    predicted to take as long as that one. Until two sizes are fitted (or when noise gives a
    fit with a < 0 or b <= 0), the bound that holds for any a >= 0 is used: the last batch's
    seconds per schedule for a larger batch, its seconds for a smaller one.
    """

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.seconds: list[float] = []
        self._fit: tuple[float, float, int] | None = None

    def record(self, size: int, seconds: float) -> None:
        """Adds a timed batch of `size` schedules."""
        self.sizes.append(size)
        self.seconds.append(seconds)
        skip = 1 if len(self.sizes) > 1 else 0
        sizes, times = self.sizes[skip:], self.seconds[skip:]
        self._fit = None
        if len(set(sizes)) > 1:
            b, a = np.polyfit(np.asarray(sizes, dtype=np.float64), np.asarray(times), 1)
            if a >= 0 and b > 0:
                self._fit = (float(a), float(b), min(sizes))

    @property
    def fitted(self) -> bool:
        """Whether predictions come from a fit of a and b (else from the bound)."""
        return self._fit is not None

    def predict(self, size: int) -> float:
        """Seconds a batch of `size` schedules is expected to take (0.0 before any batch)."""
        if self._fit is not None:
            a, b, smallest = self._fit
            return a + b * max(size, smallest)
        if not self.sizes:
            return 0.0
        return self.seconds[-1] * max(size / self.sizes[-1], 1.0)

    def largest(self, most: int, seconds: float) -> int:
        """The largest batch of at most `most` schedules predicted to take <= `seconds`, or 0."""
        return next((size for size in range(most, 0, -1) if self.predict(size) <= seconds), 0)

    def per_schedule(self) -> float:
        """The fewest seconds per schedule a timed batch took."""
        return min(t / b for b, t in zip(self.sizes, self.seconds, strict=True))


@dataclass(frozen=True)
class GFlowNetSamplerConfig:
    """How the trained policy is used.

    Attributes:
        policy: path of a GFlowNet checkpoint (best.pt of `graphopt train gflownet`).
        samples: schedules sampled at most (paper 004: 1,000); the budget may allow fewer.
        sigma: the temperature they are sampled at; None: the checkpoint's
            (`TrainConfig.inference_sigma`: its `sampling.inference_sigma` when set, as the
            shipped policy's 0.002, else its validation temperature, paper 004's 0.005 by
            default, or a PPO policy's training temperature).
        logit_temperature: what P_F's logits are divided by at each step; None: the
            checkpoint's `sampling.inference_logit_temperature` (1 unless set after training;
            the shipped policy's 0.25).
        locality: the weight of the locality preference (`Decoding`); None: the checkpoint's
            `sampling.inference_locality` (0 unless set after training; the shipped policy's 2).
    """

    policy: str | None = None
    samples: int = 1000
    sigma: float | None = None
    logit_temperature: float | None = None
    locality: float | None = None

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise SolverError(f"samples must be >= 1, got {self.samples}")
        if self.sigma is not None and not self.sigma > 0:
            raise SolverError(f"temperature sigma must be > 0, got {self.sigma}")
        try:
            self.decoding(PLAIN)
        except ValueError as error:
            raise SolverError(str(error)) from None

    def decoding(self, default: Decoding) -> Decoding:
        """`default` (the checkpoint's) with the fields this config gives."""
        return Decoding(
            default.logit_temperature if self.logit_temperature is None else self.logit_temperature,
            default.locality if self.locality is None else self.locality,
        )


class LoadedPolicy(NamedTuple):
    """A checkpoint's policy and how it samples by default (`load_gflownet_policy`)."""

    policy: Policy
    sigma: float
    """`TrainConfig.inference_sigma` of the run."""
    decoding: Decoding
    """`SamplingConfig.decoding` of the run."""


@cache
def load_gflownet_policy(path: str, n_devices: int) -> LoadedPolicy:
    """A GFlowNet checkpoint's policy for `n_devices` devices, and how it samples by default.

    Loaded once per process.

    Raises:
        CheckpointError: not a GFlowNet checkpoint, malformed, or for another device count.
    """
    record = read_checkpoint(path, GFLOWNET_FORMAT)
    trained, config = stored_configs(record, path, TrainConfig.from_dict, GFlowNetConfig)
    policy = build_policy(config)
    if not policy.serves(n_devices):
        raise CheckpointError(
            f"{path} is a policy for {config.n_devices} devices, the machine has {n_devices}"
        )
    load_weights(policy, record["model_state"], f"{path}: model_state")
    return LoadedPolicy(policy.eval(), trained.inference_sigma, trained.sampling.decoding)


@dataclass(frozen=True)
class BatchSampler:
    """Draws batches of schedules of one problem from a loaded policy.

    Attributes:
        problem: the graph, machine and pins.
        policy: the trained policy for the machine's device count.
        sigma: the temperature it samples at.
        context: `policy.context` of the graph, built once for every batch.
        decoding: how P_F's logits become each draw (`Decoding`).
    """

    problem: Problem
    policy: Policy
    sigma: float
    context: object
    decoding: Decoding = PLAIN

    @property
    def chunk(self) -> int:
        """The largest batch (`chunk_size`)."""
        return chunk_size(self.problem.graph.n_ops, self.policy.config)

    def __call__(self, size: int, rng: np.random.Generator) -> Schedules:
        """`size` schedules, seeded by `rng`, as (placement, events) pairs."""
        problem = self.problem
        generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        with torch.no_grad(), one_torch_thread():
            sampled = sample_trajectories(
                self.policy,
                problem.graph,
                problem.machine,
                size,
                self.sigma,
                generator,
                self.context,
                problem.pinned,
                backward=False,
                decoding=self.decoding,
            )
        placements, events = sampled.schedules.solutions()
        return list(zip(placements, events, strict=True))


class GFlowNet(Solver):
    """Schedules sampled from a trained GFlowNet policy at a low temperature (paper 004).

    Args:
        config: the checkpoint, the number of samples and the temperature.
    """

    name = "gflownet"
    objectives = frozenset({Objective.MAKESPAN})
    stops_when_stalled = False
    default_seconds = DEFAULT_SECONDS

    def __init__(self, config: GFlowNetSamplerConfig | None = None) -> None:
        self.config = config or GFlowNetSamplerConfig()
        self.sampled: Schedules = []
        self.heft: Schedules = []
        """HEFT's schedules of the last run (plain, then the timeline variants), candidates
        beside the sampled ones."""
        self.heft_makespan = np.inf
        """The best of their makespans, each scored once when offered."""
        self.best_sampled = np.inf
        """The best makespan a sampled schedule of the last run reached (within capacity)."""

    def policy(self, problem: Problem) -> LoadedPolicy:
        """The trained policy for this problem's device count, and how to sample it.

        Raises:
            SolverError: no checkpoint given and none shipped for the device count, or a
                checkpoint that does not fit.
        """
        d = problem.machine.n_devices
        path = self.config.policy or shipped_policy_path("gflownet", "makespan", d)
        if path is None:
            raise SolverError(
                f"no shipped gflownet policy for makespan on {d} devices; train one with "
                "`graphopt train gflownet CONFIG` and pass it with --policy"
            )
        try:
            loaded = load_gflownet_policy(path, d)
        except CheckpointError as error:
            raise SolverError(str(error)) from None
        config = self.config
        sigma = loaded.sigma if config.sigma is None else config.sigma
        decoding = config.decoding(loaded.decoding)
        if decoding.locality and not isinstance(loaded.policy, GraphEncodedPolicy):
            raise SolverError(f"{path}: locality decoding needs a per-graph policy")
        return LoadedPolicy(loaded.policy, sigma, decoding)

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Samples batch after batch, scores every schedule and offers each batch whole.

        Every schedule sampled is kept in `sampled` and counted. No batch asks for more
        schedules than the evaluations left; under a time budget each batch is sized by
        `BatchTimes` to fit the time left, and none starts when even one schedule would not.
        When fewer than `samples` were drawn, a note says so and why.
        """
        self.sampled, self.heft, self.best_sampled = [], [], np.inf
        self.heft_makespan = np.inf
        asked, seconds = self.config.samples, tracker.budget.seconds
        times = BatchTimes()
        with suppress(BudgetExhausted):
            draw = self.sampler(problem)
            self._offer_heft(problem, tracker)
            while len(self.sampled) < asked:
                size = min(draw.chunk, asked - len(self.sampled), tracker.remaining)
                if seconds is not None:
                    left = seconds - tracker.seconds
                    if times.fitted:
                        left = min(left, BATCH_SHARE * seconds)
                    if times.sizes:
                        size = times.largest(min(size, GROWTH * max(times.sizes)), left / SAFETY)
                    else:
                        size = 1
                    if size == 0:
                        tracker.budget_too_short = True
                        break
                start = time.perf_counter()
                batch = draw(size, rng)
                times.record(size, time.perf_counter() - start)
                self._offer(problem, tracker, batch)
        if self.heft:
            tracker.note(self._against_heft())
        if len(self.sampled) < asked:
            tracker.note(self._shortfall(tracker, times))

    def _offer_heft(self, problem: Problem, tracker: Tracker) -> None:
        """Scores HEFT's schedules and offers each (an evaluation each), before any sampling.

        Plain HEFT first, then each timeline variant; `heft` and `heft_makespan` keep them
        and their best makespan as they are offered, so a budget ending among them loses none.
        """
        graph, machine, pinned = problem.graph, problem.machine, problem.pinned
        schedules = [heft_events(graph, machine, pinned)]
        for timed in heft_timelines(graph, machine, pinned).values():
            schedules.append((timed.placement, timed.events))
        for placement, events in schedules:
            peaks, span, _ = problem.scorer.evaluate(placement, events)
            self.heft.append((placement, events))
            self.heft_makespan = min(self.heft_makespan, span)
            tracker.offer(placement, events, peaks, span)

    def _against_heft(self) -> str:
        """The note comparing the best sample with HEFT's best schedule (makespans, in capacity)."""
        heft, best = self.heft_makespan, self.best_sampled
        if not self.sampled:
            return "only HEFT's schedules were scored: the budget allowed no sample"
        if math.isinf(best):
            return "no sampled schedule fits the capacity; HEFT's best schedule is kept"
        if best < heft:
            faster = 100.0 * (1.0 - best / heft)
            return f"the best sampled schedule is {faster:.2f}% faster than HEFT's best"
        slower = 100.0 * (best / heft - 1.0) if heft > 0 else 0.0
        return (
            f"no sampled schedule beat HEFT's best ({slower:.2f}% slower at best); HEFT's is kept"
        )

    def _offer(self, problem: Problem, tracker: Tracker, batch: Schedules) -> None:
        """Scores every schedule of `batch`, keeps them, and offers the batch to the tracker.

        Offered as one (its best, counted as len(batch) evaluations), so that the budget ending
        inside a batch loses none of it; ties keep the first sampled, as one by one would.
        """
        self.sampled.extend(batch)
        scored = [problem.scorer.evaluate(placement, events) for placement, events in batch]
        excess, value = problem.fitness(
            np.array([peaks for peaks, _, _ in scored]), np.array([span for _, span, _ in scored])
        )
        best = int(np.lexsort((value, excess))[0])
        fits = excess == 0
        if fits.any():
            spans = np.array([span for _, span, _ in scored])
            self.best_sampled = min(self.best_sampled, float(spans[fits].min()))
        placement, events = batch[best]
        tracker.offer_best(placement, events, int(excess[best]), float(value[best]), len(batch))

    def _shortfall(self, tracker: Tracker, times: BatchTimes) -> str:
        """The note of a run that drew fewer schedules than `samples`: how many and why."""
        evaluations = tracker.budget.evaluations
        if tracker.remaining == 0 and evaluations is not None:
            limit = f"the budget of {evaluations:,} evaluations"
        elif tracker.budget.solver_default:
            limit = f"the default {self.default_seconds:g} s (--time or --budget for more)"
        else:
            limit = "the time budget"
        if not times.sizes:
            return f"sampled no schedule: {limit} allowed only HEFT's"
        return (
            f"sampled {len(self.sampled):,} of the {self.config.samples:,} schedules asked in "
            f"{tracker.seconds:.1f} s: {limit} allowed no more (the policy took "
            f"{times.per_schedule():.3g} s per schedule of this graph at best)"
        )

    def sampler(self, problem: Problem) -> BatchSampler:
        """Draws batches of `problem`'s schedules from the policy, loaded once for all."""
        policy, sigma, decoding = self.policy(problem)
        context = policy.context(problem.graph, problem.machine)
        return BatchSampler(problem, policy, sigma, context, decoding)

    def batches(self, problem: Problem, rng: np.random.Generator) -> Iterator[Schedules]:
        """All `samples` schedules as (placement, events) pairs, `BatchSampler.chunk` at a time.

        Args:
            problem: the graph, machine and pins.
            rng: seeds each batch.
        """
        draw = self.sampler(problem)
        left = self.config.samples
        while left > 0:
            batch = min(draw.chunk, left)
            yield draw(batch, rng)
            left -= batch

    def max_candidates(self) -> int:
        """The schedules a run samples at most."""
        return self.config.samples

    def top_candidates(self, problem: Problem, k: int) -> list[Solution]:
        """The `k` best distinct schedules of the last run (HEFT's among them), by the proxy."""
        scored = self.heft + self.sampled
        return top_candidates(problem, scored, min(k, len(scored)))

    def samples_drawn(self) -> int:
        """The schedules the last run scored as candidates (HEFT's too), repeats included."""
        return len(self.heft) + len(self.sampled)


def gflownet(policy: str | None = None) -> GFlowNet:
    """The GFlowNet sampler with the checkpoint at `policy` (None: the shipped one)."""
    return GFlowNet(GFlowNetSamplerConfig(policy=policy))
