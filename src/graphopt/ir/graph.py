"""The graph IR: one immutable computation graph on flat numpy arrays.

A graph is ops and tensors (docs/format.md section 1): each tensor has one producer op and a set of
consumer ops. Everything is stored as contiguous arrays in CSR form (tensor -> consumers,
op -> inputs, op -> outputs, op -> successors/predecessors), so numba kernels read it directly and
torch gets it through `torch.from_numpy` without per-node Python work.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from graphopt._messages import describe
from graphopt.errors import GraphError
from graphopt.ir._algorithms import longest_path, reachable, topological_order
from graphopt.ir.arrays import FusionArrays, GraphArrays
from graphopt.limits import MAX_ITEMS, MAX_TOTAL_BYTES

INDEX = np.int32
"""dtype of op and tensor indices inside the IR."""
OFFSET = np.int64
"""dtype of CSR offsets."""
SIZE = np.int64
"""dtype of byte sizes."""

OP_FIELDS = ("name", "runtime", "temp_memory")
"""Op fields of the format held in the graph's arrays; an op's `op_attrs` hold the others."""
TENSOR_FIELDS = ("name", "size", "producer", "consumers", "persistent", "output")
"""Tensor fields of the format held in the graph's arrays; `tensor_attrs` hold the others."""
GRAPH_FIELDS = ("format", "name", "ops", "tensors")
"""Graph-level fields of the format; `attrs` holds the others."""
FUSION_CLASSES = ("none", "elementwise", "reduction", "contraction")
"""An op's fusion class (docs/format.md section 13, op field `fusion`); `Graph.op_fusion` holds
each op's index in this tuple."""
RANDOM_OP_WORDS = ("dropout", "bernoulli", "rand", "normal", "uniform", "multinomial")
"""Words of an op `type` (lower-cased) that mark a random op: not recomputable unless the op
says `deterministic` (docs/format.md section 15); `aten.native_dropout`, ONNX `RandomNormal`."""
KERNEL_FIELDS = ("memory_bandwidth", "launch_overhead")
"""Fields of the graph's `kernel` object: the device's main-memory bytes/s and seconds per
kernel launch (section 13)."""


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.flags.writeable = False
    return array


