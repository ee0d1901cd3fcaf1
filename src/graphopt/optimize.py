"""`optimize`: one call from a graph and a machine to a scored solution (API and CLI share it)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Score
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.solvers.base import (
    Budget,
    Objective,
    Problem,
    Progress,
    Result,
    SolverError,
    Stall,
)
from graphopt.solvers.bounds import (
    fused_makespan_lower_bound,
    fused_peak_memory_lower_bound,
    op_step_memory,
)
from graphopt.solvers.candidates import CandidateSampler, shortfall
from graphopt.solvers.fusion import FUSION_POLICIES, apply_fusion
from graphopt.solvers.registry import FUSION_SEARCHERS, SAMPLERS, default_fusion, make_solver
from graphopt.solvers.remat import greedy_recompute

DEFAULT_MAX_OVERHEAD = 0.2
"""With `remat` and peak memory as the objective, the extra makespan allowed by default, as a
fraction of the search's: about what checkpointing every layer costs on one device (one more
forward pass is a third of a training step)."""
REMAT_SHARE = 0.2
"""With `remat` under a time budget, the share of it left to recomputing after the search."""
DEFAULT_SECONDS = 10.0
"""The default budget: seconds of search, ended sooner when a solution reaches the lower bound
or the search stalls (`DEFAULT_STALL`).

