"""Measuring a program's real memory and time, the way the cost model predicts them.

`LiveBytes` is a `TorchDispatchMode` that sees every ATen op the program runs: each storage an op
returns that did not exist before is counted once (outputs that alias an input's storage, views
and in-place results, add nothing), and is released when the storage itself is freed (its
finalizer), whichever tensor held it last. Its peak is the largest sum of live storages right
after an op returned, when the op's inputs are still alive: the contract's step memory without
the persistent tensors, which exist before the program starts. The allocator's own view comes
from `torch.profiler`'s memory events (it also sees scratch buffers inside kernels), and on CUDA
from `torch.cuda.max_memory_allocated`.

Values are checked twice: against the captured program bit for bit (the order changes nothing),
and against eager PyTorch on the module itself (`Capture.eager`: its own kernels and autograd)
within float reassociation (`EAGER_RTOL`, `EAGER_ATOL`), so that a capture that computes the
wrong thing (a decomposition that breaks autograd) does not pass as "identical".
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from graphopt._messages import raised
from graphopt.errors import GraphoptError, ModelImportError
from graphopt.execution.apply import apply, outputs_identical, predict
from graphopt.importers.torch_export import Capture
from graphopt.ir.solution import Solution


class LiveBytes(TorchDispatchMode):
    """Live bytes of the storages created while it is active, per logical device.

    `device` is the logical device the next ops run on (an executor sets it; 0 otherwise); a new
    storage counts on the device current when an op returned it and leaves that device's total
    when it is freed.
    """

    def __init__(self, n_devices: int = 1) -> None:
        super().__init__()
        self.device = 0
        self.current = [0] * n_devices
        self.peak = [0] * n_devices
        self._live: dict[int, tuple[int, int]] = {}  # storage key -> (device, bytes)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {_key(value) for value in tree_flatten((args, kwargs))[0] if _is_tensor(value)}
        for value in tree_flatten(out)[0]:
            if not _is_tensor(value):
                continue
            storage = value.untyped_storage()
            key = _key(value)
            if key in inputs or key in self._live:
                continue
            size = storage.nbytes()
            self._live[key] = (self.device, size)
            self.current[self.device] += size
            weakref.finalize(storage, self._release, key)
        device = self.device
        self.peak[device] = max(self.peak[device], self.current[device])
        return out

    def _release(self, key: int) -> None:
        device, size = self._live.pop(key)
        self.current[device] -= size


EAGER_RTOL = 1e-4
EAGER_ATOL = 1e-5
"""How close a program's outputs must be to eager PyTorch's: |program - eager| <= EAGER_ATOL +
EAGER_RTOL |eager| per element. Float reassociation only: the program runs decomposed kernels
(softmax, normalizations, activations as separate ATen ops) where eager runs fused ones, which
moved the measured zoo training steps' losses and updated parameters by at most 1e-6
(llama-tiny-sdpa; resnet18 1.2e-7); the broken attention gradients moved them by 2e-3 to 2e-2."""


@dataclass(frozen=True)
class EagerComparison:
    """A program's outputs against eager PyTorch's on the same arguments and random seed.

    Attributes:
        close: every output within `EAGER_ATOL + EAGER_RTOL * |eager|` of eager's, with the
            same shapes and dtypes (NaN where eager has NaN).
        difference: the largest absolute difference of any element (inf for a shape or dtype
            mismatch, or a NaN where eager has a number).
    """

    close: bool
    difference: float


def eager_outputs(capture: Capture, args: tuple[Any, ...], seed: int = 0) -> Any | None:
    """What eager PyTorch computes from `args` (`Capture.eager`), None without a module.

    Random state as `measure` seeds it, restored afterwards; buffers the program writes are
    copied first, so the reference run leaves `args` as they were.
    """
    if capture.eager is None:
        return None
    args = _own_copies(capture, detached(args))
    with torch.random.fork_rng(), running():
        torch.manual_seed(seed)
        return capture.eager(args)


def compare_with_eager(outputs: Any, reference: Any | None) -> EagerComparison | None:
    """`outputs` of a program against `eager_outputs` (None: no reference to compare with).

    `reference` is flat, with None at the outputs eager does not compute.
    """
    if reference is None:
        return None
    got = tree_flatten(outputs)[0]
    if len(got) != len(reference):
        return EagerComparison(False, math.inf)
    close, difference = True, 0.0
    for value, expected in zip(got, reference, strict=True):
        if expected is not None:
            pair_close, pair_difference = _compare(value, expected)
            close = close and pair_close
            difference = max(difference, pair_difference)
    return EagerComparison(close, difference)


def _compare(value: Any, expected: Any) -> tuple[bool, float]:
    """(close, largest absolute difference) of one output against eager's."""
    if not (_is_tensor(value) and _is_tensor(expected)):
        return value == expected, 0.0 if value == expected else math.inf
    if value.shape != expected.shape or value.dtype != expected.dtype:
        return False, math.inf
    if not value.dtype.is_floating_point:
        equal = torch.equal(value, expected)
        return equal, 0.0 if equal else math.inf
    close = torch.allclose(value, expected, rtol=EAGER_RTOL, atol=EAGER_ATOL, equal_nan=True)
    gaps = (value.double() - expected.double()).abs()
    gaps = gaps.masked_fill(value.isnan() & expected.isnan(), 0.0).nan_to_num(nan=math.inf)
    return close, float(gaps.max()) if gaps.numel() else 0.0


