"""The graph as numba kernels take it: one NamedTuple of its arrays, each of one fixed dtype.

Every kernel that walks a graph takes a `GraphArrays` (`Graph.arrays`) and reads its fields by
name, so the list of arrays is written once, and since numba compiles a kernel once per set of
argument types, the fixed dtypes (and read-only flags) make that once per kernel for all graphs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class GraphArrays(NamedTuple):
    """A graph's CSR arrays (see `Graph`), all contiguous and read-only."""

    tensor_size: np.ndarray
    """[n_tensors] int64: bytes of each tensor."""
    tensor_producer: np.ndarray
    """[n_tensors] int32: the op that produces each tensor."""
    tensor_persistent: np.ndarray
    """[n_tensors] bool: whether the tensor stays resident on its producer's device."""
    tensor_output: np.ndarray
    """[n_tensors] bool: whether the tensor is a graph output, held on its producer's device from
    its producer's step to the last step."""
    consumer_ptr: np.ndarray
    """[n_tensors + 1] int64: CSR offsets into `consumer_op`."""
    consumer_op: np.ndarray
    """[n_edges] int32: the distinct consumers of each tensor, ascending."""
    op_input_ptr: np.ndarray
    """[n_ops + 1] int64: CSR offsets into `op_input_tensor`."""
    op_input_tensor: np.ndarray
    """[n_edges] int32: the distinct input tensors of each op, ascending."""
    op_output_ptr: np.ndarray
    """[n_ops + 1] int64: CSR offsets into `op_output_tensor`."""
    op_output_tensor: np.ndarray
    """[n_tensors] int32: the tensors each op produces, ascending."""
    op_runtime: np.ndarray
    """[n_ops] float64: seconds each op runs."""
    op_temp_memory: np.ndarray
    """[n_ops] int64: scratch bytes each op holds while it runs."""


_u = np.uint64
"""Array indices are cast to unsigned so that numba skips negative-index wraparound (which cost
the scorer about a quarter of its time); shared by the kernels. Only for indices already known
to be in range."""


class FusionArrays(NamedTuple):
    """What scoring fusion groups reads beside `GraphArrays` (docs/format.md section 13)."""

    op_fusion: np.ndarray
    """[n_ops] int8 index of each op's class in `graph.FUSION_CLASSES` (0: none)."""
    op_compute_time: np.ndarray
    """[n_ops] float64 arithmetic seconds of each op at the device's peak."""
    topological_position: np.ndarray
    """[n_ops] int64 position of each op in the graph's topological order (prunes the
    convexity search)."""
    op_successor_ptr: np.ndarray
    """[n_ops + 1] int64 CSR offsets into `op_successor`."""
    op_successor: np.ndarray
    """[n_edges] int32 consumers of each op's outputs (with repeats)."""
    op_predecessor_ptr: np.ndarray
    """[n_ops + 1] int64 CSR offsets into `op_predecessor`."""
    op_predecessor: np.ndarray
    """[n_edges] int32 producers of each op's inputs (with repeats)."""
    memory_bandwidth: float
    """Bytes/s of the device's main memory (NaN when the graph has no `kernel`)."""
    launch_overhead: float
    """Seconds per kernel launch (NaN when the graph has no `kernel`)."""
