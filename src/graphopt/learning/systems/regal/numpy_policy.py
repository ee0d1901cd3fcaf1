"""Shipped policies' greedy inference in numpy, without importing torch.

Importing torch takes 1.2 to 1.6 s, which every `graphopt optimize --solver regal` process paid
before its policy's first output: several times a whole 5,000-evaluation BRKGA run on a 300 to
1,700-op graph (benchmarks/bench_regal_scale.py). The shipped networks are small (width 32), and
numpy runs their forward pass faster than torch on one thread (measured on 1,447 ops: 6 ms for
the numpy message-passing encoder, 52 ms for torch's whole inference). So for the shipped
policies (package data, never a user's file: those go through torch's `weights_only` loader in
`checkpoints.py`), this module

- reads the checkpoint, a torch zip archive of float32 tensors and plain containers, with an
  unpickler that knows only the three names such a file uses (`read_record`), and checks its
  fields with `checkpoints.load_policy`'s own checks (`records.py`), its tensors' names and
  shapes against the network's (`state_shapes`) and its outputs on the same 3-op probe;
- runs `policy.RegalPolicy`'s forward pass (message passing or GAS's LSTM, the heads, the feature
  anchor) with the same float32 operations (`NumpyPolicy.logits`). Where every head's last
  layer is all zeros (the shipped REGAL policies, kept at their step-0 weights), the heads give
  their biases whatever the encoder says, so the encoder is left out once a bound on its outputs
  (`NumpyPolicy.encoder_bound`) shows they are finite: inference then costs about 1 ms.

Anything it does not read or run (another storage type, a file torch wrote differently, outputs
that are not finite) makes `load` return None, and the caller loads the torch policy.

Greedy actions must be torch's, bit for bit: they decide every result. numpy's matrix products
sum in another order than torch's kernels, so a logit can differ from torch's in its last bits.
`NumpyPolicy.logits` therefore also returns, for each logit, a bound on that difference: 0 where
the logit is computed exactly alike (a head whose last layer is all zeros, as in the shipped
REGAL policies, gives its bias, to which the feature anchor adds the same float32 operations as
torch's), otherwise the last layer's products of absolute weights with a relative error of
`RELATIVE_ERROR` on the encoder's output (18 times the largest measured). `greedy_actions`
returns the argmax only where each op's best level beats every other level by more than both
bounds, or ties it where both are 0 (torch's argmax, like numpy's, takes the first maximum), and
None otherwise, for the caller to run the torch policy. `policy.RegalPolicy` is this module's
reference twin: tests/test_regal_scale.py compares both on random graphs and policies.
"""

from __future__ import annotations

import collections
import ctypes
import io
import math
import pickle
import struct
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.learning.features import EDGE_FEATURE_NAMES, GraphFeatures, node_feature_names
from graphopt.learning.formats import CheckpointError, check_envelope
from graphopt.learning.systems.regal.actions import gene_distributions
from graphopt.learning.systems.regal.config import PolicyConfig
from graphopt.learning.systems.regal.records import REGAL_FORMAT, PolicyFields, policy_fields
from graphopt.solvers.brkga import GeneDistributions
from graphopt.solvers.random_keys import RandomKeyDecoder

RELATIVE_ERROR = 1e-5
"""Assumed bound on |numpy - torch| of each encoder output, relative to the largest output of
its op. Measured on the shipped policies over 38 graphs (26 zoo graphs of 93 to 1,638 ops and
12 generated ones): at most 1.6e-7 for message passing, 5.5e-7 for GAS's LSTM."""

LARGEST = 1e30
"""Outputs beyond this magnitude are left to torch (whose float32 overflows near 3.4e38)."""


class Unsupported(Exception):
    """A checkpoint or network this module does not read or run: torch's loader must."""


# --------------------------------------------------------------------------------- reading
class _FloatStorage:
    """Stands for `torch.FloatStorage` in a checkpoint's pickle."""


