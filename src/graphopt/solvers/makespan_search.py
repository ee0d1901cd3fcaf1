"""Makespan search from known solutions: moves on the critical path, re-list-scheduled.

HEFT and its variants (`list_scheduling`) place each op greedily and never revisit a choice;
BRKGA and local search from random starts rarely reach their quality on real graphs, so the
portfolio's search after HEFT used to return HEFT's makespan unchanged. This search starts from
given solutions and changes what can shorten the makespan: the critical chain, the events that
each start when the one before finishes (a data dependency, a received copy or the previous
event on the device) and that end at the makespan.

A state is a placement and a list (a topological order of the ops). A candidate is decoded by
list-scheduling the list on the fixed placement with HEFT's insertion policy
(`timeline_schedule`), scored exactly by the scorer and offered to the tracker. Moves, from the
current schedule, in this order:

- re-rank: the list becomes the order of upward ranks for the current placement (edges within
  a device cost nothing), i.e. list scheduling of the fixed placement by upward rank;
- order moves: a critical op moves in the list before the op that precedes it on its device
  (so it takes that op's place on the timeline), or as early as its inputs allow;
- device moves: a critical op to another device; the producer of a copy received on the chain
  to the receiving device (no receive left); a run of consecutive critical ops on one device
  (or either half of it) to another device together, which single moves would only reach
  through a worse schedule with a transfer in the middle of the chain.

A descent takes the first candidate with a better (bytes over capacity, makespan) and stops
when `SAMPLE` candidates in a row are no better. Then a kick, from the best state of the climb:
either a few random critical ops moved to other devices (iterated local search) or a fresh HEFT
schedule on randomly perturbed upward ranks (a GRASP restart: on real graphs a few hundred of
those alone find most of what the moves find, and the moves then refine them). Kicks grow
stronger with each one that fails (more ops moved, more noise), which on small graphs reaches
schedules the moves cannot. A climb ends when `STALE_KICKS` kicks in a row fail to improve its
best, or with the budget.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numba
import numpy as np

from graphopt.costmodels.machine import MachineArrays
from graphopt.costmodels.validity import Violation
from graphopt.ir.arrays import GraphArrays
from graphopt.ir.solution import Solution
from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, Tracker
from graphopt.solvers.list_scheduling import (
    HeftScheduler,
    TimedSchedule,
    most_critical_children,
    placement_order,
    priority_order,
    timeline_schedule,
    transfer_durations,
    upward_ranks,
)

SAMPLE = 1000
"""Candidates a descent step tries before it deems its state a local optimum."""

KICK_OPS = 2
"""Critical ops a kick moves to random devices, plus one per kick that failed before it."""

RESTART_SHARE = 0.5
"""Share of kicks that are fresh randomized HEFT schedules rather than moves of the best."""

RANK_NOISE = 0.05
"""Relative noise on the upward ranks of a randomized HEFT schedule, times one plus the number
of kicks that failed before it."""

STALE_KICKS = 30
"""Kicks in a row that do not improve the climb's best before the climb from a start ends."""