Real models need more than REGAL's 5,000 evaluations (paper 001 section 4.2): on real graphs of
a few hundred ops, 10 s reach bounds that 5,000 evaluations do not (`graphopt bench zoo-real`).
Pass evaluations for runs that repeat exactly with a seed, or seconds for an exact time."""

DEFAULT_STALL = Stall(min_seconds=1.0, fraction=0.25)
"""When the default budget ends a stalled search: no improvement for max(1 s, 25% of the time
elapsed) in the last phase of a search (each phase of `auto` ends on the same rule and hands the
rest of the time to the next). Measured in `benchmarks/default_stop.py`."""

FUSION_CHOICES = (*FUSION_POLICIES, "search")
"""`optimize(fusion=...)`: a policy applied after the search, or "search" to search fusion."""


@dataclass(frozen=True, eq=False, kw_only=True)
class OptimizeResult(Result):
    """A solve's `Result` with what a report of it needs, so that every caller reports alike.

    Attributes:
        bound: the best proven lower bound on the objective: the instance's
            (`bounds.peak_memory_lower_bound` or `bounds.makespan_lower_bound`) or the solver's
            own `lower_bound`, whichever is higher.
        gap: how far `value` lies above `bound`, as a fraction (0.0 when the bound is 0).
        excess: bytes over the capacity, summed over the devices (0 when the solution fits).
        proof: when the solution does not fit, `capacity_proof`'s reason why no placement can;
            None when it fits or no single op shows it.
        candidates: with `candidates=K`, the K best distinct schedules a sampling solver drew,
            best first (paper 004's candidate set; empty otherwise); fewer, with a note saying
            why (`candidates.shortfall`), when it drew fewer than K distinct ones.
    """

    bound: float
    gap: float
    excess: int
    proof: str | None
    candidates: tuple[Solution, ...] = ()


def pins_from_names(graph: Graph, pins: Mapping[str, int]) -> np.ndarray | None:
    """[n_ops] pins (-1 = free) from {op name: device}; None when empty.

    Raises:
        SolverError: naming an op the graph does not have, or a device that is not a
            non-negative integer (-1 marks a free op in the array, never a pin).
    """
    if not pins:
        return None
    ids = graph.op_ids
    pinned = np.full(graph.n_ops, -1, dtype=np.int64)
    for name, device in pins.items():
        if name not in ids:
            raise SolverError(f"cannot pin op {name!r}: the graph has no op of that name")
        if isinstance(device, bool) or not isinstance(device, int | np.integer) or device < 0:
            raise SolverError(
                f"cannot pin op {name!r} to device {device!r}: a device is an integer >= 0"
            )
        pinned[ids[name]] = device
    return pinned


def optimize(
    graph: Graph,
    machine: Machine | None = None,
    objective: Objective | str = Objective.PEAK_MEMORY,
    solver: str = "auto",
    evaluations: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    pins: Mapping[str, int] | None = None,
    initial: Sequence[Solution] = (),
    progress: Progress | None = None,
    policy: str | None = None,
    candidates: int = 0,
    fusion: str | None = None,
    finetune: int = 0,
    remat: bool = False,
    max_overhead: float | None = None,
) -> OptimizeResult:
    """Optimizes placement and schedule of `graph` on `machine` for `objective`.

    Args:
        graph: the computation graph.
        machine: devices, capacity and transfers (default: one device, no capacity).
        objective: 'peak-memory' or 'makespan'.
        solver: a name from `graphopt.solvers.registry.SOLVERS`.
        evaluations: evaluation budget.
        seconds: wall-clock budget; `DEFAULT_SECONDS` when neither is given.
        seed: the same seed gives the same result under an evaluation budget.
        pins: {op name: device} for ops whose device is fixed.
        initial: known solutions to start from.
        progress: called on every improvement.
        policy: a policy checkpoint for the learned solvers (`registry.LEARNED`) instead of
            the shipped one.
        candidates: also return the best `candidates` distinct schedules (K) of a solver that
            samples many (`registry.SAMPLERS`); 0: only the best.
        fusion: "search" to search fusion groups with placement and order (the solvers of
            `registry.FUSION_SEARCHERS`), or a policy of `solvers.fusion.FUSION_POLICIES` that
            then fuses ops on the best placement and order found ("none": no fusion); None:
            the solver's own default (`registry.default_fusion`: XLA-like fusion for
            `compiler-default`, none for the others). With fusion the bound is one that
            fusion cannot beat (`bounds.fused_*`).
        finetune: steps of training on the graph before solving it, for the solvers that
            fine-tune a policy (gdp; 0: zero-shot).
        remat: then recompute ops and transfer copies again (docs/format.md section 15) on
            the best solution, without fusion so far (`_recomputed`): for peak memory, the
            lowest peak within `max_overhead`; for makespan, the least that fits the capacity.
        max_overhead: with `remat`, most extra makespan as a fraction of the search's best
            (default `DEFAULT_MAX_OVERHEAD` for peak memory, none for makespan).

    Raises:
        SolverError: unknown solver or objective, bad budget, bad pins, a policy for a
            solver that takes none or one trained for another problem.
    """
    started = time.perf_counter()
    machine = machine or Machine()
    if evaluations is None and seconds is None:
        budget = Budget(seconds=DEFAULT_SECONDS, stall=DEFAULT_STALL)
    else:
        budget = Budget(evaluations=evaluations, seconds=seconds)
    classes = bool(graph.op_fusion.any())
    if fusion is None:
        fusion = default_fusion(solver, classes)
    if fusion not in FUSION_CHOICES:
        raise SolverError(
            f"unknown fusion policy {fusion!r}; valid policies: {', '.join(FUSION_CHOICES)}"
        )
    problem = Problem(
        graph,
        machine,
        objective,
        pins_from_names(graph, pins or {}),
        fusion=fusion == "search" and classes,
        remat=remat,
    )
    _check_remat(remat, max_overhead, fusion)
    chosen = make_solver(solver, policy, finetune)
    if candidates < 0:
        raise SolverError(f"candidates (top K) must be >= 1, or 0 for none, got {candidates}")
    if candidates and not isinstance(chosen, CandidateSampler):
        raise SolverError(
            f"solver {solver!r} keeps one solution; top-K candidates come from a sampling "
            f"solver ({', '.join(SAMPLERS)})"
        )
    if candidates and candidates > chosen.max_candidates():
        raise SolverError(
            f"top-K needs K <= the {chosen.max_candidates()} schedules {solver} samples, "
            f"got K = {candidates}"
        )
    search = _less_spent(budget, started)
    if remat and search.seconds is not None:
        search = replace(search, seconds=search.seconds * (1 - REMAT_SHARE))
    solved = chosen.solve(problem, search, seed, initial, progress)
    if fusion != "none" and not classes:
        solved = _noted(
            solved,
            f"--fusion {fusion}: no op of graph '{graph.name}' has a fusion class (op field "
            "'fusion'), so nothing was fused; graphs that graphopt imports carry them",
        )
    elif fusion == "search" and not solved.solution.n_groups:
        solved = _noted(
            solved,
            f"--fusion search: the best solution fuses no ops (the solvers that search fusion "
            f"are {', '.join(FUSION_SEARCHERS)})",
        )
    elif fusion not in ("none", "search"):
        solved = _fused(problem, solved, fusion, evaluations, seed)
    if remat:
        left = None if budget.seconds is None else _less_spent(budget, started).seconds
        solved = _recomputed(problem, solved, max_overhead, left)
    result = _with_bounds(problem, solved)
    if candidates:
        record = dict(result.solution.solver)
        kept = [
            _claimed(problem, solution, {**record, "candidate": rank})
            for rank, solution in enumerate(chosen.top_candidates(problem, candidates), start=1)
        ]
        result = replace(result, candidates=tuple(kept))
        fewer = shortfall(candidates, len(kept), chosen.samples_drawn())
        if fewer is not None:
            result = _noted(result, fewer)
    return _timed(result, time.perf_counter() - started)


def _check_remat(remat: bool, max_overhead: float | None, fusion: str) -> None:
    """Refuses what recomputation does not run with yet, and an overhead without it."""
    if max_overhead is not None and not remat:
        raise SolverError("max_overhead (--max-overhead) limits recomputation: add remat (--remat)")
    if max_overhead is not None and not max_overhead >= 0:
        raise SolverError(f"max_overhead must be a fraction >= 0, got {max_overhead}")
    if remat and fusion != "none":
        raise SolverError(
            f"remat (--remat) does not combine with fusion yet, got fusion {fusion!r}: use "
            "--fusion none"
        )


def _recomputed(
    problem: Problem, result: Result, max_overhead: float | None, seconds: float | None
) -> Result:
    """`result` with ops recomputed and copies transferred again (`remat.greedy_recompute`).

    For peak memory: the lowest peak whose makespan stays within `max_overhead` of the
    search's. For makespan, recomputing does not shorten a schedule, so it runs only when the
    schedule does not fit the capacity, and stops at the first that fits. The result keeps
    its schedule, with a note, when recomputing lowers nothing. Under a time budget it gets the
    seconds the search left (`REMAT_SHARE` of them); under an evaluation budget, all it needs.
    """
    graph, capacity = problem.graph, problem.machine.capacity
    order, placement = result.solution.order, result.solution.placement
    if problem.objective is Objective.MAKESPAN and result.feasible:
        return _noted(result, "remat: the schedule fits, and recomputing only adds seconds")
    if problem.objective is Objective.MAKESPAN:
        limit = math.inf if max_overhead is None else max_overhead
    else:
        limit = DEFAULT_MAX_OVERHEAD if max_overhead is None else max_overhead
        capacity = None
    solution, evaluations = greedy_recompute(
        graph,
        order,
        limit,
        capacity=capacity,
        seconds=math.inf if seconds is None else seconds,
        machine=problem.machine,
        placement=placement,
    )
    before = result.score
    if np.array_equal(solution.order, order):  # nothing lowered the peak
        within = f" within {limit:.0%} more seconds" if math.isfinite(limit) else ""
        return _noted(result, f"remat: no recomputation{within} lowers the peak")
    score = problem.scorer.score(solution)
    again = len(solution.order) - len(order)
    longer = score.makespan / before.makespan - 1 if before.makespan > 0 else 0.0
    note = (
        f"remat: {again:,} ops run or copies transferred again ({longer:.1%} longer); peak "
        f"memory {before.peak_memory:,} -> {score.peak_memory:,} bytes, makespan "
        f"{before.makespan:.6g} -> {score.makespan:.6g} s"
    )
    record = dict(result.solution.solver)
    record["notes"] = [*record.get("notes", []), note]
    record["remat"] = {"max_overhead": limit, "evaluations": evaluations}
    value = score.makespan if problem.objective is Objective.MAKESPAN else score.peak_memory
    return _rescored(result, _claimed(problem, solution, record), score, value, evaluations)


def _rescored(
    result: Result, solution: Solution, score: Score, value: float, evaluations: int = 0
) -> Result:
    """`result` holding `solution`, changed after the search (fused, recomputed) and re-scored.

    No solver's bound holds for it any more; `_with_bounds` quotes one that does.
    """
    return replace(
        result,
        solution=solution,
        score=score,
        value=float(value),
        feasible=score.feasible,
        status=(
            result.status
            if result.status == "interrupted"
            else "feasible"
            if score.feasible
            else "over-capacity"
        ),
        evaluations=result.evaluations + evaluations,
        lower_bound=None,
    )


def _less_spent(budget: Budget, started: float) -> Budget:
    """`budget` less the seconds spent since `started`, so that the whole call keeps to it.

    Making a learned solver imports torch and loads its policy (seconds on a busy machine)
    before its search starts the budget's clock. A budget already spent leaves the solver its
    first candidate.
    """
    if budget.seconds is None:
        return budget
    return replace(budget, seconds=max(budget.seconds - (time.perf_counter() - started), 1e-3))


def _timed(result: OptimizeResult, seconds: float) -> OptimizeResult:
    """`result` with the seconds of the whole call, in the result and the solution's record.

    The search, fusing after it and the bounds: what the user waited for.
    """
    record = {**result.solution.solver, "seconds": round(seconds, 6)}
    return replace(result, seconds=seconds, solution=replace(result.solution, solver=record))


def _fused(
    problem: Problem, result: Result, policy: str, evaluations: int | None, seed: int
) -> Result:
    """`result` with its solution fused by `policy` and re-scored.

    When fusing would leave the solution worse on the objective, or over capacity where it was
    not, `result` stays as it was, with a note saying what fusing would have done: a policy's
    groups are a heuristic's guess, and a user asking for fusion wants the better program.
    `_with_bounds` then quotes a bound that holds with fusion.
    """
    graph, machine = problem.graph, problem.machine
    record = dict(result.solution.solver)
    notes = list(record.get("notes", []))
    before = result.score
    fused = apply_fusion(
        policy, graph, machine, result.solution, problem.objective, evaluations or 1000, seed
    )
    score = problem.scorer.score(fused)
    change = (
        f"{fused.n_groups:,} groups of "
        f"{int((fused.fusion >= 0).sum()) if fused.fusion is not None else 0:,} ops; makespan "
        f"{before.makespan:.6g} -> {score.makespan:.6g} s, peak memory "
        f"{before.peak_memory:,} -> {score.peak_memory:,} bytes"
    )
    value = score.makespan if problem.objective is Objective.MAKESPAN else score.peak_memory
    if (not score.feasible, value) > (not result.feasible, result.value):
        worse = "over capacity" if not score.feasible else f"worse on {problem.objective.value}"
        return _noted(
            result,
            f"fusion {policy}: kept the solution without groups; fusing it ({change}) would "
            f"leave it {worse}",
        )
    notes.append(f"fusion {policy}: {change}")
    solution = replace(
        fused,
        objective={"peak_memory": score.peak_memory, "makespan": score.makespan},
        solver={**record, "fusion": policy, "notes": notes},
    )
    return _rescored(result, solution, score, value)


def _noted(result: Result, note: str) -> Result:
    """`result` with one more note in its solution's solver record."""
    record = dict(result.solution.solver)
    record["notes"] = [*record.get("notes", []), note]
    return replace(result, solution=replace(result.solution, solver=record))


