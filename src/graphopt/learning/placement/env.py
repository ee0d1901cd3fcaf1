"""GDP's environment (paper 003 section 4.1, GO paper 002 section 4): placements to rewards.

A placement policy outputs every op's device in one pass; the environment turns each placement
of a batch into a schedule with GO's per-device ready-queue scheduler (`solvers.ready_queue`,
critical-path priorities unless given) and scores it exactly (docs/format.md sections 5 and 6):
makespan and each device's peak memory under the machine's capacity, latency, bandwidth and
transfer mode. The reward is GDP's, `-sqrt(makespan / reference)`, and `INFEASIBLE_REWARD` for a
placement that exceeds some device's capacity. The reference is the better of two classical
makespans: HEFT's own schedule (timelines with insertion, `heft_timeline`) and every op on one
device (the total runtime). A reward of -1 then matches a strong classical solution on every
graph, which keeps rewards of graphs of very different sizes on one scale for batch training.
Neither alone does: on lstm-lm-unrolled-512's training graph (47,175 ops of 6 us on average,
links of 10 us latency) HEFT's schedule takes 2.5x the total runtime on 2 devices, and on
graphs with room for parallelism one device is far behind HEFT.

With the 'timeline' scheduler too (`SCHEDULERS`), each placement is also list-scheduled on
per-device timelines with HEFT's insertion policy, ops by their upward ranks under that
placement (`timeline_schedule`), and the better schedule counts (fitting first, then faster).
The ready queues ignore transfers and memory: on lstm-lm-unrolled-32's training graph on 2
devices at 0.6 x its one-device peak, the best `gp-metis` split is 2 MB over capacity under
them (8.10 ms) and fits under the timelines (8.10 ms), where `gp-metis`'s own orders give 8.73.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, get_args

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import SolverError
from graphopt.solvers.list_scheduling import (
    TimedSchedule,
    bottom_levels,
    heft_timeline,
    placement_order,
    timeline_schedule,
)
from graphopt.solvers.ready_queue import ready_queue_orders

INFEASIBLE_REWARD = -10.0
"""Reward of a placement over some device's capacity (GDP section 4.1)."""

Scheduler = Literal["ready-queue", "timeline"]
SCHEDULERS: tuple[str, ...] = get_args(Scheduler)
"""How a placement becomes a schedule: GO's ready queues (critical-path priorities unless
given), or HEFT-style insertion timelines with the placement's upward ranks."""


def check_schedulers(schedulers: Sequence[str]) -> tuple[str, ...]:
    """The schedulers as a tuple, or a SolverError naming an unknown one or none."""
    unknown = [s for s in schedulers if s not in SCHEDULERS]
    if unknown or not schedulers:
        raise SolverError(
            f"schedulers: need one or more of {', '.join(SCHEDULERS)}, got {list(schedulers)}"
        )
    return tuple(dict.fromkeys(schedulers))


@dataclass(frozen=True)
class PlacementOutcome:
    """What a batch of B placements scored.

    Attributes:
        makespan: [B] seconds (section 6).
        peaks: [B, n_devices] peak bytes of each device (section 5).
        excess: [B] bytes over capacity, summed over devices (0 when it fits).
        reward: [B] `-sqrt(makespan / reference)`, or `INFEASIBLE_REWARD` when excess > 0.
    """

    makespan: np.ndarray
    peaks: np.ndarray
    excess: np.ndarray
    reward: np.ndarray


