"""Solutions as arrays: a placement vector and one total order of op and transfer events.

This is the one decision encoding every optimizer decodes to (docs/format.md section 2). An event
is one int64 code, independent of the placement so that a batch of solutions shares one encoding:

- op ``j`` is code ``j``;
- the transfer of tensor ``t`` to device ``b`` is code ``n_ops + t * n_devices + b``.

Fusion groups (section 13) are one more array beside them: the group of each op, -1 for an op that
runs alone, so a search can carry them next to its placements and orders.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphopt.errors import SolutionError
from graphopt.ir.graph import Graph
from graphopt.limits import MAX_DEVICES

MAX_GROUP_OPS = 64
"""Most ops one fusion group may hold (docs/format.md section 13)."""


def transfer_code(
    graph: Graph, tensor: np.ndarray | int, device: np.ndarray | int, n_devices: int
) -> Any:
    """Event code of the transfer of `tensor` to `device`."""
    return graph.n_ops + np.asarray(tensor, dtype=np.int64) * n_devices + device


def decode_event(graph: Graph, code: int, n_devices: int) -> tuple[str, int, int]:
    """Splits an event code into ('op', op, -1) or ('transfer', tensor, device)."""
    if code < graph.n_ops:
        return "op", int(code), -1
    tensor, device = divmod(int(code) - graph.n_ops, n_devices)
    return "transfer", tensor, device


def implied_transfers(graph: Graph, placement: np.ndarray, n_devices: int) -> np.ndarray:
    """Sorted codes of the transfers a placement implies: one per tensor and consumer device.

    Args:
        graph: the graph.
        placement: [n_ops] device of each op.
        n_devices: number of devices d.

    Returns:
        [n_transfers] int64 event codes, ascending (by tensor, then device).
    """
    placement = np.asarray(placement, dtype=np.int64)
    source = placement[graph.tensor_producer[graph.edge_tensor]]
    target = placement[graph.consumer_op]
    foreign = source != target
    codes = transfer_code(graph, graph.edge_tensor[foreign], target[foreign], n_devices)
    return np.unique(codes)


@dataclass(frozen=True, eq=False)
class Solution:
    """A placement and one total order of events, plus what the solver claims and who made it.

    Shapes:
        placement: [n_ops] int32 device of each op.
        order: [n_events] int64 event codes (module docstring), n_events = n_ops + n_transfers.
        fusion: None (no op is fused) or [n_ops] int32 group of each op (-1: runs alone); the
            groups are renumbered 0, 1, ... in the order of their ids, so no id is skipped.

    `remat` says the schedule may recompute (docs/format.md section 15): a recomputable op may
    run more than once and a transfer may be repeated, each run making new instances of its
    outputs. Without it every op runs exactly once (section 4).
    """

    placement: np.ndarray
    order: np.ndarray
    n_devices: int
    objective: Mapping[str, Any] = field(default_factory=dict)
    solver: Mapping[str, Any] = field(default_factory=dict)
    machine: Mapping[str, Any] = field(default_factory=dict)
    fusion: np.ndarray | None = None
    remat: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.n_devices, bool) or not isinstance(self.n_devices, int | np.integer):
            raise SolutionError(f"devices must be an integer >= 1, got {self.n_devices!r}")
        if not 1 <= self.n_devices <= MAX_DEVICES:
            raise SolutionError(
                f"devices must be an integer from 1 to {MAX_DEVICES}, got {self.n_devices}"
            )
        for name, dtype in (("placement", np.int32), ("order", np.int64)):
            array = np.array(getattr(self, name), dtype=dtype).reshape(-1)
            array.flags.writeable = False
            object.__setattr__(self, name, array)
        object.__setattr__(self, "n_devices", int(self.n_devices))
        if self.fusion is not None:
            object.__setattr__(self, "fusion", _group_ids(self.fusion))

    @property
    def n_groups(self) -> int:
        """Number of fusion groups (0 without fusion)."""
        return 0 if self.fusion is None else int(self.fusion.max(initial=-1)) + 1

    def groups(self) -> list[np.ndarray]:
        """The ops of each fusion group, ascending, in group order."""
        if self.fusion is None:
            return []
        by_group = np.argsort(self.fusion, kind="stable")
        bounds = np.searchsorted(self.fusion[by_group], np.arange(self.n_groups + 1))
        return [by_group[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _group_ids(fusion: Any) -> np.ndarray:
    """Read-only int32 group ids renumbered densely (-1 kept); refuses ids below -1."""
    ids = np.array(fusion, dtype=np.int64).reshape(-1)
    if ids.size and ids.min() < -1:
        raise SolutionError(
            f"fusion: group ids must be >= 0, or -1 for an unfused op, got {ids.min()}"
        )
    used, dense = np.unique(ids, return_inverse=True)
    if used.size and used[0] == -1:
        dense = dense - 1
    grouped = np.asarray(dense, dtype=np.int32).reshape(-1)
    grouped.flags.writeable = False
    return grouped


def topological_schedule(graph: Graph, placement: np.ndarray, n_devices: int) -> Solution:
    """The plain valid order: ops in topological order, each followed by its outgoing transfers.

    This is what a compiler does without scheduling: a deterministic baseline and a valid
    starting point for searches.
    """
    placement = np.asarray(placement, dtype=np.int64)
    transfers = implied_transfers(graph, placement, n_devices)
    transfer_tensor = (transfers - graph.n_ops) // n_devices
    producer = graph.tensor_producer[transfer_tensor]
    position = np.empty(graph.n_ops, dtype=np.int64)
    position[graph.topological_order] = np.arange(graph.n_ops)
    # Sort all events by (position of the op that makes them ready, ops before transfers, code).
    keys = np.concatenate([position, position[producer]])
    kinds = np.concatenate([np.zeros(graph.n_ops, np.int64), np.ones(transfers.shape[0], np.int64)])
    codes = np.concatenate([np.arange(graph.n_ops, dtype=np.int64), transfers])
    order = codes[np.lexsort((codes, kinds, keys))]
    return Solution(placement=placement, order=order, n_devices=n_devices)


def random_schedule(
    graph: Graph, placement: np.ndarray, n_devices: int, rng: np.random.Generator
) -> Solution:
    """A valid order drawn by repeatedly running a uniformly random ready event.

    Used to test scorers on orders that interleave transfers anywhere they may go, and as
    the random-search baseline's sampler.
    """
    placement = np.asarray(placement, dtype=np.int64)
    transfers = implied_transfers(graph, placement, n_devices)
    n_ops = graph.n_ops
    n_events = n_ops + transfers.shape[0]
    transfer_slot = {int(code): n_ops + i for i, code in enumerate(transfers)}
    codes = np.concatenate([np.arange(n_ops, dtype=np.int64), transfers])
    # Event DAG: op j waits for each input's producer (same device) or transfer (other device).
    waiting = np.zeros(n_events, dtype=np.int64)
    unlocks: list[list[int]] = [[] for _ in range(n_events)]
    for j in range(n_ops):
        for t in graph.inputs(j):
            producer = int(graph.tensor_producer[t])
            if placement[producer] == placement[j]:
                unlocks[producer].append(j)
            else:
                unlocks[transfer_slot[n_ops + int(t) * n_devices + int(placement[j])]].append(j)
            waiting[j] += 1
    for slot, code in enumerate(transfers, start=n_ops):
        producer = int(graph.tensor_producer[(int(code) - n_ops) // n_devices])
        unlocks[producer].append(slot)
        waiting[slot] += 1
    ready = [int(e) for e in np.flatnonzero(waiting == 0)]
    order = np.empty(n_events, dtype=np.int64)
    draws = rng.random(n_events)
    for step in range(n_events):
        pick = int(draws[step] * len(ready))
        ready[pick], ready[-1] = ready[-1], ready[pick]
        event = ready.pop()
        order[step] = codes[event]
        for nxt in unlocks[event]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                ready.append(nxt)
    return Solution(placement=placement, order=order, n_devices=n_devices)
