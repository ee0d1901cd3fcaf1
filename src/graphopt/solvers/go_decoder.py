"""GO's decoder (paper 002 sections 3-4): placement, scheduling and fusion priorities to solutions.

One decision per op for each task, as GO's policy outputs them, becomes one contract solution:
- placement: each op's device;
- scheduling: each op's priority level in [0, levels); GO's per-device ready queues
  (`ready_queue`) run the ready op of highest level first, ties broken by the critical path
  (`level_priorities`), so level 0 everywhere is GO's default, critical-path order;
- fusion: each op's fusion level in [0, levels), or a compiler's fusion. Levels become
  priorities in (0, 1) (`fusion_priorities`), and GO's priority decoder
  (`fusion.priority_groups`) groups ops above `fusion.PRIORITY_THRESHOLD`, i.e. the upper half
  of the levels; the groups' order is re-derived with each contiguous (`fusion._fused_order`).
  'default' is XLA-like default fusion (`fusion.default_fusion`) on the decoded order, the
  compiler's choice; 'none' fuses nothing.

Decoding is batched: B placements with their levels in one numba pass per stage, then scored
exactly (docs/format.md sections 5, 6 and 13).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer, check_kernel
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import SolverError
from graphopt.solvers.fusion import default_fusion, fuse_population
from graphopt.solvers.list_scheduling import bottom_levels
from graphopt.solvers.ready_queue import ready_queue_orders

CompilerFusion = Literal["none", "default"]
"""Fusion when no fusion levels are given: none, or the compiler's default (XLA-like)."""


@dataclass(frozen=True)
class Decoded:
    """B decoded solutions, scored.

    Attributes:
        placements: [B, n_ops] int32.
        orders: [B, L] int64 event codes; row b holds lengths[b] events.
        lengths: [B] int64.
        groups: [B, n_ops] int32 fusion group of each op (-1: alone).
        peaks: [B, n_devices] int64 peak bytes per device.
        makespans: [B] seconds.
    """

    placements: np.ndarray
    orders: np.ndarray
    lengths: np.ndarray
    groups: np.ndarray
    peaks: np.ndarray
    makespans: np.ndarray

    def solution(self, b: int, n_devices: int) -> Solution:
        """The contract solution of row b."""
        group = self.groups[b]
        return Solution(
            self.placements[b],
            self.orders[b, : self.lengths[b]],
            n_devices,
            fusion=group if np.any(group >= 0) else None,
        )


def level_priorities(graph: Graph, levels: np.ndarray | None) -> np.ndarray:
    """[B, n_ops] ready-queue priorities: the level, then the critical path (bottom level).

    The bottom levels are scaled into [0, 1), so a higher level always runs first and equal
    levels keep the critical-path order. None: level 0 everywhere, critical path alone.
    """
    bottom = bottom_levels(graph)
    top = float(bottom.max(initial=0.0))
    critical = bottom / (top * (1.0 + 1e-9)) if top > 0 else np.zeros_like(bottom)
    if levels is None:
        return critical[None]
    return np.asarray(levels, dtype=np.float64) + critical[None]


def fusion_priorities(levels: np.ndarray, n_levels: int) -> np.ndarray:
    """[B, n_ops] fusion priorities in (0, 1) of levels in [0, n_levels): (level + 1/2) / L."""
    return (np.asarray(levels, dtype=np.float64) + 0.5) / n_levels


def decode(
    graph: Graph,
    machine: Machine,
    placements: np.ndarray,
    schedule_levels: np.ndarray | None = None,
    fusion_levels: np.ndarray | None = None,
    n_levels: int = 8,
    compiler_fusion: CompilerFusion = "none",
    scorer: Scorer | None = None,
) -> Decoded:
    """Decodes and scores B solutions.

    Args:
        graph: the graph (fusion needs its fusion classes and kernel; without any class,
            nothing fuses).
        machine: devices and transfer model.
        placements: [B, n_ops] devices in [0, machine.n_devices) (pins are the caller's to
            apply).
        schedule_levels: [B, n_ops] scheduling levels in [0, n_levels); None: critical path.
        fusion_levels: [B, n_ops] fusion levels in [0, n_levels); None: `compiler_fusion`.
        n_levels: L, the number of levels of both tasks.
        compiler_fusion: what fuses without fusion levels.
        scorer: the graph's scorer on `machine` (built when None).

    Raises:
        SolverError: a device, level or option out of range, a shape that does not match.
        SolutionError: fusion levels on a graph with fusion classes but no kernel.
    """
    if not 2 <= n_levels <= 1 << 16:
        raise SolverError(f"n_levels: must be in [2, 65536], got {n_levels}")
    if compiler_fusion not in ("none", "default"):
        raise SolverError(f"compiler_fusion: must be 'none' or 'default', got {compiler_fusion!r}")
    placements = np.atleast_2d(np.asarray(placements))
    shape = (placements.shape[0], graph.n_ops)
    for name, values, top in (
        ("placements", placements, machine.n_devices),
        ("schedule_levels", schedule_levels, n_levels),
        ("fusion_levels", fusion_levels, n_levels),
    ):
        if values is None:
            continue
        values = np.asarray(values)
        if values.shape != shape or (values.size and values.dtype.kind not in "iu"):
            raise SolverError(f"{name}: expected integers of shape {list(shape)}, got "
                              f"{values.dtype} {list(values.shape)}")  # fmt: skip
        bad = np.flatnonzero((values < 0) | (values >= top))
        if bad.size:
            row, op = divmod(int(bad[0]), graph.n_ops)
            raise SolverError(
                f"{name}[{row}]: op '{graph.op_names[op]}' has {values.flat[bad[0]]}, outside "
                f"0..{top - 1}"
            )
    placements = np.ascontiguousarray(placements, dtype=np.int32)
    scorer = scorer or Scorer(graph, machine)
    priorities = np.ascontiguousarray(
        np.broadcast_to(level_priorities(graph, schedule_levels), shape)
    )
    orders, lengths = ready_queue_orders(graph, machine, placements, priorities)
    peaks, makespans, status = scorer.evaluate_population(placements, orders, lengths)
    if status[:, 0].any():  # the ready queues build valid orders by construction
        row = int(np.flatnonzero(status[:, 0])[0])
        raise AssertionError(f"ready-queue order {row} refused by the scorer: {status[row]}")
    groups = np.full(shape, -1, dtype=np.int32)
    fusable = graph.n_ops > 0 and bool(graph.op_fusion.any())
    if fusable and fusion_levels is not None:
        check_kernel(graph)
        failed = fuse_population(
            graph.arrays,
            graph.fusion_arrays,
            machine.arrays,
            np.ascontiguousarray(fusion_priorities(fusion_levels, n_levels)),
            placements,
            orders,
            lengths,
            peaks,
            makespans,
            groups,
        )
        if failed >= 0:  # the decoder's groups are legal by construction
            raise AssertionError(f"fused solution {failed} refused by the scorer")
    elif fusable and compiler_fusion == "default":
        for b in range(shape[0]):
            plain = Solution(placements[b], orders[b, : lengths[b]], machine.n_devices)
            fused = default_fusion(graph, plain)
            if fused.fusion is None:
                continue
            groups[b] = fused.fusion
            orders[b, : lengths[b]] = fused.order
            peaks[b], makespans[b], (violation, _, _) = scorer.evaluate(
                placements[b], orders[b, : lengths[b]], groups[b]
            )
            if violation:
                raise AssertionError(f"default fusion refused by the scorer: {violation}")
    return Decoded(placements, orders, lengths, groups, peaks, makespans)
