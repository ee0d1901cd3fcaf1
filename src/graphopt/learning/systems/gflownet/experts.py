"""Schedules found by search as off-policy training trajectories: learning from search.

A GFlowNet loss (log-partition variance, trajectory balance) holds for any trajectory, not only
for those the policy sampled, so a training step may add schedules that a search found
(Kim et al. 2023, "Local search GFlowNets"; the expert trajectories of GFlowNet training on
combinatorial problems). Sampled alone, the policy learns only from what it already finds; a
few schedules better than its samples show it where the reward is. Measured so far, added to
the log-partition variance loss, they made the shipped policy worse (its model card: their
rewards dominate the batch's variance), so `ExpertConfig.trajectories` is 0 by default.

The search here is a randomized HEFT: HEFT's earliest-finish list scheduling on its upward
ranks times log-normal noise (`heft_schedule` with a `priority`), the first candidate plain
HEFT. Its best distinct schedules on the step's proxy become trajectories: a schedule is a
placement and an order per device, and any interleaving of the device orders that respects
the DAG builds the same proxy schedule (each op starts when its device is free and its inputs
are there, whatever was added elsewhere in between). `interleavings` follows the search's own
op order, as far as the policy's candidates (the window of ready ops with the largest bottom
levels) allow; a schedule no interleaving reaches that way is left out. A random interleaving
would build the same schedules but teach the policy to add ops in an order it cannot see the
reason for (measured: it lowered the sampled speedups).
"""

from __future__ import annotations

import numpy as np
import torch

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.graph import Graph
from graphopt.learning.systems.gflownet.config import ExpertConfig
from graphopt.learning.systems.gflownet.env import PartialSchedules
from graphopt.solvers.list_scheduling import heft_schedule, upward_ranks


def randomized_heft(
    graph: Graph, machine: Machine, count: int, noise: float, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` HEFT schedules (placement, op order): plain HEFT first, then perturbed ranks."""
    ranks = upward_ranks(graph, machine)
    found = [heft_schedule(graph, machine)]
    for _ in range(count - 1):
        factor = np.exp(noise * rng.standard_normal(graph.n_ops))
        found.append(heft_schedule(graph, machine, priority=ranks * factor))
    return found


def interleavings(
    graph: Graph, machine: Machine, schedules: list[tuple[np.ndarray, np.ndarray]], window: int
) -> tuple[PartialSchedules, torch.Tensor, np.ndarray]:
    """Trajectories that build each (placement, op order) within the policy's window.

    Each step adds, among the schedule's candidates (`PartialSchedules.candidates(window)`)
    that are next in their device's order, the one earliest in the op order: the op order
    itself whenever its next op is a candidate (each op order is a topological order, so its
    next op is always ready and next on its device).

    Returns:
        the complete schedules; [K, n] int64 actions (op * d + device); [K] bool whether each
        trajectory builds its schedule (False: at some step no candidate was next on its
        device, and the rest of that row is filler).
    """
    n, d, count = graph.n_ops, machine.n_devices, len(schedules)
    built = PartialSchedules(graph, machine, count)
    placement = np.stack([p for p, _ in schedules]).astype(np.int64)
    position = np.empty((count, n), np.int64)
    for b, (_, order) in enumerate(schedules):
        position[b, order] = np.arange(n)
    # an op is next on its device when every op before it there is added
    before = np.full((count, n), -1, np.int64)
    for b, (p, order) in enumerate(schedules):
        last = np.full(d, -1, np.int64)
        for op in order.tolist():
            before[b, op] = last[p[op]]
            last[p[op]] = op
    reached = np.ones(count, np.bool_)
    actions = np.empty((count, n), np.int64)
    rows = np.arange(count)
    for step in range(n):
        ops, _ = built.candidates(window)
        safe = np.maximum(ops, 0)
        previous = np.take_along_axis(before, safe, axis=1)
        done = np.take_along_axis(built.added, np.maximum(previous, 0), axis=1)
        nexts = (ops >= 0) & ((previous < 0) | done)
        rank = np.where(nexts, np.take_along_axis(position, safe, axis=1), n)
        reached &= nexts.any(axis=1)
        chosen = ops[rows, rank.argmin(axis=1)]  # the first candidate when none is next
        devices = placement[rows, chosen]
        actions[:, step] = chosen * d + devices
        built.step(chosen, devices)
    return built, torch.from_numpy(actions), reached


def expert_trajectories(
    graph: Graph,
    machine: Machine,
    scorer: Scorer,
    config: ExpertConfig,
    window: int,
    rng: np.random.Generator,
) -> tuple[torch.Tensor, np.ndarray]:
    """The search's best distinct reachable schedules as trajectories, best first.

    Returns:
        [E, n] actions and [E] their proxy speedups, E <= `config.trajectories`.
    """
    found = randomized_heft(graph, machine, config.candidates, config.noise, rng)
    built, actions, reached = interleavings(graph, machine, found, window)
    speedups = built.speedups(scorer)
    kept: list[int] = []
    seen: set[bytes] = set()
    for b in np.argsort(-speedups, kind="stable").tolist():
        key = built.device[b].tobytes() + _device_orders(built, b)
        if reached[b] and key not in seen and len(kept) < config.trajectories:
            seen.add(key)
            kept.append(b)
    return actions[kept], speedups[kept]


def _device_orders(built: PartialSchedules, b: int) -> bytes:
    """Schedule b's ops in device-major order (what, with its placement, makes it distinct)."""
    order = built.order[b]
    return order[np.argsort(built.device[b][order], kind="stable")].tobytes()
