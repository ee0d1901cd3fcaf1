"""REGAL's graph features (paper 001 appendix A.1).

Per op: the sum of its input tensor sizes, the sum of its output tensor sizes (and of those that
are persistent), its temp memory, its runtime, and an aggregation of a short uniform BRKGA run
(400 evaluations, counted inside the search's budget): the expected device of the op and its
expected position in the schedule over the run's last population. Per edge (one per producer,
tensor, consumer triple, so parallel edges stay): the tensor's size and whether it is persistent.
Memory features are divided by the graph's largest memory number, runtimes by its largest
runtime, so that graphs of any scale look alike. The op with the most memory is pinned to
device 0 and flagged (symmetry breaking).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.ir.graph import Graph
from graphopt.solvers.base import Problem
from graphopt.solvers.brkga import FinalPopulation
from graphopt.solvers.random_keys import RandomKeyDecoder

FEATURE_EVALUATIONS = 400
"""Evaluations of the uniform BRKGA run whose last population gives the aggregate features
(the run itself is the environment's: `regal.env.feature_population`)."""

FEATURE_SET = "regal-a1-v1"
"""Name of the feature set below; checkpoints record it and refuse another."""


def node_feature_names(n_devices: int) -> tuple[str, ...]:
    """Names of the node feature columns, in order."""
    return (
        "input_bytes",
        "output_bytes",
        "persistent_output_bytes",
        "temp_memory",
        "runtime",
        *(f"expected_device_{b}" for b in range(n_devices)),
        "expected_position",
        "pinned_to_device_0",
    )


EDGE_FEATURE_NAMES = ("tensor_bytes", "persistent")


@dataclass(frozen=True, eq=False)
class GraphFeatures:
    """What a policy reads of one graph.

    Shapes:
        node: [n_ops, F] float32 (columns: `node_feature_names`);
        edge_index: [2, n_edges] int64 producer -> consumer;
        edge: [n_edges, 2] float32 (columns: `EDGE_FEATURE_NAMES`);
        topological_rank: [n_ops] int64 position of each op in a topological order (GAS).
    """

    node: np.ndarray
    edge_index: np.ndarray
    edge: np.ndarray
    topological_rank: np.ndarray


@dataclass(frozen=True, eq=False)
class FeatureRun:
    """The features of a problem and the BRKGA run they aggregate (REGAL continues from it)."""

    features: GraphFeatures
    population: FinalPopulation


def static_features(graph: Graph, pins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The node features that need no search, and the edge features.

    Args:
        graph: the graph.
        pins: [n_ops] device pins of the decoder (-1 free); pinned ops are flagged.

    Returns:
        node [n_ops, 6] (input, output, persistent output, temp, runtime, pinned) and
        edge [n_edges, 2] float32 arrays.
    """
    size = graph.tensor_size.astype(np.float64)
    inputs = np.zeros(graph.n_ops)
    np.add.at(inputs, graph.consumer_op, size[graph.edge_tensor])
    outputs = np.bincount(graph.tensor_producer, weights=size, minlength=graph.n_ops)
    persistent = np.bincount(
        graph.tensor_producer, weights=size * graph.tensor_persistent, minlength=graph.n_ops
    )
    temp = graph.op_temp_memory.astype(np.float64)
    largest = max(inputs.max(initial=0), outputs.max(initial=0), temp.max(initial=0), 1.0)
    runtime = graph.op_runtime / max(float(graph.op_runtime.max(initial=0.0)), 1e-30)
    node = np.stack(
        [
            inputs / largest,
            outputs / largest,
            persistent / largest,
            temp / largest,
            runtime,
            (pins >= 0).astype(np.float64),
        ],
        axis=1,
    )
    edge = np.stack(
        [size[graph.edge_tensor] / largest, graph.tensor_persistent[graph.edge_tensor]], axis=1
    )
    return node.astype(np.float32), edge.astype(np.float32)


def population_statistics(
    decoder: RandomKeyDecoder, keys: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Expected device and expected schedule position of each op over a population.

    Returns:
        [n_ops, d] share of the population placing each op on each device, and [n_ops]
        mean rank of each op among the ops of the schedule, scaled to [0, 1].
    """
    layout = decoder.layout
    n_ops, d = layout.n_ops, layout.n_devices
    decoded = decoder.evaluate(keys)
    m = keys.shape[0]
    cells = np.arange(n_ops) * d + decoded.placements.astype(np.int64)
    device = np.bincount(cells.reshape(-1), minlength=n_ops * d).reshape(n_ops, d).astype(float)
    # Each schedule lists every op once, among its transfers: the ops of row r, in order, are
    # the entries < n_ops of its first lengths[r] events.
    events = decoded.orders[:, : decoded.lengths.max(initial=0)]
    listed = (events < n_ops) & (np.arange(events.shape[1]) < decoded.lengths[:, None])
    ranks = np.arange(n_ops, dtype=np.float64) / max(n_ops - 1, 1)
    position = np.bincount(events[listed], weights=np.tile(ranks, m), minlength=n_ops)
    count = max(m, 1)
    return device / count, position / count


def build_features(problem: Problem, population: FinalPopulation) -> FeatureRun:
    """The features of a problem given its feature run's last population (no evaluation)."""
    decoder = RandomKeyDecoder(problem)
    graph = problem.graph
    static, edge = static_features(graph, decoder.pins)
    device, position = population_statistics(decoder, population.keys)
    node = np.concatenate(
        [
            static[:, :5],
            device.astype(np.float32),
            position[:, None].astype(np.float32),
            static[:, 5:],
        ],
        axis=1,
    )
    rank = np.empty(graph.n_ops, dtype=np.int64)
    rank[graph.topological_order] = np.arange(graph.n_ops)
    features = GraphFeatures(node, np.array(graph.edge_index, dtype=np.int64), edge, rank)
    return FeatureRun(features, population)
