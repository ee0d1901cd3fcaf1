"""What both CP-SAT models share: the problem's facts, the placement and the implied transfers.

One Boolean per (op, device) with exactly one true per op, and one Boolean per candidate
transfer (tensor, device), true exactly when some consumer of the tensor is on that device and
its producer is not (docs/format.md section 2); devices are numbered by first use when no op is
pinned. The step model (`steps`) and the time model (`times`) are built on this part.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import numpy as np
from ortools.sat.python import cp_model

from graphopt.solvers.base import Objective, Problem

_CHECK_EVERY = 1024
"""Items of a building loop between two looks at the deadline."""

_Item = TypeVar("_Item")


class OutOfTime(Exception):
    """Building the model passed the solver's deadline."""


class Core:
    """The model's shared part: the graph as lists, ancestry, placement and transfer literals.

    Args:
        problem: the problem.
        deadline: `time.perf_counter()` after which building stops with `OutOfTime`.

    Attributes:
        model: the CP-SAT model every part adds to.
        x: x[j][b], op j runs on device b.
        y: y[(t, b)], the transfer of tensor t to device b is implied.
        same: same[(t, c)], consumer c of tensor t runs on its producer's device.
    """

    def __init__(self, problem: Problem, deadline: float) -> None:
        self.problem = problem
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
        self._ancestry()
        self.check_time()
        self._add_placement()
        self.check_time()
        self._add_transfers()
        self.check_time()

    def check_time(self) -> None:
        """Raises OutOfTime once the deadline has passed."""
        if time.perf_counter() > self.deadline:
            raise OutOfTime

    def checked(self, items: Iterable[_Item]) -> Iterator[_Item]:
        """The items, with a look at the deadline every `_CHECK_EVERY` (loops over ops)."""
        for k, item in enumerate(items):
            if k % _CHECK_EVERY == 0:
                self.check_time()
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

    def is_ancestor(self, a: int, b: int) -> bool:
        """Whether op a is an ancestor of op b."""
        return bool(self.ancestors[b] >> a & 1)

    # ---------------------------------------------------------------------------- placement
    def _add_placement(self) -> None:
        """x[j][b]: op j runs on device b; pins fixed; value symmetry broken when nothing is."""
        m, d, n = self.model, self.d, self.n
        pinned = self.problem.pinned
        self.x = [[m.new_bool_var(f"x_{j}_{b}") for b in range(d)] for j in self.checked(range(n))]
        for j in self.checked(range(n)):
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
        for j in self.checked(self.symmetry_order):
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

    # ---------------------------------------------------------------------------- transfers
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

    # -------------------------------------------------------------------------------- hints
    def canonical(self, placement: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
