"""Exact placement and scheduling with OR-Tools CP-SAT (paper 001, section 4.2).

REGAL's CP-SAT baseline formulates multi-device peak memory minimization "using a model of the
operation execution order, tensor lifetimes, and cumulative constraints to evaluate peak memory
usage". This module builds that model for the project's exact cost model (docs/format.md
section 5), and a second, interval-based model for the makespan (section 6) in the style of
the OR-Tools CP-SAT scheduling examples (job shop with alternative resources: optional
intervals per device, one NoOverlap per device, precedences with delays).

Both models share the placement: one Boolean per (op, device) with exactly one true per op, and
one Boolean per candidate transfer (tensor, device), true exactly when some consumer of the
tensor is on that device and its producer is not (section 2).

Peak memory (events on steps). Every op and every present transfer gets a step position; the
present events occupy positions 0..N-1 exactly once (unit intervals, NoOverlap, N = events).
Each tensor copy is an interval over steps, from the step that makes it resident to the step of
its last reader (section 5), or to the last step for a graph output's home copy, optional on the
device it lives on; an op's scratch memory and its other outputs that nobody reads are a unit
interval at its own step. One cumulative per device, whose capacity is the peak minus the
persistent bytes homed on that device, measures the memory of every device at every step; the
objective is the peak. Redundant constraints make small proofs fast: a bound from each op's
inputs and outputs, and, per op step and device, the bytes that the relative order of events
forces to be resident there (order literals between events, and clauses "made before k and read
after k => resident at k", or only made before k for a graph output's home copy), which the
search can reason on directly instead of through the cumulative's bounds.

Makespan (events in time). Ops are intervals with one optional alternative per device; a sync
transfer is an interval on its destination device, an async transfer a delay between producer
and consumer (a receive that takes no time needs no interval either: it can always go right
before its first reader). Redundant bounds: critical paths through each op, each device's
load and, on two devices, the best split of the runtimes (exact, by meet in the middle), which
proves a schedule without idle time optimal with no subset-sum search. Runtimes (float
seconds) are scaled to 1e9 integer ticks over the horizon; the decoded schedule is re-scored
exactly, and the reported bound subtracts the rounding slack (half a tick per event). With a
memory capacity that could bind, the step model is added as well and the step order of any two
events on one device fixes their order in time, so the schedule the model describes is exactly
the one its step order runs. Those pairwise links grow with the square of the events per device,
so past `CPSATConfig.time_links` pairs they are left out: the model is then a relaxation (its
bound stays valid), both its step order and its time order are decoded and re-scored, the better
is kept, and it is reported optimal only when it meets the relaxation's optimum.

Time: the limit covers building the model and the search. When building outlasts it, or the
search ends without any solution (graphs of many thousands of ops), the result is the start the
model would have been hinted with (the best initial solution, or device 0 in topological order),
with a note in the solution's record saying so.

Decoding: step positions give the event order directly; times give it by sorting on (start,
positive duration, topological rank), which keeps every device's sequence and every dependency.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from ortools.sat.python import cp_model

from graphopt.errors import GraphoptError
from graphopt.ir.solution import Solution, topological_schedule
from graphopt.solvers.base import Objective, Problem, Solver, SolverError, Tracker

_TICKS = 1_000_000_000
"""Integer ticks the makespan horizon is scaled to (rounding error <= 0.5 tick per event)."""

_PARTITION_OPS = 36
"""Most free ops whose best two-device split of runtimes is enumerated (2 x 2^18 subset sums)."""

_STATUS_OK = (cp_model.OPTIMAL, cp_model.FEASIBLE)

_CHECK_EVERY = 1024
"""Items of a building loop between two looks at the deadline."""

_Item = TypeVar("_Item")


@dataclass(frozen=True)
class CPSATConfig:
    """Options of the CP-SAT solver.

    Attributes:
        default_seconds: time limit (building the model and searching) when the budget gives
            evaluations only; with a budget in seconds, the seconds it has left are the limit.
        workers: CP-SAT search workers (threads).
        log: let CP-SAT print its search log.
        makespan_gap: relative gap between the best makespan and the proven bound at which
            the search stops and reports the makespan optimal. 0 demands an exact proof on the
            integer ticks; on larger graphs (30 ops and more) whose runtimes split almost
            evenly over two devices, closing the last billionths is a subset-sum search that
            can take minutes, and 1e-6 stops at once.
        liveness_cuts: most (op, tensor, device) literals the redundant order-based memory
            constraints may add (they make small peak-memory proofs fast but grow with
            ops x tensors); larger graphs rely on the cumulative constraints alone.
        time_links: most pairs of events on one device whose step order is linked to their
            order in time (makespan under a capacity that could bind); they grow with the
            square of the events per device, and beyond this many the model is a relaxation
            (module docstring). 20,000 pairs take about 2 s to build.
    """

    default_seconds: float = 10.0
    workers: int = 2
    log: bool = False
    makespan_gap: float = 0.0
    liveness_cuts: int = 2_500
    time_links: int = 20_000

    def __post_init__(self) -> None:
        for name in ("default_seconds", "makespan_gap"):
            value = getattr(self, name)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or value < 0:
                raise SolverError(f"cp-sat: {name} must be a finite number >= 0, got {value!r}")
        if self.default_seconds == 0:
            raise SolverError("cp-sat: default_seconds must be > 0, got 0")
        for name, low in (("workers", 1), ("liveness_cuts", 0), ("time_links", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise SolverError(f"cp-sat: {name} must be an integer >= {low}, got {value!r}")
        if not isinstance(self.log, bool):
            raise SolverError(f"cp-sat: log must be a bool, got {self.log!r}")


class CPSATSolver(Solver):
    """Exact solver: proves optimality on small graphs, else returns its best and a bound.

    Args:
        config: options; defaults to `CPSATConfig()`.
    """

    name = "cp-sat"
    objectives = frozenset(Objective)
    stops_when_stalled = False

    def __init__(self, config: CPSATConfig | None = None) -> None:
        self.config = CPSATConfig() if config is None else config

    def run(
        self,
        problem: Problem,
        tracker: Tracker,
        rng: np.random.Generator,
        initial: Sequence[Solution],
    ) -> None:
        """Builds the model for the problem's objective, solves it and offers the best solution.

        When the time limit passes before the model is built or any solution is found, the
        start it would have been hinted with is offered instead (module docstring).

        Raises:
            SolverError: an initial solution is invalid or the capacity cannot be met.
        """
        hint = _best_initial(problem, initial)
        seconds = self.config.default_seconds
        if tracker.budget.seconds is not None:
            seconds = max(tracker.budget.seconds - tracker.seconds, 0.01)
        deadline = time.perf_counter() + seconds
        try:
            model = _Model(problem, self.config.liveness_cuts, self.config.time_links, deadline)
            if hint is None:
                hint = _default_hint(problem, model.split)
            model.add_hint(*hint)
        except _OutOfTime:
            _offer_start(problem, tracker, hint, f"building the model took over {seconds:.3g} s")
            return
        solver = cp_model.CpSolver()
        limit = max(deadline - time.perf_counter(), 0.01)
        solver.parameters.max_time_in_seconds = limit
        solver.parameters.num_workers = self.config.workers
        solver.parameters.random_seed = int(rng.integers(2**31 - 1))
        solver.parameters.log_search_progress = self.config.log
        if not model.memory_objective:
            solver.parameters.relative_gap_limit = self.config.makespan_gap
        status = solver.solve(model.model)
        if status == cp_model.MODEL_INVALID:
            raise SolverError(f"cp-sat: invalid model: {model.model.validate()}")
        if status == cp_model.INFEASIBLE:
            capacity = problem.machine.capacity
            if capacity is None:
                raise SolverError("cp-sat: the model is infeasible without a capacity; a bug")
            raise SolverError(
                f"cp-sat: no placement and schedule of graph '{problem.graph.name}' keeps every "
                f"device within the capacity of {capacity} bytes (proven infeasible)"
            )
        # CP-SAT catches Ctrl-C itself and returns what it has: a search that ended before its
        # time limit without proving anything was interrupted, and is reported so.
        interrupted = status != cp_model.OPTIMAL and solver.wall_time + 0.1 < limit
        if status not in _STATUS_OK:
            reason = (
                f"the search was interrupted after {solver.wall_time:.3g} s, before any solution"
                if interrupted
                else f"the search found no solution in its time limit of {seconds:.3g} s"
            )
            _offer_start(problem, tracker, hint, reason)
            if interrupted:
                raise KeyboardInterrupt
            return
        scored = []
        for placement, order in model.decodings(solver):
            peaks, makespan, (violation, _, _) = problem.scorer.evaluate(placement, order)
            if violation:
                raise SolverError(
                    f"cp-sat: decoded an invalid schedule (rule {violation}); this is a bug"
                )
            excess, value = problem.fitness(peaks[None], np.asarray([makespan]))
            scored.append(((int(excess[0]), float(value[0])), placement, order, peaks, makespan))
        (_, value), placement, order, peaks, makespan = min(scored, key=lambda item: item[0])
        optimal = status == cp_model.OPTIMAL and model.attains(solver, value)
        tracker.set_bound(min(model.lower_bound(solver), value), optimal)
        tracker.offer(placement, order, peaks, makespan)
        if interrupted:
            raise KeyboardInterrupt


class _OutOfTime(Exception):
    """Building the model passed the solver's deadline."""