def _csr_by_key(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Groups item indices by key with a stable sort; returns (ptr [n_keys + 1], items)."""
    items = np.argsort(keys, kind="stable")
    ptr = np.zeros(n_keys + 1, dtype=OFFSET)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=ptr[1:])
    return ptr, items


@dataclass(frozen=True, eq=False)
class Graph:
    """An immutable computation graph (docs/format.md section 1).

    Build one with `Graph.from_arrays` (validates every rule) or the loaders in `graphopt.ir.io`.
    Arrays are read-only; derived structures are computed once and cached.

    Shapes:
        op_runtime: [n_ops] float64 seconds; op_temp_memory: [n_ops] int64 bytes.
        tensor_size: [n_tensors] int64 bytes; tensor_producer: [n_tensors] int32 op index;
        tensor_persistent: [n_tensors] bool; tensor_output: [n_tensors] bool (graph outputs,
        held from their producer's step to the last, docs/format.md section 5).
        consumer_ptr: [n_tensors + 1] int64; consumer_op: [n_edges] int32, the distinct consumers
        of tensor t, ascending, are consumer_op[consumer_ptr[t]:consumer_ptr[t + 1]].
    """

    name: str
    op_names: tuple[str, ...]
    op_runtime: np.ndarray
    op_temp_memory: np.ndarray
    tensor_names: tuple[str, ...]
    tensor_size: np.ndarray
    tensor_producer: np.ndarray
    tensor_persistent: np.ndarray
    tensor_output: np.ndarray
    consumer_ptr: np.ndarray
    consumer_op: np.ndarray
    op_attrs: tuple[Mapping[str, Any], ...] = field(repr=False)
    tensor_attrs: tuple[Mapping[str, Any], ...] = field(repr=False)
    attrs: Mapping[str, Any] = field(repr=False)

    @staticmethod
    def from_arrays(
        name: str,
        op_names: Sequence[str],
        op_runtime: Any,
        tensor_names: Sequence[str],
        tensor_size: Any,
        tensor_producer: Any,
        consumer_ptr: Any,
        consumer_op: Any,
        *,
        op_temp_memory: Any = None,
        tensor_persistent: Any = None,
        tensor_output: Any = None,
        op_attrs: Sequence[Mapping[str, Any]] | None = None,
        tensor_attrs: Sequence[Mapping[str, Any]] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> Graph:
        """Validates arrays against the contract and builds a graph.

        Repeated consumers of a tensor count once (the contract's rule), so they are merged.

        Raises:
            GraphError: naming the first offending op or tensor and the rule it breaks.
        """
        op_names = tuple(op_names)
        tensor_names = tuple(tensor_names)
        n_ops, n_tensors = len(op_names), len(tensor_names)
        runtime = _as_array(op_runtime, np.float64, n_ops, "op_runtime")
        temp = _as_array(
            0 if op_temp_memory is None else op_temp_memory, SIZE, n_ops, "op_temp_memory"
        )
        size = _as_array(tensor_size, SIZE, n_tensors, "tensor_size")
        producer = _as_array(tensor_producer, np.int64, n_tensors, "tensor_producer")
        persistent = _as_array(
            False if tensor_persistent is None else tensor_persistent,
            bool,
            n_tensors,
            "tensor_persistent",
        )
        output = _as_array(
            False if tensor_output is None else tensor_output, bool, n_tensors, "tensor_output"
        )
        ptr = _as_array(consumer_ptr, np.int64, n_tensors + 1, "consumer_ptr")
        consumers = _as_array(consumer_op, np.int64, None, "consumer_op")
        for count, what in ((n_ops, "ops"), (n_tensors, "tensors"), (consumers.shape[0], "edges")):
            if count > MAX_ITEMS:
                raise GraphError(
                    f"the graph has {count:,} {what}, more than the limit of 2**30 "
                    "(docs/format.md, limits)"
                )
        if (
            ptr[0] != 0
            or np.any((ptr < 0) | (ptr > consumers.shape[0]))
            or np.any(np.diff(ptr) < 0)
            or ptr[-1] != consumers.shape[0]
        ):
            raise GraphError(
                "consumer_ptr must start at 0, not decrease and end at len(consumer_op)"
            )

        _check_names(op_names, "op")
        _check_names(tensor_names, "tensor")
        _check_runtimes(runtime, op_names)
        _check_bytes(size, temp, tensor_names, op_names)
        both = np.flatnonzero(persistent & output)
        if both.size:
            raise GraphError(
                f"tensor '{tensor_names[both[0]]}': is both persistent and an output; "
                "a tensor is at most one of them"
            )
        bad = np.flatnonzero((producer < 0) | (producer >= n_ops))
        if bad.size:
            t = bad[0]
            raise GraphError(
                f"tensor '{tensor_names[t]}': producer index {producer[t]} is not an op"
            )
        edge_tensor = np.repeat(np.arange(n_tensors, dtype=np.int64), np.diff(ptr))
        bad = np.flatnonzero((consumers < 0) | (consumers >= n_ops))
        if bad.size:
            t = edge_tensor[bad[0]]
            raise GraphError(
                f"tensor '{tensor_names[t]}': consumer index {consumers[bad[0]]} is not an op"
            )
        bad = np.flatnonzero(consumers == producer[edge_tensor])
        if bad.size:
            t = edge_tensor[bad[0]]
            raise GraphError(
                f"tensor '{tensor_names[t]}': lists its producer "
                f"'{op_names[producer[t]]}' as a consumer"
            )

        # Canonical consumer lists: sorted, repeats merged.
        key = edge_tensor * max(n_ops, 1) + consumers
        unique_key = np.unique(key)
        edge_tensor = unique_key // max(n_ops, 1)
        consumers = unique_key % max(n_ops, 1)
        ptr = np.zeros(n_tensors + 1, dtype=OFFSET)
        np.cumsum(np.bincount(edge_tensor, minlength=n_tensors), out=ptr[1:])

        op_extras = [{} for _ in range(n_ops)] if op_attrs is None else list(op_attrs)
        tensor_extras = (
            [{} for _ in range(n_tensors)] if tensor_attrs is None else list(tensor_attrs)
        )
        if len(op_extras) != n_ops or len(tensor_extras) != n_tensors:
            raise GraphError("op_attrs / tensor_attrs must have one mapping per op / tensor")
        _check_attrs(op_extras, OP_FIELDS, "op", op_names)
        _check_attrs(tensor_extras, TENSOR_FIELDS, "tensor", tensor_names)
        _check_attrs([attrs or {}], GRAPH_FIELDS, "graph", [name])
        _check_fusion_fields(op_extras, dict(attrs or {}), op_names)
        if not isinstance(name, str):
            raise GraphError(f"graph name must be a string, got {name!r}")
        graph = Graph(
            name=name,
            op_names=op_names,
            op_runtime=_frozen(runtime),
            op_temp_memory=_frozen(temp),
            tensor_names=tensor_names,
            tensor_size=_frozen(size),
            tensor_producer=_frozen(producer.astype(INDEX)),
            tensor_persistent=_frozen(persistent),
            tensor_output=_frozen(output),
            consumer_ptr=_frozen(ptr),
            consumer_op=_frozen(consumers.astype(INDEX)),
            op_attrs=tuple(op_extras),
            tensor_attrs=tuple(tensor_extras),
            attrs=dict(attrs or {}),
        )
        graph._check_acyclic()
        graph._check_recomputable()
        return graph

    # ----------------------------------------------------------------------------------- sizes
    @property
    def n_ops(self) -> int:
        """Number of ops."""
        return len(self.op_names)

    @property
    def n_tensors(self) -> int:
        """Number of tensors."""
        return len(self.tensor_names)

    @property
    def n_edges(self) -> int:
        """Number of (producer, tensor, consumer) triples, repeated consumers counted once."""
        return int(self.consumer_op.shape[0])

    @property
    def total_runtime(self) -> float:
        """Sum of op runtimes: the single-device makespan that speedup is measured against."""
        return float(self.op_runtime.sum())

    @property
    def total_tensor_size(self) -> int:
        """Sum of tensor sizes in bytes."""
        return int(self.tensor_size.sum())

    # ------------------------------------------------------------------------- derived CSR
    @cached_property
    def edge_tensor(self) -> np.ndarray:
        """[n_edges] int32: the tensor of each (producer, tensor, consumer) edge."""
        return _frozen(
            np.repeat(np.arange(self.n_tensors, dtype=INDEX), np.diff(self.consumer_ptr))
        )

    @cached_property
    def edge_index(self) -> np.ndarray:
        """[2, n_edges] int64 producer -> consumer op pairs, one per edge (PyG's layout)."""
        src = self.tensor_producer[self.edge_tensor].astype(np.int64)
        return _frozen(np.stack([src, self.consumer_op.astype(np.int64)]))

    @cached_property
    def _inputs(self) -> tuple[np.ndarray, np.ndarray]:
        ptr, items = _csr_by_key(self.consumer_op, self.n_ops)
        return _frozen(ptr), _frozen(self.edge_tensor[items])

    @property
    def op_input_ptr(self) -> np.ndarray:
        """[n_ops + 1] int64 CSR offsets into `op_input_tensor`."""
        return self._inputs[0]

    @property
    def op_input_tensor(self) -> np.ndarray:
        """[n_edges] int32: the distinct input tensors of each op, ascending."""
        return self._inputs[1]

    @cached_property
    def _outputs(self) -> tuple[np.ndarray, np.ndarray]:
        ptr, items = _csr_by_key(self.tensor_producer, self.n_ops)
        return _frozen(ptr), _frozen(items.astype(INDEX))

    @property
    def op_output_ptr(self) -> np.ndarray:
        """[n_ops + 1] int64 CSR offsets into `op_output_tensor`."""
        return self._outputs[0]

    @property
    def op_output_tensor(self) -> np.ndarray:
        """[n_tensors] int32: the tensors each op produces, ascending."""
        return self._outputs[1]

    @cached_property
    def arrays(self) -> GraphArrays:
        """The arrays numba kernels read, gathered once: every kernel takes this one tuple."""
        return GraphArrays(
            tensor_size=self.tensor_size,
            tensor_producer=self.tensor_producer,
            tensor_persistent=self.tensor_persistent,
            tensor_output=self.tensor_output,
            consumer_ptr=self.consumer_ptr,
            consumer_op=self.consumer_op,
            op_input_ptr=self.op_input_ptr,
            op_input_tensor=self.op_input_tensor,
            op_output_ptr=self.op_output_ptr,
            op_output_tensor=self.op_output_tensor,
            op_runtime=self.op_runtime,
            op_temp_memory=self.op_temp_memory,
        )

    @cached_property
    def fusion_arrays(self) -> FusionArrays:
        """The arrays that scoring fusion groups reads beside `arrays` (section 13)."""
        ptr, successor = self._successor_edges
        back_ptr, predecessor = self._predecessor_edges
        position = np.empty(self.n_ops, dtype=np.int64)
        position[self.topological_order] = np.arange(self.n_ops)
        bandwidth, launch = self.kernel or (math.nan, math.nan)
        return FusionArrays(
            op_fusion=self.op_fusion,
            op_compute_time=self.op_compute_time,
            topological_position=_frozen(position),
            op_successor_ptr=_frozen(np.ascontiguousarray(ptr, dtype=np.int64)),
            op_successor=_frozen(np.ascontiguousarray(successor, dtype=np.int32)),
            op_predecessor_ptr=_frozen(np.ascontiguousarray(back_ptr, dtype=np.int64)),
            op_predecessor=_frozen(np.ascontiguousarray(predecessor, dtype=np.int32)),
            memory_bandwidth=float(bandwidth),
            launch_overhead=float(launch),
        )

    @cached_property
    def _successor_edges(self) -> tuple[np.ndarray, np.ndarray]:
        ptr, items = _csr_by_key(self.edge_index[0], self.n_ops)
        return ptr, self.edge_index[1][items]

    @cached_property
    def _predecessor_edges(self) -> tuple[np.ndarray, np.ndarray]:
        ptr, items = _csr_by_key(self.edge_index[1], self.n_ops)
        return ptr, self.edge_index[0][items]

    def inputs(self, op: int) -> np.ndarray:
        """Distinct input tensor indices of `op`."""
        return self.op_input_tensor[self.op_input_ptr[op] : self.op_input_ptr[op + 1]]

    def outputs(self, op: int) -> np.ndarray:
        """Tensor indices produced by `op`."""
        return self.op_output_tensor[self.op_output_ptr[op] : self.op_output_ptr[op + 1]]

    def consumers(self, tensor: int) -> np.ndarray:
        """Distinct consumer op indices of `tensor`, ascending."""
        return self.consumer_op[self.consumer_ptr[tensor] : self.consumer_ptr[tensor + 1]]

    def successors(self, op: int) -> np.ndarray:
        """Distinct ops that consume an output of `op`, ascending."""
        ptr, succ = self._successor_edges
        return np.unique(succ[ptr[op] : ptr[op + 1]])

    def predecessors(self, op: int) -> np.ndarray:
        """Distinct ops that produce an input of `op`, ascending."""
        ptr, pred = self._predecessor_edges
        return np.unique(pred[ptr[op] : ptr[op + 1]])

    @cached_property
    def sources(self) -> np.ndarray:
        """Ops with no input tensors (weights, graph inputs, constants)."""
        return _frozen(np.flatnonzero(np.diff(self.op_input_ptr) == 0))

    @cached_property
    def sinks(self) -> np.ndarray:
        """Ops none of whose outputs is consumed (graph outputs)."""
        return _frozen(np.flatnonzero(np.diff(self._successor_edges[0]) == 0))

    # ------------------------------------------------------------------------ algorithms
    @cached_property
    def topological_order(self) -> np.ndarray:
        """[n_ops] int64 ops in a deterministic topological order (Kahn, FIFO, sources by index)."""
        ptr, succ = self._successor_edges
        return _frozen(topological_order(self.n_ops, ptr, succ))

    def reachable_bits(self, forward: bool) -> np.ndarray:
        """Descendants (`forward`) or ancestors of every op, as bit rows.

        Returns [n_ops, ceil(n_ops / 64)] uint64 whose row j has bit k set when op k is a
        descendant (or ancestor) of op j. Not cached: it takes n_ops**2 / 8 bytes.
        """
        order = np.ascontiguousarray(self.topological_order)
        if forward:
            ptr, other = self._successor_edges
        else:
            ptr, other = self._predecessor_edges
            order = order[::-1].copy()
        return reachable(self.n_ops, order, ptr, other)

    @cached_property
    def _longest_paths(self) -> tuple[np.ndarray, np.ndarray]:
        ptr, pred = self._predecessor_edges
        return longest_path(self.topological_order, ptr, pred, self.op_runtime)

    @property
    def critical_path_length(self) -> float:
        """Largest sum of op runtimes along a dependency path: a lower bound on any makespan."""
        finish = self._longest_paths[0]
        return float(finish.max()) if finish.size else 0.0

    def longest_path_length(self, weight: np.ndarray) -> float:
        """Largest sum of `weight` ([n_ops] seconds) along a dependency path."""
        ptr, pred = self._predecessor_edges
        finish = longest_path(
            self.topological_order, ptr, pred, np.ascontiguousarray(weight, dtype=np.float64)
        )[0]
        return float(finish.max()) if finish.size else 0.0

    @cached_property
    def critical_path(self) -> np.ndarray:
        """Op indices of one longest (runtime-weighted) path, from its source to its sink."""
        finish, parent = self._longest_paths
        if not finish.size:
            return _frozen(np.zeros(0, dtype=np.int64))
        path = [int(np.argmax(finish))]
        while parent[path[-1]] >= 0:
            path.append(int(parent[path[-1]]))
        return _frozen(np.array(path[::-1], dtype=np.int64))

    def _check_acyclic(self) -> None:
        order = self.topological_order
        if order.shape[0] == self.n_ops:
            return
        cycle = self._find_cycle(order)
        names = " -> ".join(f"'{self.op_names[j]}'" for j in cycle + cycle[:1])
        raise GraphError(f"op dependencies form a cycle: {names}")

    def _check_recomputable(self) -> None:
        """Refuses `recomputable: true` on an op that makes a persistent tensor (section 15)."""
        for t in np.flatnonzero(self.tensor_persistent):
            op = int(self.tensor_producer[t])
            if self.op_attrs[op].get("recomputable") is True:
                raise GraphError(
                    f"op '{self.op_names[op]}': recomputable cannot be true: it makes the "
                    f"persistent tensor '{self.tensor_names[t]}' (docs/format.md section 15)"
                )

    def _find_cycle(self, partial_order: np.ndarray) -> list[int]:
        """Ops on one cycle among those Kahn's algorithm could not order, from the lowest index."""
        blocked = np.ones(self.n_ops, dtype=bool)
        blocked[partial_order] = False
        ptr, pred = self._predecessor_edges
        # Every blocked op has a blocked predecessor; walking back must revisit an op.
        seen: dict[int, int] = {}
        path: list[int] = []
        op = int(np.flatnonzero(blocked)[0])
        while op not in seen:
            seen[op] = len(path)
            path.append(op)
            preds = pred[ptr[op] : ptr[op + 1]]
            op = int(preds[blocked[preds]][0])
        cycle = path[seen[op] :][::-1]
        first = cycle.index(min(cycle))
        return cycle[first:] + cycle[:first]

    # ------------------------------------------------------------------------ metadata
    @cached_property
    def op_types(self) -> tuple[str, ...]:
        """Op type of each op (the optional `type` field), '' where absent."""
        return tuple(str(a.get("type", "")) for a in self.op_attrs)

    def op_metadata(self, key: str) -> np.ndarray:
        """[n_ops] float64 values of an optional numeric op field (`flops`, ...), NaN if absent."""
        values = [a.get(key) for a in self.op_attrs]
        numeric = [isinstance(v, int | float) and not isinstance(v, bool) for v in values]
        return np.array(
            [v if ok else math.nan for v, ok in zip(values, numeric, strict=True)], float
        )

    @cached_property
    def op_fusion(self) -> np.ndarray:
        """[n_ops] int8 index of each op's fusion class in `FUSION_CLASSES` (0, none, if unset)."""
        codes = {name: code for code, name in enumerate(FUSION_CLASSES)}
        return _frozen(
            np.array([codes[a.get("fusion", "none")] for a in self.op_attrs], dtype=np.int8)
        )

    @cached_property
    def op_compute_time(self) -> np.ndarray:
        """[n_ops] float64 arithmetic seconds of each op at peak (`compute_time`, else runtime)."""
        given = self.op_metadata("compute_time")
        return _frozen(np.where(np.isnan(given), self.op_runtime, given))

    @cached_property
    def op_recomputable(self) -> np.ndarray:
        """[n_ops] bool: may the op run again to remake its outputs (section 15)?

        The op's `recomputable` field when it has one; otherwise true except for a source op,
        an op that makes a persistent tensor, an in-place op (a `type` with a dotted part that
        ends in one `_`, as `aten.add_.Tensor`: running it again would change its input twice),
        an op that reads a tensor an in-place op reads (run again, it could see the change) and
        a random op (`RANDOM_OP_WORDS`) that is not marked `deterministic`.
        """
        makes_persistent = np.zeros(self.n_ops, dtype=bool)
        makes_persistent[self.tensor_producer[self.tensor_persistent]] = True
        sources = np.zeros(self.n_ops, dtype=bool)
        sources[self.sources] = True
        kinds = [str(a.get("type", "")).lower() for a in self.op_attrs]
        in_place = np.array(
            [any(p.endswith("_") and not p.endswith("__") for p in k.split(".")) for k in kinds],
            dtype=bool,
        )
        # A tensor an in-place op reads may change under it: a reader run again could see that.
        mutated = np.zeros(self.n_tensors, dtype=bool)
        mutated[self.edge_tensor[in_place[self.consumer_op]]] = True
        reads_mutated = np.zeros(self.n_ops, dtype=bool)
        reads_mutated[self.consumer_op[mutated[self.edge_tensor]]] = True
        flags = []
        for op, (attributes, kind) in enumerate(zip(self.op_attrs, kinds, strict=True)):
            if "recomputable" in attributes:
                flags.append(bool(attributes["recomputable"]))
                continue
            random = any(word in kind for word in RANDOM_OP_WORDS)
            flags.append(
                not (sources[op] or makes_persistent[op] or in_place[op] or reads_mutated[op])
                and (not random or attributes.get("deterministic") is True)
            )
        return _frozen(np.array(flags, dtype=bool))

    @property
    def kernel(self) -> tuple[float, float] | None:
        """(memory bandwidth bytes/s, launch overhead s) of the graph's `kernel`, if it has one."""
        kernel = self.attrs.get("kernel")
        if kernel is None:
            return None
        return float(kernel["memory_bandwidth"]), float(kernel["launch_overhead"])

    @cached_property
    def op_ids(self) -> dict[str, int]:
        """Index of each op by name."""
        return {n: i for i, n in enumerate(self.op_names)}

    @cached_property
    def tensor_ids(self) -> dict[str, int]:
        """Index of each tensor by name."""
        return {n: i for i, n in enumerate(self.tensor_names)}

    def with_tensor_sizes(self, tensor_size: Any, name: str | None = None) -> Graph:
        """The same topology with new tensor sizes (e.g. REGAL's augmentation), validated."""
        size = _as_array(tensor_size, SIZE, self.n_tensors, "tensor_size")
        _check_bytes(size, self.op_temp_memory, self.tensor_names, self.op_names)
        return replace(self, tensor_size=_frozen(size), name=self.name if name is None else name)

    def with_op_runtimes(self, op_runtime: Any) -> Graph:
        """The same graph with new op runtimes (a cost model's or a profile's), validated."""
        runtime = _as_array(op_runtime, np.float64, self.n_ops, "op_runtime")
        _check_runtimes(runtime, self.op_names)
        return replace(self, op_runtime=_frozen(runtime))

    def with_op_attrs(self, op_attrs: Sequence[Mapping[str, Any]]) -> Graph:
        """The same graph with new extra op fields (one mapping per op), validated."""
        extras = list(op_attrs)
        if len(extras) != self.n_ops:
            raise GraphError("op_attrs must have one mapping per op")
        _check_attrs(extras, OP_FIELDS, "op", self.op_names)
        _check_fusion_fields(extras, self.attrs, self.op_names)
        graph = replace(self, op_attrs=tuple(extras))
        graph._check_recomputable()
        return graph

    def with_attrs(self, **attrs: Any) -> Graph:
        """The same graph with graph-level attributes added or replaced (e.g. provenance)."""
        merged = {**self.attrs, **attrs}
        _check_attrs([merged], GRAPH_FIELDS, "graph", [self.name])
        _check_fusion_fields((), merged, ())
        return replace(self, attrs=merged)

    def __repr__(self) -> str:
        return (
            f"Graph(name={self.name!r}, n_ops={self.n_ops}, n_tensors={self.n_tensors}, "
            f"n_edges={self.n_edges})"
        )


def _as_array(values: Any, dtype: Any, length: int | None, what: str) -> np.ndarray:
    """Converts to a fresh 1-D array of `dtype` and `length` (scalars broadcast), exactly.

    `length` None takes any length and broadcasts no scalar.

    A value that would change on the way (an integer that wraps, a fraction bound for an
    integer array, a bool read as a number) is refused, never converted.
    """
    target = np.dtype(dtype)
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError) as error:
        raise GraphError(f"{what}: cannot be read as {target.name} values ({error})") from None
    if array.size == 0 and array.dtype.kind in "biuf":  # [] arrives as float64
        converted = array.astype(target)
    elif target.kind == "b":
        if array.dtype.kind != "b":
            raise GraphError(f"{what}: must hold true/false values, got {array.dtype} values")
        converted = array.astype(bool)
    elif target.kind == "f":
        if array.dtype.kind not in "iuf":
            raise GraphError(f"{what}: must hold numbers, got {array.dtype} values")
        converted = array.astype(target)
    else:
        if not isinstance(values, np.ndarray) and array.dtype.kind not in "iu":
            # A Python sequence mixing large integers and floats arrives as rounded floats.
            array = np.asarray(values, dtype=object)
        converted = _exact_integers(array, what)
    if converted.ndim == 0 and length is not None:
        converted = np.full(length, converted, dtype=target)
    if converted.ndim != 1 or length is not None and converted.shape[0] != length:
        raise GraphError(f"{what}: expected {length} values, got shape {converted.shape}")
    return np.array(converted, dtype=target)


def _exact_integers(array: np.ndarray, what: str) -> np.ndarray:
    """int64 values of an integer, integral-float or Python-object array; refuses the rest."""
    if array.dtype.kind == "i":
        return array.astype(np.int64)
    limit = np.iinfo(np.int64)
    if array.dtype.kind == "u":
        bad = np.flatnonzero(array.reshape(-1) > limit.max)
    elif array.dtype.kind == "f":
        flat = array.reshape(-1)
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(
                ~np.isfinite(flat)
                | (flat != np.floor(flat))
                | (flat < -(2.0**63))
                | (flat >= 2.0**63)
            )
    elif array.dtype.kind == "O":
        items = array.reshape(-1).tolist()
        bad = np.array(
            [i for i, item in enumerate(items) if not _is_int64(item, limit)], dtype=np.int64
        )
        if not bad.size:
            return np.array([int(item) for item in items], dtype=np.int64).reshape(array.shape)
    else:
        raise GraphError(f"{what}: must hold integers, got {array.dtype} values")
    if bad.size:
        value = array.reshape(-1)[bad[0]]
        where = f"{what}[{bad[0]}]" if array.ndim else what
        raise GraphError(f"{where}: {value!r} is not an integer that fits int64")
    return array.astype(np.int64)


def _is_int64(item: Any, limit: np.iinfo) -> bool:
    if isinstance(item, bool | np.bool_) or not isinstance(item, int | float | np.number):
        return False
    if isinstance(item, float | np.floating) and not (math.isfinite(item) and item == int(item)):
        return False
    return limit.min <= int(item) <= limit.max


def _check_runtimes(runtime: np.ndarray, op_names: tuple[str, ...]) -> None:
    bad = np.flatnonzero(~np.isfinite(runtime) | (runtime < 0))
    if bad.size:
        j = bad[0]
        raise GraphError(
            f"op '{op_names[j]}': runtime must be a finite number >= 0, got {runtime[j]}"
        )
    with np.errstate(over="ignore"):
        total = runtime.sum()
    if not math.isfinite(total):
        raise GraphError("op runtimes: their sum overflows a float64; use a larger time unit")


def _check_bytes(
    size: np.ndarray, temp: np.ndarray, tensor_names: Sequence[str], op_names: Sequence[str]
) -> None:
    """Sizes and temp memory >= 0, and their sum within `MAX_TOTAL_BYTES` (exact, no wrap)."""
    for values, kind, name, labels in (
        (size, "tensor", "size", tensor_names),
        (temp, "op", "temp_memory", op_names),
    ):
        for bad, rule in (
            (np.flatnonzero(values < 0), "must be an integer >= 0"),
            (np.flatnonzero(values > MAX_TOTAL_BYTES), "must be at most 2**53 (docs/format.md)"),
        ):
            if bad.size:
                i = bad[0]
                raise GraphError(f"{kind} '{labels[i]}': {name} {rule}, got {values[i]}")
    total = _exact_sum(size) + _exact_sum(temp)
    if total > MAX_TOTAL_BYTES:
        raise GraphError(
            f"tensor sizes and temp memory add up to {total:,} bytes, more than the limit of "
            f"2**53 = {MAX_TOTAL_BYTES:,} bytes (docs/format.md, limits)"
        )


def _exact_sum(values: np.ndarray) -> int:
    """Exact sum of int64 values in [0, 2**53], in two halves that cannot overflow int64."""
    high = int((values >> 26).sum())
    low = int((values & (2**26 - 1)).sum())
    return (high << 26) + low


def _check_attrs(
    attrs: Sequence[Any], fields: tuple[str, ...], kind: str, names: Sequence[str]
) -> None:
    """Extra fields are string-keyed mappings that do not shadow a field kept in the arrays.

    One pass gathers every key (cheap for the usual empty mappings); the offending item is only
    looked for once a problem is known.
    """
    reserved = frozenset(fields)
    keys: set[Any] = set()
    for item in attrs:
        if type(item) is not dict and not isinstance(item, Mapping):
            break
        keys.update(item)
    else:
        if reserved.isdisjoint(keys) and all(isinstance(key, str) for key in keys):
            return
    for item, name in zip(attrs, names, strict=True):
        label = f"{kind} '{name}'" if kind != "graph" else "graph"
        if not isinstance(item, Mapping):
            raise GraphError(f"{label}: extra fields must be a mapping, got {type(item).__name__}")
        bad = [key for key in item if not isinstance(key, str) or key in reserved]
        if bad:
            raise GraphError(
                f"{label}: extra field {bad[0]!r} is not a string key, or is a field of the "
                "format held in the graph's arrays"
            )


def _check_fusion_fields(
    op_attrs: Sequence[Mapping[str, Any]], attrs: Mapping[str, Any], op_names: Sequence[str]
) -> None:
    """The fusion fields of section 13: op `fusion` and `compute_time`, graph `kernel`."""
    for attributes, name in zip(op_attrs, op_names, strict=True):
        if "fusion" in attributes and attributes["fusion"] not in FUSION_CLASSES:
            raise GraphError(
                f"op '{name}': fusion must be one of {', '.join(FUSION_CLASSES)}, got "
                f"{describe(attributes['fusion'])}"
            )
        for flag in ("recomputable", "deterministic"):
            if flag in attributes and not isinstance(attributes[flag], bool):
                raise GraphError(
                    f"op '{name}': {flag} must be true or false, got {describe(attributes[flag])}"
                )
        if "compute_time" in attributes and not _is_seconds(attributes["compute_time"]):
            raise GraphError(
                f"op '{name}': compute_time must be a finite number of seconds >= 0, got "
                f"{describe(attributes['compute_time'])}"
            )
    if "kernel" not in attrs:
        return
    kernel = attrs["kernel"]
    if not isinstance(kernel, Mapping) or sorted(kernel) != sorted(KERNEL_FIELDS):
        raise GraphError(
            "graph: kernel must be an object with exactly memory_bandwidth (bytes/s > 0) and "
            f"launch_overhead (seconds >= 0), got {describe(kernel)}"
        )
    bandwidth, launch = kernel["memory_bandwidth"], kernel["launch_overhead"]
    if not _is_seconds(bandwidth) or bandwidth <= 0:
        raise GraphError(
            "graph: kernel: memory_bandwidth must be a finite number > 0, got "
            f"{describe(bandwidth)}"
        )
    if not _is_seconds(launch):
        raise GraphError(
            f"graph: kernel: launch_overhead must be a finite number of seconds >= 0, got "
            f"{describe(launch)}"
        )


def _is_seconds(value: Any) -> bool:
    """A finite number >= 0 (not a bool)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _check_names(names: tuple[str, ...], kind: str) -> None:
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise GraphError(f"{kind}s[{i}]: name must be a non-empty string, got {name!r}")
    if len(set(names)) != len(names):
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise GraphError(f"{kind} '{name}': name is not unique")
            seen.add(name)
