"""What every solver shares: the problem, the budget, fitness ranking, the tracker and the result.

One driver, many solvers (ARCHITECTURE.md principle 3): a solver is a small object whose `run`
searches and offers each evaluated candidate to a `Tracker`. The tracker counts evaluations
against the budget, keeps the best solution so far and its trace (best-so-far against
evaluations, papers 000 fig. 2 and 001 fig. 5), and stops the search when the budget is spent.
`Solver.solve` wraps `run` with the tracker, re-scores the best solution with the exact scorer,
and turns Ctrl-C into an early, still valid result.

A problem with a single solution (no ops; or every op's device fixed to one device and one
topological order) is solved by its first evaluation: the tracker then reports the budget spent
and the solution proven optimal, so no search spends its whole budget (or time) re-evaluating
the same solution. Likewise a candidate that fits and reaches the problem's peak memory lower
bound (`bounds`) is proven optimal and ends the search.

Ranking (REGAL A.2): with a capacity, every feasible solution ranks above every infeasible one.
Candidates are compared by the key (excess, value): `excess` is the bytes by which the peak
memory of all devices together exceeds the capacity (0 when feasible) and `value` is the
objective (peak memory in bytes or makespan in seconds).
"""

from __future__ import annotations

import math
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
from numba.core import event

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Score, Scorer, check_kernel
from graphopt.errors import GraphoptError
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution


class SolverError(GraphoptError):
    """An impossible or malformed optimization request (budget, pins, options, solver name)."""


class InfeasibleError(SolverError):
    """No solution can fit the capacity: it is below a proven lower bound on peak memory."""


class NoSolutionError(SolverError):
    """A search ended, within its budget, without any solution: not an input error."""