def detached(args: Any) -> Any:
    """`args` with every tensor detached (same storage, no gradient tracking)."""
    return tree_map(lambda value: value.detach() if _is_tensor(value) else value, args)


def _is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def _key(tensor: torch.Tensor) -> int:
    return StorageWeakRef(tensor.untyped_storage()).cdata


@dataclass(frozen=True)
class Measurement:
    """One program run on one set of inputs.

    Attributes:
        live_peak: peak bytes of live storages the program created (`LiveBytes`).
        allocator_peak: peak of the CPU allocator's memory events in `torch.profiler`, relative
            to the start (it also counts kernels' scratch buffers); None when not profiled.
        cuda_peak: `max_memory_allocated` above the start on CUDA; None on CPU.
        seconds: median wall time of the timed runs.
        outputs: what the tracked run returned.
    """

    live_peak: int
    allocator_peak: int | None
    cuda_peak: int | None
    seconds: float
    outputs: Any


def measure(
    program: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    repeats: int = 5,
    profile: bool = True,
    seed: int = 0,
) -> Measurement:
    """Runs `program(*args)` under `LiveBytes`, the profiler, and `repeats` times for the clock.

    Every input is detached and grad mode is on: a captured program computes its own
    gradients, so no input may make autograd record (and keep tensors alive), while kernels see
    grad mode as when the step was traced (an LSTM's forward keeps the workspace its backward
    reads only in grad mode). The tracked run starts from torch's random state seeded with
    `seed` (the caller's state is restored), so programs with random ops (dropout) give
    comparable outputs.
    """
    args = detached(args)
    with torch.enable_grad(), torch.random.fork_rng():
        torch.manual_seed(seed)
        with LiveBytes() as live, running():
            outputs = program(*args)
        allocator = allocator_peak(program, args) if profile else None
        with running():  # a training step through CPU flash attention has CPU kernels only
            cuda = _cuda_peak(program, args) if torch.cuda.is_available() else None
        times = []
        for _ in range(max(repeats, 1)):
            start = time.perf_counter()
            program(*args)
            times.append(time.perf_counter() - start)
    return Measurement(live.peak[0], allocator, cuda, statistics.median(times), outputs)


@contextlib.contextmanager
def running() -> Iterator[None]:
    """Turns a failure of the captured program on real tensors into one line.

    A capture traced on fake tensors can record a call that real kernels refuse (an LSTM's
    training step on CPU: its backward asks for a workspace the fake kernel never made).
    """
    try:
        yield
    except GraphoptError:
        raise
    except Exception as error:  # whatever the kernels raise
        raise ModelImportError(
            f"the captured program does not run on real tensors: {raised(error)}"
        ) from None


