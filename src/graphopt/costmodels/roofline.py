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
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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
DEFAULT_DEVICE = "a100"

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
    kernel = ~(np.isnan(flops) & np.isnan(bytes_accessed))
    peak = np.where(half_matrix, spec.half_matmul_flops, spec.fp32_flops)
    compute = np.nan_to_num(flops) / peak
    memory = np.nan_to_num(bytes_accessed) / spec.memory_bandwidth
    return np.where(kernel, np.maximum(compute, memory) + spec.launch_overhead, 0.0)


def annotate_runtimes(graph: Graph, spec: DeviceSpec | str = DEFAULT_DEVICE) -> Graph:
    """The graph with every op's runtime set to its roofline estimate on `spec`."""
    spec = device_spec(spec) if isinstance(spec, str) else spec
    half_matrix = np.array(
        [
            attrs.get("type") in MATRIX_TYPES and attrs.get("dtype") in HALF_DTYPES
            for attrs in graph.op_attrs
        ],
        dtype=bool,
    )
    runtime = roofline_runtime(
        graph.op_metadata("flops"), graph.op_metadata("bytes_accessed"), half_matrix, spec
    )
    return graph.with_op_runtimes(runtime).with_attrs(runtime_source=f"roofline:{spec.name}")


def read_profile(path: str | Path) -> dict[str, float]:
    """Measured seconds per op name, from a CSV (`op,seconds`) or a JSON object `{op: seconds}`.

    Raises:
        GraphError: naming the file and the row or key that is not a valid duration.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise GraphError(f"{path}: cannot read the profile ({error.strerror})") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise GraphError(f"{path}: not valid JSON ({error.msg})") from None
        if not isinstance(data, dict):
            raise GraphError(f"{path}: a profile must be a JSON object {{op name: seconds}}")
        rows = list(data.items())
    else:
        rows = [tuple(row) for row in csv.reader(text.splitlines()) if row]
        if rows and rows[0][0].strip().lower() in ("op", "name"):
            rows = rows[1:]
    profile: dict[str, float] = {}
    for number, row in enumerate(rows, start=1):
        if len(row) != 2:
            raise GraphError(f"{path}: row {number} must be 'op,seconds', got {list(row)}")
        name, value = str(row[0]).strip(), row[1]
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = math.nan
        if isinstance(value, bool) or not math.isfinite(seconds) or seconds < 0:
            raise GraphError(
                f"{path}: op '{name}': runtime must be a finite number >= 0, got {value!r}"
            )
        profile[name] = seconds
    return profile


def apply_profile(graph: Graph, profile: Mapping[str, float]) -> Graph:
    """The graph with the runtimes of the profiled ops replaced by their measured seconds.

    Raises:
        GraphError: for a profiled name that is not an op of the graph.
    """
    runtime = graph.op_runtime.copy()
    ids = graph.op_ids
    for name, seconds in profile.items():
        if name not in ids:
            raise GraphError(f"profile names op '{name}', which is not in graph '{graph.name}'")
        runtime[ids[name]] = seconds
    return graph.with_op_runtimes(runtime).with_attrs(runtime_profiled_ops=len(profile))
