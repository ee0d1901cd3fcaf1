"""Replaying a multi-device solution on the captured program, event by event.

Each op event runs its fx node on its device with the copies of its inputs that live there; each
transfer event copies a tensor to its destination (`.to(device)`, or a `clone` when the devices
are logical CPU devices that share one memory); and every copy is dropped right after its last
reader, as section 5 of the contract frees it (a graph output's home copy is kept to the end). A
`LiveBytes` tracker attributes every storage an op or a copy creates to the device it runs on, so
each device's measured peak stands beside the cost model's prediction for it.

Nodes the importer merged into others (views, tuple getitems) are evaluated on the device that
reads them, from the copy there, when first needed, and dropped with the copy they view. A
placeholder is the storage it lives in, as the importer counts it: its transfer copies that
storage once, and every placeholder on it (a tied weight's other name, a buffer that views
another) becomes a view of the copy. The replay is sequential: it checks memory and values, not
time; its outputs are also compared with eager PyTorch's on the module
(`measure.EagerComparison`). A solution's fusion groups are not applied (fusing is the
compiler's, as in `apply`): their ops run one by one in the solution's order, and the predicted
peaks are those of the same solution without groups.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.fx import Node
from torch.utils._pytree import tree_flatten

from graphopt.costmodels._reference import persistent_per_device, reference_releases
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.errors import SolutionError
from graphopt.execution.measure import (
    EagerComparison,
    LiveBytes,
    compare_with_eager,
    detached,
    eager_outputs,
    running,
)
from graphopt.importers.torch_export import Capture
from graphopt.ir.solution import Solution


@dataclass(frozen=True)
class Replay:
    """What a replay measured, per device, beside what the cost model predicts.

    Attributes:
        devices: the torch device each logical device ran on.
        measured: [d] peak bytes of live storages created on each device (`LiveBytes`).
        predicted: [d] the cost model's peak of each device.
        persistent: [d] bytes of persistent tensors homed on each device (resident before the
            program starts, so not among the measured storages).
        outputs: the program's outputs, in the structure the captured program returns.
        eager: those outputs against eager PyTorch's on the module, from the same arguments and
            seed (None: the capture has no module to run).
    """

    devices: tuple[str, ...]
    measured: tuple[int, ...]
    predicted: tuple[int, ...]
    persistent: tuple[int, ...]
    outputs: Any
    eager: EagerComparison | None = None


def replay(
    capture: Capture,
    solution: Solution,
    devices: Sequence[str] | None = None,
    args: tuple[Any, ...] | None = None,
    seed: int = 0,
) -> Replay:
    """Runs `solution` on the captured program, one event at a time, on `devices`.

    Args:
        capture: the program and its graph.
        solution: a valid solution of `capture.graph` on any number of devices; its fusion
            groups, if any, are not applied (their ops run one by one).
        devices: a torch device per logical device (default: "cpu" for each).
        args: the program's inputs (default: `capture.args`).
        seed: torch's random seed for the run (as `measure` seeds it), restored afterwards.

    Raises:
        SolutionError: an invalid or recomputing solution, or a device list of the wrong
            length.
    """
    graph, d = capture.graph, solution.n_devices
    if solution.remat:
        raise SolutionError(
            "the solution recomputes ops (remat, docs/format.md section 15), which replay does "
            "not run yet; run a one-device one with apply or measure"
        )
    devices = tuple(devices) if devices is not None else ("cpu",) * d
    if len(devices) != d:
        raise SolutionError(f"the solution uses {d} devices, {len(devices)} were given")
    solution = replace(solution, fusion=None)
    score = Scorer(graph, Machine(n_devices=d)).score(solution)
    args = capture.args if args is None else args
    eager = eager_outputs(capture, args, seed)
    runner = _Runner(capture, solution, devices, detached(args))
    with torch.enable_grad(), torch.random.fork_rng(), LiveBytes(d) as live, running():
        torch.manual_seed(seed)
        runner.live = live
        outputs = runner.run()
    persistent = persistent_per_device(graph, solution.placement, d)
    return Replay(
        devices,
        tuple(live.peak),
        score.peak_memory_per_device,
        tuple(int(p) for p in persistent),
        outputs,
        compare_with_eager(outputs, eager),
    )


class _Runner:
    """The state of one replay: copies by (fx node, output index, device) and when each dies."""

    def __init__(
        self,
        capture: Capture,
        solution: Solution,
        devices: tuple[str, ...],
        args: tuple[Any, ...],
    ) -> None:
        self.capture, self.solution, self.devices = capture, solution, devices
        self.graph = capture.graph
        self.nodes = {node.name: node for node in capture.program.graph.nodes}
        self.place = [int(p) for p in solution.placement]
        self.copies: dict[tuple[str, int, int], Any] = {}
        self.views: dict[tuple[str, int], Any] = {}  # merged nodes evaluated on a device
        self.live: LiveBytes | None = None
        self.own = set(capture.op_nodes.values())  # nodes that are graph ops of their own
        self.merged = {name for name in capture.node_ops if name not in self.own}
        self.storage_of: dict[str, list[str]] = {}  # a source's placeholder -> all on its storage
        for alias, held in capture.aliases.items():
            self.storage_of.setdefault(held, [held]).append(alias)
        placeholders = [n.name for n in capture.program.graph.nodes if n.op == "placeholder"]
        values = dict(zip(placeholders, tree_flatten(args)[0], strict=True))
        for name in placeholders:
            if name in capture.aliases:
                continue  # placed with the placeholder that holds its storage
            home = self.place[self.graph.op_ids[capture.node_ops[name]]]
            members = self.storage_of.get(name, [name])
            placed = [values[member] for member in members]
            if isinstance(values[name], torch.Tensor):  # resident before the run: not measured
                placed = _on_one_storage(placed, devices[home], copy=False)
            for member, value in zip(members, placed, strict=True):
                self.copies[(member, 0, home)] = value
        self.value_of = {  # graph tensor index -> (node, output index)
            self.graph.tensor_ids[name]: value for name, value in capture.tensor_values.items()
        }

    def run(self) -> Any:
        graph, d = self.graph, self.solution.n_devices
        last_read = self._last_reads()
        for step, code in enumerate(self.solution.order.tolist()):
            if code < graph.n_ops:
                self._run_op(code)
            else:
                t, device = divmod(code - graph.n_ops, d)
                self._transfer(t, device)
            for t, device in last_read.pop(step, ()):
                self._drop(t, device)
        output = next(n for n in self.capture.program.graph.nodes if n.op == "output")
        home = {n.name: self._home(n) for n in output.all_input_nodes}
        values = torch.fx.node.map_arg(output.args[0], lambda n: self._value(n, home[n.name]))
        return self.capture.program.graph._codegen.process_outputs(values)

    def _last_reads(self) -> dict[int, list[tuple[int, int]]]:
        """Step -> the copies (tensor, device) to drop right after it.

        The scorer's own rule (`reference_releases`), for the tensors that hold a value.
        """
        releases = reference_releases(self.graph, self.solution)
        return {
            step: [copy for copy in copies if copy[0] in self.value_of]
            for step, copies in releases.items()
        }

    def _run_op(self, op: int) -> None:
        node = self.nodes[self.capture.op_nodes[self.graph.op_names[op]]]
        if node.op == "placeholder":
            return
        device = self.place[op]
        assert self.live is not None
        self.live.device = device
        args, kwargs = torch.fx.node.map_arg(
            (node.args, node.kwargs), lambda n: self._value(n, device)
        )
        if "device" in kwargs:  # factories (arange, full, ...) make their tensor on this device
            kwargs = {**kwargs, "device": torch.device(self.devices[device])}
        result = node.target(*args, **kwargs)
        for written in self.capture.mutates.get(node.name, ()):
            self._propagate_write(written, device)
        if node.name in self.capture.writes:  # readers find the written copy through `_value`
            return
        results = result if isinstance(result, list | tuple) else [result]
        for index, value in enumerate(results):
            self.copies[(node.name, index, device)] = value

    def _transfer(self, t: int, device: int) -> None:
        if t not in self.value_of:
            return  # an order-only tensor: nothing to move
        name, index = self.value_of[t]
        home = self.place[self.graph.tensor_producer[t]]
        source = self.copies[(name, index, home)]
        assert self.live is not None
        self.live.device = device
        target = self.devices[device]
        same = torch.device(target) == source.device
        if self.nodes[name].op != "placeholder":
            self.copies[(name, index, device)] = source.clone() if same else source.to(target)
            return
        members = self.storage_of.get(name, [name])
        homed = [self.copies[(member, 0, home)] for member in members]
        for member, value in zip(members, _on_one_storage(homed, target, same), strict=True):
            self.copies[(member, 0, device)] = value

    def _propagate_write(self, written: str, device: int) -> None:
        """Copies what an op wrote in place on `device` into every other copy of the storage.

        The contract moves no bytes for an in-place write (its marker tensor has size 0), so the
        replay keeps every existing copy current at the write, in place: no storage is made,
        and a copy made later by a transfer starts from current data.
        """
        node = self.nodes[written]
        source = self._value(node, device)
        for other in range(self.solution.n_devices):
            if other == device:
                continue
            try:
                target = self._value(node, other)
            except SolutionError:
                continue  # no copy there
            target.copy_(source)

    def _drop(self, t: int, device: int) -> None:
        name, index = self.value_of[t]
        for member in self.storage_of.get(name, [name]):
            self.copies.pop((member, index, device), None)
            for key in [k for k in self.views if k[1] == device and self._rooted(k[0], member)]:
                del self.views[key]

    def _rooted(self, merged: str, name: str) -> bool:
        """Whether merged node `merged` views (through merged nodes) the value of node `name`."""
        node = self.nodes[merged]
        return any(
            source.name == name or (source.name in self.merged and self._rooted(source.name, name))
            for source in node.all_input_nodes
        )

    def _home(self, node: Node) -> int:
        """The device of the op a returned node belongs to."""
        op = self.capture.node_ops[node.name]
        return self.place[self.graph.op_ids[op]] if op is not None else 0

    def _value(self, node: Node, device: int) -> Any:
        """The value of `node` on `device`: a copy there, or a merged node evaluated from one."""
        if node.name in self.capture.writes:
            return self._value(self.nodes[self.capture.writes[node.name]], device)
        if node.name in self.own or node.op == "placeholder":
            return self._copy(node, 0, device)
        if node.target is operator.getitem:
            source = node.args[0]
            if source.name in self.own:
                return self._copy(source, node.args[1], device)
        key = (node.name, device)
        if key not in self.views:
            args, kwargs = torch.fx.node.map_arg(
                (node.args, node.kwargs), lambda n: self._value(n, device)
            )
            self.views[key] = node.target(*args, **kwargs)
        return self.views[key]

    def _copy(self, node: Node, index: int, device: int) -> Any:
        key = (node.name, index, device)
        if key not in self.copies:
            raise SolutionError(
                f"fx node '{node.name}' has no copy on device {device} when it is read"
            )
        return self.copies[key]


def _on_one_storage(values: list[torch.Tensor], target: str, copy: bool) -> list[torch.Tensor]:
    """`values`, views of one storage, as views of that storage on `target`.

    The storage moves whole and once (with `copy`, it is copied even onto its own device, as
    a transfer between logical CPU devices is), so its bytes are the graph tensor's.
    """
    first = values[0]
    elements = first.untyped_storage().nbytes() // first.element_size()
    flat = first.as_strided((elements,), (1,), 0)
    moved = flat.clone() if copy else flat.to(target)
    return [
        (moved if value.dtype == moved.dtype else moved.view(value.dtype)).as_strided(
            value.size(), value.stride(), value.storage_offset()
        )
        for value in values
    ]