def _rebuild_tensor(
    storage: Any,
    offset: Any,
    size: Any,
    stride: Any,
    requires_grad: Any = False,
    hooks: Any = None,
    metadata: Any = None,
) -> np.ndarray:
    """`torch._utils._rebuild_tensor_v2` for a dense, contiguous float32 tensor."""
    if not isinstance(storage, np.ndarray) or not isinstance(offset, int):
        raise Unsupported("tensor")
    if not isinstance(size, tuple) or not isinstance(stride, tuple) or len(size) != len(stride):
        raise Unsupported("tensor shape")
    if not all(isinstance(n, int) and n >= 0 for n in (*size, *stride)):
        raise Unsupported("tensor shape")
    count = math.prod(size)
    contiguous = tuple(math.prod(size[i + 1 :]) for i in range(len(size)))
    if count and (stride != contiguous or not 0 <= offset <= storage.size - count):
        raise Unsupported("tensor layout")
    return storage[offset : offset + count].astype(np.float32).reshape(size)


_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch", "FloatStorage"): _FloatStorage,
}
"""Every global a shipped checkpoint's pickle names, and what it becomes here."""


class _Members:
    """The members of a zip archive read from one read of the file (zipfile opens each anew).

    Stored members (torch writes them so) are sliced from the file's bytes and checked against
    their CRC; others are read through zipfile.
    """

    def __init__(self, path: str | Path, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.data = memoryview(Path(path).read_bytes())

    def read(self, name: str) -> memoryview | bytes:
        info = self.archive.getinfo(name)
        start = info.header_offset
        if (
            info.compress_type != zipfile.ZIP_STORED
            or self.data[start : start + 4] != b"PK\x03\x04"
        ):
            return self.archive.read(name)
        name_length, extra_length = struct.unpack("<HH", self.data[start + 26 : start + 30])
        start += 30 + name_length + extra_length
        member = self.data[start : start + info.file_size]
        if len(member) != info.file_size or zlib.crc32(member) != info.CRC:
            raise Unsupported(f"member {name}")
        return member


class _Unpickler(pickle.Unpickler):
    """Builds a checkpoint's record from its pickle and the archive's storages, nothing else."""

    def __init__(self, data: memoryview | bytes, members: _Members, prefix: str) -> None:
        super().__init__(io.BytesIO(data))
        self.members = members
        self.prefix = prefix
        self.storages: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[module, name]
        except KeyError:
            raise Unsupported(f"{module}.{name}") from None

    def persistent_load(self, pid: Any) -> np.ndarray:
        if not (
            isinstance(pid, tuple)
            and len(pid) == 5
            and pid[0] == "storage"
            and pid[1] is _FloatStorage
            and isinstance(pid[2], str)
            and pid[2].isdigit()
            and pid[3] == "cpu"
            and isinstance(pid[4], int)
        ):
            raise Unsupported("storage")
        key, count = pid[2], pid[4]
        if key not in self.storages:
            data = self.members.read(f"{self.prefix}data/{key}")
            if len(data) != 4 * count:
                raise Unsupported("storage size")
            self.storages[key] = np.frombuffer(data, dtype="<f4")
        return self.storages[key]


def read_record(path: str | Path) -> Any:
    """The record a torch checkpoint of float32 tensors holds, tensors as float32 arrays.

    Raises:
        Unsupported: not such a file (torch's loader says what it is).
    """
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pickles) != 1:
                raise Unsupported("archive")
            prefix = pickles[0][: -len("data.pkl")]
            members = _Members(path, archive)
            if f"{prefix}byteorder" in names and members.read(f"{prefix}byteorder") != b"little":
                raise Unsupported("byte order")
            return _Unpickler(members.read(pickles[0]), members, prefix).load()
    except Unsupported:
        raise
    except Exception as error:  # a damaged archive or pickle: torch's loader reports it
        raise Unsupported(str(error)) from None


def _mlp_shapes(prefix: str, inputs: int, hidden: int, outputs: int) -> dict[str, tuple]:
    return {
        f"{prefix}.0.weight": (hidden, inputs),
        f"{prefix}.0.bias": (hidden,),
        f"{prefix}.2.weight": (outputs, hidden),
        f"{prefix}.2.bias": (outputs,),
    }


