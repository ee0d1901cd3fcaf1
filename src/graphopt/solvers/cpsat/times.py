"""The time model of the makespan: op intervals per device, transfers, redundant bounds.

Ops are intervals with one optional alternative per device; a sync transfer is an interval on
its destination device, an async transfer a delay between producer and consumer (a receive
that takes no time needs no interval either: it can always go right before its first reader).
Redundant bounds: critical paths through each op, each device's load and, on two devices, the
best split of the runtimes (exact, by meet in the middle), which proves a schedule without idle
time optimal with no subset-sum search. Runtimes (float seconds) are scaled to `_TICKS` integer
ticks over the horizon.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphopt.solvers.cpsat.core import Core

_TICKS = 1_000_000_000
"""Integer ticks the makespan horizon is scaled to (rounding error <= 0.5 tick per event)."""

_PARTITION_OPS = 36
"""Most free ops whose best two-device split of runtimes is enumerated (2 x 2^18 subset sums)."""


class TimeModel:
    """Start times of the events on their devices, and the makespan.

    Args:
        core: the shared part it adds to.
        fixed_order: whether the step model fixes each device's order too (`Model`); then an
            instant receive gets an interval as well, to hold back what follows it.

    Attributes:
        split: on two devices, the best split of the runtimes (device of each op), to hint
            the search with; None otherwise.
    """

    def __init__(self, core: Core, fixed_order: bool) -> None:
        self.core = core
        self.fixed_order = fixed_order
        self.split: list[int] | None = None
        self._build()

    def _build(self) -> None:
        """Op intervals per device, transfers (sync intervals or async delays), makespan."""
        core = self.core
        m, d, n = core.model, core.d, core.n
        graph, machine = core.graph, core.machine
        sync = machine.arrays.sync
        delay = {t: machine.transfer_duration(core.size[t]) for t in {t for (t, _) in core.y}}
        horizon_seconds = graph.total_runtime + sum(delay[t] for (t, _) in core.y)
        self.scale = _TICKS / horizon_seconds if horizon_seconds > 0 else 1.0
        self.runtime = [round(float(r) * self.scale) for r in graph.op_runtime]
        self.delay = {t: round(v * self.scale) for t, v in delay.items()}
        horizon = sum(self.runtime) + sum(self.delay[t] for (t, _) in core.y)
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
        for j in core.checked(range(n)):
            m.add(self.makespan >= self.start[j] + self.runtime[j] + tail[j])
            for b in range(d):
                busy[b].append(
                    m.new_optional_fixed_size_interval_var(
                        self.start[j], self.runtime[j], core.x[j][b], f"run_{j}_{b}"
                    )
                )
                load[b].append(self.runtime[j] * core.x[j][b])
        self.start_tr: dict[tuple[int, int], Any] = {}
        for t, consumers in core.checked(enumerate(core.consumers)):
            p = core.producer[t]
            for c in consumers:
                m.add(self.start[c] >= self.finish[p])
            for b in range(d):
                if (t, b) not in core.y:
                    continue
                y = core.y[(t, b)]
                # An instant receive needs no interval unless steps fix the device's order
                # (then it waits for its producer and holds back what follows it on b).
                if sync and (self.delay[t] > 0 or self.fixed_order):
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
                    m.add(self.start[c] >= ready).only_enforce_if([core.x[c][b], y])
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
        core = self.core
        pinned = core.problem.pinned
        device = [-1 if pinned is None else int(pinned[j]) for j in range(core.n)]
        fixed = [sum(r for j, r in enumerate(self.runtime) if device[j] == b) for b in (0, 1)]
        free = [j for j in range(core.n) if device[j] < 0 and self.runtime[j] > 0]
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

    def hint(self, placement: np.ndarray, order: np.ndarray) -> None:
        """Start times of the order run greedily with the model's integer durations."""
        core = self.core
        m, n, d = core.model, core.n, core.d
        sync = core.machine.arrays.sync
        free = [0] * d
        ready: dict[tuple[int, int], int] = {}
        makespan = 0
        for code in (int(c) for c in order):
            if code < n:
                b = int(placement[code])
                start = max([free[b]] + [ready[(int(t), b)] for t in core.graph.inputs(code)])
                m.add_hint(self.start[code], start)
                finish = start + self.runtime[code]
                free[b] = finish
                for t in core.graph.outputs(code):
                    ready[(int(t), b)] = finish
            else:
                t, b = divmod(code - n, d)
                produced = ready[(t, int(placement[core.producer[t]]))]
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