def _claimed(problem: Problem, solution: Solution, record: dict[str, object]) -> Solution:
    """`solution` with its exact objective, the solver's record and the machine filled in."""
    score = problem.scorer.score(solution)
    return replace(
        solution,
        objective={"peak_memory": score.peak_memory, "makespan": score.makespan},
        solver=record,
        machine=problem.machine.to_json(),
    )


def _with_bounds(problem: Problem, result: Result) -> OptimizeResult:
    """`result` with its bound, gap, excess over the capacity and infeasibility proof.

    A solution fused after the search (`_fused`) is quoted a bound that holds with fusion, since
    fusion can beat the others; a problem that searches fusion has such bounds already.
    """
    bound: float = (
        problem.peak_memory_bound
        if problem.objective is Objective.PEAK_MEMORY
        else problem.lower_bound
    )
    if result.solution.n_groups and not problem.fusion:
        n_devices = problem.machine.n_devices
        bound = (
            fused_makespan_lower_bound(problem.graph, n_devices)
            if problem.objective is Objective.MAKESPAN
            else float(fused_peak_memory_lower_bound(problem.graph, n_devices))
        )
    elif result.lower_bound is not None:
        bound = max(bound, result.lower_bound)
    excess, proof = 0, None
    capacity = problem.machine.capacity
    if not result.feasible and capacity is not None:
        excess = sum(max(peak - capacity, 0) for peak in result.score.peak_memory_per_device)
        proof = capacity_proof(problem.graph, capacity)
    return OptimizeResult(
        **{field.name: getattr(result, field.name) for field in fields(Result)},
        bound=bound,
        gap=result.value / bound - 1.0 if bound > 0 else 0.0,
        excess=excess,
        proof=proof,
    )


def capacity_proof(graph: Graph, capacity: int) -> str | None:
    """Why no placement fits `capacity` bytes per device: an op whose step alone holds more.

    Returns "op 'NAME' alone holds N bytes at its step", or None when every op's step fits.
    """
    step = op_step_memory(graph)
    if not step.size or step.max() <= capacity:
        return None
    heaviest = int(step.argmax())
    return f"op {graph.op_names[heaviest]!r} alone holds {int(step[heaviest]):,} bytes at its step"
