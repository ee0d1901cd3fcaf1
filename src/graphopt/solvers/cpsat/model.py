"""The CP-SAT model of one problem: the shared part, the step and time models, hint, decoding.

Peak memory is the step model's (`steps`). The makespan is the time model's (`times`); with a
memory capacity that could bind, the step model is added as well and the step order of any two
events on one device fixes their order in time, so the schedule the model describes is exactly
the one its step order runs. Those pairwise links grow with the square of the events per
device, so past `CPSATConfig.time_links` pairs they are left out: the model is then a relaxation
(its bound stays valid), both its step order and its time order are decoded and re-scored, the
better is kept, and it is reported optimal only when it meets the relaxation's optimum.

Decoding: step positions give the event order directly; times give it by sorting on (start,
positive duration, topological rank), which keeps every device's sequence and every dependency.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from graphopt.solvers.base import Problem
from graphopt.solvers.cpsat.config import CPSATConfig
from graphopt.solvers.cpsat.core import Core
from graphopt.solvers.cpsat.steps import StepModel
from graphopt.solvers.cpsat.times import TimeModel


class Model:
    """The CP-SAT model of one problem, built in stages, with its hint and decoder.

    Args:
        problem: the problem; its objective picks the model (module docstring).
        liveness_cuts: most literals the order-based memory constraints may add.
        time_links: most event pairs whose step order is linked to their time order.
        deadline: `time.perf_counter()` after which building stops with `core.OutOfTime`.

    Attributes:
        model: the CP-SAT model.
        steps: the step model, with the peak-memory objective or a capacity that could bind.
        times: the time model, with the makespan objective.
        linked: whether the schedule the model describes is the one its decoded order runs.
    """

    def __init__(
        self,
        problem: Problem,
        liveness_cuts: int,
        time_links: int = CPSATConfig.time_links,
        deadline: float = math.inf,
    ) -> None:
        self.core = core = Core(problem, deadline)
        self.model = core.model
        self.memory_objective = core.memory_objective
        self.time_links = time_links
        self.linked = True
        graph, capacity = problem.graph, problem.machine.capacity
        vacuous = capacity is None or capacity >= graph.total_tensor_size + int(
            graph.op_temp_memory.max(initial=0)
        )
        self.steps: StepModel | None = None
        if self.memory_objective or not vacuous:
            self.steps = StepModel(core, liveness_cuts)
            core.check_time()
        self.times: TimeModel | None = None
        if not self.memory_objective:
            self.times = TimeModel(core, fixed_order=self.steps is not None)
            core.check_time()
        if self.steps is not None and self.times is not None:
            self._link_steps_and_times()
        if self.memory_objective:
            self.model.minimize(self.steps.peak)
        else:
            self.model.minimize(self.times.makespan)

    @property
    def split(self) -> list[int] | None:
        """The time model's best split of the runtimes over two devices, to hint with."""
        return None if self.times is None else self.times.split

    def _link_steps_and_times(self) -> None:
        """Two events on one device run in time in the order of their steps."""
        core = self.core
        steps = self.steps
        times = self.times
        m, d = core.model, core.d
        # Events that may occupy device b: (event, start, duration, presence on b).
        on: list[list[tuple[tuple[int, ...], Any, int, Any]]] = [[] for _ in range(d)]
        for j in range(core.n):
            for b in range(d):
                on[b].append(((j,), times.start[j], times.runtime[j], core.x[j][b]))
        for (t, b), start in times.start_tr.items():
            on[b].append(((t, b), start, times.delay[t], core.y[(t, b)]))
        if sum(len(events) * (len(events) - 1) // 2 for events in on) > self.time_links:
            self.linked = False
            return
        for b in range(d):
            for i, (e, start_e, dur_e, on_e) in enumerate(on[b]):
                core.check_time()
                for f, start_f, dur_f, on_f in on[b][i + 1 :]:
                    before = steps.before(e, f)
                    if isinstance(before, bool):
                        continue
                    m.add(start_e + dur_e <= start_f).only_enforce_if([before, on_e, on_f])
                    m.add(start_f + dur_f <= start_e).only_enforce_if([~before, on_e, on_f])

    # ------------------------------------------------------------------------ hints
    def add_hint(self, placement: np.ndarray, order: np.ndarray, peaks: np.ndarray) -> None:
        """Hints the decisions of a known solution (devices renumbered to the symmetry cut)."""
        core = self.core
        placement, order = core.canonical(placement, order)
        m, d, n = core.model, core.d, core.n
        for j in core.checked(range(n)):
            for b in range(d):
                m.add_hint(core.x[j][b], int(placement[j]) == b)
        present = {int(c) - n for c in order if c >= n}
        for (t, b), y in core.y.items():
            m.add_hint(y, t * d + b in present)
        for (t, c), same in core.same.items():
            m.add_hint(same, placement[c] == placement[core.producer[t]])
        if self.steps is not None:
            self.steps.hint(placement, order, peaks)
        if self.times is not None:
            self.times.hint(placement, order)

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
        core = self.core
        steps = self.steps
        times = self.times
        n, d = core.n, core.d
        if by_steps is None:
            by_steps = steps is not None
        placement = np.array(
            [next(b for b in range(d) if solver.boolean_value(core.x[j][b])) for j in range(n)],
            dtype=np.int32,
        )
        present = [key for key, y in core.y.items() if solver.boolean_value(y)]
        codes = [*range(n), *(n + t * d + b for t, b in present)]
        if by_steps:
            keys = [solver.value(steps.pos[j]) for j in range(n)]
            keys += [solver.value(steps.pos_tr[key]) for key in present]
        else:
            keys = [
                (solver.value(times.start[j]), times.runtime[j] > 0, 2 * core.rank[j])
                for j in range(n)
            ]
            for t, b in present:
                p = core.producer[t]
                if (t, b) in times.start_tr:
                    start = solver.value(times.start_tr[(t, b)])
                elif core.machine.arrays.sync:
                    # An instant receive goes right before its first reader on b.
                    start = min(keys[c][0] for c in core.consumers[t] if placement[c] == b)
                else:
                    start = solver.value(times.start[p]) + times.runtime[p]
                keys.append((start, times.delay[t] > 0, 2 * core.rank[p] + 1))
        order = np.array([codes[i] for i in sorted(range(len(codes)), key=keys.__getitem__)])
        return placement, order.astype(np.int64)

    def lower_bound(self, solver: cp_model.CpSolver) -> float:
        """The solver's proven bound in bytes or seconds (less rounding slack for seconds)."""
        bound = solver.best_objective_bound
        if self.times is None:
            return float(math.ceil(bound - 1e-6))
        return max(bound - self._slack, 0.0) / self.times.scale

    def attains(self, solver: cp_model.CpSolver, value: float) -> bool:
        """Whether a decoded solution's exact `value` meets the model's best objective.

        Always true when the model describes exactly the schedule it decodes to; without the
        step-time links, only when the exact value is within rounding of the relaxation's.
        """
        if self.linked or self.times is None:
            return True
        return value <= (solver.objective_value + self._slack) / self.times.scale

    @property
    def _slack(self) -> float:
        """Ticks a makespan may be off by rounding: half a tick per op and per transfer."""
        return 0.5 * (self.core.n + len(self.core.y))
