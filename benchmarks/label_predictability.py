"""Where a search's labels leave the partition hint: how predictable imitation targets are.

    .venv/bin/python benchmarks/label_predictability.py LABELS [--dataset SPEC]

For each labelled graph (`graphopt dataset label`), the label's devices are renamed to agree
best with the hint (`objectives.imitation.best_renaming` on the hint's one-hot), and the ops
the label moves off the hint are described: their share, how many lie on the hint's cut (an
edge to an op on another hinted device) against the share of cut ops overall, how far the
others are from the cut (undirected hops), and how long their runs are along a topological
order. Moves concentrated on the cut, or in long runs (whole blocks), would be a pattern a
policy can learn; scattered short runs off the cut are not one that per-op features single out
(issue 45, `docs/results/learned-vs-auto/`).
"""

from __future__ import annotations

import argparse
from collections import deque
from dataclasses import replace

import numpy as np
import torch

from graphopt.ir.graph import Graph
from graphopt.learning.labels import Labels
from graphopt.learning.objectives.imitation import best_renaming
from graphopt.learning.placement.env import PlacementEnv
from graphopt.learning.placement.hint import partition_hint

SCHEDULERS = ("ready-queue", "timeline")
"""The hint's schedulers: the shipped GDP config's."""
FAR = 6
"""Hops from the cut counted as 'far' (the histogram's last bin)."""


def hops_from(graph: Graph, sources: np.ndarray) -> np.ndarray:
    """Undirected hops from each op to the nearest op of `sources` (FAR when FAR or more)."""
    edges = np.asarray(graph.edge_index)
    neighbours: list[list[int]] = [[] for _ in range(graph.n_ops)]
    for a, b in edges.T.tolist():
        neighbours[a].append(b)
        neighbours[b].append(a)
    distance = np.full(graph.n_ops, FAR)
    distance[sources] = 0
    queue = deque(np.flatnonzero(sources).tolist())
    while queue:
        op = queue.popleft()
        for other in neighbours[op]:
            if distance[other] > distance[op] + 1:
                distance[other] = distance[op] + 1
                queue.append(other)
    return distance


def describe(graph: Graph, hint: np.ndarray, label: np.ndarray, n_devices: int) -> dict:
    """The moves of `label` off `hint` on one graph."""
    one_hot = torch.nn.functional.one_hot(torch.from_numpy(hint), n_devices).double()
    renamed = best_renaming(torch.log(one_hot * 0.98 + 0.02 / n_devices), label, n_devices)[label]
    moved = renamed != hint
    edges = np.asarray(graph.edge_index)
    cut_edges = hint[edges[0]] != hint[edges[1]]
    on_cut = np.zeros(graph.n_ops, dtype=bool)
    on_cut[edges[0][cut_edges]] = True
    on_cut[edges[1][cut_edges]] = True
    along = moved[graph.topological_order]
    runs = int(along[0]) + int(np.sum(along[1:] & ~along[:-1])) if along.size else 0
    return {
        "ops": graph.n_ops,
        "moved": int(moved.sum()),
        "cut": int(on_cut.sum()),
        "moved_on_cut": int((moved & on_cut).sum()),
        "runs": runs,
        "hops": np.bincount(hops_from(graph, on_cut)[moved], minlength=FAR + 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("labels")
    parser.add_argument("--dataset", default=None, help="the labelled dataset (default: theirs)")
    args = parser.parse_args()
    labels = Labels.open(args.labels)
    config = labels.config if args.dataset is None else replace(labels.config, dataset=args.dataset)
    machine = config.machine()
    totals: dict = {"ops": 0, "moved": 0, "cut": 0, "moved_on_cut": 0, "runs": 0, "hops": 0}
    for split in config.splits:
        graphs = config.graphs(split)
        for index in sorted(labels.places(split)):
            graph = graphs[index]
            hint = partition_hint(PlacementEnv(graph, machine, schedulers=SCHEDULERS))
            label = labels.placement(split, index, graph)
            row = describe(graph, hint.astype(np.int64), label, machine.n_devices)
            print(
                f"{graph.name[:28]:28s} {row['ops']:6d} ops  moved {row['moved'] / row['ops']:.3f}"
                f"  on the cut: {row['cut'] / row['ops']:.3f} of ops,"
                f" {row['moved_on_cut'] / max(1, row['moved']):.2f} of moves"
                f"  runs {row['runs']} (mean {row['moved'] / max(1, row['runs']):.1f} ops)"
            )
            totals = {key: totals[key] + row[key] for key in totals}
    print(
        f"all: {totals['moved'] / totals['ops']:.3f} of ops moved; the cut holds "
        f"{totals['cut'] / totals['ops']:.3f} of ops and "
        f"{totals['moved_on_cut'] / max(1, totals['moved']):.3f} of moves; mean run "
        f"{totals['moved'] / max(1, totals['runs']):.2f} ops along a "
        f"topological order; hops of moved ops from the cut (0..{FAR - 1}, {FAR}+): "
        f"{totals['hops'].tolist()}"
    )


if __name__ == "__main__":
    main()