@numba.njit(cache=True)
def _critical_chain(
    g: GraphArrays,
    m: MachineArrays,
    duration: np.ndarray,
    placement: np.ndarray,
    events: np.ndarray,
) -> np.ndarray:
    """Event codes of one critical chain, first to last.

    Times the events as the scorer does (docs/format.md section 6) and remembers, for each, the
    event whose finish set its start (the device's previous event on a tie).
    """
    n_ops = placement.shape[0]
    n_events = events.shape[0]
    d = m.n_devices
    device_free = np.zeros(d, dtype=np.float64)
    device_last = np.full(d, -1, dtype=np.int64)
    ready = np.full(g.tensor_producer.shape[0] * d, -1.0)
    ready_at = np.full(g.tensor_producer.shape[0] * d, -1, dtype=np.int64)
    finish = np.zeros(n_events, dtype=np.float64)
    bound_by = np.full(n_events, -1, dtype=np.int64)
    for position in range(n_events):
        code = events[position]
        if code < n_ops:
            device = placement[code]
            start, by = device_free[device], device_last[device]
            for e in range(g.op_input_ptr[code], g.op_input_ptr[code + 1]):
                copy = g.op_input_tensor[e] * d + device
                if ready[copy] > start:
                    start, by = ready[copy], ready_at[copy]
            end = start + g.op_runtime[code]
            for e in range(g.op_output_ptr[code], g.op_output_ptr[code + 1]):
                copy = g.op_output_tensor[e] * d + device
                ready[copy], ready_at[copy] = end, position
            device_free[device], device_last[device] = end, position
        else:
            t = (code - n_ops) // d
            device = (code - n_ops) % d
            source = t * d + placement[g.tensor_producer[t]]
            start, by = ready[source], ready_at[source]
            if m.sync:
                if device_free[device] >= start:
                    start, by = device_free[device], device_last[device]
                device_free[device], device_last[device] = start + duration[t], position
            end = start + duration[t]
            ready[t * d + device], ready_at[t * d + device] = end, position
        finish[position], bound_by[position] = end, by
    chain = np.empty(n_events, dtype=np.int64)
    k = 0
    position = np.argmax(finish) if n_events > 0 else -1
    while position >= 0:
        chain[k] = events[position]
        k += 1
        position = bound_by[position]
    return chain[:k][::-1].copy()


@dataclass(frozen=True)
class _State:
    """A scored candidate: placement and list, its events, key and critical chain."""

    placement: np.ndarray
    order: np.ndarray
    events: np.ndarray
    key: tuple[int, float]
    """(bytes over capacity, makespan): the tracker's ranking."""
    critical: np.ndarray
    """Ops of the critical chain, first to last."""
    received: np.ndarray
    """Transfer event codes of the critical chain."""


