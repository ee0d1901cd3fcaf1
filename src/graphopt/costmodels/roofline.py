"""Roofline runtime estimates for imported ops, and measured profiles that override them.

An op's runtime on a device is estimated as

    max(flops / peak_flops, bytes_accessed / memory_bandwidth) + launch_overhead

(Williams, Waterman and Patterson, "Roofline", CACM 2009), from the `flops` and `bytes_accessed`
fields the importers attach to each op. Matrix ops (matmul, convolution, attention) in half
precision use the tensor-core peak; everything else the vector FP32 peak. Ops with neither field
(parameters, inputs, ops that only alias their input) are not kernels and get runtime 0.

The estimates are data, not truth: `read_profile` + `apply_profile` replace them with measured
seconds per op name (a CSV `op,seconds` or a JSON object).
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphopt._messages import describe, reason
from graphopt.costmodels.defaults import DEFAULT_DEVICE
from graphopt.errors import GraphError
from graphopt.ir.graph import Graph


@dataclass(frozen=True)
class DeviceSpec:
    """Published peak numbers of one accelerator.

    Attributes:
        name: short key (`a100`).
        description: product and memory variant the numbers belong to.
        fp32_flops: dense FP32 peak (FLOP/s) of the vector units.
        half_matmul_flops: dense FP16/BF16 tensor-core peak (FLOP/s), for matrix ops.
        memory_bandwidth: main-memory bandwidth (bytes/s).
        launch_overhead: seconds added per kernel (launch and scheduling latency).
        source: where the peaks come from.
    """

    name: str
    description: str
    fp32_flops: float
    half_matmul_flops: float
    memory_bandwidth: float
    launch_overhead: float
    source: str


# Peaks are the vendors' dense (no sparsity) figures. GPU launch overhead: a few microseconds per
# kernel is the commonly measured CUDA launch latency; 5 us is used for all three GPUs.
DEVICE_SPECS: dict[str, DeviceSpec] = {
    spec.name: spec
    for spec in (
        DeviceSpec(
            "v100",
            "NVIDIA Tesla V100 SXM2 32 GB",
            fp32_flops=15.7e12,
            half_matmul_flops=125e12,
            memory_bandwidth=900e9,
            launch_overhead=5e-6,
            source="NVIDIA Tesla V100 datasheet (2018): 15.7 TFLOPS FP32, 125 TFLOPS tensor, "
            "900 GB/s HBM2",
        ),
        DeviceSpec(
            "a100",
            "NVIDIA A100 SXM4 80 GB",
            fp32_flops=19.5e12,
            half_matmul_flops=312e12,
            memory_bandwidth=2039e9,
            launch_overhead=5e-6,
            source="NVIDIA A100 datasheet (2021): 19.5 TFLOPS FP32, 312 TFLOPS FP16/BF16 tensor, "
            "2,039 GB/s HBM2e",
        ),
        DeviceSpec(
            "h100",
            "NVIDIA H100 SXM5 80 GB",
            fp32_flops=67e12,
            half_matmul_flops=989e12,
            memory_bandwidth=3.35e12,
            launch_overhead=5e-6,
            source="NVIDIA H100 datasheet (2023): 67 TFLOPS FP32, 989 TFLOPS FP16/BF16 tensor "
            "(dense), 3.35 TB/s HBM3",
        ),
        DeviceSpec(
            "cpu",
            "generic 8-core AVX2 server CPU, dual-channel DDR4",
            fp32_flops=768e9,
            half_matmul_flops=768e9,
            memory_bandwidth=50e9,
            launch_overhead=1e-6,
            source="8 cores x 3 GHz x 32 FP32 FLOP/cycle (two 8-wide FMA units); DDR4-3200 dual "
            "channel ~51 GB/s; 1 us per-op dispatch",
        ),
    )
}

MATRIX_TYPES = frozenset(
    {
        # core ATen (torch importer)
        "aten.mm",
        "aten.bmm",
        "aten.addmm",
        "aten.baddbmm",
        "aten.convolution",
        "aten._scaled_dot_product_efficient_attention",
        "aten._scaled_dot_product_flash_attention",
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten._scaled_dot_product_flash_attention_for_cpu_backward",
        "aten.convolution_backward",
        # ONNX
        "MatMul",
        "Gemm",
        "Conv",
        "ConvTranspose",
        "MatMulInteger",
        "QLinearMatMul",
        "QLinearConv",
        "Attention",
    }
)
HALF_DTYPES = frozenset({"float16", "bfloat16"})
ATTENTION_BACKWARD = {
    "aten._scaled_dot_product_flash_attention_for_cpu": False,
    "aten._scaled_dot_product_flash_attention_for_cpu_backward": True,
}
"""Fused attention types priced by `attention_flops` -> whether the type is the backward (torch's
FLOP registry prices the CUDA kernels, not these)."""

_REDUCTION_TYPES = frozenset(
    {
        # core ATen: reductions, softmax and normalization statistics (and their backwards)
        *(
            f"aten.{name}"
            for name in (
                "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "var_mean", "std",
                "logsumexp", "argmax", "argmin", "any", "all", "norm", "linalg_vector_norm",
                "cumsum", "_softmax", "_log_softmax", "native_layer_norm", "native_batch_norm",
                "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
                "_native_batch_norm_legit_functional", "native_group_norm",
                "_softmax_backward_data", "_log_softmax_backward_data",
                "native_layer_norm_backward", "native_batch_norm_backward",
                "native_group_norm_backward", "avg_pool2d", "max_pool2d_with_indices",
                "_adaptive_avg_pool2d", "avg_pool2d_backward", "max_pool2d_with_indices_backward",
                "_adaptive_avg_pool2d_backward",
            )
        ),
        # ONNX
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
        "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "Softmax", "LogSoftmax",
        "LayerNormalization", "BatchNormalization", "GroupNormalization",
        "InstanceNormalization", "ArgMax", "ArgMin", "CumSum", "GlobalAveragePool",
        "GlobalMaxPool", "AveragePool", "MaxPool",
    }
)  # fmt: skip
_ELEMENTWISE_TYPES = frozenset(
    {
        # ONNX (ATen ops carry torch's own `pointwise` tag instead)
        "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal",
        "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Sigmoid", "HardSigmoid", "Tanh", "Erf",
        "Gelu", "Softplus", "Clip", "Cast", "Where", "Min", "Max", "Sum", "Mean", "Equal",
        "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Floor",
        "Ceil", "Round", "Sin", "Cos", "Sign", "Expand", "Mod", "BitShift",
        # core ATen data type changes
        "aten._to_copy",
    }
)  # fmt: skip
FUSION_TYPES: dict[str, str] = {
    **dict.fromkeys(_ELEMENTWISE_TYPES, "elementwise"),
    **dict.fromkeys(_REDUCTION_TYPES, "reduction"),
    **dict.fromkeys(MATRIX_TYPES, "contraction"),
}
"""The one table from op types to fusion classes (docs/format.md section 13): pointwise,
broadcast, cast and activation ops are elementwise; reductions, softmax, pooling and
normalization statistics are reductions; matmul, convolution and attention are contractions;
every other type (data movement, indexing, concatenation, scatter, random numbers, ...) is
none. Core ATen ops that torch tags `pointwise` are elementwise too (`fusion_class`)."""


def attention_flops(
    query: tuple[int, ...],
    key: tuple[int, ...],
    value: tuple[int, ...],
    *,
    causal: bool = False,
    backward: bool = False,
) -> int:
    """FLOPs of fused scaled-dot-product attention: its matrix products, as torch counts them.

    Query [N, H, L, E], key [N, Hk, S, E], value [N, Hk, S, Ev] (Hk divides H: grouped-query
    attention broadcasts key and value heads). The forward multiplies Q K^T and the weights by V,
    2 N H (E + Ev) FLOPs per (query, key) pair; the backward recomputes the scores and runs four
    products (gradients of the weights, V, Q and K), 2 N H (3 E + 2 Ev) per pair: 2.5 times the
    forward when E = Ev. A causal kernel skips the pairs above the diagonal, leaving
    sum_i min(i + 1, S) of the L S pairs (L (L + 1) / 2 when L = S). Softmax is not counted,
    as in `torch.utils.flop_counter`.
    """
    n, heads, length, e = query
    memory, e_value = key[2], value[3]
    pairs = length * memory
    if causal:
        below = min(length, memory)
        pairs = below * (below + 1) // 2 + (length - below) * memory
    per_pair = 3 * e + 2 * e_value if backward else e + e_value
    return 2 * n * heads * pairs * per_pair


def fusion_class(op_type: str, pointwise: bool = False) -> str:
    """The fusion class of an op type by `FUSION_TYPES`; torch's `pointwise` tag -> elementwise."""
    return FUSION_TYPES.get(op_type, "elementwise" if pointwise else "none")