class PlacementEnv:
    """One graph on one machine: placements in, exact makespans and GDP's rewards out.

    Args:
        graph: the graph.
        machine: devices, capacity and transfer model.
        priorities: [n_ops] scheduling priorities (larger first); None: the critical path's
            bottom levels, GO's default.
        reference: makespan that scores -1; None: the better of HEFT's own schedule
            (`heft_timeline`) and the total runtime (every op on one device), or 1 s when
            both are 0.
        schedulers: names in `SCHEDULERS`; each placement keeps the best of their schedules.
        pinned: [n_ops] device of each pinned op, -1 where free (`Problem.pinned`), or None:
            every placement scored keeps the pins, so that fine-tuning on a problem learns
            from and searches around the solutions the problem allows.
    """

    def __init__(
        self,
        graph: Graph,
        machine: Machine,
        priorities: np.ndarray | None = None,
        reference: float | None = None,
        schedulers: Sequence[str] = ("ready-queue",),
        pinned: np.ndarray | None = None,
    ) -> None:
        self.schedulers = check_schedulers(schedulers)
        self.graph = graph
        self.machine = machine
        self.pinned = None if pinned is None else np.asarray(pinned, dtype=np.int32)
        if self.pinned is not None and self.pinned.shape != (graph.n_ops,):
            raise SolverError(
                f"pinned: expected {graph.n_ops} devices (one per op), got shape "
                f"{self.pinned.shape}"
            )
        self.scorer = Scorer(graph, machine)
        self.priorities = np.ascontiguousarray(
            bottom_levels(graph) if priorities is None else priorities, dtype=np.float64
        )
        if self.priorities.shape != (graph.n_ops,):
            raise SolverError(
                f"priorities: expected {graph.n_ops} values (one per op), "
                f"got shape {self.priorities.shape}"
            )
        if reference is None:
            reference = min(self.heft.makespan, graph.total_runtime)
            # No ops, or only zero runtimes: any positive scale keeps rewards finite.
            reference = reference if reference > 0 else 1.0
        if not reference > 0:
            raise SolverError(f"reference makespan must be > 0, got {reference}")
        self.reference = reference

    @cached_property
    def heft(self) -> TimedSchedule:
        """HEFT's own schedule of the graph (the reference's and the partition hint's), once."""
        return heft_timeline(self.graph, self.machine)

    @property
    def n_devices(self) -> int:
        """d, the devices placements choose from."""
        return self.machine.n_devices

    def check(self, placements: np.ndarray) -> np.ndarray:
        """[B, n_ops] int32 placements, pins applied, or a SolverError naming the first bad op."""
        placements = np.atleast_2d(np.asarray(placements))
        if placements.ndim != 2 or placements.shape[1] != self.graph.n_ops:
            raise SolverError(
                f"placements: expected shape [B, {self.graph.n_ops}], got {placements.shape}"
            )
        bad = np.argwhere((placements < 0) | (placements >= self.machine.n_devices))
        if bad.size:
            row, op = bad[0]
            raise SolverError(
                f"placements[{row}]: op '{self.graph.op_names[op]}' is on device "
                f"{placements[row, op]}, outside 0..{self.machine.n_devices - 1}"
            )
        if self.pinned is not None:
            placements = np.where(self.pinned >= 0, self.pinned, placements)
        return np.ascontiguousarray(placements, dtype=np.int32)

    def schedules(self, placements: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """(peaks [B, d], makespans [B], each one's events) of checked placements [B, n_ops]."""
        found = []
        if "ready-queue" in self.schedulers:
            orders, lengths = ready_queue_orders(
                self.graph, self.machine, placements, self.priorities
            )
            peaks, makespans, status = self.scorer.evaluate_population(placements, orders, lengths)
            if status[:, 0].any():  # the scheduler builds valid orders by construction
                raise AssertionError(f"ready-queue order refused by the scorer: {status[0]}")
            found.append((peaks, makespans, [o[:n] for o, n in zip(orders, lengths, strict=True)]))
        if "timeline" in self.schedulers:
            found.append(self._timelines(placements))
        peaks, makespans, events = found[0]
        for other_peaks, other_makespans, other_events in found[1:]:
            over, other_over = self.machine.excess(peaks), self.machine.excess(other_peaks)
            better = (other_over < over) | ((other_over == over) & (other_makespans < makespans))
            peaks = np.where(better[:, None], other_peaks, peaks)
            makespans = np.where(better, other_makespans, makespans)
            pairs = zip(events, other_events, better, strict=True)
            events = [theirs if take else ours for ours, theirs, take in pairs]
        return peaks, makespans, events

    def _timelines(self, placements: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """`schedules` by the insertion timelines alone, one placement at a time."""
        peaks = np.empty((len(placements), self.n_devices), dtype=np.int64)
        makespans = np.empty(len(placements), dtype=np.float64)
        events = []
        for b, placement in enumerate(placements):
            order = placement_order(self.graph, self.machine, placement)
            timed = timeline_schedule(self.graph, self.machine, order, placement)
            peaks[b], makespans[b], (violation, _, _) = self.scorer.evaluate(
                placement, timed.events
            )
            if violation:  # the timelines build valid schedules by construction
                raise AssertionError(f"timeline schedule refused by the scorer: {violation}")
            events.append(timed.events)
        return peaks, makespans, events

    def step(self, placements: np.ndarray) -> PlacementOutcome:
        """Scores a batch of placements ([B, n_ops] or [n_ops])."""
        peaks, makespans, _ = self.schedules(self.check(placements))
        return self.outcome(peaks, makespans)

    def score(self, actions: np.ndarray) -> PlacementOutcome:
        """Scores a batch of a policy's actions: placements here (`GOEnv`: per-task actions)."""
        return self.step(actions)

    def outcome(self, peaks: np.ndarray, makespans: np.ndarray) -> PlacementOutcome:
        """GDP's rewards of scored solutions (peaks [B, d], makespans [B])."""
        excess = self.machine.excess(peaks)
        reward = np.where(excess > 0, INFEASIBLE_REWARD, -np.sqrt(makespans / self.reference))
        return PlacementOutcome(makespans, peaks, excess, reward)

    def solution(self, placement: np.ndarray) -> Solution:
        """The contract solution of one placement: its best schedule's events, re-scorable."""
        placements = self.check(placement)
        _, _, events = self.schedules(placements)
        return Solution(placements[0], events[0], self.machine.n_devices)
