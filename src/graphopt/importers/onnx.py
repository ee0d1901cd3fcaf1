"""ONNX importer: an ONNX model becomes a `graphopt.graph/1` graph (docs/format.md section 1).

The model is loaded without its external data and run through ONNX shape inference, so every size
comes from static shapes and dtypes, never from weight bytes: a model whose external data file is
missing still imports. Then one pass over the (topologically sorted) nodes builds the graph:

- Initializers, graph inputs and `Constant` nodes become source ops (`kind` = "parameter",
  "input" or "constant") that each produce one persistent tensor, as the contract asks for
  weights and inputs (section 5: no schedule may pretend to load them late). Initializers whose
  external data names the same bytes (file, offset, length), as a tied weight saved under two
  names is, are one tensor: the later names alias the first, as an `Identity` would.
- Alias ops (`ALIAS_OPS`) do not allocate: their output is merged into their data input, so a
  reshape chain is counted once, as the PyTorch importer does for views.
- Every other node becomes one op with `type`, `flops` (`FLOP_FORMULAS`), `bytes_accessed` (the
  bytes of its distinct inputs and outputs) and `dtype`, and each named output one tensor.
- The graph's outputs are `output` tensors (section 5: held until the program ends); an output
  that is a weight or an input is resident throughout already.

Runtimes are then the roofline estimates of `graphopt.costmodels.roofline` on the chosen device.
Whatever cannot be sized exactly (a symbolic dim, an unknown shape or dtype, control flow) is a
`ModelImportError` naming the tensor or node: a size silently taken as 0 would corrupt every peak
memory computed later.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from google.protobuf import json_format, text_format
from google.protobuf.message import DecodeError
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, TypeProto

from graphopt.costmodels.roofline import DEFAULT_DEVICE, DeviceSpec, annotate_runtimes
from graphopt.errors import ModelImportError
from graphopt.importers.builder import GraphBuilder
from graphopt.ir.graph import Graph

Shape = tuple[int, ...]
FlopFormula = Callable[[NodeProto, Sequence[Shape | None], Sequence[Shape | None]], int]
"""FLOPs of one node from the node (for its attributes) and the static shapes of its inputs and
outputs, in ONNX order; an absent optional input or output is None."""

DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})

ALIAS_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
"""Default-domain ops whose output is a view of their first input: same bytes, new shape only.

