"""Exact placement and scheduling with OR-Tools CP-SAT (paper 001, section 4.2).

REGAL's CP-SAT baseline formulates multi-device peak memory minimization "using a model of the
operation execution order, tensor lifetimes, and cumulative constraints to evaluate peak memory
usage". This package builds that model for the project's exact cost model (docs/format.md
section 5), and a second, interval-based model for the makespan (section 6) in the style of
the OR-Tools CP-SAT scheduling examples (job shop with alternative resources: optional
intervals per device, one NoOverlap per device, precedences with delays).

The modules, along the model's seams: `core` (what both models share: the placement and the
implied transfers), `steps` (peak memory: events on steps, copy lifetimes, cumulatives and
order-based cuts), `times` (the makespan: intervals, delays and bounds), `model` (which of the
two a problem needs, their links, the hint and the decoding), `solver` (the solver: time limit,
hint, solve, offer) and `config` (its options). This package is their public face.
"""

from graphopt.solvers.cpsat.config import CPSATConfig
from graphopt.solvers.cpsat.solver import CPSATSolver

__all__ = ["CPSATConfig", "CPSATSolver"]
