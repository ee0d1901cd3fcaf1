"""GO's baselines for its multi-task policy (paper 002): the compiler's default, and annealing.

GO compares a policy that decides every op's device, scheduling level and fusion level with what
a compiler does unaided ("TF-default") and with a search over the same decisions. Both baselines
here go through GO's decoder (`go_decoder.decode`), the one its policy's actions go through, so
they differ from the policy only in how the decisions are chosen:

- `CompilerDefault`: HEFT's placement (or the human-expert one), GO's ready queues in
  critical-path order, and XLA-like default fusion when the problem allows fusion.
- `GOAnnealing`: simulated annealing over the three sets of per-op decisions, from the
  compiler default's placement with critical-path order and every fusable op at the top level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

import numpy as np

from graphopt.solvers.base import Initial, Problem, Rng, Solver, SolverError, Tracker
from graphopt.solvers.checks import check_integer, check_non_negative
from graphopt.solvers.expert import expert_placement
from graphopt.solvers.go_decoder import Decoded, decode
from graphopt.solvers.list_scheduling import heft_timeline

PlacementChoice = Literal["heft", "expert"]
"""Where the compiler default places ops: HEFT's earliest finishes, or whole modules in order."""


@dataclass(frozen=True)
class CompilerDefaultConfig:
    """Options of the compiler default."""

    placement: PlacementChoice = "heft"
    """'heft': HEFT's insertion-timeline placement; 'expert': `expert.expert_placement`."""

    def __post_init__(self) -> None:
        allowed = get_args(PlacementChoice)
        if self.placement not in allowed:
            raise SolverError(
                f"placement must be one of {', '.join(allowed)}, got {self.placement!r}"
            )


def compiler_placement(problem: Problem, choice: PlacementChoice = "heft") -> np.ndarray:
    """[n_ops] int32 the compiler default's placement, pins honoured.

    One device or no op leaves nothing to place (every op on device 0).
    """
    graph, machine, pinned = problem.graph, problem.machine, problem.pinned
    if machine.n_devices == 1 or graph.n_ops == 0:
        return np.zeros(graph.n_ops, dtype=np.int32)
    if choice == "heft":
        return heft_timeline(graph, machine, pinned).placement.astype(np.int32)
    placement = expert_placement(graph, machine.n_devices)
    if pinned is not None:
        placement = np.where(pinned >= 0, pinned, placement)
    return placement.astype(np.int32)


def offer_decoded(problem: Problem, tracker: Tracker, decoded: Decoded, fused: bool) -> None:
    """Offers every decoded row to the tracker (with its groups when fusion is searched)."""
    excess, value = problem.fitness(decoded.peaks, decoded.makespans)
    tracker.offer_population(
        decoded.placements,
        decoded.orders,
        decoded.lengths,
        excess,
        value,
        decoded.groups if fused else None,
    )


class CompilerDefault(Solver):
    """GO's "TF-default": the compiler's placement, order and fusion, one evaluation."""

    name = "compiler-default"

    def __init__(self, config: CompilerDefaultConfig | None = None) -> None:
        self.config = config or CompilerDefaultConfig()

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Decodes and offers the one default solution."""
        decoded = decode(
            problem.graph,
            problem.machine,
            compiler_placement(problem, self.config.placement)[None],
            compiler_fusion="default" if problem.fusion else "none",
            scorer=problem.scorer,
        )
        offer_decoded(problem, tracker, decoded, bool(problem.fusion))


@dataclass(frozen=True)
class GOAnnealingConfig:
    """Options of annealing over GO's decisions."""

    n_levels: int = 8
    """Scheduling and fusion levels per op, [0, n_levels), as GO's policy outputs them."""
    hot: float = 0.05
    """First temperature, in units of the start's energy (as `fusion.anneal_fusion`)."""
    cold: float = 0.0005
    """Last temperature."""
    batch: int = 16
    """Moves from the current state decoded together (one `decode` call)."""
    capacity_penalty: float = 10.0
    """Energy weight of bytes over capacity, relative to the objective (both normalized)."""

    def __post_init__(self) -> None:
        # One level would put every fusion priority at the threshold: nothing could fuse.
        check_integer("n_levels", self.n_levels, low=2)
        if not (math.isfinite(self.hot) and math.isfinite(self.cold) and 0 < self.cold <= self.hot):
            raise SolverError(
                f"temperatures must satisfy 0 < cold <= hot, got hot={self.hot!r}, "
                f"cold={self.cold!r}"
            )
        check_integer("batch", self.batch)
        check_non_negative("capacity_penalty", self.capacity_penalty)


class Task(NamedTuple):
    """One of GO's per-op decisions: which row of the state, which ops move, how many values."""

    row: int
    ops: np.ndarray
    values: int