def allocator_peak(program: Callable[..., Any], args: tuple[Any, ...]) -> int | None:
    """Peak of the allocator's live bytes above the start, from the profiler's memory timeline.

    The timeline (`_memory_profile`, what `export_memory_timeline` draws) lists every allocation
    and free with its size, scratch buffers inside kernels included. None when this torch's
    profiler cannot build it.
    """
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action

    with (
        _quiet_stderr(),
        profile(
            activities=[ProfilerActivity.CPU],
            profile_memory=True,
            record_shapes=True,
            with_stack=True,
        ) as prof,
    ):
        program(*args)
    try:
        timeline = prof._memory_profile().timeline
    except Exception:  # a private API: its absence or failure leaves the allocator's view out
        return None
    running = peak = 0
    for _, action, _, size in timeline:
        if action == Action.CREATE:
            running += size
        elif action == Action.DESTROY:
            running -= size
        peak = max(peak, running)
    return peak


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Sends file descriptor 2 to /dev/null: the profiler's C++ side logs every start and stop."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _cuda_peak(program: Callable[..., Any], args: tuple[Any, ...]) -> int:
    """Peak allocated CUDA bytes above the start, running on `cuda:0` (inputs copied there)."""
    on_gpu = tree_map(lambda v: v.to("cuda") if _is_tensor(v) else v, args)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    program(*on_gpu)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def random_like(value: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A random tensor of `value`'s shape and dtype.

    Integers stay in `value`'s range, so token ids and labels stay valid.
    """
    if value.dtype == torch.bool:
        return torch.rand(value.shape, generator=generator) < 0.5
    if value.dtype.is_floating_point or value.dtype.is_complex:
        return torch.randn(value.shape, generator=generator, dtype=value.dtype)
    low, high = (int(value.min()), int(value.max()) + 1) if value.numel() else (0, 1)
    return torch.randint(low, high, value.shape, generator=generator, dtype=value.dtype)


def fresh_args(capture: Capture, seed: int) -> tuple[Any, ...]:
    """The capture's arguments with random example inputs, and copies of what it writes.

    A search's order is measured on inputs it has never seen; the same seed gives the same
    inputs. Parameters and buffers stay the module's own tensors, except those the program
    writes in place (batch norm's running statistics in a training step), which are copied
    so that measuring leaves the model as it was.
    """
    generator = torch.Generator().manual_seed(seed)
    args = list(capture.args)
    for position in capture.inputs:
        args[position] = random_like(args[position], generator)
    return _own_copies(capture, tuple(args))


def _own_copies(capture: Capture, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """`args` with a copy of every tensor the program writes in place, the rest shared."""
    leaves, spec = tree_flatten(args)
    written = _written_placeholders(capture)
    placeholders = [n.name for n in capture.program.graph.nodes if n.op == "placeholder"]
    leaves = [
        value.clone() if name in written and _is_tensor(value) else value
        for name, value in zip(placeholders, leaves, strict=True)
    ]
    return tree_unflatten(leaves, spec)


def _written_placeholders(capture: Capture) -> set[str]:
    """Placeholders whose storage an op writes in place, through views and earlier writes."""
    nodes = {node.name: node for node in capture.program.graph.nodes}
    own = set(capture.op_nodes.values())
    written = set()
    for targets in capture.mutates.values():
        for target in targets:
            node = nodes[target]
            while node.op != "placeholder" and (
                node.name in capture.writes or node.name not in own
            ):
                node = node.all_input_nodes[0]  # a view's or an in-place op's base
            if node.op == "placeholder":
                written.add(node.name)
    return written


@dataclass(frozen=True)
class OrderMeasurement:
    """One order of a captured program: predicted and measured peaks, time, and its outputs.

    Attributes:
        label: the order's name ("captured" for the program as captured).
        predicted: the cost model's peak memory, persistent tensors included.
        persistent: bytes of the persistent tensors (parameters, buffers, inputs), which exist
            before the program runs and so are not among the measured storages.
        measurement: the run.
        identical: whether its outputs equal the captured program's bit for bit.
        eager: its outputs against eager PyTorch's on the module (None: the capture has no
            module to run).
    """

    label: str
    predicted: int
    persistent: int
    measurement: Measurement
    identical: bool
    eager: EagerComparison | None = None

    @property
    def predicted_live(self) -> int:
        """The prediction the live-bytes peak must equal: the peak minus persistent bytes."""
        return self.predicted - self.persistent


def measure_orders(
    capture: Capture,
    solutions: Mapping[str, Solution],
    *,
    seed: int = 0,
    repeats: int = 5,
    profile: bool = True,
) -> list[OrderMeasurement]:
    """Measures the captured program and each 1-device solution applied to it, on fresh inputs.

    The captured program itself comes first, as "captured", scored as its graph's op order
    (the fx node order it was captured in). Each order's outputs are compared with the captured
    program's bit for bit and with eager PyTorch's on the module (`EagerComparison`).

    Raises:
        SolutionError: a multi-device or invalid solution.
    """
    graph = capture.graph
    persistent = int(graph.tensor_size[graph.tensor_persistent].sum())
    args = fresh_args(capture, seed)
    captured_order = Solution(np.zeros(graph.n_ops, np.int32), np.arange(graph.n_ops), 1)
    programs = [("captured", captured_order, capture.program)]
    programs += [(label, s, apply(capture, s)) for label, s in solutions.items()]
    eager = eager_outputs(capture, args)
    reference = None
    rows = []
    for label, solution, program in programs:
        run = measure(program, args, repeats=repeats, profile=profile)
        reference = run.outputs if reference is None else reference
        rows.append(
            OrderMeasurement(
                label,
                predict(capture, solution).peak_memory,
                persistent,
                run,
                outputs_identical(reference, run.outputs),
                compare_with_eager(run.outputs, eager),
            )
        )
    return rows
