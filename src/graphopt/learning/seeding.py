"""A learned solver's samples as seeds of the search that spends the rest of its budget.

A placement policy's forward pass and K samples take a fraction of a second; on unseen models
they were the classical hint and no better, and `auto`'s search in the same time was 1-16%
ahead (issue 45). So a learned solver uses its time as `auto` does: its own offers first, then
`auto` (`solvers.portfolio`) for what is left, started from the best distinct solutions the
policy produced (`Elite`) as well as the classical hints `auto` computes itself. The result is
never worse than the policy's best offer, and the policy earns its place by the seeds it gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphopt.ir.solution import Solution
from graphopt.solvers.base import Initial, Problem, Rng, Tracker
from graphopt.solvers.go_decoder import Decoded
from graphopt.solvers.portfolio import Portfolio


class Elite:
    """The `size` best distinct solutions offered so far, by the problem's ranking keys.

    Args:
        problem: ranks candidates (`Problem.fitness`: excess over capacity, then the objective).
        size: how many are kept.
    """

    def __init__(self, problem: Problem, size: int) -> None:
        self.problem = problem
        self.size = size
        self._kept: list[tuple[int, float, bytes, Solution]] = []

    def add(
        self,
        placements: np.ndarray,
        orders: Sequence[np.ndarray],
        peaks: np.ndarray,
        makespans: np.ndarray,
        groups: np.ndarray | None = None,
    ) -> None:
        """Considers B scored candidates, keeping the best `size` distinct ones.

        Args:
            placements: [B, n_ops] device of each op.
            orders: B arrays of event codes.
            peaks: [B, n_devices] peak bytes per device.
            makespans: [B] seconds.
            groups: None, or [B, n_ops] fusion group of each op (-1: alone).
        """
        excess, value = self.problem.fitness(peaks, makespans)
        n_devices = self.problem.machine.n_devices
        seen = {key for _, _, key, _ in self._kept}
        added = 0
        for b in np.lexsort((value, excess)):
            if added == self.size:  # the batch's later rows rank below all of these
                break
            placement = np.asarray(placements[b], dtype=np.int32)
            order = np.asarray(orders[b], dtype=np.int64)
            fusion = None if groups is None or (groups[b] < 0).all() else groups[b]
            key = placement.tobytes() + order.tobytes()
            if fusion is not None:
                key += np.asarray(fusion, dtype=np.int32).tobytes()
            if key in seen:
                continue
            seen.add(key)
            added += 1
            solution = Solution(placement, order, n_devices, fusion=fusion)
            self._kept.append((int(excess[b]), float(value[b]), key, solution))
        self._kept.sort(key=lambda kept: kept[:2])
        del self._kept[self.size :]

    def add_decoded(self, decoded: Decoded, fused: bool) -> None:
        """Considers GO's decoded solutions (their groups only when fusion is searched)."""
        orders = [decoded.orders[b, :length] for b, length in enumerate(decoded.lengths)]
        groups = decoded.groups if fused else None
        self.add(decoded.placements, orders, decoded.peaks, decoded.makespans, groups)

    def solutions(self) -> list[Solution]:
        """The kept solutions, best first."""
        return [solution for *_, solution in self._kept]


def search_rest(problem: Problem, tracker: Tracker, rng: Rng, seeds: Initial) -> None:
    """Spends what is left of the budget on `auto`'s search, started from `seeds` too."""
    Portfolio().run(problem, tracker, rng, seeds)