def device_spec(name: str) -> DeviceSpec:
    """The spec called `name` (case-insensitive), or a `GraphError` listing the known ones."""
    try:
        return DEVICE_SPECS[name.lower()]
    except KeyError:
        known = ", ".join(DEVICE_SPECS)
        raise GraphError(f"unknown device spec '{name}' (known: {known})") from None


def roofline_runtime(
    flops: np.ndarray, bytes_accessed: np.ndarray, half_matrix: np.ndarray, spec: DeviceSpec
) -> np.ndarray:
    """Roofline seconds per op; ops whose flops and bytes are both NaN (not kernels) get 0.

    Shapes:
        flops, bytes_accessed: [n] float64 (NaN where unknown); half_matrix: [n] bool.
    """
    compute = compute_seconds(flops, half_matrix, spec)
    memory = np.nan_to_num(bytes_accessed) / spec.memory_bandwidth
    return np.where(
        is_kernel(flops, bytes_accessed), np.maximum(compute, memory) + spec.launch_overhead, 0.0
    )


def is_kernel(flops: np.ndarray, bytes_accessed: np.ndarray) -> np.ndarray:
    """[n] bool: ops with flops or bytes accessed (parameters, inputs and aliases have neither)."""
    return ~(np.isnan(flops) & np.isnan(bytes_accessed))