def _offer_start(
    problem: Problem,
    tracker: Tracker,
    hint: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    reason: str,
) -> None:
    """Offers the start the model is hinted with, when CP-SAT itself has nothing to offer."""
    placement, order, _ = hint if hint is not None else _default_hint(problem, None)
    peaks, makespan, _ = problem.scorer.evaluate(placement, order)
    tracker.note(f"cp-sat: {reason}; the result is its start, not a CP-SAT solution")
    tracker.offer(placement, order, peaks, makespan)


def _best_initial(
    problem: Problem, initial: Sequence[Solution]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The best initial solution by the problem's ranking, as (placement, order, peaks)."""
    best: tuple[tuple[int, float], np.ndarray, np.ndarray, np.ndarray] | None = None
    for k, solution in enumerate(initial):
        try:
            score = problem.scorer.score(solution)
        except GraphoptError as error:
            raise SolverError(f"cp-sat: initial solution {k} is invalid: {error}") from error
        peaks = np.asarray(score.peak_memory_per_device, dtype=np.int64)
        excess, value = problem.fitness(peaks[None], np.asarray([score.makespan]))
        key = (int(excess[0]), float(value[0]))
        if best is None or key < best[0]:
            best = (key, solution.placement, solution.order, peaks)
    return None if best is None else best[1:]


def _default_hint(
    problem: Problem, split: list[int] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A valid start: the best split of runtimes (makespan) or device 0, in topological order."""
    if split is not None:
        placement = np.array(split, dtype=np.int64)
    else:
        placement = np.zeros(problem.graph.n_ops, dtype=np.int64)
        if problem.pinned is not None:
            placement = np.where(problem.pinned >= 0, problem.pinned, 0)
    solution = topological_schedule(problem.graph, placement, problem.machine.n_devices)
    peaks, _, _ = problem.scorer.evaluate(solution.placement, solution.order)
    return solution.placement, solution.order, peaks


def _negate(literal: Any) -> Any:
    """Negation of a literal or of a constant truth value."""
    return not literal if isinstance(literal, bool) else ~literal


class _Model:
    """The CP-SAT model of one problem, built in stages, with its hint and decoder.

    Args:
        problem: the problem; its objective picks the model (module docstring).
        liveness_cuts: most literals the order-based memory constraints may add.
        time_links: most event pairs whose step order is linked to their time order.
        deadline: `time.perf_counter()` after which building stops with `_OutOfTime`.
    """

    def __init__(
        self,
        problem: Problem,
        liveness_cuts: int,
        time_links: int = CPSATConfig.time_links,
        deadline: float = math.inf,
    ) -> None:
        self.problem = problem
        self.liveness_cuts = liveness_cuts
        self.time_links = time_links
        self.deadline = deadline
        self.graph = graph = problem.graph
        self.machine = machine = problem.machine
        self.d = machine.n_devices
        self.n = graph.n_ops
        self.model = cp_model.CpModel()
        self.memory_objective = problem.objective is Objective.PEAK_MEMORY
        self.consumers = [[int(c) for c in graph.consumers(t)] for t in range(graph.n_tensors)]
        self.producer = [int(p) for p in graph.tensor_producer]
        self.size = [int(s) for s in graph.tensor_size]
        self.persistent = [bool(p) for p in graph.tensor_persistent]
        self.output = [bool(o) for o in graph.tensor_output]
        self.order_literals: dict[Any, Any] = {}
        self.split: list[int] | None = None
        self.linked = True
        """Whether the schedule the model describes is the one its decoded order runs."""
        self._ancestry()
        self._check_time()
        self._add_placement()
        self._check_time()
        self._add_transfers()
        self._check_time()
        capacity = machine.capacity
        vacuous = capacity is None or capacity >= graph.total_tensor_size + int(
            graph.op_temp_memory.max(initial=0)
        )
        self.steps = self.memory_objective or not vacuous
        self.times = not self.memory_objective
        if self.steps:
            self._add_steps()
            self._check_time()
        if self.times:
            self._add_times()
            self._check_time()
        if self.steps and self.times:
            self._link_steps_and_times()
        if self.memory_objective:
            self.model.minimize(self.peak)
        else:
            self.model.minimize(self.makespan)

    def _check_time(self) -> None:
        """Raises _OutOfTime once the deadline has passed."""
        if time.perf_counter() > self.deadline:
            raise _OutOfTime

    def _checked(self, items: Iterable[_Item]) -> Iterator[_Item]:
        """The items, with a look at the deadline every `_CHECK_EVERY` (loops over ops)."""
        for k, item in enumerate(items):
            if k % _CHECK_EVERY == 0:
                self._check_time()
            yield item

    # ------------------------------------------------------------------------ static structure
    def _ancestry(self) -> None:
        """Ancestor and descendant bitsets and counts, and a topological rank per op."""
        graph, n = self.graph, self.n
        ancestors = [0] * n
        for j in (int(j) for j in graph.topological_order):
            for p in graph.predecessors(j):
                ancestors[j] |= ancestors[int(p)] | (1 << int(p))
        descendants = [0] * n
        for j in (int(j) for j in graph.topological_order[::-1]):
            for c in graph.successors(j):
                descendants[j] |= descendants[int(c)] | (1 << int(c))
        self.ancestors = ancestors
        self.descendants = descendants
        self.n_ancestors = [a.bit_count() for a in ancestors]
        self.n_descendants = [a.bit_count() for a in descendants]
        self.rank = [0] * n
        for position, j in enumerate(graph.topological_order):
            self.rank[int(j)] = position

    def _is_ancestor(self, a: int, b: int) -> bool:
        """Whether op a is an ancestor of op b."""
        return bool(self.ancestors[b] >> a & 1)

    # ------------------------------------------------------------------ stage 1: placement
    def _add_placement(self) -> None:
        """x[j][b]: op j runs on device b; pins fixed; value symmetry broken when nothing is."""
        m, d, n = self.model, self.d, self.n
        pinned = self.problem.pinned
        self.x = [[m.new_bool_var(f"x_{j}_{b}") for b in range(d)] for j in self._checked(range(n))]
        for j in self._checked(range(n)):
            m.add_exactly_one(self.x[j])
            if pinned is not None and pinned[j] >= 0:
                m.add(self.x[j][int(pinned[j])] == 1)
        self.symmetry_order: list[int] = []
        if d == 1 or n == 0 or (pinned is not None and bool(np.any(pinned >= 0))):
            return
        # Devices are interchangeable: number them by first use along the ops sorted by output
        # bytes, largest first (that op goes to device 0). Op k may use device b >= 1 only if an
        # earlier op uses device b - 1; used[b] tracks "some op so far is on device b".
        out_bytes = np.zeros(n, dtype=np.int64)
        np.add.at(out_bytes, self.graph.tensor_producer, self.graph.tensor_size)
        self.symmetry_order = [int(j) for j in np.argsort(-out_bytes, kind="stable")]
        used: list[Any] = [None] * d
        for j in self._checked(self.symmetry_order):
            for b in range(1, d):
                if used[b - 1] is None:
                    m.add(self.x[j][b] == 0)
                else:
                    m.add_implication(self.x[j][b], used[b - 1])
            for b in range(d - 1):
                now = m.new_bool_var(f"used_{j}_{b}")
                earlier = [] if used[b] is None else [used[b]]
                m.add_bool_or([self.x[j][b], *earlier]).only_enforce_if(now)
                for lit in (self.x[j][b], *earlier):
                    m.add_implication(lit, now)
                used[b] = now

    # ------------------------------------------------------------------ stage 2: transfers
    def _add_transfers(self) -> None:
        """y[(t, b)]: the transfer of t to b is implied (a consumer on b, the producer not)."""
        m, d = self.model, self.d
        self.y: dict[tuple[int, int], Any] = {}
        for t, consumers in enumerate(self.consumers):
            if not consumers or d == 1:
                continue
            p = self.producer[t]
            for b in range(d):
                y = m.new_bool_var(f"y_{t}_{b}")
                self.y[(t, b)] = y
                m.add_implication(y, ~self.x[p][b])
                m.add_bool_or([self.x[c][b] for c in consumers]).only_enforce_if(y)
                for c in consumers:
                    m.add_bool_or([y, self.x[p][b], ~self.x[c][b]])
        # Same-device literal of each (tensor, consumer) edge: the home copy's readers.
        self.same: dict[tuple[int, int], Any] = {}
        for t, consumers in enumerate(self.consumers):
            p = self.producer[t]
            for c in consumers if d > 1 else ():
                s = m.new_bool_var(f"same_{t}_{c}")
                self.same[(t, c)] = s
                for b in range(d):
                    m.add_bool_or([s, ~self.x[p][b], ~self.x[c][b]])
                    m.add_implication(s, self.x[c][b]).only_enforce_if(self.x[p][b])
                    m.add_implication(s, self.x[p][b]).only_enforce_if(self.x[c][b])

    # ------------------------------------------------------------- stage 3: steps and memory
    def _add_steps(self) -> None:
        """Event positions, precedences, copy lifetimes and per-device cumulative memory."""
        m, d, n = self.model, self.d, self.n
        horizon = n + len(self.y)
        last = max(horizon - 1, 0)
        # Positions: ops and present transfers fill 0..count-1, one event per step.
        self.count = m.new_int_var(n, max(horizon, n), "count")
        m.add(self.count == n + sum(self.y.values()))
        self.pos = [
            m.new_int_var(self.n_ancestors[j], last - self.n_descendants[j], f"pos_{j}")
            for j in range(n)
        ]
        self.pos_tr: dict[tuple[int, int], Any] = {}
        units = []
        for j in self._checked(range(n)):
            m.add(self.pos[j] + self.n_descendants[j] <= self.count - 1)
            units.append(m.new_fixed_size_interval_var(self.pos[j], 1, f"step_{j}"))
        for (t, b), y in self.y.items():
            p = self.producer[t]
            tail = min(1 + self.n_descendants[c] for c in self.consumers[t])
            pos = m.new_int_var(self.n_ancestors[p] + 1, last - tail, f"pos_tr_{t}_{b}")
            self.pos_tr[(t, b)] = pos
            m.add(pos <= self.count - 1).only_enforce_if(y)
            m.add(pos == self.pos[p] + 1).only_enforce_if(~y)
            units.append(m.new_optional_fixed_size_interval_var(pos, 1, y, f"step_tr_{t}_{b}"))
        m.add_no_overlap(units)
        m.add_all_different(self.pos)

        # Precedences: producer before consumer and transfer; transfer before its readers.
        for t, consumers in self._checked(enumerate(self.consumers)):
            p = self.producer[t]
            for c in consumers:
                m.add(self.pos[p] < self.pos[c])
            for b in range(d):
                if (t, b) not in self.y:
                    continue
                m.add(self.pos[p] < self.pos_tr[(t, b)])
                for c in consumers:
                    m.add(self.pos_tr[(t, b)] < self.pos[c]).only_enforce_if(
                        [self.x[c][b], self.y[(t, b)]]
                    )

        # Copy lifetimes [start, last reader] and memory per device.
        intervals: list[list[Any]] = [[] for _ in range(d)]
        demands: list[list[int]] = [[] for _ in range(d)]
        for j in self._checked(range(n)):
            alone = int(self.graph.op_temp_memory[j]) + sum(
                self.size[t]
                for t in (int(t) for t in self.graph.outputs(j))
                if not self.consumers[t] and not self.persistent[t] and not self.output[t]
            )
            if alone == 0:
                continue
            for b in range(d):
                intervals[b].append(
                    m.new_optional_fixed_size_interval_var(self.pos[j], 1, self.x[j][b], f"op_{j}")
                )
                demands[b].append(alone)
        for t, consumers in self._checked(enumerate(self.consumers)):
            p, size = self.producer[t], self.size[t]
            if self.output[t] and size:
                # A graph output's home copy: from its producer's step to the last step.
                length = m.new_int_var(1, max(horizon, 1), f"life_{t}")
                for b in range(d):
                    intervals[b].append(
                        m.new_optional_interval_var(
                            self.pos[p], length, self.count, self.x[p][b], f"home_{t}_{b}"
                        )
                    )
                    demands[b].append(size)
            if not consumers or size == 0:
                continue
            if not self.persistent[t] and not self.output[t]:
                end = m.new_int_var(0, last, f"end_{t}")
                for c in consumers:
                    reader = m.add(end >= self.pos[c])
                    if d > 1:
                        reader.only_enforce_if(self.same[(t, c)])
                for b in range(d):
                    if (t, b) in self.y:
                        m.add(end >= self.pos_tr[(t, b)]).only_enforce_if(self.y[(t, b)])
                length = m.new_int_var(2, horizon, f"life_{t}")
                for b in range(d):
                    intervals[b].append(
                        m.new_optional_interval_var(
                            self.pos[p], length, end + 1, self.x[p][b], f"home_{t}_{b}"
                        )
                    )
                    demands[b].append(size)
            for b in range(d):
                if (t, b) not in self.y:
                    continue
                end = m.new_int_var(0, last, f"end_tr_{t}_{b}")
                for c in consumers:
                    m.add(end >= self.pos[c]).only_enforce_if(self.x[c][b])
                length = m.new_int_var(2, horizon, f"life_tr_{t}_{b}")
                intervals[b].append(
                    m.new_optional_interval_var(
                        self.pos_tr[(t, b)], length, end + 1, self.y[(t, b)], f"copy_{t}_{b}"
                    )
                )
                demands[b].append(size)

        # Persistent home copies are a constant per device; the rest must fit peak - constant.
        budget = sum(self.size) + int(self.graph.op_temp_memory.max(initial=0))
        if self.memory_objective:
            high = budget if self.machine.capacity is None else self.machine.capacity
            self.peak = m.new_int_var(0, max(min(high, budget), 0), "peak")
            m.add(self.peak >= self._static_memory_bound())
            limit: Any = self.peak
        else:
            limit = int(self.machine.capacity or 0)
        rooms = []
        for b in range(d):
            resident = sum(
                self.size[t] * self.x[self.producer[t]][b]
                for t in range(len(self.size))
                if self.persistent[t] and self.size[t]
            )
            room = m.new_int_var(0, budget, f"room_{b}")
            m.add(room == limit - resident)
            if intervals[b]:
                m.add_cumulative(intervals[b], demands[b], room)
            rooms.append(room)
        self._add_liveness(rooms)

    def _before(self, e: tuple[int, ...], f: tuple[int, ...]) -> Any:
        """Literal 'event e runs at an earlier step than event f' (True/False when static).

        Events are (j,) for op j and (t, b) for the transfer of t to b. Literals over pairs
        with a transfer only mean something when the transfer is present.
        """
        if self._ordered(e, f):
            return True
        if self._ordered(f, e):
            return False
        key = (e, f) if (e, f) < (f, e) else (f, e)
        if key not in self.order_literals:
            first, second = (self._step(k) for k in key)
            present = [self.y[k] for k in key if len(k) == 2]
            lit = self.model.new_bool_var(f"before_{len(self.order_literals)}")
            self.model.add(first < second).only_enforce_if([lit, *present])
            self.model.add(second < first).only_enforce_if([~lit, *present])
            self.order_literals[key] = lit
        lit = self.order_literals[key]
        return lit if key == (e, f) else ~lit

    def _step(self, event: tuple[int, ...]) -> Any:
        """Step variable of an event."""
        return self.pos[event[0]] if len(event) == 1 else self.pos_tr[event]

    def _add_liveness(self, rooms: list[Any]) -> None:
        """Memory of each device at each op's step, from the relative order of events.

        A copy is resident at op k's step when the event that made it came before k and one
        of its readers comes after k (or is k). Clauses force 'resident' from those order
        literals; the sum of resident bytes must fit the device's room. Redundant with the
        cumulative, it lets the search reason on orders directly.
        """
        m, x, d = self.model, self.x, self.d

        def clause(*literals: Any) -> None:
            if any(lit is True for lit in literals):
                return
            m.add_bool_or([lit for lit in literals if lit is not False])

        # Ops at whose step tensor t may be resident: neither its producer nor an ancestor of
        # it, nor, unless t is a graph output (held to the end), a descendant of every consumer
        # (a consumer is not its own descendant).
        crossing: list[list[int]] = [[] for _ in range(self.n)]
        steps = {}
        every = (1 << self.n) - 1
        for t, consumers in enumerate(self.consumers):
            if not self.size[t] or (d == 1 and self.persistent[t]):
                continue
            p = self.producer[t]
            if self.output[t]:
                steps[t] = every & ~(self.ancestors[p] | 1 << p)
                continue
            if not consumers:
                continue
            after_all = self.descendants[consumers[0]]
            for c in consumers[1:]:
                after_all &= self.descendants[c]
            steps[t] = every & ~(self.ancestors[p] | 1 << p | after_all)
        if d * sum(bits.bit_count() for bits in steps.values()) > self.liveness_cuts:
            return
        for t, bits in steps.items():
            while bits:
                low = bits & -bits
                crossing[low.bit_length() - 1].append(t)
                bits ^= low
        for k in self._checked(range(self.n)):
            inputs = {int(t) for t in self.graph.inputs(k)}
            own = int(self.graph.op_temp_memory[k]) + sum(
                self.size[int(t)] for t in self.graph.outputs(k) if not self.persistent[int(t)]
            )
            terms: list[list[Any]] = [[own * x[k][b]] if own else [] for b in range(d)]
            for t in crossing[k]:
                p, size, consumers = self.producer[t], self.size[t], self.consumers[t]
                for b in range(d):
                    live = m.new_bool_var("")
                    terms[b].append(size * live)
                    if t in inputs:
                        if self.persistent[t]:
                            clause(live, ~x[k][b], x[p][b])
                        else:
                            clause(live, ~x[k][b])
                    if self.output[t]:
                        # A graph output's home copy on b: made before k.
                        clause(live, ~x[p][b], _negate(self._before((p,), (k,))))
                    elif not self.persistent[t]:
                        # Home copy on b: made before k, read after k.
                        made = _negate(self._before((p,), (k,)))
                        for c in consumers:
                            if c != k:
                                later = _negate(self._before((k,), (c,)))
                                clause(live, ~x[p][b], ~x[c][b], made, later)
                        for a in range(d):
                            if (t, a) in self.y:
                                later = _negate(self._before((k,), (t, a)))
                                clause(live, ~x[p][b], ~self.y[(t, a)], made, later)
                    if (t, b) in self.y:
                        # Received copy on b: arrived before k, read after k.
                        arrived = _negate(self._before((t, b), (k,)))
                        for c in consumers:
                            if c == k or self._is_ancestor(k, c):
                                clause(live, ~self.y[(t, b)], ~x[c][b], arrived)
                            elif not self._is_ancestor(c, k):
                                clause(
                                    live,
                                    ~self.y[(t, b)],
                                    ~x[c][b],
                                    arrived,
                                    _negate(self._before((k,), (c,))),
                                )
            for b in range(d):
                if terms[b]:
                    m.add(sum(terms[b]) <= rooms[b])

    def _static_memory_bound(self) -> int:
        """Memory at any op's own step: its inputs, outputs and scratch are all resident."""
        bound = 0
        for j in range(self.n):
            tensors = {int(t) for t in self.graph.inputs(j)} | {
                int(t) for t in self.graph.outputs(j)
            }
            need = int(self.graph.op_temp_memory[j]) + sum(self.size[t] for t in tensors)
            bound = max(bound, need)
        return bound

    # ------------------------------------------------------------------ stage 4: time
    def _add_times(self) -> None:
        """Op intervals per device, transfers (sync intervals or async delays), makespan."""
        m, d, n = self.model, self.d, self.n
        graph, machine = self.graph, self.machine
        sync = machine.arrays.sync
        delay = {t: machine.transfer_duration(self.size[t]) for t in {t for (t, _) in self.y}}
        horizon_seconds = graph.total_runtime + sum(delay[t] for (t, _) in self.y)
        self.scale = _TICKS / horizon_seconds if horizon_seconds > 0 else 1.0
        self.runtime = [round(float(r) * self.scale) for r in graph.op_runtime]
        self.delay = {t: round(v * self.scale) for t, v in delay.items()}
        horizon = sum(self.runtime) + sum(self.delay[t] for (t, _) in self.y)
        # Longest chains of runtimes before (head) and after (tail) each op.
        head = [0] * n
        tail = [0] * n
        order = [int(j) for j in graph.topological_order]
        for j in order:
            for p in graph.predecessors(j):
                head[j] = max(head[j], head[int(p)] + self.runtime[int(p)])
        for j in reversed(order):
            for c in graph.successors(j):
                tail[j] = max(tail[j], tail[int(c)] + self.runtime[int(c)])
        chain = max((head[j] + self.runtime[j] + tail[j] for j in range(n)), default=0)
        self.makespan = m.new_int_var(chain, horizon, "makespan")
        self.start = [
            m.new_int_var(head[j], horizon - self.runtime[j] - tail[j], f"start_{j}")
            for j in range(n)
        ]
        self.finish = [self.start[j] + self.runtime[j] for j in range(n)]
        busy: list[list[Any]] = [[] for _ in range(d)]
        load: list[list[Any]] = [[] for _ in range(d)]
        for j in self._checked(range(n)):
            m.add(self.makespan >= self.start[j] + self.runtime[j] + tail[j])
            for b in range(d):
                busy[b].append(
                    m.new_optional_fixed_size_interval_var(
                        self.start[j], self.runtime[j], self.x[j][b], f"run_{j}_{b}"
                    )
                )
                load[b].append(self.runtime[j] * self.x[j][b])
        self.start_tr: dict[tuple[int, int], Any] = {}
        for t, consumers in self._checked(enumerate(self.consumers)):
            p = self.producer[t]
            for c in consumers:
                m.add(self.start[c] >= self.finish[p])
            for b in range(d):
                if (t, b) not in self.y:
                    continue
                y = self.y[(t, b)]
                # An instant receive needs no interval unless steps fix the device's order
                # (then it waits for its producer and holds back what follows it on b).
                if sync and (self.delay[t] > 0 or self.steps):
                    start = m.new_int_var(head[p] + self.runtime[p], horizon, f"start_tr_{t}_{b}")
                    self.start_tr[(t, b)] = start
                    m.add(start >= self.finish[p])
                    busy[b].append(
                        m.new_optional_fixed_size_interval_var(
                            start, self.delay[t], y, f"recv_{t}_{b}"
                        )
                    )
                    load[b].append(self.delay[t] * y)
                    ready = start + self.delay[t]
                else:
                    ready = self.finish[p] + self.delay[t]
                for c in consumers:
                    m.add(self.start[c] >= ready).only_enforce_if([self.x[c][b], y])
        for b in range(d):
            m.add_no_overlap(busy[b])
            m.add(self.makespan >= sum(load[b]))
        if d > 1:
            m.add(d * self.makespan >= sum(self.runtime))
        if d == 2:
            m.add(self.makespan >= self._partition_bound())

    def _partition_bound(self) -> int:
        """Least possible max load of two devices: the best split of the op runtimes.

        Exact by meet in the middle over the free ops' subset sums (pins fixed), so that a
        schedule with no idle time is proven optimal at once, with no subset-sum search. The
        best split is kept in `self.split` (device of each op) to hint the search with.
        Graphs with too many free ops fall back to half the total runtime.
        """
        pinned = self.problem.pinned
        device = [-1 if pinned is None else int(pinned[j]) for j in range(self.n)]
        fixed = [sum(r for j, r in enumerate(self.runtime) if device[j] == b) for b in (0, 1)]
        free = [j for j in range(self.n) if device[j] < 0 and self.runtime[j] > 0]
        device = [0 if b < 0 and not self.runtime[j] else b for j, b in enumerate(device)]
        total = sum(self.runtime)
        if len(free) > _PARTITION_OPS:
            return -(-total // 2)
        halves = [free[0::2], free[1::2]]
        sums = []
        for ops in halves:
            half = np.zeros(1, dtype=np.int64)
            for j in ops:
                half = np.concatenate([half, half + self.runtime[j]])
            sums.append(half)
        # Device 0 gets fixed[0] + left[i] + right[k]; the best k for each i is next to target.
        left, right = sums
        by_sum = np.argsort(right, kind="stable")
        ordered = right[by_sum]
        index = np.searchsorted(ordered, total / 2 - fixed[0] - left)
        best, pick = total + 1, (0, 0)
        for near in (np.clip(index - 1, 0, ordered.size - 1), np.clip(index, 0, ordered.size - 1)):
            load = fixed[0] + left + ordered[near]
            worst = np.maximum(load, total - load)
            i = int(np.argmin(worst))
            if int(worst[i]) < best:
                best, pick = int(worst[i]), (i, int(by_sum[near[i]]))
        for ops, chosen in zip(halves, pick, strict=True):
            for bit, j in enumerate(ops):
                device[j] = 0 if chosen >> bit & 1 else 1
        self.split = device
        return best

    # --------------------------------------------------------- stage 5: steps fix time order
    def _link_steps_and_times(self) -> None:
        """Two events on one device run in time in the order of their steps."""
        m, d = self.model, self.d
        # Events that may occupy device b: (event, start, duration, presence on b).
        on: list[list[tuple[tuple[int, ...], Any, int, Any]]] = [[] for _ in range(d)]
        for j in range(self.n):
            for b in range(d):
                on[b].append(((j,), self.start[j], self.runtime[j], self.x[j][b]))
        for (t, b), start in self.start_tr.items():
            on[b].append(((t, b), start, self.delay[t], self.y[(t, b)]))
        if sum(len(events) * (len(events) - 1) // 2 for events in on) > self.time_links:
            self.linked = False
            return
        for b in range(d):
            for i, (e, start_e, dur_e, on_e) in enumerate(on[b]):
                self._check_time()
                for f, start_f, dur_f, on_f in on[b][i + 1 :]:
                    before = self._before(e, f)
                    if isinstance(before, bool):
                        continue
                    m.add(start_e + dur_e <= start_f).only_enforce_if([before, on_e, on_f])
                    m.add(start_f + dur_f <= start_e).only_enforce_if([~before, on_e, on_f])

    def _ordered(self, e: tuple[int, ...], f: tuple[int, ...]) -> bool:
        """Whether event e precedes event f in every valid order (static ancestry only)."""
        if len(e) != 1:
            return False
        if len(f) == 1:
            return self._is_ancestor(e[0], f[0])
        producer = self.producer[f[0]]
        return e[0] == producer or self._is_ancestor(e[0], producer)

    # ------------------------------------------------------------------------ hints
    def add_hint(self, placement: np.ndarray, order: np.ndarray, peaks: np.ndarray) -> None:
        """Hints the decisions of a known solution (devices renumbered to the symmetry cut)."""
        placement, order = self._canonical(placement, order)
        m, d, n = self.model, self.d, self.n
        for j in self._checked(range(n)):
            for b in range(d):
                m.add_hint(self.x[j][b], int(placement[j]) == b)
        present = {int(c) - n for c in order if c >= n}
        for (t, b), y in self.y.items():
            m.add_hint(y, t * d + b in present)
        for (t, c), same in self.same.items():
            m.add_hint(same, placement[c] == placement[self.producer[t]])
        if self.steps:
            self._hint_steps(placement, order, peaks)
        if self.times:
            self._hint_times(placement, order)

    def _canonical(self, placement: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The same solution with devices numbered by first use along the symmetry order."""
        placement = np.asarray(placement, dtype=np.int64)
        order = np.asarray(order, dtype=np.int64)
        if not self.symmetry_order:
            return placement, order
        mapping: dict[int, int] = {}
        for j in self.symmetry_order:
            mapping.setdefault(int(placement[j]), len(mapping))
        label = np.array([mapping.get(b, b) for b in range(self.d)], dtype=np.int64)
        order = order.copy()
        transfers = order >= self.n
        tensor, device = np.divmod(order[transfers] - self.n, self.d)
        order[transfers] = self.n + tensor * self.d + label[device]
        return label[placement], order

    def _hint_steps(self, placement: np.ndarray, order: np.ndarray, peaks: np.ndarray) -> None:
        """Steps of the events, their relative order and the peak: a complete hint.

        An absent transfer gets the step right after its producer. Hinting the order literals
        too lets CP-SAT take the hint as its first solution without searching for them.
        """
        m, n, d = self.model, self.n, self.d
        step = {int(code): k for k, code in enumerate(order)}
        for j in self._checked(range(n)):
            m.add_hint(self.pos[j], step[j])
        for (t, b), pos in self.pos_tr.items():
            code = n + t * d + b
            step.setdefault(code, step[self.producer[t]] + 1)
            m.add_hint(pos, step[code])

        def code_of(event: tuple[int, ...]) -> int:
            return event[0] if len(event) == 1 else n + event[0] * d + event[1]

        for (e, f), before in self._checked(self.order_literals.items()):
            m.add_hint(before, step[code_of(e)] < step[code_of(f)])
        if self.memory_objective:
            m.add_hint(self.peak, int(np.max(peaks)))

    def _hint_times(self, placement: np.ndarray, order: np.ndarray) -> None:
        """Start times of the order run greedily with the model's integer durations."""
        m, n, d = self.model, self.n, self.d
        sync = self.machine.arrays.sync
        free = [0] * d
        ready: dict[tuple[int, int], int] = {}
        makespan = 0
        for code in (int(c) for c in order):
            if code < n:
                b = int(placement[code])
                start = max([free[b]] + [ready[(int(t), b)] for t in self.graph.inputs(code)])
                m.add_hint(self.start[code], start)
                finish = start + self.runtime[code]
                free[b] = finish
                for t in self.graph.outputs(code):
                    ready[(int(t), b)] = finish
            else:
                t, b = divmod(code - n, d)
                produced = ready[(t, int(placement[self.producer[t]]))]
                if sync:
                    start = max(free[b], produced)
                    if (t, b) in self.start_tr:
                        m.add_hint(self.start_tr[(t, b)], start)
                    finish = start + self.delay[t]
                    free[b] = finish
                else:
                    finish = produced + self.delay[t]
                ready[(t, b)] = finish
            makespan = max(makespan, finish)
        m.add_hint(self.makespan, makespan)

    # ------------------------------------------------------------------------ decoding
    def decodings(self, solver: cp_model.CpSolver) -> list[tuple[np.ndarray, np.ndarray]]:
        """The solver's best solution as (placement, order) pairs to re-score.

        One pair; two when steps and times are not linked: the step order and the time order
        (either may be the better schedule).
        """
        if self.linked:
            return [self.decode(solver)]
        return [self.decode(solver, by_steps=True), self.decode(solver, by_steps=False)]

    def decode(
        self, solver: cp_model.CpSolver, by_steps: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The placement and full event order of the solver's best solution.

        Args:
            solver: the solver after a successful solve.
            by_steps: order the events by step positions (True) or by start times (False);
                None: by steps when the model has them.
        """
        n, d = self.n, self.d
        if by_steps is None:
            by_steps = self.steps
        placement = np.array(
            [next(b for b in range(d) if solver.boolean_value(self.x[j][b])) for j in range(n)],
            dtype=np.int32,
        )
        present = [key for key, y in self.y.items() if solver.boolean_value(y)]
        codes = [*range(n), *(n + t * d + b for t, b in present)]
        if by_steps:
            keys = [solver.value(self.pos[j]) for j in range(n)]
            keys += [solver.value(self.pos_tr[key]) for key in present]
        else:
            keys = [
                (solver.value(self.start[j]), self.runtime[j] > 0, 2 * self.rank[j])
                for j in range(n)
            ]
            for t, b in present:
                p = self.producer[t]
                if (t, b) in self.start_tr:
                    start = solver.value(self.start_tr[(t, b)])
                elif self.machine.arrays.sync:
                    # An instant receive goes right before its first reader on b.
                    start = min(keys[c][0] for c in self.consumers[t] if placement[c] == b)
                else:
                    start = solver.value(self.start[p]) + self.runtime[p]
                keys.append((start, self.delay[t] > 0, 2 * self.rank[p] + 1))
        order = np.array([codes[i] for i in sorted(range(len(codes)), key=keys.__getitem__)])
        return placement, order.astype(np.int64)

    def lower_bound(self, solver: cp_model.CpSolver) -> float:
        """The solver's proven bound in bytes or seconds (less rounding slack for seconds)."""
        bound = solver.best_objective_bound
        if self.memory_objective:
            return float(math.ceil(bound - 1e-6))
        return max(bound - self._slack, 0.0) / self.scale

    def attains(self, solver: cp_model.CpSolver, value: float) -> bool:
        """Whether a decoded solution's exact `value` meets the model's best objective.

        Always true when the model describes exactly the schedule it decodes to; without the
        step-time links, only when the exact value is within rounding of the relaxation's.
        """
        if self.linked:
            return True
        return value <= (solver.objective_value + self._slack) / self.scale

    @property
    def _slack(self) -> float:
        """Ticks a makespan may be off by rounding: half a tick per op and per transfer."""
        return 0.5 * (self.n + len(self.y))