def memory_limit() -> int:
    """Bytes a search may hold in its working arrays: half of this machine's memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


def check_memory(what: str, nbytes: int) -> None:
    """Refuses, before allocating, a search whose arrays would not fit in memory.

    Raises:
        SolverError: naming what needs the memory, how much, and the limit.
    """
    limit = memory_limit()
    if nbytes > limit:
        raise SolverError(
            f"{what} would need {nbytes / 2**30:,.1f} GiB of memory, more than the limit of "
            f"{limit / 2**30:,.1f} GiB (half of this machine's); use fewer devices, a smaller "
            "graph or a smaller population"
        )


class Objective(StrEnum):
    """What a search minimizes."""

    PEAK_MEMORY = "peak-memory"
    MAKESPAN = "makespan"

    @classmethod
    def parse(cls, text: str | Objective) -> Objective:
        """The objective named `text`; SolverError listing the valid names otherwise."""
        try:
            return cls(text)
        except ValueError:
            valid = ", ".join(o.value for o in cls)
            raise SolverError(f"unknown objective {text!r}; valid: {valid}") from None


@dataclass(frozen=True)
class Stall:
    """When a search has stalled: no improvement for max(`min_seconds`, `fraction` x elapsed).

    The default `optimize` budget ends a stalled search early: on real graphs most of a fixed
    10 s run is spent after the best solution was found. The window grows with the time
    already spent, so a search that needed long to find its last improvement is given long to
    find the next.

    Attributes:
        min_seconds: the shortest window.
        fraction: the window as a share of the seconds elapsed, when that is longer.
    """

    min_seconds: float = 2.0
    fraction: float = 0.25

    def __post_init__(self) -> None:
        if not (math.isfinite(self.min_seconds) and self.min_seconds > 0):
            raise SolverError(f"stall min_seconds must be > 0, got {self.min_seconds!r}")
        if not (math.isfinite(self.fraction) and 0 <= self.fraction < 1):
            raise SolverError(f"stall fraction must be in [0, 1), got {self.fraction!r}")

    def window(self, elapsed: float) -> float:
        """Seconds without improvement that end a search `elapsed` seconds old."""
        return max(self.min_seconds, self.fraction * elapsed)


@dataclass(frozen=True)
class Budget:
    """How long a search may run: a number of fitness evaluations, seconds, or both.

    Attributes:
        evaluations: maximum candidate evaluations (calls of the cost model), or None.
        seconds: maximum wall-clock seconds, or None.
        stop_at_bound: end a peak memory search once a solution that fits reaches the problem's
            lower bound (it is then proven optimal); False spends the whole budget regardless.
            Makespans are float sums whose order of addition differs between the bound and
            the scorer, so a makespan search never stops on its bound.
        stall: end the search sooner once it has stalled (`Stall`); None spends the whole
            budget (an exact `--time` or `--budget`).
        solver_default: `seconds` is the solver's own `Solver.default_seconds`, which replaced
            the default budget's (set by `Solver.solve`, so notes can say "the default").
    """

    evaluations: int | None = None
    seconds: float | None = None
    stop_at_bound: bool = True
    stall: Stall | None = None
    solver_default: bool = False

    def __post_init__(self) -> None:
        if self.evaluations is None and self.seconds is None:
            raise SolverError("a budget needs evaluations or seconds (or both)")
        if self.evaluations is not None and (
            isinstance(self.evaluations, bool)
            or not isinstance(self.evaluations, int | np.integer)
            or self.evaluations < 1
        ):
            raise SolverError(
                f"budget evaluations must be an integer >= 1, got {self.evaluations!r}"
            )
        if self.seconds is not None and (
            isinstance(self.seconds, bool)
            or not isinstance(self.seconds, int | float)
            or not math.isfinite(self.seconds)
            or self.seconds <= 0
        ):
            raise SolverError(f"budget seconds must be a finite number > 0, got {self.seconds!r}")


@dataclass(frozen=True, eq=False)
class Problem:
    """A graph to optimize on a machine for an objective, with optional pinned ops.

    Attributes:
        graph: the computation graph.
        machine: devices, capacity and transfer model.
        objective: what to minimize.
        pinned: [n_ops] int32 device each op must run on, or -1 where free; None when no op
            is pinned. Every solver honours it.
        fusion: whether solutions may fuse ops (section 13): the random-key decoder then gains
            one fusion priority per op (so BRKGA searches fusion with placement and order),
            and the bounds are those that hold with fusion. Solvers that do not fuse still
            return valid, unfused solutions.
        remat: whether solutions may recompute (section 15): the bounds are then those that
            hold with recomputation. The solvers search without it; `optimize` recomputes on
            their best solution.
    """

    graph: Graph
    machine: Machine
    objective: Objective = Objective.PEAK_MEMORY
    pinned: np.ndarray | None = None
    fusion: bool = False
    remat: bool = False
    scorer: Scorer = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "objective", Objective.parse(self.objective))
        object.__setattr__(self, "scorer", Scorer(self.graph, self.machine))
        if self.fusion:
            check_kernel(self.graph)
        if self.pinned is None:
            return
        pinned = np.array(self.pinned, dtype=np.int64).reshape(-1)
        if pinned.shape[0] != self.graph.n_ops:
            raise SolverError(f"pinned has {pinned.shape[0]} entries for {self.graph.n_ops} ops")
        bad = np.flatnonzero((pinned < -1) | (pinned >= self.machine.n_devices))
        if bad.size:
            op = int(bad[0])
            raise SolverError(
                f"op {self.graph.op_names[op]!r} is pinned to device {int(pinned[op])}, "
                f"but the machine has devices 0..{self.machine.n_devices - 1}"
            )
        pinned = pinned.astype(np.int32)
        pinned.flags.writeable = False
        object.__setattr__(self, "pinned", pinned)

    @cached_property
    def peak_memory_bound(self) -> int:
        """Bytes some device holds in every solution (`bounds`; with fusion or remat, theirs)."""
        from graphopt.solvers.bounds import fused_peak_memory_lower_bound, peak_memory_lower_bound

        if self.fusion:
            return fused_peak_memory_lower_bound(self.graph, self.machine.n_devices)
        return peak_memory_lower_bound(self.graph, self.machine.n_devices, self.remat)

    @cached_property
    def lower_bound(self) -> float:
        """A proven lower bound on the objective for any solution (`bounds`)."""
        from graphopt.solvers.bounds import fused_makespan_lower_bound, makespan_lower_bound

        if self.objective is Objective.PEAK_MEMORY:
            return float(self.peak_memory_bound)
        if self.fusion:
            return fused_makespan_lower_bound(self.graph, self.machine.n_devices)
        return makespan_lower_bound(self.graph, self.machine)

    def check_capacity(self) -> None:
        """Raises InfeasibleError when the capacity is below the peak memory lower bound."""
        capacity = self.machine.capacity
        if capacity is None:
            return
        bound = self.peak_memory_bound
        if capacity < bound:
            raise InfeasibleError(
                f"capacity {capacity:,} bytes per device is below the lower bound of {bound:,} "
                f"bytes on {self.machine.n_devices} device(s) (persistent and graph output bytes "
                "spread evenly plus the largest op step; docs/format.md, limits and bounds): no "
                "solution fits"
            )

    @cached_property
    def has_one_solution(self) -> bool:
        """Whether exactly one solution exists (e.g. the empty graph's empty schedule).

        So it is when the placement is fixed (one device, or every op pinned) to a single
        device, which implies no transfer, and the ops have one topological order, i.e. each
        op in it consumes an output of the op before it.
        """
        graph, n_ops = self.graph, self.graph.n_ops
        if n_ops == 0:
            return True
        if self.fusion and graph.op_fusion.any():
            return False
        if self.machine.n_devices > 1 and (
            self.pinned is None or np.any(self.pinned != self.pinned[0]) or self.pinned[0] < 0
        ):
            return False
        order = graph.topological_order.astype(np.int64)
        producer, consumer = graph.edge_index
        edges = np.unique(producer * n_ops + consumer)
        return bool(np.isin(order[:-1] * n_ops + order[1:], edges).all())

    def fitness(self, peaks: np.ndarray, makespans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ranking keys (excess, value) of candidates; lower is better, excess first.

        Args:
            peaks: [..., n_devices] peak memory per device.
            makespans: [...] makespans.

        Returns:
            excess [...] int64 bytes over capacity summed over devices, value [...] float64.
        """
        peaks = np.asarray(peaks, dtype=np.int64)
        excess = self.machine.excess(peaks)
        if self.objective is Objective.PEAK_MEMORY:
            value = peaks.max(axis=-1).astype(np.float64)
        else:
            value = np.asarray(makespans, dtype=np.float64)
        return excess, value


class BudgetExhausted(Exception):
    """Raised by the tracker inside `run` when the budget is spent; `solve` catches it."""


@dataclass
class Trace:
    """Best-so-far against evaluations: one point per improvement.

    Attributes:
        evaluations: evaluations spent when the best improved.
        seconds: seconds since the start at that point.
        excess: bytes over capacity of the best at that point.
        value: objective of the best at that point.
    """

    evaluations: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    excess: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)

    def best_at(self, evaluations: np.ndarray) -> np.ndarray:
        """Objective of the best-so-far after each given number of evaluations (nan before any)."""
        points = np.asarray(self.evaluations, dtype=np.int64)
        values = np.asarray(self.value, dtype=np.float64)
        index = np.searchsorted(points, np.asarray(evaluations), side="right") - 1
        best = np.full(index.shape, np.nan)
        best[index >= 0] = values[index[index >= 0]]
        return best