def compute_seconds(flops: np.ndarray, half_matrix: np.ndarray, spec: DeviceSpec) -> np.ndarray:
    """[n] seconds of arithmetic at the peak that applies (tensor cores for half matrix ops)."""
    peak = np.where(half_matrix, spec.half_matmul_flops, spec.fp32_flops)
    return np.nan_to_num(flops) / peak


def annotate_runtimes(graph: Graph, spec: DeviceSpec | str = DEFAULT_DEVICE) -> Graph:
    """The graph with every op's runtime set to its roofline estimate on `spec`.

    It also records what fusion scoring needs (section 13): each kernel's `compute_time`
    (flops / peak), each op's `fusion` class unless the importer set it (`fusion_class` of its
    type), and the graph's `kernel` (the device's memory bandwidth and launch overhead).
    """
    spec = device_spec(spec) if isinstance(spec, str) else spec
    half_matrix = np.array(
        [
            attrs.get("type") in MATRIX_TYPES and attrs.get("dtype") in HALF_DTYPES
            for attrs in graph.op_attrs
        ],
        dtype=bool,
    )
    flops, bytes_accessed = graph.op_metadata("flops"), graph.op_metadata("bytes_accessed")
    runtime = roofline_runtime(flops, bytes_accessed, half_matrix, spec)
    compute = compute_seconds(flops, half_matrix, spec)
    kernel = is_kernel(flops, bytes_accessed)
    op_attrs = [
        {
            **attrs,
            "fusion": attrs.get("fusion", fusion_class(str(attrs.get("type", "")))),
            **({"compute_time": float(compute[j])} if kernel[j] else {}),
        }
        for j, attrs in enumerate(graph.op_attrs)
    ]
    return (
        graph.with_op_runtimes(runtime)
        .with_op_attrs(op_attrs)
        .with_attrs(
            runtime_source=f"roofline:{spec.name}",
            kernel={
                "memory_bandwidth": spec.memory_bandwidth,
                "launch_overhead": spec.launch_overhead,
            },
        )
    )


