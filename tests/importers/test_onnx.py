"""ONNX importer: tiny hand-built models, hand-computed sizes and FLOPs, bad input, torch export."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from graphopt.costmodels.roofline import DEVICE_SPECS, DeviceSpec
from graphopt.costmodels.score import score
from graphopt.errors import ModelImportError
from graphopt.importers.onnx import ALIAS_OPS, import_onnx
from graphopt.ir.graph import Graph
from graphopt.ir.solution import topological_schedule

F32 = TensorProto.FLOAT


def _value(name: str, shape: list[int | str] | None, dtype: int = F32) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _init(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: list[TensorProto] = (),
    value_info: list[onnx.ValueInfoProto] = (),
    opset: int = 21,
    domains: tuple[str, ...] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers), None, value_info)
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in domains)]
    return helper.make_model(graph, opset_imports=opsets, producer_name="graphopt-tests")


def _mlp_model() -> onnx.ModelProto:
    """x[2,3] @ W[3,4] + b[4] -> Relu."""
    return _model(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
            helper.make_node("Add", ["h", "b"], ["z"], name="add"),
            helper.make_node("Relu", ["z"], ["y"], name="relu"),
        ],
        [_value("x", [2, 3])],
        [_value("y", [2, 4])],
        [_init("W", np.ones((3, 4), np.float32)), _init("b", np.zeros(4, np.float32))],
    )


def _chain_model() -> onnx.ModelProto:
    """x[2,3,4] through every alias op into MatMul -> Relu, whose output is aliased again."""
    return _model(
        [
            helper.make_node("Reshape", ["x", "s"], ["r1"], name="reshape"),
            helper.make_node("Unsqueeze", ["r1", "axes"], ["r2"], name="unsqueeze"),
            helper.make_node("Squeeze", ["r2", "axes"], ["r3"], name="squeeze"),
            helper.make_node("Flatten", ["r3"], ["r4"], name="flatten", axis=1),
            helper.make_node("Identity", ["r4"], ["r5"], name="identity"),
            helper.make_node("MatMul", ["r5", "W"], ["h"], name="matmul"),
            helper.make_node("Relu", ["h"], ["y0"], name="relu"),
            helper.make_node("Identity", ["y0"], ["y"], name="out"),
        ],
        [_value("x", [2, 3, 4])],
        [_value("y", [6, 5])],
        [
            _init("s", np.array([6, 4], np.int64)),
            _init("axes", np.array([0], np.int64)),
            _init("W", np.ones((4, 5), np.float32)),
        ],
    )


def _attrs(graph: Graph, op: str) -> dict:
    return dict(graph.op_attrs[graph.op_ids[op]])


def _size(graph: Graph, tensor: str) -> int:
    return int(graph.tensor_size[graph.tensor_ids[tensor]])


def _consumers(graph: Graph, tensor: str) -> list[str]:
    return [graph.op_names[j] for j in graph.consumers(graph.tensor_ids[tensor])]


def _roofline(graph: Graph, spec: DeviceSpec) -> np.ndarray:
    """Hand-written roofline over the op attrs: vector peak, or the tensor-core peak for half
    precision matrix ops; sources (no flops) are not kernels."""
    expected = []
    for attrs in graph.op_attrs:
        if "flops" not in attrs:
            expected.append(0.0)
            continue
        half_matrix = attrs["type"] in ("MatMul", "Gemm", "Conv") and attrs["dtype"] == "float16"
        peak = spec.half_matmul_flops if half_matrix else spec.fp32_flops
        compute = attrs["flops"] / peak
        memory = attrs["bytes_accessed"] / spec.memory_bandwidth
        expected.append(max(compute, memory) + spec.launch_overhead)
    return np.array(expected)


# ---------------------------------------------------------------------------- structure, sizes
def test_mlp_ops_tensors_sizes_and_flops():
    graph = import_onnx(_mlp_model(), name="mlp")
    assert graph.name == "mlp"
    assert graph.op_names == ("parameter:W", "parameter:b", "input:x", "matmul", "add", "relu")
    assert graph.tensor_names == ("W", "b", "x", "h", "z", "y")
    assert list(graph.tensor_size) == [48, 16, 24, 32, 32, 32]
    assert list(graph.tensor_persistent) == [True, True, True, False, False, False]
    assert list(graph.tensor_output) == [False, False, False, False, False, True]  # y returned
    assert [_attrs(graph, op)["kind"] for op in graph.op_names[:3]] == [
        "parameter",
        "parameter",
        "input",
    ]
    assert _attrs(graph, "matmul") == {
        "type": "MatMul",
        "fusion": "contraction",
        "flops": 2 * 2 * 4 * 3,
        "compute_time": 2 * 2 * 4 * 3 / DEVICE_SPECS["a100"].fp32_flops,
        "bytes_accessed": 24 + 48 + 32,
        "dtype": "float32",
    }
    assert [_attrs(graph, op)["fusion"] for op in ("add", "relu", "input:x")] == [
        "elementwise",
        "elementwise",
        "none",
    ]
    assert _attrs(graph, "add")["flops"] == 8 and _attrs(graph, "add")["bytes_accessed"] == 80
    assert _attrs(graph, "relu")["flops"] == 8 and _attrs(graph, "relu")["bytes_accessed"] == 64
    assert _consumers(graph, "h") == ["add"] and _consumers(graph, "y") == []
    assert graph.tensor_attrs[graph.tensor_ids["W"]] == {"shape": [3, 4], "dtype": "float32"}
    assert dict(graph.attrs) == {
        "source": "onnx",
        "producer_name": "graphopt-tests",
        "opset": 21,
        "runtime_source": "roofline:a100",
        "kernel": {"memory_bandwidth": 2039e9, "launch_overhead": 5e-6},
    }
    assert graph.kernel == (2039e9, 5e-6)


def test_runtimes_are_the_roofline_of_the_chosen_device():
    model = _model(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        [_value("x", [64, 128], TensorProto.FLOAT16)],
        [_value("y", [64, 256], TensorProto.FLOAT16)],
        [_init("W", np.ones((128, 256), np.float16))],
    )
    for device in ("a100", DEVICE_SPECS["h100"], "cpu"):
        spec = DEVICE_SPECS[device] if isinstance(device, str) else device
        for source in (_mlp_model(), _chain_model(), model):
            graph = import_onnx(source, device=device)
            np.testing.assert_allclose(graph.op_runtime, _roofline(graph, spec), rtol=1e-12)
    assert _attrs(import_onnx(model), "mm")["dtype"] == "float16"


def test_conv_net_flops_match_hand_formulas():
    model = _model(
        [
            helper.make_node(
                "Conv", ["x", "W", "B"], ["c"], name="conv", group=2, strides=[2, 2], pads=[1] * 4
            ),
            helper.make_node("Relu", ["c"], ["r"], name="relu"),
            helper.make_node(
                "MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]
            ),
            helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
            helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
            helper.make_node("Gemm", ["f", "W2", "B2"], ["l"], name="fc", transB=1),
            helper.make_node("Softmax", ["l"], ["y"], name="softmax"),
        ],
        [_value("x", [1, 4, 8, 8])],
        [_value("y", [1, 10])],
        [
            _init("W", np.ones((6, 2, 3, 3), np.float32)),
            _init("B", np.zeros(6, np.float32)),
            _init("W2", np.ones((10, 6), np.float32)),
            _init("B2", np.zeros(10, np.float32)),
        ],
    )
    graph = import_onnx(model)
    conv_out = 1 * 6 * 4 * 4
    assert _size(graph, "c") == conv_out * 4
    assert _attrs(graph, "conv")["flops"] == 2 * conv_out * (4 // 2) * 3 * 3 + conv_out
    assert _attrs(graph, "pool")["flops"] == (6 * 2 * 2) * (2 * 2)
    assert _attrs(graph, "gap")["flops"] == 6 * 2 * 2
    assert _attrs(graph, "fc")["flops"] == 2 * 10 * 6 + 10
    assert _attrs(graph, "softmax")["flops"] == 5 * 10
    assert "flatten" not in graph.op_ids and "f" not in graph.tensor_ids
    assert _consumers(graph, "g") == ["fc"]


def _single_op(op_type: str, inputs: dict, opset: int = 21, **attrs) -> Graph:
    """One node reading graph inputs (given as shapes) and initializers (given as arrays)."""
    names = list(inputs)
    node = helper.make_node(op_type, names, ["y"], name="op", **attrs)
    graph_inputs = [_value(n, s) for n, s in inputs.items() if not isinstance(s, np.ndarray)]
    initializers = [_init(n, a) for n, a in inputs.items() if isinstance(a, np.ndarray)]
    return import_onnx(
        _model(
            [node],
            graph_inputs,
            [helper.make_empty_tensor_value_info("y")],
            initializers,
            opset=opset,
        )
    )


@pytest.mark.parametrize(
    ("op_type", "inputs", "attrs", "flops"),
    [
        ("MatMul", {"a": [2, 5, 3], "b": [3, 4]}, {}, 2 * (2 * 5 * 4) * 3),
        ("MatMul", {"a": [3], "b": [3, 4]}, {}, 2 * 4 * 3),
        ("Gemm", {"a": [3, 2], "b": [3, 4], "c": [4]}, {"transA": 1}, 2 * 8 * 3 + 8),
        ("Gemm", {"a": [2, 3], "b": [3, 4]}, {}, 2 * 8 * 3),
        ("Conv", {"x": [1, 3, 5, 5], "w": [4, 3, 3, 3]}, {}, 2 * (4 * 3 * 3) * 3 * 9),
        # Every input element meets C_out/group x kernel weights, whatever the stride.
        ("ConvTranspose", {"x": [1, 4, 3, 3], "w": [4, 3, 2, 2]}, {"strides": [2, 2]}, 864),
        ("AveragePool", {"x": [1, 2, 6, 6]}, {"kernel_shape": [3, 3], "strides": [3, 3]}, 8 * 9),
        ("GlobalMaxPool", {"x": [1, 2, 6, 6]}, {}, 72),
        ("LayerNormalization", {"x": [4, 8], "scale": [8]}, {}, 5 * 32),
        (
            "BatchNormalization",
            {"x": [2, 3, 4], "s": [3], "b": [3], "m": [3], "v": [3]},
            {},
            5 * 24,
        ),
        ("InstanceNormalization", {"x": [2, 3, 4], "s": [3], "b": [3]}, {}, 5 * 24),
        ("LogSoftmax", {"x": [4, 8]}, {}, 5 * 32),
        ("ReduceSum", {"x": [4, 8], "axes": np.array([1], np.int64)}, {}, 32),
        ("ArgMax", {"x": [4, 8]}, {"axis": 1}, 32),
        ("Transpose", {"x": [4, 8]}, {"perm": [1, 0]}, 0),
        ("Concat", {"a": [4, 8], "b": [4, 8]}, {"axis": 0}, 0),
        ("Gather", {"x": [10, 8], "i": np.array([1, 2], np.int64)}, {}, 0),
        ("Relu", {"x": [4, 8]}, {}, 32),
        ("Mul", {"a": [4, 1], "b": [1, 8]}, {}, 32),
        ("Erf", {"x": [4, 8]}, {}, 32),
    ],
)
def test_flops_formulas(op_type, inputs, attrs, flops):
    graph = _single_op(op_type, inputs, **attrs)
    assert _attrs(graph, "op")["type"] == op_type
    assert _attrs(graph, "op")["flops"] == flops


@pytest.mark.parametrize(
    ("op_type", "inputs", "attrs", "flops"),
    [
        # seq 5 x batch 2 rows; H 6, I 3: 2*4*6*(3+6) gate matmuls + (4+5)*6 elementwise.
        ("LSTM", {"x": [5, 2, 3], "w": [1, 24, 3], "r": [1, 24, 6]}, {"hidden_size": 6}, 10 * 486),
        (
            "LSTM",  # bidirectional, batch-first, with biases (+2*4*6)
            {"x": [2, 5, 3], "w": [2, 24, 3], "r": [2, 24, 6], "b": [2, 48]},
            {"hidden_size": 6, "direction": "bidirectional", "layout": 1},
            2 * 10 * (486 + 48),
        ),
        ("GRU", {"x": [5, 2, 3], "w": [1, 18, 3], "r": [1, 18, 6]}, {"hidden_size": 6}, 10 * 372),
        ("RNN", {"x": [5, 2, 3], "w": [1, 6, 3], "r": [1, 6, 6]}, {"hidden_size": 6}, 10 * 114),
        ("Einsum", {"a": [2, 3], "b": [3, 4]}, {"equation": "ij,jk->ik"}, 2 * 2 * 3 * 4),
        ("Einsum", {"a": [7, 2, 3], "b": [7, 3, 4]}, {"equation": "bij,bjk"}, 2 * 7 * 24),
        ("Einsum", {"a": [7, 2, 3], "b": [3, 4]}, {"equation": "...ij,jk->...ik"}, 2 * 7 * 24),
        # (ij,jk) keeps i,k for the output: 2*2*3*4; then (ik,kl): 2*2*4*5.
        (
            "Einsum",
            {"a": [2, 3], "b": [3, 4], "c": [4, 5]},
            {"equation": "ij,jk,kl->il"},
            2 * 24 + 2 * 40,
        ),
        ("Einsum", {"a": [4, 4]}, {"equation": "ii->"}, 16),
    ],
)
def test_recurrent_and_einsum_flops(op_type, inputs, attrs, flops):
    graph = _single_op(op_type, inputs, opset=14, **attrs)
    assert _attrs(graph, "op")["flops"] == flops


@pytest.mark.parametrize(
    ("inputs", "attrs"),
    [
        ({"q": [2, 4, 5, 8], "k": [2, 4, 7, 8], "v": [2, 4, 7, 6]}, {}),
        (
            {"q": [2, 5, 32], "k": [2, 7, 32], "v": [2, 7, 24]},
            {"q_num_heads": 4, "kv_num_heads": 4},
        ),
    ],
)
def test_attention_flops_in_both_layouts(inputs, attrs):
    graph = _single_op("Attention", inputs, opset=23, **attrs)
    queries, scores = 2 * 4 * 5 * 8, 2 * 4 * 5 * 7
    outputs = 2 * 4 * 5 * 6
    assert _attrs(graph, "op")["flops"] == 2 * 7 * (queries + outputs) + 5 * scores


def test_custom_domain_op_is_prefixed_and_counts_output_elements():
    model = _model(
        [helper.make_node("FusedMatMul", ["a", "b"], ["y"], name="fused", domain="com.microsoft")],
        [_value("a", [2, 3]), _value("b", [3, 4])],
        [_value("y", [2, 4])],
        domains=("com.microsoft",),
    )
    attrs = _attrs(import_onnx(model), "fused")
    assert attrs["type"] == "com.microsoft.FusedMatMul"
    assert attrs["flops"] == 8


# -------------------------------------------------------------------------------------- aliases
def test_reshape_chain_is_counted_once():
    graph = import_onnx(_chain_model())
    assert {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"} == ALIAS_OPS
    assert graph.op_names == (
        "parameter:s",
        "parameter:axes",
        "parameter:W",
        "input:x",
        "matmul",
        "relu",
    )
    assert graph.tensor_names == ("s", "axes", "W", "x", "h", "y0")
    # x 2*3*4 f32 + s 2 i64 + axes 1 i64 + W 4*5 f32 + h 6*5 f32 + y0 6*5 f32.
    assert graph.total_tensor_size == 96 + 16 + 8 + 80 + 120 + 120
    assert _consumers(graph, "x") == ["matmul"]
    assert _consumers(graph, "s") == [] and _consumers(graph, "axes") == []
    assert _attrs(graph, "matmul")["flops"] == 2 * (6 * 5) * 4
    assert _attrs(graph, "matmul")["bytes_accessed"] == 96 + 80 + 120
    # The graph output 'y' aliases y0, so y0's tensor is the one held to the end.
    assert [graph.tensor_names[t] for t in np.flatnonzero(graph.tensor_output)] == ["y0"]


def test_constant_nodes_are_persistent_sources_and_names_stay_unique():
    model = _model(
        [
            helper.make_node("Constant", [], ["c"], value=_init("v", np.ones((2, 3), np.float32))),
            helper.make_node("Add", ["x", "c"], ["s"]),
            helper.make_node("Add", ["s", "c"], ["Add"]),
            helper.make_node("Relu", ["Add"], ["y"], name="y"),
        ],
        [_value("x", [2, 3])],
        [_value("y", [2, 3])],
    )
    graph = import_onnx(model)
    assert graph.tensor_names == ("x", "c", "s", "Add", "y")
    # Unnamed nodes are named after their type; a node name taken by a value gets a suffix.
    assert graph.op_names == ("input:x", "Constant", "Add_2", "Add_3", "y_2")
    assert _attrs(graph, "Constant") == {"kind": "constant", "fusion": "none"}
    assert graph.tensor_persistent[graph.tensor_ids["c"]]
    assert graph.op_runtime[graph.op_ids["Constant"]] == 0.0


# ----------------------------------------------------------------------------------- files
def test_file_import_names_the_graph_after_the_file(tmp_path: Path):
    path = tmp_path / "my_mlp.onnx"
    onnx.save_model(_mlp_model(), path)
    from_file, in_memory = import_onnx(path), import_onnx(_mlp_model())
    assert from_file.name == "my_mlp" and import_onnx(str(path), name="x").name == "x"
    assert from_file.op_names == in_memory.op_names
    np.testing.assert_array_equal(from_file.tensor_size, in_memory.tensor_size)


def test_missing_external_data_still_imports(tmp_path: Path):
    # Shapes are inferred before saving, as exporters store them: without the data file, shape
    # inference alone could not read Reshape's target shape.
    model = onnx.shape_inference.infer_shapes(_chain_model())
    path = tmp_path / "chain.onnx"
    onnx.save_model(
        model,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="chain.data",
        size_threshold=0,
    )
    (tmp_path / "chain.data").unlink()
    stored = onnx.load(path, load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in stored.graph.initializer)
    graph = import_onnx(path)
    assert graph.total_tensor_size == import_onnx(_chain_model()).total_tensor_size


# ------------------------------------------------------------------------------- bad inputs
def _assert_import_error(source, *fragments: str) -> None:
    with pytest.raises(ModelImportError) as error:
        import_onnx(source)
    message = str(error.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_dynamic_dim_names_the_tensor_and_its_producer():
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [_value("x", ["batch", 3])],
        [_value("y", ["batch", 3])],
    )
    _assert_import_error(model, "tensor 'x'", "op 'input:x'", "'batch'", "static shapes")


def test_unknown_output_shape_names_the_tensor_and_node():
    model = _model(
        [helper.make_node("Mystery", ["x"], ["y"], name="mystery", domain="custom")],
        [_value("x", [2, 3])],
        [_value("y", None)],
        domains=("custom",),
    )
    _assert_import_error(model, "tensor 'y'", "node 'mystery'")


@pytest.mark.parametrize(("dtype", "type_name"), [(TensorProto.STRING, "STRING"), (0, "UNDEFINED")])
def test_unsupported_dtype_names_the_tensor(dtype, type_name):
    model = _model(
        [helper.make_node("Identity", ["x"], ["y"], name="id")],
        [_value("x", [2], dtype)],
        [_value("y", [2], dtype)],
    )
    _assert_import_error(model, "tensor 'x'", type_name)


def test_control_flow_names_the_node():
    branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["out"])], "branch", [], [_value("out", [2])]
    )
    model = _model(
        [
            helper.make_node(
                "If", ["cond"], ["y"], name="branchy", then_branch=branch, else_branch=branch
            )
        ],
        [_value("cond", [], TensorProto.BOOL), _value("x", [2])],
        [_value("y", [2])],
    )
    _assert_import_error(model, "node 'branchy' (If)", "control flow is not supported")


def test_unsorted_nodes_name_the_missing_input():
    model = _model(
        [
            helper.make_node("Relu", ["h"], ["y"], name="late"),
            helper.make_node("Relu", ["x"], ["h"]),
        ],
        [_value("x", [2])],
        [_value("y", [2])],
    )
    _assert_import_error(model, "node 'late'", "input 'h'", "topologically sorted")


@pytest.mark.parametrize(
    ("equation", "fragment"),
    [
        ("ij,jk,kl->il", "equation 'ij,jk,kl->il' has 3 operands for 2 inputs"),
        ("ijk,jk->ik", "operand 'ijk' of 'ijk,jk->ik' does not fit a rank-2 input"),
        (None, "equation '' has 1 operands for 2 inputs"),
    ],
)
def test_malformed_einsum_names_the_node_and_the_equation(equation, fragment):
    attrs = {} if equation is None else {"equation": equation}
    node = helper.make_node("Einsum", ["a", "b"], ["y"], name="mix", **attrs)
    model = _model([node], [_value("a", [2, 3]), _value("b", [3, 4])], [_value("y", [2, 4])])
    _assert_import_error(model, "node 'mix' (Einsum)", fragment)


def test_alias_op_without_a_data_input_names_the_node():
    model = _model(
        [helper.make_node("Identity", [""], ["y"], name="orphan")], [], [_value("y", [3])]
    )
    _assert_import_error(model, "node 'orphan' (Identity)", "has no data input")


def test_shape_inference_crash_is_an_import_error():
    # ONNX's C++ shape inference fails with std::length_error (ValueError) on a bodiless Loop.
    model = _model([helper.make_node("Loop", [], ["y"], name="loop")], [], [_value("y", [1])])
    _assert_import_error(model, "model: shape inference failed")


@pytest.mark.parametrize(
    ("op_type", "inputs", "attrs", "opset", "flops"),
    [
        # No input features: 5 x 1 rows still run the recurrence, 2*4*4*4 + (4+5)*4 per row.
        ("LSTM", {"x": [5, 1, 0], "w": [1, 16, 0], "r": [1, 16, 4]}, {"hidden_size": 4}, 14, 820),
        # Empty head dim: only the softmax over the 3 x 3 scores of 2 heads is left.
        ("Attention", {"q": [1, 2, 3, 0], "k": [1, 2, 3, 0], "v": [1, 2, 3, 0]}, {}, 23, 90),
    ],
)
def test_zero_sized_dims_count_flops_without_dividing_by_zero(op_type, inputs, attrs, opset, flops):
    graph = _single_op(op_type, inputs, opset=opset, **attrs)
    assert _attrs(graph, "op")["flops"] == flops


@pytest.mark.parametrize(
    ("file_name", "content", "fragment"),
    [
        ("bad.onnx", b"hello, not a model", "not an ONNX model"),
        ("bad.onnx", b"", "no graph"),
        ("bad.onnx", None, "cannot read"),
        ("bad.json", b'{"format": "graphopt.graph/1", "ops": []}', "not an ONNX model"),
        ("bad.textproto", b"\xff\xfe", "not an ONNX model"),
    ],
)
def test_unreadable_files_are_import_errors(tmp_path: Path, file_name, content, fragment):
    path = tmp_path / file_name
    if content is not None:
        path.write_bytes(content)
    _assert_import_error(path, str(path), fragment)


# ------------------------------------------------------------------------------- torch export
def test_torch_exported_cnn_and_mlp_import_and_score(tmp_path: Path):
    from torch import nn

    cnn = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=2, groups=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()
    mlp = nn.Sequential(
        nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8), nn.Softmax(-1)
    ).eval()
    cases = [(cnn, torch.randn(2, 3, 16, 16), "Conv"), (mlp, torch.randn(4, 32), "Gemm")]
    for model, example, kernel in cases:
        path = tmp_path / f"{kernel}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (example,), path, dynamo=True)
        graph = import_onnx(path)
        assert graph.attrs["producer_name"] == "pytorch" and graph.attrs["opset"] >= 18
        ids = graph.tensor_ids
        for name, parameter in model.named_parameters():
            assert graph.tensor_size[ids[name]] == parameter.numel() * 4
            assert graph.tensor_persistent[ids[name]]
        assert kernel in graph.op_types
        kernels = [j for j, attrs in enumerate(graph.op_attrs) if "flops" in attrs]
        assert np.all(graph.op_runtime[kernels] > 0)
        result = score(graph, topological_schedule(graph, np.zeros(graph.n_ops, np.int32), 1))
        assert result.makespan == pytest.approx(graph.total_runtime)
        persistent = int(graph.tensor_size[graph.tensor_persistent].sum())
        assert persistent < result.peak_memory <= graph.total_tensor_size

    conv_flops = [
        attrs["flops"]
        for attrs in import_onnx(tmp_path / "Conv.onnx").op_attrs
        if attrs.get("type") == "Conv"
    ]
    first, second = 2 * 8 * 16 * 16, 2 * 16 * 3 * 3  # output elements of each conv
    assert conv_flops == [2 * first * 3 * 9 + first, 2 * second * (8 // 2) * 9 + second]


def test_torch_and_onnx_imports_of_one_model_agree(tmp_path: Path) -> None:
    """The documented tolerance: exact, once two exporter differences are accounted for.

    The ONNX exporter folds an eval-mode BatchNorm into the preceding Conv (one op and its output
    fewer), and ATen's max_pool2d_with_indices also returns the int64 indices (one tensor more).
    """
    from test_torch_export import cnn, mlp

    from graphopt.importers.torch_export import import_module

    def kernels_and_activation_bytes(graph: Graph) -> tuple[int, int]:
        kernels = sum(1 for attrs in graph.op_attrs if "kind" not in attrs)
        return kernels, int(graph.tensor_size[~graph.tensor_persistent].sum())

    for build, folded in ((mlp, False), (cnn, True)):
        module, inputs = build()
        torch_graph = import_module(module, inputs)
        path = tmp_path / f"{build.__name__}.onnx"
        torch.onnx.export(module.eval(), inputs, path, dynamo=True)
        onnx_graph = import_onnx(path)
        ops, activations = kernels_and_activation_bytes(torch_graph)
        if folded:
            sizes = dict(zip(torch_graph.tensor_names, torch_graph.tensor_size, strict=True))
            ops -= 1
            activations -= sizes["_native_batch_norm_legit_no_training:0"]
            activations -= sizes["max_pool2d_with_indices:1"]
        assert kernels_and_activation_bytes(onnx_graph) == (ops, activations)
        persistent = torch_graph.tensor_size[torch_graph.tensor_persistent].sum()
        assert onnx_graph.tensor_size[onnx_graph.tensor_persistent].sum() <= persistent
