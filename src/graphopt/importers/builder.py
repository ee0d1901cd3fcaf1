"""Incremental construction of a `Graph` by the importers.

Each importer walks its source graph once, adding ops, tensors and consumer edges by index; `build`
turns the lists into the CSR arrays of `Graph.from_arrays` in one numpy pass, which validates every
rule of the contract. Op fields beyond runtime and temp memory (`type`, `flops`,
`bytes_accessed`, `module`, ...) go into the op's attributes and are kept in every file format.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphopt.ir.graph import Graph


class GraphBuilder:
    """Ops and tensors added one at a time, then built into a validated `Graph`."""

    def __init__(self, name: str, attrs: dict[str, Any] | None = None) -> None:
        self.name = name
        self.attrs = dict(attrs or {})
        self.op_names: list[str] = []
        self.op_runtime: list[float] = []
        self.op_temp_memory: list[int] = []
        self.op_attrs: list[dict[str, Any]] = []
        self.tensor_names: list[str] = []
        self.tensor_size: list[int] = []
        self.tensor_producer: list[int] = []
        self.tensor_persistent: list[bool] = []
        self.tensor_output: list[bool] = []
        self.tensor_attrs: list[dict[str, Any]] = []
        self._edge_tensor: list[int] = []
        self._edge_op: list[int] = []
        self._taken: set[str] = set()

    @property
    def n_ops(self) -> int:
        """Ops added so far."""
        return len(self.op_names)

    def unique_name(self, base: str) -> str:
        """`base`, or `base_2`, `base_3`, ... if already used by an op or tensor of this graph."""
        name, suffix = base or "unnamed", 1
        while name in self._taken:
            suffix += 1
            name = f"{base}_{suffix}"
        self._taken.add(name)
        return name

    def add_op(self, name: str, *, runtime: float = 0.0, temp_memory: int = 0, **attrs: Any) -> int:
        """Adds an op (name made unique) and returns its index; None-valued attrs are dropped."""
        self.op_names.append(self.unique_name(name))
        self.op_runtime.append(float(runtime))
        self.op_temp_memory.append(int(temp_memory))
        self.op_attrs.append({k: v for k, v in attrs.items() if v is not None})
        return len(self.op_names) - 1

    def add_tensor(
        self, name: str, size: int, producer: int, *, persistent: bool = False, **attrs: Any
    ) -> int:
        """Adds a tensor produced by op `producer` and returns its index."""
        self.tensor_names.append(self.unique_name(name))
        self.tensor_size.append(int(size))
        self.tensor_producer.append(producer)
        self.tensor_persistent.append(bool(persistent))
        self.tensor_output.append(False)
        self.tensor_attrs.append({k: v for k, v in attrs.items() if v is not None})
        return len(self.tensor_names) - 1

    def mark_output(self, tensor: int) -> None:
        """Marks a tensor the program returns (a persistent one is resident throughout anyway)."""
        self.tensor_output[tensor] = not self.tensor_persistent[tensor]

    def add_consumer(self, tensor: int, op: int) -> None:
        """Records that op `op` reads tensor `tensor` (repeats are merged when built)."""
        self._edge_tensor.append(tensor)
        self._edge_op.append(op)

    def build(self) -> Graph:
        """The validated graph (raises `GraphError` naming the first broken rule)."""
        edge_tensor = np.asarray(self._edge_tensor, dtype=np.int64)
        edge_op = np.asarray(self._edge_op, dtype=np.int64)
        order = np.argsort(edge_tensor, kind="stable")
        ptr = np.zeros(len(self.tensor_names) + 1, dtype=np.int64)
        np.cumsum(np.bincount(edge_tensor, minlength=len(self.tensor_names)), out=ptr[1:])
        return Graph.from_arrays(
            self.name,
            self.op_names,
            self.op_runtime,
            self.tensor_names,
            self.tensor_size,
            self.tensor_producer,
            ptr,
            edge_op[order],
            op_temp_memory=self.op_temp_memory,
            tensor_persistent=self.tensor_persistent,
            tensor_output=self.tensor_output,
            op_attrs=self.op_attrs,
            tensor_attrs=self.tensor_attrs,
            attrs=self.attrs,
        )