def read_profile(path: str | Path) -> dict[str, float]:
    """Measured seconds per op name, from a CSV (`op,seconds`) or a JSON object `{op: seconds}`.

    CSV: one `op,seconds` row per op, an optional first row `op,seconds` (a header), blank lines
    ignored. Op names are taken exactly as written; spaces around a number are ignored. JSON
    (`.json`): an object of op names to numbers. Either may start with a byte-order mark.

    Every op may be named once, and every time must be a finite decimal number >= 0: a
    duplicate, `nan`, `inf`, `1e400`, `-1`, an empty cell, `1_000` or `0x10` is refused, never
    dropped or read as something else.

    Raises:
        GraphError: naming the file, the line or op, and the rule it breaks.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as error:
        raise GraphError(f"{path}: cannot read the profile ({error.strerror})") from None
    except UnicodeDecodeError:
        raise GraphError(f"{path}: a profile must be UTF-8 text") from None
    is_json = path.suffix.lower() == ".json"
    rows = _json_rows(path, text) if is_json else _csv_rows(path, text)
    profile: dict[str, float] = {}
    for where, name, value in rows:
        if not isinstance(name, str) or not name:
            raise GraphError(f"{path}: {where}: op name must be non-empty, got {describe(name)}")
        if name in profile:
            raise GraphError(f"{path}: {where}: op {describe(name)} is named twice")
        profile[name] = _profile_seconds(
            value, f"{path}: {where}: op {describe(name)}", not is_json
        )
    return profile


_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


class _JsonObject(list):
    """A JSON object's (key, value) pairs in order, duplicates kept."""


def _csv_rows(path: Path, text: str) -> list[tuple[str, str, str]]:
    """(where, op, seconds text) of each data row of a CSV profile."""
    rows = []
    first = True
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        for row in reader:
            if not row:
                continue
            header = first and [cell.strip().lower() for cell in row] == ["op", "seconds"]
            first = False
            if header:
                continue
            where = f"line {reader.line_num}"
            if len(row) != 2:
                raise GraphError(f"{path}: {where}: must be 'op,seconds', got {len(row)} cells")
            rows.append((where, row[0], row[1].strip()))
    except csv.Error as error:
        raise GraphError(
            f"{path}: line {reader.line_num}: not valid CSV ({reason(error)})"
        ) from None
    return rows


def _json_rows(path: Path, text: str) -> list[tuple[str, str, Any]]:
    """(where, op, seconds) of each member of a JSON profile, duplicates kept."""
    try:
        data = json.loads(text, object_pairs_hook=_JsonObject)
    except (ValueError, RecursionError) as error:  # JSON syntax, integer-size, nesting errors
        raise GraphError(f"{path}: not valid JSON ({reason(error)})") from None
    if not isinstance(data, _JsonObject):
        raise GraphError(f"{path}: a profile must be a JSON object {{op name: seconds}}")
    return [(f"key {i}", name, value) for i, (name, value) in enumerate(data)]


def _profile_seconds(value: Any, where: str, text: bool = False) -> float:
    """A measured time, finite and >= 0: a number, or with `text` a decimal (CSV cells)."""
    seconds = math.nan
    if text and isinstance(value, str) and _DECIMAL.fullmatch(value):
        seconds = float(value)
    elif (
        not text
        and isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool)
    ):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
    if not (math.isfinite(seconds) and seconds >= 0):
        raise GraphError(f"{where}: seconds must be a finite number >= 0, got {describe(value)}")
    return seconds


def apply_profile(graph: Graph, profile: Mapping[str, float]) -> Graph:
    """The graph with the runtimes of the profiled ops replaced by their measured seconds.

    Raises:
        GraphError: for a profiled name that is not an op of the graph (with the closest op
            name when there is one: a misspelt op must not go unnoticed), or a time that is not
            a finite number >= 0.
    """
    runtime = graph.op_runtime.copy()
    ids = graph.op_ids
    for name, seconds in profile.items():
        if name not in ids:
            close = difflib.get_close_matches(str(name), graph.op_names, n=1)
            hint = f"; did you mean {describe(close[0])}?" if close else ""
            raise GraphError(
                f"profile names op {describe(name)}, which is not in graph "
                f"{describe(graph.name)}{hint}"
            )
        runtime[ids[name]] = _profile_seconds(seconds, f"profile: op {describe(name)}")
    return graph.with_op_runtimes(runtime).with_attrs(runtime_profiled_ops=len(profile))