Progress = Callable[[int, float, int], None]
"""Called as progress(evaluations, best value, best excess) after each offer that improved."""

Rng = np.random.Generator
"""The random generator a search draws from, seeded by `Solver.solve`."""

Initial = Sequence[Solution]
"""Known solutions a search may start from (`Solver.solve`'s `initial`)."""


class Compiles(event.Listener):
    """numba's compiles while a search runs: how many, and their seconds.

    Only outermost compiles count: a kernel's callees compile inside it. A time budget is for
    searching, so the tracker leaves these seconds out of it (`graphopt warmup` compiles every
    kernel at install; a change of the sources or a new signature compiles again).
    """

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._depth = 0
        self._started = 0.0

    def on_start(self, fired: event.Event) -> None:
        """A compile starts (maybe a callee's, inside another)."""
        if self._depth == 0:
            self._started = time.perf_counter()
        self._depth += 1

    def on_end(self, fired: event.Event) -> None:
        """A compile ends: the outermost one counts, with its seconds."""
        self._depth -= 1
        if self._depth == 0:
            self.count += 1
            self.seconds += time.perf_counter() - self._started


class Tracker:
    """Counts evaluations, keeps the best candidate and the trace, enforces the budget.

    Solvers call `offer` (one candidate) or `offer_population` (a scored batch) after every
    evaluation they make. Both raise `BudgetExhausted` once the budget is spent, so a solver's
    loop needs no budget logic of its own beyond `remaining` for sizing its last batch.
    """

    def __init__(self, problem: Problem, budget: Budget, progress: Progress | None = None) -> None:
        self.problem = problem
        self.budget = budget
        self.progress = progress
        self.evaluations = 0
        self.trace = Trace()
        self.best_placement: np.ndarray | None = None
        self.best_order: np.ndarray | None = None
        self.best_fusion: np.ndarray | None = None
        self.best_key: tuple[int, float] = (np.iinfo(np.int64).max, math.inf)
        self.lower_bound: float | None = None
        self.proven_optimal = False
        self.notes: list[str] = []
        self.searched_all = False
        """Set by the first evaluation of a problem with one solution: nothing is left."""
        self.budget_too_short = False
        """Set by a solver that stops because what is left of the budget fits no more work
        (a sampler's next batch would overrun the time): its run ended on the budget."""
        self.start = time.perf_counter()
        self.compiles = Compiles()
        """numba's compiles during `Solver.solve`'s search, left out of `seconds`."""
        self._evaluation_limit = budget.evaluations
        self._seconds_limit = budget.seconds
        self._quiet_since = 0.0
        """Seconds at the last improvement, or at the last start or end of a phase."""
        self._stall_exempt = 0

    @property
    def seconds(self) -> float:
        """Seconds since the tracker was created, less those numba spent compiling kernels."""
        return time.perf_counter() - self.start - self.compiles.seconds

    @property
    def remaining(self) -> int:
        """Evaluations left in the current phase (a large number when only time is limited)."""
        if self._evaluation_limit is None:
            return np.iinfo(np.int32).max
        return max(self._evaluation_limit - self.evaluations, 0)

    @property
    def exhausted(self) -> bool:
        """True once the (phase's) budget is spent, it stalled or nothing is left to search."""
        if self.searched_all:
            return True
        if self._evaluation_limit is not None and self.evaluations >= self._evaluation_limit:
            return True
        if self._seconds_limit is not None and self.seconds >= self._seconds_limit:
            return True
        return self.stalled

    @property
    def stalled(self) -> bool:
        """Whether the budget's stall rule ends the current phase (or the search, outside one).

        The quiet time counts from the last improvement or the last phase boundary, so a
        phase that stalls hands over to the next with a whole window of its own.
        """
        stall = self.budget.stall
        if stall is None or self._stall_exempt:
            return False
        now = self.seconds
        return now - self._quiet_since > stall.window(now)

    @property
    def last_improvement(self) -> float:
        """Seconds since the start at which the best last improved (0.0 before any)."""
        return self.trace.seconds[-1] if self.trace.seconds else 0.0

    @property
    def budget_spent(self) -> bool:
        """Whether the whole budget's seconds or evaluations are spent (not just a phase's)."""
        budget = self.budget
        return (budget.seconds is not None and self.seconds >= budget.seconds) or (
            budget.evaluations is not None and self.evaluations >= budget.evaluations
        )

    @property
    def stopped_stalled(self) -> bool:
        """Whether a finished search ended on the stall rule rather than its budget."""
        return self.stalled and not (self.budget_spent or self.searched_all)

    @contextmanager
    def exempt_from_stall(self) -> Iterator[None]:
        """Runs a block that the stall rule does not end.

        A fixed set of candidates (a portfolio's baselines) is worth finishing however long it
        goes without improving.
        """
        self._stall_exempt += 1
        try:
            yield
        finally:
            self._stall_exempt -= 1
            self._quiet_since = self.seconds

    @contextmanager
    def phase(self, share: float, evaluations: int | None = None) -> Iterator[None]:
        """Runs a block on `share` of what is left of the budget, for solvers run in sequence.

        The block ends quietly when its share is spent or it stalls (`Budget.stall`); it
        re-raises when the whole budget is spent.
        `evaluations`, when given, caps the block's evaluations at that number too (REGAL's
        400-evaluation feature run).
        """
        saved = self._evaluation_limit, self._seconds_limit
        if evaluations is not None:
            cap = self.evaluations + evaluations
            self._evaluation_limit = cap if saved[0] is None else min(cap, saved[0])
        if self._evaluation_limit is not None:
            self._evaluation_limit = self.evaluations + max(1, int(share * self.remaining))
        if self._seconds_limit is not None:
            left = max(self._seconds_limit - self.seconds, 0.0)
            self._seconds_limit = self.seconds + share * left
        self._quiet_since = self.seconds
        try:
            yield
        except BudgetExhausted:
            self._evaluation_limit, self._seconds_limit = saved
            self._quiet_since = self.seconds
            if self.exhausted:
                raise
        finally:
            self._evaluation_limit, self._seconds_limit = saved
            self._quiet_since = self.seconds

    def check(self) -> None:
        """Raises BudgetExhausted when the budget is spent (for solvers between evaluations)."""
        if self.exhausted:
            raise BudgetExhausted

    def offer(
        self,
        placement: np.ndarray,
        order: np.ndarray,
        peaks: np.ndarray,
        makespan: float,
        fusion: np.ndarray | None = None,
    ) -> bool:
        """Records one evaluated valid candidate; returns True when it is the new best."""
        excess, value = self.problem.fitness(np.asarray(peaks)[None], np.asarray([makespan]))
        return self.offer_best(placement, order, int(excess[0]), float(value[0]), 1, fusion)

    def offer_population(
        self,
        placements: np.ndarray,
        orders: np.ndarray,
        lengths: np.ndarray,
        excess: np.ndarray,
        value: np.ndarray,
        groups: np.ndarray | None = None,
    ) -> bool:
        """Records a batch of evaluated valid candidates with their ranking keys.

        Shapes:
            placements: [B, n_ops]; orders: [B, L] with lengths [B] valid events per row;
            excess, value: [B]; groups: None or [B, n_ops] fusion groups.
        """
        if len(value) == 0:
            self.check()
            return False
        best = int(np.lexsort((value, excess))[0])
        return self.offer_best(
            placements[best],
            orders[best, : lengths[best]],
            int(excess[best]),
            float(value[best]),
            len(value),
            None if groups is None else groups[best],
        )

    def offer_best(
        self,
        placement: np.ndarray,
        order: np.ndarray,
        excess: int,
        value: float,
        evaluations: int,
        fusion: np.ndarray | None = None,
    ) -> bool:
        """Records `evaluations` evaluations whose best candidate is (placement, order, fusion).

        For solvers that rank a batch themselves (e.g. incremental move evaluation) and only
        materialize its best member; returns True when it is the new best.
        """
        improved = self._consider(placement, order, excess, value, evaluations, fusion)
        self.check()
        return improved

    def spend(self, evaluations: int) -> None:
        """Counts evaluations that offered nothing new (e.g. a candidate decoded again).

        They too end the search with its budget: raises BudgetExhausted once it is spent.
        """
        self.evaluations += evaluations
        self.check()

    def note(self, text: str) -> None:
        """Records a remark for the solution's `solver` record (e.g. a fallback a solver took)."""
        self.notes.append(text)

    def set_bound(self, lower_bound: float | None, proven_optimal: bool) -> None:
        """Records a proven lower bound on the objective (exact solvers)."""
        self.lower_bound = lower_bound
        self.proven_optimal = proven_optimal

    def _consider(
        self,
        placement: np.ndarray,
        order: np.ndarray,
        excess: int,
        value: float,
        spent: int,
        fusion: np.ndarray | None,
    ) -> bool:
        self.evaluations += spent
        if self.problem.has_one_solution or (
            self.budget.stop_at_bound
            and self.problem.objective is Objective.PEAK_MEMORY
            and excess == 0
            and not self.proven_optimal
            and value <= self.problem.lower_bound
        ):
            self.searched_all = True
            self.set_bound(value, True)
        if (excess, value) >= self.best_key:
            return False
        self.best_key = (excess, value)
        self._quiet_since = self.seconds
        self.best_placement = np.array(placement, dtype=np.int32)
        self.best_order = np.array(order, dtype=np.int64)
        self.best_fusion = None if fusion is None else np.array(fusion, dtype=np.int32)
        self.trace.evaluations.append(self.evaluations)
        self.trace.seconds.append(self.seconds)
        self.trace.excess.append(excess)
        self.trace.value.append(value)
        if self.progress is not None:
            self.progress(self.evaluations, value, excess)
        return True


