"""Options of the CP-SAT solver."""

from __future__ import annotations

import math
from dataclasses import dataclass

from graphopt.solvers.base import SolverError
from graphopt.solvers.checks import check_integer


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
        check_integer("cp-sat: workers", self.workers)
        check_integer("cp-sat: liveness_cuts", self.liveness_cuts, low=0)
        check_integer("cp-sat: time_links", self.time_links, low=0)
        if not isinstance(self.log, bool):
            raise SolverError(f"cp-sat: log must be a bool, got {self.log!r}")
