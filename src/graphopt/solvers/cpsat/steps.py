"""The step model of peak memory: events on steps, copy lifetimes, one cumulative per device.

Every op and every present transfer gets a step position; the present events occupy positions
0..N-1 exactly once (unit intervals, NoOverlap, N = events). Each tensor copy is an interval over
steps, from the step that makes it resident to the step of its last reader (docs/format.md
section 5), or to the last step for a graph output's home copy, optional on the device it lives
on; an op's scratch memory and its other outputs that nobody reads are a unit interval at its
own step. One cumulative per device, whose capacity is the peak minus the persistent bytes homed
on that device, measures the memory of every device at every step. Redundant constraints make
small proofs fast: a bound from each op's inputs and outputs, and, per op step and device, the
bytes that the relative order of events forces to be resident there (order literals between
events, `before`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphopt.solvers.cpsat.core import Core


def _negate(literal: Any) -> Any:
    """Negation of a literal or of a constant truth value."""
    return not literal if isinstance(literal, bool) else ~literal


class StepModel:
    """Step positions of the events, their order literals, and memory per device and step.

    Args:
        core: the shared part it adds to.
        liveness_cuts: most literals the order-based memory constraints may add.

    Attributes:
        peak: the peak memory variable (the objective), with the peak-memory objective only.
    """

    def __init__(self, core: Core, liveness_cuts: int) -> None:
        self.core = core
        self.liveness_cuts = liveness_cuts
        self.order_literals: dict[Any, Any] = {}
        self._build()

    def _build(self) -> None:
        """Event positions, precedences, copy lifetimes and per-device cumulative memory."""
        core = self.core
        m, d, n = core.model, core.d, core.n
        horizon = n + len(core.y)
        last = max(horizon - 1, 0)
        # Positions: ops and present transfers fill 0..count-1, one event per step.
        self.count = m.new_int_var(n, max(horizon, n), "count")
        m.add(self.count == n + sum(core.y.values()))
        self.pos = [
            m.new_int_var(core.n_ancestors[j], last - core.n_descendants[j], f"pos_{j}")
            for j in range(n)
        ]
        self.pos_tr: dict[tuple[int, int], Any] = {}
        units = []
        for j in core.checked(range(n)):
            m.add(self.pos[j] + core.n_descendants[j] <= self.count - 1)
            units.append(m.new_fixed_size_interval_var(self.pos[j], 1, f"step_{j}"))
        for (t, b), y in core.y.items():
            p = core.producer[t]
            tail = min(1 + core.n_descendants[c] for c in core.consumers[t])
            pos = m.new_int_var(core.n_ancestors[p] + 1, last - tail, f"pos_tr_{t}_{b}")
            self.pos_tr[(t, b)] = pos
            m.add(pos <= self.count - 1).only_enforce_if(y)
            m.add(pos == self.pos[p] + 1).only_enforce_if(~y)
            units.append(m.new_optional_fixed_size_interval_var(pos, 1, y, f"step_tr_{t}_{b}"))
        m.add_no_overlap(units)
        m.add_all_different(self.pos)

        # Precedences: producer before consumer and transfer; transfer before its readers.
        for t, consumers in core.checked(enumerate(core.consumers)):
            p = core.producer[t]
            for c in consumers:
                m.add(self.pos[p] < self.pos[c])
            for b in range(d):
                if (t, b) not in core.y:
                    continue
                m.add(self.pos[p] < self.pos_tr[(t, b)])
                for c in consumers:
                    m.add(self.pos_tr[(t, b)] < self.pos[c]).only_enforce_if(
                        [core.x[c][b], core.y[(t, b)]]
                    )

        # Copy lifetimes [start, last reader] and memory per device.
        intervals: list[list[Any]] = [[] for _ in range(d)]
        demands: list[list[int]] = [[] for _ in range(d)]
        for j in core.checked(range(n)):
            alone = int(core.graph.op_temp_memory[j]) + sum(
                core.size[t]
                for t in (int(t) for t in core.graph.outputs(j))
                if not core.consumers[t] and not core.persistent[t] and not core.output[t]
            )
            if alone == 0:
                continue
            for b in range(d):
                intervals[b].append(
                    m.new_optional_fixed_size_interval_var(self.pos[j], 1, core.x[j][b], f"op_{j}")
                )
                demands[b].append(alone)
        for t, consumers in core.checked(enumerate(core.consumers)):
            p, size = core.producer[t], core.size[t]
            if core.output[t] and size:
                # A graph output's home copy: from its producer's step to the last step.
                length = m.new_int_var(1, max(horizon, 1), f"life_{t}")
                for b in range(d):
                    intervals[b].append(
                        m.new_optional_interval_var(
                            self.pos[p], length, self.count, core.x[p][b], f"home_{t}_{b}"
                        )
                    )
                    demands[b].append(size)
            if not consumers or size == 0:
                continue
            if not core.persistent[t] and not core.output[t]:
                end = m.new_int_var(0, last, f"end_{t}")
                for c in consumers:
                    reader = m.add(end >= self.pos[c])
                    if d > 1:
                        reader.only_enforce_if(core.same[(t, c)])
                for b in range(d):
                    if (t, b) in core.y:
                        m.add(end >= self.pos_tr[(t, b)]).only_enforce_if(core.y[(t, b)])
                length = m.new_int_var(2, horizon, f"life_{t}")
                for b in range(d):
                    intervals[b].append(
                        m.new_optional_interval_var(
                            self.pos[p], length, end + 1, core.x[p][b], f"home_{t}_{b}"
                        )
                    )
                    demands[b].append(size)
            for b in range(d):
                if (t, b) not in core.y:
                    continue
                end = m.new_int_var(0, last, f"end_tr_{t}_{b}")
                for c in consumers:
                    m.add(end >= self.pos[c]).only_enforce_if(core.x[c][b])
                length = m.new_int_var(2, horizon, f"life_tr_{t}_{b}")
                intervals[b].append(
                    m.new_optional_interval_var(
                        self.pos_tr[(t, b)], length, end + 1, core.y[(t, b)], f"copy_{t}_{b}"
                    )
                )
                demands[b].append(size)

        # Persistent home copies are a constant per device; the rest must fit peak - constant.
        budget = sum(core.size) + int(core.graph.op_temp_memory.max(initial=0))
        if core.memory_objective:
            high = budget if core.machine.capacity is None else core.machine.capacity
            self.peak = m.new_int_var(0, max(min(high, budget), 0), "peak")
            m.add(self.peak >= self._static_memory_bound())
            limit: Any = self.peak
        else:
            limit = int(core.machine.capacity or 0)
        rooms = []
        for b in range(d):
            resident = sum(
                core.size[t] * core.x[core.producer[t]][b]
                for t in range(len(core.size))
                if core.persistent[t] and core.size[t]
            )
            room = m.new_int_var(0, budget, f"room_{b}")
            m.add(room == limit - resident)
            if intervals[b]:
                m.add_cumulative(intervals[b], demands[b], room)
            rooms.append(room)
        self._add_liveness(rooms)

    def before(self, e: tuple[int, ...], f: tuple[int, ...]) -> Any:
        """Literal 'event e runs at an earlier step than event f' (True/False when static).

        Events are (j,) for op j and (t, b) for the transfer of t to b. Literals over pairs
        with a transfer only mean something when the transfer is present.
        """
        core = self.core
        if self._ordered(e, f):
            return True
        if self._ordered(f, e):
            return False
        key = (e, f) if (e, f) < (f, e) else (f, e)
        if key not in self.order_literals:
            first, second = (self.step(k) for k in key)
            present = [core.y[k] for k in key if len(k) == 2]
            lit = core.model.new_bool_var(f"before_{len(self.order_literals)}")
            core.model.add(first < second).only_enforce_if([lit, *present])
            core.model.add(second < first).only_enforce_if([~lit, *present])
            self.order_literals[key] = lit
        lit = self.order_literals[key]
        return lit if key == (e, f) else ~lit

    def _ordered(self, e: tuple[int, ...], f: tuple[int, ...]) -> bool:
        """Whether event e precedes event f in every valid order (static ancestry only)."""
        core = self.core
        if len(e) != 1:
            return False
        if len(f) == 1:
            return core.is_ancestor(e[0], f[0])
        producer = core.producer[f[0]]
        return e[0] == producer or core.is_ancestor(e[0], producer)

    def step(self, event: tuple[int, ...]) -> Any:
        """Step variable of an event."""
        return self.pos[event[0]] if len(event) == 1 else self.pos_tr[event]

    def _add_liveness(self, rooms: list[Any]) -> None:
        """Memory of each device at each op's step, from the relative order of events.

        A copy is resident at op k's step when the event that made it came before k and one
        of its readers comes after k (or is k). Clauses force 'resident' from those order
        literals; the sum of resident bytes must fit the device's room. Redundant with the
        cumulative, it lets the search reason on orders directly.
        """
        core = self.core
        m, x, d = core.model, core.x, core.d

        def clause(*literals: Any) -> None:
            if any(lit is True for lit in literals):
                return
            m.add_bool_or([lit for lit in literals if lit is not False])

        # Ops at whose step tensor t may be resident: neither its producer nor an ancestor of
        # it, nor, unless t is a graph output (held to the end), a descendant of every consumer
        # (a consumer is not its own descendant).
        crossing: list[list[int]] = [[] for _ in range(core.n)]
        steps = {}
        every = (1 << core.n) - 1
        for t, consumers in enumerate(core.consumers):
            if not core.size[t] or (d == 1 and core.persistent[t]):
                continue
            p = core.producer[t]
            if core.output[t]:
                steps[t] = every & ~(core.ancestors[p] | 1 << p)
                continue
            if not consumers:
                continue
            after_all = core.descendants[consumers[0]]
            for c in consumers[1:]:
                after_all &= core.descendants[c]
            steps[t] = every & ~(core.ancestors[p] | 1 << p | after_all)
        if d * sum(bits.bit_count() for bits in steps.values()) > self.liveness_cuts:
            return
        for t, bits in steps.items():
            while bits:
                low = bits & -bits
                crossing[low.bit_length() - 1].append(t)
                bits ^= low
        for k in core.checked(range(core.n)):
            inputs = {int(t) for t in core.graph.inputs(k)}
            own = int(core.graph.op_temp_memory[k]) + sum(
                core.size[int(t)] for t in core.graph.outputs(k) if not core.persistent[int(t)]
            )
            terms: list[list[Any]] = [[own * x[k][b]] if own else [] for b in range(d)]
            for t in crossing[k]:
                p, size, consumers = core.producer[t], core.size[t], core.consumers[t]
                for b in range(d):
                    live = m.new_bool_var("")
                    terms[b].append(size * live)
                    if t in inputs:
                        if core.persistent[t]:
                            clause(live, ~x[k][b], x[p][b])
                        else:
                            clause(live, ~x[k][b])
                    if core.output[t]:
                        # A graph output's home copy on b: made before k.
                        clause(live, ~x[p][b], _negate(self.before((p,), (k,))))
                    elif not core.persistent[t]:
                        # Home copy on b: made before k, read after k.
                        made = _negate(self.before((p,), (k,)))
                        for c in consumers:
                            if c != k:
                                later = _negate(self.before((k,), (c,)))
                                clause(live, ~x[p][b], ~x[c][b], made, later)
                        for a in range(d):
                            if (t, a) in core.y:
                                later = _negate(self.before((k,), (t, a)))
                                clause(live, ~x[p][b], ~core.y[(t, a)], made, later)
                    if (t, b) in core.y:
                        # Received copy on b: arrived before k, read after k.
                        arrived = _negate(self.before((t, b), (k,)))
                        for c in consumers:
                            if c == k or core.is_ancestor(k, c):
                                clause(live, ~core.y[(t, b)], ~x[c][b], arrived)
                            elif not core.is_ancestor(c, k):
                                clause(
                                    live,
                                    ~core.y[(t, b)],
                                    ~x[c][b],
                                    arrived,
                                    _negate(self.before((k,), (c,))),
                                )
            for b in range(d):
                if terms[b]:
                    m.add(sum(terms[b]) <= rooms[b])

    def _static_memory_bound(self) -> int:
        """Memory at any op's own step: its inputs, outputs and scratch are all resident."""
        core = self.core
        bound = 0
        for j in range(core.n):
            tensors = {int(t) for t in core.graph.inputs(j)} | {
                int(t) for t in core.graph.outputs(j)
            }
            need = int(core.graph.op_temp_memory[j]) + sum(core.size[t] for t in tensors)
            bound = max(bound, need)
        return bound

    def hint(self, placement: np.ndarray, order: np.ndarray, peaks: np.ndarray) -> None:
        """Steps of the events, their relative order and the peak: a complete hint.

        An absent transfer gets the step right after its producer. Hinting the order literals
        too lets CP-SAT take the hint as its first solution without searching for them.
        """
        core = self.core
        m, n, d = core.model, core.n, core.d
        step = {int(code): k for k, code in enumerate(order)}
        for j in core.checked(range(n)):
            m.add_hint(self.pos[j], step[j])
        for (t, b), pos in self.pos_tr.items():
            code = n + t * d + b
            step.setdefault(code, step[core.producer[t]] + 1)
            m.add_hint(pos, step[code])

        def code_of(event: tuple[int, ...]) -> int:
            return event[0] if len(event) == 1 else n + event[0] * d + event[1]

        for (e, f), before in core.checked(self.order_literals.items()):
            m.add_hint(before, step[code_of(e)] < step[code_of(f)])
        if core.memory_objective:
            m.add_hint(self.peak, int(np.max(peaks)))