Status = Literal["optimal", "feasible", "over-capacity", "interrupted"]
"""How a solve ended (`Result.status`)."""


@dataclass(frozen=True, eq=False)
class Result:
    """What a solve returns: the best solution (scored exactly), how it was found, its trace.

    Attributes:
        solution: the best solution, with `objective` and `solver` fields filled in.
        score: its exact score (re-scored by `Scorer.score`).
        objective: the objective searched.
        value: the best objective value (peak memory bytes or makespan seconds).
        feasible: whether it fits the capacity.
        evaluations: evaluations spent.
        seconds: wall-clock seconds.
        trace: best-so-far against evaluations.
        status: 'optimal' (proven), 'feasible' (fits the capacity, not proven optimal),
            'over-capacity' (the best found exceeds the capacity) or 'interrupted' (Ctrl-C).
        lower_bound: a proven lower bound on the objective, when the solver has one.
    """

    solution: Solution
    score: Score
    objective: Objective
    value: float
    feasible: bool
    evaluations: int
    seconds: float
    trace: Trace
    status: Status
    lower_bound: float | None = None


class Solver(ABC):
    """A search that runs under a budget and reports every candidate to a tracker.

    Subclasses set `name` and `objectives`, hold their options as frozen config dataclasses,
    and implement `run`.
    """

    name: ClassVar[str]
    objectives: ClassVar[frozenset[Objective]] = frozenset(Objective)
    stops_when_stalled: ClassVar[bool] = True
    """Whether a budget's stall rule may end this solver's run early. False for solvers whose
    run is not a search for one best solution (a sampler keeping many candidates, an exact
    model proving a bound)."""
    default_seconds: ClassVar[float | None] = None
    """Such a solver's own time limit under `optimize`'s default budget (the one with a stall
    rule), when it is shorter; None: the default budget's. A sampler has no stall to end it, and
    one that samples for as long as a search would answers later than a user of the default
    expects."""

    @abstractmethod
    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Searches, offering each evaluated candidate to `tracker` until done or exhausted."""

    def options(self) -> dict[str, Any]:
        """The solver's options, recorded in the solution's `solver` field."""
        config = getattr(self, "config", None)
        return dict(vars(config)) if config is not None else {}

    def solve(
        self,
        problem: Problem,
        budget: Budget,
        seed: int = 0,
        initial: Sequence[Solution] = (),
        progress: Progress | None = None,
    ) -> Result:
        """Runs the search and returns the best solution, exactly re-scored.

        Args:
            problem: what to optimize.
            budget: evaluations and/or seconds.
            seed: seeds every random choice; the same seed gives the same result under an
                evaluation budget.
            initial: known solutions to start from (BRKGA seeds its population with them).
            progress: optional callback on every improvement.

        Raises:
            SolverError: the objective is not supported, or the search found no solution.
            InfeasibleError: the capacity is below the peak memory lower bound (no search runs).
        """
        if problem.objective not in self.objectives:
            raise SolverError(
                f"solver {self.name!r} does not optimize {problem.objective.value}; "
                f"it supports {', '.join(sorted(o.value for o in self.objectives))}"
            )
        problem.check_capacity()
        if not self.stops_when_stalled:
            if budget.stall is not None and self.default_seconds is not None:
                if self.default_seconds < (budget.seconds or math.inf):
                    budget = replace(budget, seconds=self.default_seconds, solver_default=True)
            budget = replace(budget, stall=None)
        tracker = Tracker(problem, budget, progress)
        status: Status = "feasible"
        try:
            with event.install_listener("numba:compile", tracker.compiles):
                self.run(problem, tracker, np.random.default_rng(seed), initial)
        except BudgetExhausted:
            pass
        except KeyboardInterrupt:
            if tracker.best_placement is None:
                raise
            status = "interrupted"
        return finish(self, problem, tracker, seed, status)


StopReason = Literal["interrupted", "bound", "stalled", "budget", "finished"]
"""Why a search ended (the solution's `solver.stopped`): Ctrl-C; the best reached a proven lower
bound or nothing was left to search; the stall rule of a default budget; the budget was spent,
or what was left of it fit no more work; or the solver's search ran to its end within the
budget (a heuristic)."""


def stop_reason(tracker: Tracker, status: Status) -> StopReason:
    """Why the search `tracker` followed ended (`StopReason`)."""
    if status == "interrupted":
        return "interrupted"
    if tracker.searched_all:
        return "bound"
    if tracker.stopped_stalled:
        return "stalled"
    if tracker.budget_too_short or tracker.budget_spent:
        return "budget"
    return "finished"


def finish(solver: Solver, problem: Problem, tracker: Tracker, seed: int, status: Status) -> Result:
    """Builds the Result from the tracker's best: re-scored exactly, with the solver's record."""
    if tracker.best_placement is None or tracker.best_order is None:
        raise NoSolutionError(f"solver {solver.name!r} found no solution within its budget")
    seconds = tracker.seconds
    n_devices = problem.machine.n_devices
    draft = Solution(
        tracker.best_placement, tracker.best_order, n_devices, fusion=tracker.best_fusion
    )
    score = problem.scorer.score(draft)
    excess, value = problem.fitness(
        np.asarray(score.peak_memory_per_device)[None], np.asarray([score.makespan])
    )
    if status == "feasible" and excess[0] > 0:
        status = "over-capacity"
    elif status == "feasible" and tracker.proven_optimal:
        status = "optimal"
    record: dict[str, Any] = {
        "name": solver.name,
        "evaluations": tracker.evaluations,
        "seconds": round(seconds, 6),
        "seed": seed,
        "status": status,
        **solver.options(),
    }
    if tracker.lower_bound is not None:
        record["lower_bound"] = tracker.lower_bound
    notes = list(tracker.notes)
    if tracker.compiles.count:
        notes.append(
            f"numba compiled {tracker.compiles.count} kernel"
            f"{'' if tracker.compiles.count == 1 else 's'} in {tracker.compiles.seconds:.3g} s "
            "during the search, not counted in its time (run `graphopt warmup` once after "
            "installing)"
        )
    record["stopped"] = stop_reason(tracker, status)
    if record["stopped"] == "stalled":
        budget_seconds = tracker.budget.seconds
        notes.append(
            f"stopped after {seconds:.1f} s"
            + (f" of {budget_seconds:.1f} s" if budget_seconds is not None else "")
            + f": no improvement in the last {seconds - tracker.last_improvement:.1f} s "
            "(the default budget ends a stalled search; --time S searches exactly S seconds)"
        )
    if notes:
        record["notes"] = notes
    solution = Solution(
        draft.placement,
        draft.order,
        n_devices,
        objective={"peak_memory": score.peak_memory, "makespan": score.makespan},
        solver=record,
        machine=problem.machine.to_json(),
        fusion=draft.fusion if draft.n_groups else None,
    )
    return Result(
        solution=solution,
        score=score,
        objective=problem.objective,
        value=float(value[0]),
        feasible=bool(excess[0] == 0),
        evaluations=tracker.evaluations,
        seconds=seconds,
        trace=tracker.trace,
        status=status,
        lower_bound=tracker.lower_bound,
    )
