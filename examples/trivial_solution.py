"""Write the plain baseline solution of a graph: round-robin placement, topological order.

    python examples/trivial_solution.py graph.json solution.json --devices 2

This is what a compiler does without optimizing; `graphopt score` then checks and scores it.
"""

from __future__ import annotations

import argparse

import numpy as np

import graphopt


def main(argv: list[str] | None = None) -> None:
    """Reads a graph, places ops round-robin in topological order, writes the scored solution."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph")
    parser.add_argument("solution")
    parser.add_argument("--devices", type=int, default=2)
    args = parser.parse_args(argv)

    graph = graphopt.load_graph(args.graph)
    machine = graphopt.Machine(n_devices=args.devices)
    placement = np.empty(graph.n_ops, dtype=np.int32)
    placement[graph.topological_order] = np.arange(graph.n_ops) % args.devices
    solution = graphopt.topological_schedule(graph, placement, args.devices)
    result = graphopt.score(graph, solution, machine)
    solution = graphopt.Solution(
        placement=solution.placement,
        order=solution.order,
        n_devices=args.devices,
        objective={"peak_memory": result.peak_memory, "makespan": result.makespan},
        solver={"name": "round_robin_topological"},
        machine=machine.to_json(),
    )
    graphopt.save_solution(graph, solution, args.solution)
    print(
        f"wrote {args.solution}: peak memory {result.peak_memory:,} B, "
        f"makespan {result.makespan:.4f} s"
    )


if __name__ == "__main__":
    main()