PLACEMENT, SCHEDULE, FUSION = 0, 1, 2
"""Rows of the annealing state [3, n_ops]: device, scheduling level, fusion level."""


class GOAnnealing(Solver):
    """Simulated annealing over GO's per-op device, scheduling level and fusion level.

    A move picks an active task uniformly and redraws one to three of its ops' values uniformly;
    each batch of moves from the current state is decoded together and accepted in turn by
    Metropolis against the current energy, the first acceptance ending the batch (the rest still
    count and are offered). Energy = objective / the start's + capacity_penalty x bytes over
    capacity / the start's peak. The temperature falls geometrically from `hot` to `cold` over
    the evaluations (over the seconds when the budget has no evaluation count).
    """

    name = "go-anneal"

    def __init__(self, config: GOAnnealingConfig | None = None) -> None:
        self.config = config or GOAnnealingConfig()

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Anneals from the compiler default's placement."""
        config, graph = self.config, problem.graph
        fused = bool(problem.fusion and graph.n_ops and graph.op_fusion.any())
        state = np.zeros((3, graph.n_ops), dtype=np.int64)
        state[PLACEMENT] = compiler_placement(problem)
        if fused:
            state[FUSION] = config.n_levels - 1
        tasks = self._tasks(problem, fused)

        def evaluate(states: np.ndarray) -> tuple[Decoded, tuple[np.ndarray, np.ndarray]]:
            """Decodes [B, 3, n_ops] states; the decoded rows and their (excess, value)."""
            decoded = decode(
                graph,
                problem.machine,
                states[:, PLACEMENT],
                states[:, SCHEDULE],
                states[:, FUSION] if fused else None,
                config.n_levels,
                scorer=problem.scorer,
            )
            return decoded, problem.fitness(decoded.peaks, decoded.makespans)

        decoded, (excess, value) = evaluate(state[None])
        value_scale = float(value[0]) if value[0] > 0 else 1.0
        memory_scale = float(max(decoded.peaks.max(initial=0), 1))

        def energy(excess: np.ndarray, value: np.ndarray) -> np.ndarray:
            return value / value_scale + config.capacity_penalty * excess / memory_scale

        current = float(energy(excess, value)[0])
        offer_decoded(problem, tracker, decoded, fused)  # ends a problem without ops at once
        start_evaluations, span = tracker.evaluations, max(tracker.remaining, 1)
        start_seconds = tracker.seconds

        def progress() -> float:
            """Share of the budget spent since the start: evaluations when counted, else time."""
            if tracker.budget.evaluations is not None:
                return (tracker.evaluations - start_evaluations) / span
            left = (tracker.budget.seconds or 0.0) - start_seconds
            return (tracker.seconds - start_seconds) / left if left > 0 else 1.0

        while True:
            temperature = config.hot * (config.cold / config.hot) ** min(progress(), 1.0)
            states = self._moves(state, tasks, min(config.batch, tracker.remaining), rng)
            decoded, (excess, value) = evaluate(states)
            deltas = energy(excess, value) - current
            draws = rng.random(deltas.shape[0])
            accepted = np.flatnonzero(
                (deltas <= 0) | (draws < np.exp(-np.maximum(deltas, 0) / temperature))
            )
            if accepted.size:
                state = states[accepted[0]]
                current += float(deltas[accepted[0]])
            offer_decoded(problem, tracker, decoded, fused)

    def _tasks(self, problem: Problem, fused: bool) -> list[Task]:
        """The active tasks: placement of free ops on several devices, order, fusable ops."""
        graph, n_devices, pinned = problem.graph, problem.machine.n_devices, problem.pinned
        tasks = []
        free = np.arange(graph.n_ops) if pinned is None else np.flatnonzero(pinned < 0)
        if n_devices > 1 and free.size:
            tasks.append(Task(PLACEMENT, free, n_devices))
        tasks.append(Task(SCHEDULE, np.arange(graph.n_ops), self.config.n_levels))
        if fused:  # the level of an op without a fusion class decides nothing
            tasks.append(Task(FUSION, np.flatnonzero(graph.op_fusion != 0), self.config.n_levels))
        return tasks

    @staticmethod
    def _moves(
        state: np.ndarray, tasks: list[Task], size: int, rng: np.random.Generator
    ) -> np.ndarray:
        """[size, 3, n_ops] states, each the current one with one move applied."""
        states = np.repeat(state[None], size, axis=0)
        for row in states:
            task = tasks[int(rng.integers(len(tasks)))]
            count = min(int(rng.integers(1, 4)), task.ops.size)
            ops = rng.choice(task.ops, size=count, replace=False)
            row[task.row, ops] = rng.integers(0, task.values, count)
        return states