def _encoder_shapes(prefix: str, config: PolicyConfig) -> dict[str, tuple]:
    hidden = config.hidden
    n_nodes = len(node_feature_names(config.n_devices))
    shapes = _mlp_shapes(f"{prefix}.node_encoder", n_nodes, hidden, hidden)
    if config.encoder == "lstm":
        half = hidden // 2
        for suffix in ("l0", "l0_reverse"):
            shapes[f"{prefix}.lstm.weight_ih_{suffix}"] = (4 * half, hidden)
            shapes[f"{prefix}.lstm.weight_hh_{suffix}"] = (4 * half, half)
            shapes[f"{prefix}.lstm.bias_ih_{suffix}"] = (4 * half,)
            shapes[f"{prefix}.lstm.bias_hh_{suffix}"] = (4 * half,)
        return shapes
    shapes.update(_mlp_shapes(f"{prefix}.edge_encoder", len(EDGE_FEATURE_NAMES), hidden, hidden))
    for direction in ("forward_messages", "backward_messages"):
        shapes.update(_mlp_shapes(f"{prefix}.{direction}.message_mlp", 3 * hidden, hidden, hidden))
    shapes.update(_mlp_shapes(f"{prefix}.update", 2 * hidden, hidden, hidden))
    return shapes


def state_shapes(config: PolicyConfig) -> dict[str, tuple]:
    """Name and shape of every tensor of `RegalPolicy(config).state_dict()`."""
    hidden, k = config.hidden, config.actions.levels
    slots = config.actions.beta_slots(config.n_devices)
    shapes = {**_encoder_shapes("encoder", config), **_encoder_shapes("baseline_encoder", config)}
    for slot in range(slots):
        shapes.update(_mlp_shapes(f"beta_heads.{slot}", hidden, hidden, 2 * k))
    if config.actions.elite_bias:
        shapes.update(_mlp_shapes("bias_head", hidden, hidden, k))
    if config.anchor is not None:
        shapes["anchor"] = (slots,)
    shapes.update(_mlp_shapes("baseline_node", hidden, hidden, hidden))
    shapes.update(_mlp_shapes("baseline_graph", hidden, hidden, 1))
    return shapes


# ------------------------------------------------------------------------------ the network
_BLAS_THREAD_SETTERS = (
    "openblas_set_num_threads_local",
    "scipy_openblas_set_num_threads_local64_",
    "openblas_set_num_threads_local64_",
)
"""Names of OpenBLAS's `int set_num_threads_local(int)` (numpy's wheels rename some symbols)."""


@cache
def _blas_thread_limit() -> Any:
    """OpenBLAS's thread-count setter in numpy's BLAS (returns the previous count), or None."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()})
        for path in paths:
            library = ctypes.CDLL(path)
            for name in _BLAS_THREAD_SETTERS:
                setter = getattr(library, name, None)
                if setter is not None:
                    setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
                    return setter
    except (OSError, IndexError):
        pass
    return None


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Runs the block's numpy matrix products on one thread (as torch's inference does).

    The forward pass is too small to gain from BLAS threads, and right after the feature run
    they collide with the search's numba threads: measured, a 200-op forward pass took 3 ms on
    one thread and up to 220 ms with OpenBLAS's threads on 2 busy cores (530 ms on 669 ops).
    Despite its name, `openblas_set_num_threads_local` sets the process's count in numpy's
    OpenBLAS builds; it is restored when the block ends. Without OpenBLAS (another BLAS, or no
    /proc), nothing changes.
    """
    limit = _blas_thread_limit()
    previous = None if limit is None else limit(1)
    try:
        yield
    finally:
        if limit is not None:
            limit(previous)


def _linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    out = x @ weight.T
    if bias is not None:
        out += bias
    return out


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0.0), out=x)


class _Aggregation:
    """`encoders.mpnn.Aggregation`: per-edge messages summed (or averaged) at one end.

    The sums are torch's `scatter_add_`, bit for bit: each node adds its messages one at a time
    in edge order. Slot k holds every node's k-th edge, so a slot adds one message to each of
    its nodes in one vectorized step; the edges past the first `SLOTS` of a node (ops with
    many consumers) are added by `np.add.at`, which goes through them in order. On the zoo
    graphs this is 2 to 3 times faster than `np.add.reduceat`, whose pairwise sums also differ
    from torch's in the last bits.
    """

    SLOTS = 8

    def __init__(self, at: np.ndarray, n_nodes: int, aggregation: str) -> None:
        counts = np.bincount(at, minlength=n_nodes)
        order = np.argsort(at, kind="stable")
        rank = np.empty(at.shape[0], dtype=np.int64)
        rank[order] = np.arange(at.shape[0]) - (np.cumsum(counts) - counts)[at[order]]
        self.slots = []
        for k in range(min(self.SLOTS, int(counts.max(initial=0)))):
            edges = np.flatnonzero(rank == k)
            self.slots.append((at[edges], edges))
        rest = order[rank[order] >= self.SLOTS]  # by node, then edge order
        self.rest = (at[rest], rest) if rest.size else None
        self.n_nodes = n_nodes
        self.count = None
        if aggregation == "mean":
            self.count = np.maximum(counts, 1).astype(np.float32)[:, None]

    def __call__(self, messages: np.ndarray) -> np.ndarray:
        out = np.zeros((self.n_nodes, messages.shape[1]), dtype=np.float32)
        for nodes, edges in self.slots:
            out[nodes] += messages[edges]
        if self.rest is not None:
            np.add.at(out, self.rest[0], messages[self.rest[1]])
        return out if self.count is None else out / self.count


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.float32(1.0) / (np.float32(1.0) + np.exp(-x))