class _Climb:
    """One problem's search: decoding, exact scoring, offering, moves and kicks."""

    def __init__(self, problem: Problem, tracker: Tracker, rng: np.random.Generator) -> None:
        self.problem, self.tracker, self.rng = problem, tracker, rng
        graph, machine = problem.graph, problem.machine
        self.n_ops, self.d = graph.n_ops, machine.n_devices
        self.duration = transfer_durations(graph, machine)
        self.free = (
            np.ones(graph.n_ops, dtype=bool) if problem.pinned is None else problem.pinned < 0
        )
        self.rank = upward_ranks(graph, machine)
        self.seen: set[int] = set()

    def score(self, placement: np.ndarray, order: np.ndarray, events: np.ndarray) -> _State:
        """Scores a valid solution exactly, offers it to the tracker and returns its state."""
        problem, graph = self.problem, self.problem.graph
        peaks, makespan, (violation, _, _) = problem.scorer.evaluate(placement, events)
        if violation != Violation.NONE:  # decoded schedules are valid by construction
            raise AssertionError(f"makespan search built an invalid schedule ({violation})")
        excess, _ = problem.fitness(peaks[None], np.array([makespan]))
        chain = _critical_chain(
            graph.arrays, problem.machine.arrays, self.duration, placement, events
        )
        state = _State(
            placement,
            order,
            events,
            (int(excess[0]), float(makespan)),
            chain[chain < self.n_ops],
            chain[chain >= self.n_ops],
        )
        self.tracker.offer(placement, events, peaks, makespan)
        return state

    def consider(self, timed: TimedSchedule, order: np.ndarray) -> Iterator[_State]:
        """Scores and offers a schedule not seen before (yields it), else yields nothing.

        A schedule seen before still counts as an evaluation: decoding it cost as much, and
        a search that keeps re-deriving known schedules must still end with its budget.
        """
        produced = hash(timed.placement.tobytes() + timed.events.tobytes())
        if produced in self.seen:
            self.tracker.spend(1)
            return
        self.seen.add(produced)
        yield self.score(timed.placement, order, timed.events)

    def decode(self, placement: np.ndarray, order: np.ndarray) -> Iterator[_State]:
        """List-schedules `order` on the fixed `placement` (insertion policy), if not seen."""
        asked = hash(placement.tobytes() + order.tobytes())
        if asked not in self.seen:
            self.seen.add(asked)
            graph, machine = self.problem.graph, self.problem.machine
            yield from self.consider(timeline_schedule(graph, machine, order, placement), order)

    def ranked(self, placement: np.ndarray) -> np.ndarray:
        """The list by upward ranks for a fixed placement (edges within a device are free)."""
        return placement_order(self.problem.graph, self.problem.machine, placement)

    def neighbours(self, state: _State) -> Iterator[_State]:
        """Unseen candidates around `state`: re-rank, order moves, then placement moves.

        Random order within the order moves and within the placement moves.
        """
        yield from self.decode(state.placement, self.ranked(state.placement))
        critical = state.critical
        previous = _device_predecessors(state.events, state.placement, self.n_ops)
        for op in self.rng.permutation(critical).tolist():
            for before in (int(previous[op]), -1):
                order = _earlier(self.problem, state.order, op, before)
                if order is not None:
                    yield from self.decode(state.placement, order)
        moves = [
            (np.array([op]), device)
            for op in critical[self.free[critical]].tolist()
            for device in range(self.d)
            if device != state.placement[op]
        ]
        for code in state.received.tolist():  # a receive on the chain: compute it there instead
            tensor, device = divmod(code - self.n_ops, self.d)
            source = self.problem.graph.tensor_producer[tensor]
            if self.free[source]:
                moves.append((np.array([source]), device))
        for run in _runs(critical, state.placement):
            run = run[self.free[run]]
            halves = [run[: len(run) // 2], run[len(run) // 2 :]] if len(run) > 3 else []
            for block in [run, *halves]:
                if len(block) >= 2:
                    home = state.placement[block[0]]
                    moves += [(block, device) for device in range(self.d) if device != home]
        for index in self.rng.permutation(len(moves)).tolist():
            ops, device = moves[index]
            placement = state.placement.copy()
            placement[ops] = device
            yield from self.decode(placement, state.order)

    def kick(self, state: _State, strength: int) -> Iterator[_State]:
        """A fresh randomized HEFT schedule, or `state` with a few critical ops moved.

        Both grow with `strength` (kicks that failed in a row): more rank noise, more ops
        moved, the latter drawn beyond the critical chain once it has too few.
        """
        graph, machine = self.problem.graph, self.problem.machine
        if self.rng.random() < RESTART_SHARE or self.d == 1:
            noise = RANK_NOISE * (1 + strength)
            rank = self.rank * (1.0 + noise * self.rng.uniform(-1.0, 1.0, self.n_ops))
            order = priority_order(graph, rank)
            child = most_critical_children(graph, rank) if self.rng.random() < 0.5 else None
            timed = timeline_schedule(graph, machine, order, self.problem.pinned, child=child)
            yield from self.consider(timed, order)
            return
        free = np.flatnonzero(self.free)
        critical = state.critical[self.free[state.critical]]
        count = min(KICK_OPS + strength, free.size)
        pool = critical if critical.size >= count else free
        if count:
            chosen = self.rng.choice(pool, size=count, replace=False)
            placement = state.placement.copy()
            shift = self.rng.integers(1, self.d, size=chosen.size)
            placement[chosen] = (placement[chosen] + shift) % self.d
            yield from self.decode(placement, self.ranked(placement))

    def descend(self, state: _State) -> _State:
        """First-improvement descent until `SAMPLE` candidates in a row are no better."""
        improved = True
        while improved:
            improved = False
            for tried, candidate in enumerate(self.neighbours(state)):
                if candidate.key < state.key:
                    state, improved = candidate, True
                    break
                if tried >= SAMPLE:
                    break
        return state

    def climb(self, start: _State) -> None:
        """Descents from kicks of the best state, until `STALE_KICKS` kicks fail in a row."""
        best = current = start
        stale = 0
        while stale < STALE_KICKS:
            current = self.descend(current)
            if current.key < best.key:
                best, stale = current, 0
            else:
                stale += 1
            current = next(self.kick(best, stale), best)


def _runs(critical: np.ndarray, placement: np.ndarray) -> list[np.ndarray]:
    """Maximal runs of consecutive critical ops on one device, of two ops or more."""
    if critical.size == 0:
        return []
    devices = placement[critical]
    cuts = np.flatnonzero(devices[1:] != devices[:-1]) + 1
    return [run for run in np.split(critical, cuts) if run.size >= 2]


def _device_predecessors(events: np.ndarray, placement: np.ndarray, n_ops: int) -> np.ndarray:
    """[n_ops] the op run just before each op on its device in `events`, or -1."""
    ops = events[events < n_ops]
    by_device = ops[np.argsort(placement[ops], kind="stable")]
    previous = np.full(n_ops, -1, dtype=np.int64)
    same = placement[by_device[1:]] == placement[by_device[:-1]]
    previous[by_device[1:][same]] = by_device[:-1][same]
    return previous


def _earlier(problem: Problem, order: np.ndarray, op: int, before: int) -> np.ndarray | None:
    """`order` with `op` moved before `before` (-1: as early as it can), after its inputs."""
    position = np.empty(order.shape[0], dtype=np.int64)
    position[order] = np.arange(order.shape[0])
    inputs = problem.graph.predecessors(op)
    target = int(position[inputs].max(initial=-1)) + 1
    if before >= 0:
        target = max(int(position[before]), target)
    here = int(position[op])
    if target >= here:
        return None
    return np.concatenate([order[:target], [op], order[target:here], order[here + 1 :]])


class CriticalPathSearch(Solver):
    """Critical-path moves re-list-scheduled, from given solutions (see the module docstring).

    Starts from the tracker's best and each initial solution; with neither, from HEFT's.
    """

    name = "cp-search"
    objectives = frozenset({Objective.MAKESPAN})

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Climbs from each start in turn, each on an equal share of what is left.

        On one device without a capacity every order has the same makespan (the total
        runtime) and fits, so after its start there is nothing to search.
        """
        if tracker.best_placement is None and not initial:
            HeftScheduler().run(problem, tracker, rng, ())
        search = _Climb(problem, tracker, rng)
        starts = _starts(problem, tracker, initial)
        fixed = problem.machine.n_devices == 1 and problem.machine.capacity is None
        for index, (placement, events) in enumerate(starts):
            with tracker.phase(1.0 / (len(starts) - index)):
                order = events[events < problem.graph.n_ops]
                start = search.score(placement, order, events)
                if not fixed:
                    search.climb(start)


def _starts(
    problem: Problem, tracker: Tracker, initial: Sequence[Solution]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Distinct (placement, events) starts: the tracker's best, then the initial solutions.

    An initial solution that breaks a pin or is invalid is left out.
    """
    found = [(tracker.best_placement, tracker.best_order)] if tracker.best_order is not None else []
    found += [(solution.placement, solution.order) for solution in initial]
    starts, seen = [], set()
    for placement, events in found:
        placement = np.ascontiguousarray(placement, dtype=np.int32)
        events = np.ascontiguousarray(events, dtype=np.int64)
        pinned = problem.pinned
        if placement.shape[0] != problem.graph.n_ops:
            continue
        if pinned is not None and np.any(placement[pinned >= 0] != pinned[pinned >= 0]):
            continue
        if problem.scorer.evaluate(placement, events)[2][0] != Violation.NONE:
            continue
        key = placement.tobytes() + events.tobytes()
        if key not in seen:
            seen.add(key)
            starts.append((placement, events))
    return starts