Runtimes (ONNX Runtime, TensorRT) alias these buffers instead of copying, and the PyTorch
importer merges views the same way. Transpose, Expand, Slice and Dropout are not in the list:
they generally materialize a new buffer.
"""

# Element type -> (numpy-style name, bits per element). Strings have no static size.
_DTYPES: dict[int, tuple[str, int]] = {
    TensorProto.FLOAT: ("float32", 32),
    TensorProto.UINT8: ("uint8", 8),
    TensorProto.INT8: ("int8", 8),
    TensorProto.UINT16: ("uint16", 16),
    TensorProto.INT16: ("int16", 16),
    TensorProto.INT32: ("int32", 32),
    TensorProto.INT64: ("int64", 64),
    TensorProto.BOOL: ("bool", 8),
    TensorProto.FLOAT16: ("float16", 16),
    TensorProto.DOUBLE: ("float64", 64),
    TensorProto.UINT32: ("uint32", 32),
    TensorProto.UINT64: ("uint64", 64),
    TensorProto.COMPLEX64: ("complex64", 64),
    TensorProto.COMPLEX128: ("complex128", 128),
    TensorProto.BFLOAT16: ("bfloat16", 16),
    TensorProto.FLOAT8E4M3FN: ("float8_e4m3fn", 8),
    TensorProto.FLOAT8E4M3FNUZ: ("float8_e4m3fnuz", 8),
    TensorProto.FLOAT8E5M2: ("float8_e5m2", 8),
    TensorProto.FLOAT8E5M2FNUZ: ("float8_e5m2fnuz", 8),
    TensorProto.UINT4: ("uint4", 4),
    TensorProto.INT4: ("int4", 4),
    TensorProto.FLOAT4E2M1: ("float4_e2m1fn", 4),
    TensorProto.FLOAT8E8M0: ("float8_e8m0fnu", 8),
    TensorProto.UINT2: ("uint2", 2),
    TensorProto.INT2: ("int2", 2),
    TensorProto.FLOAT6E2M3: ("float6_e2m3fn", 6),
    TensorProto.FLOAT6E3M2: ("float6_e3m2fn", 6),
}


# ------------------------------------------------------------------------------- FLOP formulas
def _elements(shape: Shape | None) -> int:
    return 0 if shape is None else math.prod(shape)


def _present(shapes: Sequence[Shape | None], index: int) -> bool:
    return index < len(shapes) and shapes[index] is not None


def _attr(node: NodeProto, name: str, default: Any) -> Any:
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def _matmul(a_index: int) -> FlopFormula:
    """2 x output elements x K, K being the last dim of input A (at `a_index`)."""

    def flops(
        node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
    ) -> int:
        return 2 * _elements(outputs[0]) * inputs[a_index][-1]

    return flops


def _gemm(node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]) -> int:
    """2 x M x N x K for A @ B, plus M x N for the bias C when present."""
    a = inputs[0]
    k = a[0] if _attr(node, "transA", 0) else a[1]
    out = _elements(outputs[0])
    return 2 * out * k + (out if _present(inputs, 2) else 0)


def _conv(weight_index: int, bias_index: int | None) -> FlopFormula:
    """2 x output elements x (C_in / group) x kernel elements, plus the bias add.

    The weight (at `weight_index`) is [C_out, C_in / group, k1, k2, ...].
    """

    def flops(
        node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
    ) -> int:
        weight, out = inputs[weight_index], _elements(outputs[0])
        bias = bias_index is not None and _present(inputs, bias_index)
        return 2 * out * weight[1] * math.prod(weight[2:]) + (out if bias else 0)

    return flops


def _conv_transpose(
    node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
) -> int:
    """2 x input elements x (C_out / group) x kernel elements, plus the bias add.

    Every input element is scattered into (C_out / group) x kernel outputs, so counting from the
    input stays exact for any stride; the weight is [C_in, C_out / group, k1, k2, ...].
    """
    weight = inputs[1]
    bias = _elements(outputs[0]) if _present(inputs, 2) else 0
    return 2 * _elements(inputs[0]) * weight[1] * math.prod(weight[2:]) + bias


def _attention(
    node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
) -> int:
    """Q @ K^T and P @ V (2 FLOPs per multiply-add each) plus about 5 per score for the softmax.

    Q is [B, H_q, L, E] or [B, L, H_q x E] (then `q_num_heads` gives H_q); K's second-to-last dim
    is the key length S in both layouts.
    """
    query, key_length, out = inputs[0], inputs[1][-2], outputs[0]
    heads = _attr(node, "q_num_heads", 1) if len(query) == 3 else 1
    scores = math.prod(query[:-1]) * heads * key_length
    return 2 * key_length * (_elements(query) + _elements(out)) + 5 * scores


def _recurrent(gates: int, cell: int) -> FlopFormula:
    """FLOPs of RNN (1 gate), GRU (3 gates) and LSTM (4 gates) cells over a whole sequence.

    Per time step, direction and batch row: the gate matmuls 2 x gates x H x (I + H), their
    biases (2 x gates x H when B is given), one activation per gate element and `cell`
    elementwise FLOPs per hidden unit for the state update (LSTM: f*c + i*g and o*tanh(c); GRU:
    r*(...) and (1-z)*n + z*h), plus LSTM peepholes (3 multiply-adds per unit) when P is given.
    X is [seq, batch, I] (layout=1: [batch, seq, I], the same rows); W is
    [directions, gates x H, I].
    """

    def flops(
        node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
    ) -> int:
        x, w = inputs[0], inputs[1]
        directions, hidden, width = w[0], w[1] // gates, x[-1]
        per_row = 2 * gates * hidden * (width + hidden) + (gates + cell) * hidden
        if _present(inputs, 3):
            per_row += 2 * gates * hidden
        if gates == 4 and _present(inputs, 7):
            per_row += 6 * hidden
        return directions * math.prod(x[:-1]) * per_row

    return flops


def _einsum(
    node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
) -> int:
    """Operands contracted pairwise, left to right, as unoptimized `numpy.einsum` does.

    Each pair costs 2 FLOPs per point of the joint index space of its two operands and keeps the
    indices a later operand or the output still needs. One operand (a sum, trace or transpose)
    costs one FLOP per input element.
    """
    equation = _attr(node, "equation", b"").decode().replace(" ", "")
    left, arrow, right = equation.partition("->")
    operands = left.split(",")
    if len(operands) != len(inputs):
        raise ValueError(
            f"equation '{equation}' has {len(operands)} operands for {len(inputs)} inputs"
        )
    sizes: dict[str, int] = {}
    terms = []
    for term, shape in zip(operands, inputs, strict=True):
        named = term.replace("...", "")
        # Broadcast (...) dims, right-aligned across operands, get letters of their own.
        broadcast = [chr(0x100 + k) for k in reversed(range(len(shape) - len(named)))]
        letters = term.replace("...", "".join(broadcast)) if "..." in term else term
        if len(letters) != len(shape):
            raise ValueError(
                f"operand '{term}' of '{equation}' does not fit a rank-{len(shape)} input"
            )
        for letter, size in zip(letters, shape, strict=True):
            sizes[letter] = max(sizes.get(letter, 1), size)
        terms.append(set(letters))
    if len(terms) == 1:
        return _elements(inputs[0])
    if arrow:
        kept = set(right.replace("...", "")) | {c for c in sizes if ord(c) >= 0x100}
    else:
        kept = {c for c in sizes if sum(c in t for t in terms) == 1 or ord(c) >= 0x100}
    total, current = 0, terms[0]
    for i, term in enumerate(terms[1:], start=1):
        joint = current | term
        total += 2 * math.prod(sizes[c] for c in joint)
        current = joint & (kept.union(*terms[i + 1 :]))
    return total


def _pool(node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]) -> int:
    """Output elements x kernel elements: every output reads its whole window."""
    return _elements(outputs[0]) * math.prod(_attr(node, "kernel_shape", ()))


def _input_elements(
    node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
) -> int:
    """One FLOP per input element (reductions and global pooling touch each input once)."""
    return _elements(inputs[0])


def _five_per_element(
    node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
) -> int:
    """About 5 FLOPs per element: mean, variance, scale and shift, or max, exp, sum and divide."""
    return 5 * _elements(outputs[0])


def _no_flops(
    node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
) -> int:
    """Pure data movement: its cost is the bytes it moves, which `bytes_accessed` counts."""
    return 0


def _output_elements(
    node: NodeProto, inputs: Sequence[Shape | None], outputs: Sequence[Shape | None]
) -> int:
    """One FLOP per output element, over all outputs (elementwise ops and activations)."""
    return sum(_elements(shape) for shape in outputs)


_NORMALIZATIONS = (
    "BatchNormalization",
    "LayerNormalization",
    "InstanceNormalization",
    "GroupNormalization",
    "RMSNormalization",
    "MeanVarianceNormalization",
    "LpNormalization",
)
_SOFTMAXES = ("Softmax", "LogSoftmax")
_REDUCTIONS = (
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "ArgMax",
    "ArgMin",
    "TopK",
)
_DATA_MOVEMENT = (
    "Gather",
    "GatherElements",
    "GatherND",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "Concat",
    "Split",
    "Slice",
    "Transpose",
    "Pad",
    "Expand",
    "Tile",
    "DepthToSpace",
    "SpaceToDepth",
    "Shape",
    "Size",
    "ConstantOfShape",
    "Compress",
    "ReverseSequence",
    "Trilu",
    "OneHot",
    "EyeLike",
    "CenterCropPad",
)

FLOP_FORMULAS: dict[str, FlopFormula] = {
    "MatMul": _matmul(0),
    "MatMulInteger": _matmul(0),
    "QLinearMatMul": _matmul(0),
    "Gemm": _gemm,
    "Conv": _conv(1, 2),
    "ConvInteger": _conv(1, None),
    "QLinearConv": _conv(3, 8),
    "ConvTranspose": _conv_transpose,
    "Attention": _attention,
    "Einsum": _einsum,
    "RNN": _recurrent(1, 0),
    "GRU": _recurrent(3, 5),
    "LSTM": _recurrent(4, 5),
    **dict.fromkeys(("MaxPool", "AveragePool", "LpPool"), _pool),
    **dict.fromkeys(("GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"), _input_elements),
    **dict.fromkeys(_NORMALIZATIONS + _SOFTMAXES, _five_per_element),
    **dict.fromkeys(_REDUCTIONS, _input_elements),
    **dict.fromkeys(_DATA_MOVEMENT, _no_flops),
}
"""FLOPs per op type (a multiply-add counts 2). Any type not listed, e.g. elementwise unary and
binary ops, activations, casts and custom-domain ops, counts one FLOP per output element
(`_output_elements`): right for elementwise work, an underestimate for unknown heavy kernels."""


def _count_flops(
    node: NodeProto,
    op_type: str,
    label: str,
    inputs: Sequence[Shape | None],
    outputs: Sequence[Shape | None],
) -> int:
    """FLOPs of `node` (type `op_type`, domain-prefixed outside the default domain).

    Raises:
        ModelImportError: when the shapes or attributes do not fit the op's formula (a malformed
            model: a missing input shape, a wrong rank, an attribute of the wrong type).
    """
    formula = FLOP_FORMULAS.get(op_type, _output_elements)
    try:
        return int(formula(node, inputs, outputs))
    except (IndexError, TypeError, ValueError, AttributeError) as error:
        raise ModelImportError(
            f"{label}: input shapes {list(inputs)} do not fit the {op_type} FLOP formula ({error})"
        ) from None


# ------------------------------------------------------------------------------------ importer
def import_onnx(
    source: str | Path | ModelProto,
    *,
    name: str | None = None,
    device: str | DeviceSpec = DEFAULT_DEVICE,
) -> Graph:
    """Imports an ONNX model as a graph with roofline runtimes.

    Args:
        source: path of an `.onnx` file (its external data is never read) or a loaded model.
        name: graph name; defaults to the file's stem, then the ONNX graph's name.
        device: device spec (or its name) the roofline runtimes are estimated for.

    Returns:
        The validated graph; its attrs hold `source="onnx"`, `opset` (default-domain opset
        version) and `producer_name`.

    Raises:
        ModelImportError: the file is not an ONNX model, or a node or tensor cannot be imported
            (message names it and the rule).
        GraphError: the resulting graph breaks the contract.
    """
    if isinstance(source, ModelProto):
        model, where, stem = source, "model", ""
    else:
        model, where, stem = _load(Path(source)), str(source), Path(source).stem
    if not model.HasField("graph"):
        raise ModelImportError(f"{where}: not an ONNX model (it has no graph)")
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except _INFERENCE_ERRORS as error:
        raise ModelImportError(f"{where}: shape inference failed ({_one_line(error)})") from None
    opsets = [entry.version for entry in model.opset_import if entry.domain in DEFAULT_DOMAINS]
    attrs: dict[str, Any] = {"source": "onnx", "producer_name": model.producer_name}
    if opsets:
        attrs["opset"] = opsets[0]
    reader = _GraphReader(model.graph)
    reader.read(model.graph)
    builder = GraphBuilder(name or stem or model.graph.name or "onnx", attrs)
    return annotate_runtimes(reader.build(builder), device)


# What `onnx.load` raises for content that is not a model in the format the file's extension
# selects (binary protobuf by default; JSON, text proto or ONNX text for their extensions).
_PARSE_ERRORS = (
    DecodeError,
    json_format.ParseError,
    text_format.ParseError,
    onnx.parser.ParseError,
    UnicodeDecodeError,
)


# What shape inference raises for a malformed model: its own errors, and C++ exceptions that
# surface as ValueError (`vector::reserve` for a Loop node without its body) or RuntimeError.
_INFERENCE_ERRORS = (
    onnx.shape_inference.InferenceError,
    onnx.checker.ValidationError,
    ValueError,
    RuntimeError,
)


def _load(path: Path) -> ModelProto:
    """The model at `path` without external data; its sizes come from shapes, not weight bytes."""
    try:
        return onnx.load(path, load_external_data=False)
    except OSError as error:
        raise ModelImportError(f"{path}: cannot read the ONNX file ({error.strerror})") from None
    except _PARSE_ERRORS as error:
        raise ModelImportError(f"{path}: not an ONNX model ({_one_line(error)})") from None


@dataclass(frozen=True)
class _Tensor:
    name: str
    shape: Shape
    dtype: str
    size: int
    producer: int
    persistent: bool


class _GraphReader:
    """Ops, tensors and edges of one shape-inferred ONNX graph, collected in one pass.

    Tensors go into the builder before ops, so tensors keep their ONNX value names exactly and an
    op whose node name collides with a value name is the one that gets a suffix.
    """

    def __init__(self, graph: GraphProto) -> None:
        self.types: dict[str, TypeProto] = {
            value.name: value.type for value in (*graph.input, *graph.value_info, *graph.output)
        }
        self.ops: list[tuple[str, dict[str, Any]]] = []
        self.tensors: list[_Tensor] = []
        self.edges: list[tuple[int, int]] = []
        # ONNX value name -> index of the tensor holding it (an alias output -> its data tensor),
        # and the value's own shape, which an alias changes.
        self.tensor_of: dict[str, int] = {}
        self.shape_of: dict[str, Shape] = {}
        self.returned: set[int] = set()
        self.stored: dict[tuple[str, str, str], int] = {}  # external bytes -> tensor

    def read(self, graph: GraphProto) -> None:
        """Adds the sources, then every node in order, then checks the graph outputs exist."""
        for initializer in graph.initializer:
            if initializer.name in self.tensor_of:
                raise ModelImportError(
                    f"initializer '{initializer.name}' is defined twice (ONNX values are "
                    "assigned once)"
                )
            stored = _external_bytes(initializer)
            if stored in self.stored:
                held = self.tensor_of[initializer.name] = self.stored[stored]
                self.shape_of[initializer.name] = tuple(initializer.dims)
                self.ops[self.tensors[held].producer][1].setdefault("aliases", []).append(
                    initializer.name
                )
                continue
            self._add_source(initializer.name, "parameter", initializer=initializer)
            if stored is not None:
                self.stored[stored] = self.tensor_of[initializer.name]
        for sparse in graph.sparse_initializer:
            dense = TensorProto(name=sparse.values.name, data_type=sparse.values.data_type)
            dense.dims.extend(sparse.dims)
            self._add_source(dense.name, "parameter", initializer=dense)
        for value in graph.input:
            if value.name not in self.tensor_of:
                self._add_source(value.name, "input")
        for index, node in enumerate(graph.node):
            self._add_node(node, index)
        for value in graph.output:
            if value.name not in self.tensor_of:
                raise ModelImportError(
                    f"graph output '{value.name}' is not produced by any node, initializer or "
                    "graph input"
                )
            self.returned.add(self.tensor_of[value.name])

    def build(self, builder: GraphBuilder) -> Graph:
        """The collected graph, built and validated by `builder`."""
        for index, tensor in enumerate(self.tensors):
            added = builder.add_tensor(
                tensor.name,
                tensor.size,
                tensor.producer,
                persistent=tensor.persistent,
                shape=list(tensor.shape),
                dtype=tensor.dtype,
            )
            if index in self.returned:
                builder.mark_output(added)
        for base_name, attrs in self.ops:
            builder.add_op(base_name, **attrs)
        for tensor, op in self.edges:
            builder.add_consumer(tensor, op)
        return builder.build()

    def _add_source(
        self,
        value: str,
        kind: str,
        *,
        initializer: TensorProto | None = None,
        node: NodeProto | None = None,
        label: str = "",
    ) -> None:
        """A source op producing one persistent tensor: a weight, a graph input or a constant.

        Initializers are sized from their `dims` (never from their data, which may be external
        and missing); inputs and constants from shape inference. Weights and inputs are named
        `kind:value`, constants after their node.
        """
        op_name = (node.name or node.op_type) if node is not None else f"{kind}:{value}"
        producer = label or f"op '{op_name}'"
        if initializer is None:
            shape, dtype, bits = self._value_type(value, producer)
        else:
            shape = tuple(initializer.dims)
            dtype, bits = _dtype(initializer.data_type, f"tensor '{value}' produced by {producer}")
        self.ops.append((op_name, {"kind": kind}))
        self._add_tensor(value, shape, dtype, bits, persistent=True)

    def _add_node(self, node: NodeProto, index: int) -> None:
        label = _node_label(node, index)
        for attribute in node.attribute:
            if attribute.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
                raise ModelImportError(
                    f"{label}: control flow is not supported; export with static control flow"
                )
        inputs = [value for value in node.input if value]
        for value in inputs:
            if value not in self.tensor_of:
                raise ModelImportError(
                    f"{label}: input '{value}' is not an initializer, a graph input or an output "
                    "of an earlier node (ONNX nodes must be topologically sorted)"
                )
        for value in node.output:
            if value in self.tensor_of:
                raise ModelImportError(
                    f"{label}: output '{value}' is already defined (ONNX values are assigned once)"
                )
        default_domain = node.domain in DEFAULT_DOMAINS
        if default_domain and node.op_type == "Constant":
            self._add_source(node.output[0], "constant", node=node, label=label)
        elif default_domain and node.op_type in ALIAS_OPS:
            self._add_alias(node, label)
        else:
            self._add_kernel(node, label)

    def _add_alias(self, node: NodeProto, label: str) -> None:
        """Merges the node's output into its data input: consumers read the input's tensor."""
        output = node.output[0] if node.output else ""
        if not output:
            return
        if not (node.input and node.input[0]):
            raise ModelImportError(f"{label}: has no data input (input 0 is missing)")
        self.shape_of[output] = self._value_type(output, label)[0]
        self.tensor_of[output] = self.tensor_of[node.input[0]]

    def _add_kernel(self, node: NodeProto, label: str) -> None:
        """One op with type, FLOPs, bytes accessed and dtype; one tensor per named output."""
        op = len(self.ops)
        op_type = (
            node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
        )
        touched: set[int] = set()
        for value in node.input:
            if value:
                touched.add(self.tensor_of[value])
                self.edges.append((self.tensor_of[value], op))
        dtypes: list[str] = []
        for value in node.output:
            if value:
                shape, dtype, bits = self._value_type(value, label)
                touched.add(self._add_tensor(value, shape, dtype, bits, producer=op))
                dtypes.append(dtype)
        flops = _count_flops(
            node,
            op_type,
            label,
            [self.shape_of.get(value) for value in node.input],
            [self.shape_of.get(value) for value in node.output],
        )
        self.ops.append(
            (
                node.name or node.op_type,
                {
                    "type": op_type,
                    "flops": flops,
                    "bytes_accessed": sum(self.tensors[t].size for t in touched),
                    "dtype": dtypes[0] if dtypes else None,
                },
            )
        )

    def _add_tensor(
        self,
        value: str,
        shape: Shape,
        dtype: str,
        bits: int,
        *,
        producer: int | None = None,
        persistent: bool = False,
    ) -> int:
        """Records a tensor for ONNX value `value` (produced by the last op added by default)."""
        index = len(self.tensors)
        size = (math.prod(shape) * bits + 7) // 8
        owner = len(self.ops) - 1 if producer is None else producer
        self.tensors.append(_Tensor(value, shape, dtype, size, owner, persistent))
        self.tensor_of[value] = index
        self.shape_of[value] = shape
        return index

    def _value_type(self, value: str, producer: str) -> tuple[Shape, str, int]:
        """Static shape, dtype name and bits per element of `value`, from shape inference."""
        where = f"tensor '{value}' produced by {producer}"
        value_type = self.types.get(value)
        kind = None if value_type is None else value_type.WhichOneof("value")
        if kind is None:
            raise ModelImportError(
                f"{where}: no type or shape after shape inference; export with static shapes"
            )
        if kind != "tensor_type":
            raise ModelImportError(f"{where}: type is {kind}, only tensors are supported")
        tensor_type = value_type.tensor_type
        dtype, bits = _dtype(tensor_type.elem_type, where)
        if not tensor_type.HasField("shape"):
            raise ModelImportError(f"{where}: shape is unknown; export with static shapes")
        shape = []
        for axis, dim in enumerate(tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value >= 0:
                shape.append(dim.dim_value)
            else:
                what = f"symbolic ('{dim.dim_param}')" if dim.dim_param else "unknown"
                raise ModelImportError(f"{where}: dim {axis} is {what}; export with static shapes")
        return tuple(shape), dtype, bits


def _dtype(elem_type: int, where: str) -> tuple[str, int]:
    """Numpy-style name and bits per element of an ONNX element type (`where` names the tensor)."""
    if elem_type not in _DTYPES:
        type_name = (
            TensorProto.DataType.Name(elem_type)
            if elem_type in TensorProto.DataType.values()
            else str(elem_type)
        )
        raise ModelImportError(
            f"{where}: dtype {type_name} is not supported (only numeric and bool tensors have a "
            "static size)"
        )
    return _DTYPES[elem_type]


def _external_bytes(initializer: TensorProto) -> tuple[str, str, str] | None:
    """(file, offset, length) of an initializer's external data, as written; None when inline."""
    if initializer.data_location != TensorProto.EXTERNAL:
        return None
    entries = {entry.key: entry.value for entry in initializer.external_data}
    if "location" not in entries:
        return None
    return entries["location"], entries.get("offset", "0"), entries.get("length", "")


def _node_label(node: NodeProto, index: int) -> str:
    """How errors name a node: its name, else its position, with its op type."""
    if node.name:
        return f"node '{node.name}' ({node.op_type})"
    return f"unnamed node #{index} ({node.op_type})"


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