class NumpyPolicy:
    """A policy network's forward pass in numpy float32 (`policy.RegalPolicy`'s twin).

    Args:
        config: the network's shape.
        weights: every tensor of its state dict, float32 (`state_shapes`).
        fields: what the checkpoint says the policy is for.
    """

    def __init__(
        self, config: PolicyConfig, weights: Mapping[str, np.ndarray], fields: PolicyFields
    ) -> None:
        self.config = config
        self.weights = dict(weights)
        self.fields = fields
        self.feature_evaluations = fields.feature_evaluations
        self.inner = fields.inner
        slots = config.actions.beta_slots(config.n_devices)
        self.heads = [f"beta_heads.{slot}" for slot in range(slots)]
        self.heads += ["bias_head"] * config.actions.elite_bias
        self.constant_heads = not any(self.weights[f"{h}.2.weight"].any() for h in self.heads)
        """Whether every head's last layer is all zeros (the shipped REGAL policies): its
        outputs are then its bias, whatever the encoder says, as long as that is finite."""

    def _mlp(self, prefix: str, x: np.ndarray) -> np.ndarray:
        w = self.weights
        hidden = _relu(_linear(x, w[f"{prefix}.0.weight"], w[f"{prefix}.0.bias"]))
        return _linear(hidden, w[f"{prefix}.2.weight"], w[f"{prefix}.2.bias"])

    def encode(self, features: GraphFeatures, prefix: str = "encoder") -> np.ndarray:
        """[n_ops, hidden] representations (`MPNNEncoder` or `SequenceEncoder`)."""
        if self.config.encoder == "lstm":
            return self._sequence(features, prefix)
        return self._mpnn(features, prefix)

    def _mpnn(self, features: GraphFeatures, prefix: str) -> np.ndarray:
        w, width = self.weights, self.config.hidden
        h = self._mlp(f"{prefix}.node_encoder", features.node)
        edge_h = self._mlp(f"{prefix}.edge_encoder", features.edge)
        source, target = features.edge_index
        at_target = _Aggregation(target, h.shape[0], self.config.aggregation)
        at_source = _Aggregation(source, h.shape[0], self.config.aggregation)
        first = [w[f"{prefix}.{d}_messages.message_mlp.0.weight"] for d in ("forward", "backward")]
        biases = [w[f"{prefix}.{d}_messages.message_mlp.0.bias"] for d in ("forward", "backward")]
        second = [f"{prefix}.{d}_messages.message_mlp.2" for d in ("forward", "backward")]
        node_weight = np.concatenate(
            [first[0][:, :width], first[1][:, :width], first[0][:, width : 2 * width]]
            + [first[1][:, width : 2 * width]]
        )
        edge_weight = np.concatenate([first[0][:, 2 * width :], first[1][:, 2 * width :]])
        edge_part = _linear(edge_h, edge_weight, np.concatenate(biases))
        for _ in range(self.config.rounds):
            node_part = _linear(h, node_weight)
            hidden = _relu(
                node_part[source, : 2 * width] + node_part[target, 2 * width :] + edge_part
            )
            messages = at_target(
                _linear(hidden[:, :width], w[f"{second[0]}.weight"], w[f"{second[0]}.bias"])
            ) + at_source(
                _linear(hidden[:, width:], w[f"{second[1]}.weight"], w[f"{second[1]}.bias"])
            )
            h = self._mlp(f"{prefix}.update", np.concatenate([h, messages], axis=1))
        return h

    def _sequence(self, features: GraphFeatures, prefix: str) -> np.ndarray:
        """MLP_n, then the bidirectional LSTM along the topological order (gates i, f, g, o)."""
        w = self.weights
        h = self._mlp(f"{prefix}.node_encoder", features.node)
        n, half = h.shape[0], self.config.hidden // 2
        result = np.empty((n, 2 * half), dtype=np.float32)
        if n == 0:
            return result
        order = np.argsort(features.topological_rank, kind="stable")
        xs = h[order]
        # Both directions step together: the forward one reads position t, the backward one
        # n - 1 - t, through one block-diagonal recurrent matrix.
        inputs = []
        recurrent = np.zeros((2 * half, 8 * half), dtype=np.float32)
        for i, suffix in enumerate(("l0", "l0_reverse")):
            lstm = f"{prefix}.lstm"
            gates = _linear(xs, w[f"{lstm}.weight_ih_{suffix}"], w[f"{lstm}.bias_ih_{suffix}"])
            gates += w[f"{lstm}.bias_hh_{suffix}"]
            inputs.append(gates if i == 0 else gates[::-1])
            block = slice(4 * half * i, 4 * half * (i + 1))
            recurrent[half * i : half * (i + 1), block] = w[f"{lstm}.weight_hh_{suffix}"].T
        steps = np.concatenate(inputs, axis=1).reshape(n, 2, 4, half)
        outputs = np.empty((n, 2, half), dtype=np.float32)
        state = np.zeros((1, 2 * half), dtype=np.float32)
        cell = np.zeros((2, half), dtype=np.float32)
        for t in range(n):
            gates = steps[t] + (state @ recurrent).reshape(2, 4, half)
            sig = _sigmoid(gates)
            cell = sig[:, 1] * cell + sig[:, 0] * np.tanh(gates[:, 2])
            out = sig[:, 3] * np.tanh(cell)
            outputs[t] = out
            state = out.reshape(1, 2 * half)
        result[order, :half] = outputs[:, 0]
        result[order[::-1], half:] = outputs[:, 1]
        return result

    def _head(self, prefix: str, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A head's outputs and the bound on their difference from torch's."""
        w = self.weights
        first_w, first_b = w[f"{prefix}.0.weight"], w[f"{prefix}.0.bias"]
        second_w = w[f"{prefix}.2.weight"]
        hidden = _relu(_linear(h, first_w, first_b))
        out = _linear(hidden, second_w, w[f"{prefix}.2.bias"])
        # Outputs whose row of W2 is all zeros are exactly the bias, in torch as here.
        exact = ~second_w.any(axis=1)
        if exact.all():
            return out, np.zeros_like(out)
        scale = np.abs(h).max(axis=1, keepdims=True, initial=0.0)
        # |error| of the hidden layer: the input's relative error through |W1|, plus rounding
        # (relu does not increase it); then through |W2|, plus the rounding of the output.
        hidden_error = RELATIVE_ERROR * (
            scale * np.abs(first_w).sum(axis=1) + np.abs(first_b) + hidden
        )
        bound = hidden_error @ np.abs(second_w).T + 4 * np.spacing(np.abs(out))
        return out, np.where(exact, np.float32(0.0), bound)

    def _anchor_logits(self, x: np.ndarray) -> np.ndarray:
        """`RegalPolicy._anchor_logits`, the same float32 operations in the same order."""
        k = self.config.actions.levels
        targets = [
            np.float32(1.0) - x[:, cols] if flip else x[:, cols]
            for cols, flip in self.config.anchor_targets()
        ]
        target = np.concatenate(targets, axis=1) * np.float32(k - 1)
        levels = np.arange(k, dtype=np.float32)
        difference = levels - target[..., None]
        pull = -self.weights["anchor"][None, :, None] * (difference * difference)
        return np.stack([pull, np.zeros_like(pull)], axis=2).reshape(x.shape[0], -1, k)

    def _layer_bound(self, name: str, inputs: list[tuple[int, float]]) -> np.ndarray:
        """Per output, a bound on |W x + b| for x made of blocks of (width, bound on |x|)."""
        weight = np.abs(self.weights[f"{name}.weight"]).astype(np.float64)
        out = np.abs(self.weights[f"{name}.bias"]).astype(np.float64)
        start = 0
        for width, bound in inputs:
            out = out + weight[:, start : start + width].sum(axis=1) * bound
            start += width
        return out

    def _mlp_bound(self, prefix: str, inputs: list[tuple[int, float]]) -> float:
        """A bound on the outputs of `_mlp(prefix, x)` (relu does not increase magnitudes)."""
        hidden = self._layer_bound(f"{prefix}.0", inputs)
        second = np.abs(self.weights[f"{prefix}.2.weight"]).astype(np.float64)
        bias = np.abs(self.weights[f"{prefix}.2.bias"]).astype(np.float64)
        return float((second @ hidden + bias).max(initial=0.0))

    def encoder_bound(self, features: GraphFeatures, prefix: str = "encoder") -> float:
        """A bound on every |h| that `encode` (or torch's encoder) can give, or inf.

        It comes from the weights' absolute row sums and the features' largest magnitude, and
        is inf where it reaches `LARGEST`. Below `LARGEST` (far from float32's overflow, so
        rounding cannot cross it), no encoder output is infinite or NaN, in numpy or torch.
        """
        width = self.config.hidden
        n_nodes = features.node.shape[1]
        with np.errstate(over="ignore", invalid="ignore"):
            x = float(np.abs(features.node).max(initial=0.0))
            h = self._mlp_bound(f"{prefix}.node_encoder", [(n_nodes, x)])
            if self.config.encoder == "lstm":
                # Outputs o * tanh(c) are within [-1, 1] when the gates are finite.
                gates = 0.0
                for suffix in ("l0", "l0_reverse"):
                    w = {
                        key: np.abs(self.weights[f"{prefix}.lstm.{key}_{suffix}"])
                        for key in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
                    }
                    total = w["weight_ih"].sum(axis=1, dtype=np.float64) * h + w["bias_ih"]
                    total = total + w["weight_hh"].sum(axis=1, dtype=np.float64) + w["bias_hh"]
                    gates = max(gates, float(total.max(initial=0.0)))
                return 1.0 if gates < LARGEST else math.inf
            e = float(np.abs(features.edge).max(initial=0.0))
            e = self._mlp_bound(f"{prefix}.edge_encoder", [(len(EDGE_FEATURE_NAMES), e)])
            degrees = [0.0, 0.0]
            if features.edge_index.shape[1]:
                degrees = [
                    float(np.bincount(end).max()) if self.config.aggregation == "add" else 1.0
                    for end in features.edge_index[::-1]  # messages to targets, to sources
                ]
            for _ in range(self.config.rounds):
                blocks = [(width, h), (width, h), (width, e)]
                messages = sum(
                    degree * self._mlp_bound(f"{prefix}.{d}_messages.message_mlp", blocks)
                    for d, degree in zip(("forward", "backward"), degrees, strict=True)
                )
                h = self._mlp_bound(f"{prefix}.update", [(width, h), (width, messages)])
                if not h < LARGEST:
                    return math.inf
        return h if h < LARGEST else math.inf

    def _constant_heads(self, features: GraphFeatures) -> bool:
        """Whether the heads' outputs are their biases here, in torch as in numpy.

        So they are when their last layers are all zeros and every encoder output and every
        hidden value of the heads is certainly finite (`encoder_bound`).
        """
        if not self.constant_heads:
            return False
        h = self.encoder_bound(features)
        width = self.config.hidden
        return h < LARGEST and all(
            self._layer_bound(f"{head}.0", [(width, h)]).max(initial=0.0) < LARGEST
            for head in self.heads
        )

    def logits(
        self, features: GraphFeatures, skip_encoder: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Action logits [n_ops, n_heads, k] (as `RegalPolicy.forward`) and their bounds.

        bound[v, j, a] bounds |logits[v, j, a] - torch's|; 0 means they are equal.

        Args:
            features: one graph's features.
            skip_encoder: where every head's output is its bias (`_constant_heads`), leave
                out the encoder, whose outputs the heads multiply by zero (False: run it
                anyway, the reference for tests).
        """
        k = self.config.actions.levels
        n = features.node.shape[0]
        if skip_encoder and self._constant_heads(features):
            heads = {
                head: (np.tile(self.weights[f"{head}.2.bias"], (n, 1)), None) for head in self.heads
            }
            heads = {head: (out, np.zeros_like(out)) for head, (out, _) in heads.items()}
        else:
            h = self.encode(features)
            if h.size and not np.abs(h).max() < LARGEST:
                raise Unsupported("encoder outputs")
            heads = {head: self._head(head, h) for head in self.heads}
        slots = self.config.actions.beta_slots(self.config.n_devices)
        values = [heads[f"beta_heads.{slot}"][0].reshape(-1, 2, k) for slot in range(slots)]
        bounds = [heads[f"beta_heads.{slot}"][1].reshape(-1, 2, k) for slot in range(slots)]
        if self.config.anchor is not None:
            logits = np.concatenate(values, axis=1) + self._anchor_logits(features.node)
            bound = np.concatenate(bounds, axis=1)
            values = [logits]
            bounds = [np.where(bound > 0, bound + 2 * np.spacing(np.abs(logits)), 0)]
        if self.config.actions.elite_bias:
            out, bound = heads["bias_head"]
            values.append(out.reshape(-1, 1, k))
            bounds.append(bound.reshape(-1, 1, k))
        return np.concatenate(values, axis=1), np.concatenate(bounds, axis=1)

    def baseline(self, features: GraphFeatures) -> np.ndarray:
        """[1] b(G) of one graph (`RegalPolicy.baseline`)."""
        node = self._mlp("baseline_node", self.encode(features, "baseline_encoder"))
        pooled = node.sum(axis=0, keepdims=True) / np.float32(max(node.shape[0], 1))
        return self._mlp("baseline_graph", pooled)[:, 0]


def greedy_actions(logits: np.ndarray, bound: np.ndarray) -> np.ndarray | None:
    """[n_ops, n_heads] argmax actions where they are certainly torch's, else None."""
    if logits.size and not np.abs(logits).max() < LARGEST:
        return None  # non-finite or near torch's overflow: torch decides (and refuses)
    best = logits.argmax(axis=-1)
    top = np.take_along_axis(logits, best[..., None], axis=-1)
    top_bound = np.take_along_axis(bound, best[..., None], axis=-1)
    needed = bound + top_bound
    certain = (top - logits > needed) | (needed == 0)
    np.put_along_axis(certain, best[..., None], True, axis=-1)
    return best if certain.all() else None


def predict_genes(
    policy: NumpyPolicy, features: GraphFeatures, decoder: RandomKeyDecoder
) -> GeneDistributions | None:
    """`inference.predict_genes` with greedy actions, or None where torch must decide them."""
    try:
        with np.errstate(all="ignore"), single_threaded_blas():
            logits, bound = policy.logits(features)
    except Unsupported:
        return None
    actions = greedy_actions(logits, bound)
    if actions is None:
        return None
    problem = decoder.problem
    return gene_distributions(
        actions,
        policy.config.actions,
        decoder.layout,
        problem.graph.tensor_producer,
        policy.inner.config(problem.objective.value),
    )


def _probe_for(config: PolicyConfig) -> GraphFeatures:
    """The 3-op graph on which `checkpoints._check_outputs` probes a policy's outputs."""
    n_features = len(node_feature_names(config.n_devices))
    rng = np.random.default_rng(0)
    return GraphFeatures(
        rng.random((3, n_features), dtype=np.float32),
        np.array([[0, 0, 1], [1, 2, 2]], dtype=np.int64),
        rng.random((3, 2), dtype=np.float32),
        np.arange(3, dtype=np.int64),
    )


def load(path: str | Path, objective: str, n_devices: int) -> NumpyPolicy | None:
    """A shipped policy for numpy inference, or None where torch's loader must load it.

    None also for a file `checkpoints.load_policy` would refuse: that loader says why.
    """
    try:
        record = check_envelope(read_record(path), path, REGAL_FORMAT)
        fields = policy_fields(record, path, objective, n_devices)
        config = fields.config
        if config.encoder == "lstm" and config.hidden % 2:
            raise Unsupported("odd LSTM width")
        state, shapes = record["model_state"], state_shapes(config)
        if not isinstance(state, Mapping) or set(state) != set(shapes):
            raise Unsupported("tensor names")
        for key, shape in shapes.items():
            value = state[key]
            if not isinstance(value, np.ndarray) or value.shape != shape:
                raise Unsupported(f"tensor {key}")
            if not np.isfinite(value).all():
                raise Unsupported(f"tensor {key}")
        policy = NumpyPolicy(config, state, fields)
        probe = _probe_for(config)
        with np.errstate(all="ignore"):
            outputs = [policy.logits(probe)[0], policy.baseline(probe)]
        if not all(np.abs(o).max() < LARGEST for o in outputs):
            raise Unsupported("outputs")
    except (Unsupported, CheckpointError):
        return None
    return policy
