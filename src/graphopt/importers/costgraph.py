"""Loader for TensorFlow `CostGraphDef` text protos, the format of REGAL's released dataset.

REGAL (paper 001) released its synthetic graphs as `tensorflow.CostGraphDef` messages in protobuf
text format. The message types are built here at runtime from a descriptor written after
TensorFlow's `cost_graph.proto`, `tensor_shape.proto` and `types.proto`, so reading these files
needs only the `protobuf` package, not TensorFlow. The descriptor uses proto2 syntax so that the
parser records which scalar fields a file actually sets (see `alias_input_port` below).

How a cost graph becomes a `graphopt.graph/1` graph (docs/format.md section 1):

- Each `node` is one op named by `name`; node `id`s are only used to resolve references. A
  duplicate id or name, or an empty name, is rejected.
- Runtime: `compute_cost` microseconds, in seconds; when `compute_cost` is 0 and `compute_time`
  is positive, `compute_time` is used instead (both are TensorFlow's microsecond estimates).
  `temp_memory` is `temporary_memory_size`. Op attributes: `id`, `device` (when set),
  `compute_time` and `memory_time` (raw microseconds), and `inaccurate` (only when true).
  Cost graphs carry no op type, so ops have no `type`.
- Output `i` of node `n` is the tensor `"n:i"` of `output_info[i].size` bytes, with attributes
  `shape` (list of dims, -1 unknown; left out for an unknown rank) and `dtype` (TensorFlow's enum
  name, e.g. `DT_FLOAT`) when given. Its consumers are the nodes whose `input_info` names it
  (`preceding_node` id, `preceding_port` output index).
- An output whose `alias_input_port` is >= 0 reuses the buffer of that input (an in-place op, a
  reshape, an identity): it allocates nothing. It stays a tensor of size 0, so that
  its readers still run after the aliasing node, and its readers also become consumers of the
  tensor it aliases (followed through chains of aliases), which therefore stays resident until
  they have run. Its `alias_of` attribute names that tensor. -1 means no alias.
  TensorFlow writes these files from proto3 messages: zeros are omitted and -1 is written for
  every output that aliases nothing, so an absent field means port 0 (when the node has inputs).
- Each `control_input` id `p` of node `n` is a size-0 tensor `"^p->n"` from `p` to `n`, the
  contract's control dependency (repeated ids give one tensor).
- `persistent_memory_size > 0` adds a persistent tensor `"n:persistent"` of that size produced by
  `n` with no consumers: memory the node holds for the whole run (variables, their state).
- Graph attributes: `source="costgraph"`, plus `aggregated_cost` ({dimension: cost}) when the file
  has `cost` entries.

Unreadable text, a reference to an unknown id or to a missing output, a negative size and a bad
alias port raise `ModelImportError` naming the node; the contract's own rules (a cycle, a negative
runtime or temp memory) are checked by `Graph.from_arrays`, which raises `GraphError`.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf.message import Message

from graphopt.errors import ModelImportError
from graphopt.importers.builder import GraphBuilder
from graphopt.ir.graph import Graph

MICROSECOND = 1e-6
"""Seconds per microsecond: cost graph times are microseconds, graph runtimes seconds."""

_FieldType = descriptor_pb2.FieldDescriptorProto
_DATA_TYPES = (
    "DT_INVALID DT_FLOAT DT_DOUBLE DT_INT32 DT_UINT8 DT_INT16 DT_INT8 DT_STRING DT_COMPLEX64 "
    "DT_INT64 DT_BOOL DT_QINT8 DT_QUINT8 DT_QINT32 DT_BFLOAT16 DT_QINT16 DT_QUINT16 DT_UINT16 "
    "DT_COMPLEX128 DT_HALF DT_RESOURCE DT_VARIANT DT_UINT32 DT_UINT64"
).split()
"""TensorFlow's `DataType` names, by number; each has a `_REF` twin at number + 100."""
_SUFFIXES = (".pbtxt", ".txt", ".pb", ".costgraph")
"""File name endings dropped to name a graph after its file."""
_LOCATION = re.compile(r"^\d+(:\d+)?\s*:\s*")


def import_costgraph(source: str | Path, *, name: str | None = None) -> Graph:
    """Reads a `CostGraphDef` text proto file into a validated graph.

    Args:
        source: path of the text proto (`node { ... }` entries at the top level).
        name: graph name; defaults to the file name without `.pbtxt`/`.costgraph` endings.

    Raises:
        ModelImportError: the file cannot be read or parsed, or refers to missing nodes/outputs.
        GraphError: the graph breaks a rule of the contract (a cycle, a negative runtime).
    """
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ModelImportError(f"{path}: cannot read the cost graph ({error})") from None
    return _to_graph(_parse(text, str(path)), name or _name_of(path))


def parse_costgraph(text: str, *, name: str = "costgraph") -> Graph:
    """Parses the text of a `CostGraphDef` text proto into a validated graph.

    Raises:
        ModelImportError: the text cannot be parsed or refers to missing nodes/outputs; parse
            errors are located as `<name>:line:column`.
        GraphError: the graph breaks a rule of the contract (a cycle, a negative runtime).
    """
    return _to_graph(_parse(text, f"<{name}>"), name)


def _name_of(path: Path) -> str:
    """The file name without the endings a cost graph file usually has."""
    name = path.name
    while name.lower().endswith(_SUFFIXES):
        name = name[: name.rindex(".")]
    return name or path.name


def _parse(text: str, origin: str) -> Message:
    """The `CostGraphDef` message of `text`, or a one-line error located in `origin`."""
    message = _message_class()()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as error:
        reason = _LOCATION.sub("", str(error)).replace("\n", " ")
        raise ModelImportError(
            f"{origin}:{error.GetLine()}:{error.GetColumn()}: "
            f"not a TensorFlow CostGraphDef text proto: {reason}"
        ) from None
    return message


def _to_graph(costgraph: Message, name: str) -> Graph:
    """Builds the graph of a parsed `CostGraphDef` (semantics in the module docstring)."""
    nodes = list(costgraph.node)
    op_of_id = _index_nodes(nodes)
    _check_references(nodes, op_of_id)
    attrs: dict[str, Any] = {"source": "costgraph"}
    if costgraph.cost:
        attrs["aggregated_cost"] = {c.dimension: c.cost for c in costgraph.cost}
    builder = GraphBuilder(name, attrs)
    for node in nodes:
        runtime = node.compute_cost or max(node.compute_time, 0)
        builder.add_op(
            node.name,
            runtime=runtime * MICROSECOND,
            temp_memory=node.temporary_memory_size,
            id=node.id,
            device=node.device or None,
            compute_time=node.compute_time,
            memory_time=node.memory_time,
            inaccurate=True if node.inaccurate else None,
        )

    # Tensors are keyed by (op index, output port); aliases map such a key to the input's key.
    tensor_of: dict[tuple[int, int], int] = {}
    aliased: dict[tuple[int, int], tuple[int, int]] = {}
    for j, node in enumerate(nodes):
        for port, output in enumerate(node.output_info):
            alias = _alias_port(output, len(node.input_info))
            if alias is not None:
                source = node.input_info[alias]
                aliased[j, port] = (op_of_id[source.preceding_node], source.preceding_port)
            tensor_of[j, port] = builder.add_tensor(
                f"{node.name}:{port}",
                0 if alias is not None else output.size,
                j,
                **_tensor_attrs(output),
            )
        if node.persistent_memory_size > 0:
            builder.add_tensor(
                f"{node.name}:persistent", node.persistent_memory_size, j, persistent=True
            )

    owner = _resolve_aliases(aliased)
    for key, target in owner.items():
        builder.tensor_attrs[tensor_of[key]]["alias_of"] = builder.tensor_names[tensor_of[target]]
    for j, node in enumerate(nodes):
        for source in node.input_info:
            key = (op_of_id[source.preceding_node], source.preceding_port)
            builder.add_consumer(tensor_of[key], j)
            target = owner.get(key)
            # A node reading an alias of its own output closes a cycle through the alias tensor,
            # which the contract's check reports; it must not also consume its own output.
            if target is not None and target[0] != j:
                builder.add_consumer(tensor_of[target], j)
        for predecessor in dict.fromkeys(node.control_input):
            p = op_of_id[predecessor]
            control = builder.add_tensor(f"^{nodes[p].name}->{node.name}", 0, p)
            builder.add_consumer(control, j)
    return builder.build()


def _index_nodes(nodes: list[Message]) -> dict[int, int]:
    """Op index of each node id; rejects empty names and duplicate ids or names."""
    op_of_id: dict[int, int] = {}
    op_of_name: dict[str, int] = {}
    for j, node in enumerate(nodes):
        if not node.name:
            raise ModelImportError(f"node with id {node.id} (node #{j}): has no name")
        if node.name in op_of_name:
            other = nodes[op_of_name[node.name]]
            raise ModelImportError(
                f"node '{node.name}': name is used by two nodes (ids {other.id} and {node.id})"
            )
        if node.id in op_of_id:
            other = nodes[op_of_id[node.id]]
            raise ModelImportError(
                f"node '{node.name}': id {node.id} is already the id of node '{other.name}'"
            )
        op_of_id[node.id] = j
        op_of_name[node.name] = j
    return op_of_id


def _check_references(nodes: list[Message], op_of_id: dict[int, int]) -> None:
    """Rejects references to unknown ids or outputs, negative sizes and bad alias ports."""
    for node in nodes:
        for k, source in enumerate(node.input_info):
            if source.preceding_node not in op_of_id:
                raise ModelImportError(
                    f"node '{node.name}': input {k} refers to unknown node id "
                    f"{source.preceding_node}"
                )
            producer = nodes[op_of_id[source.preceding_node]]
            n_outputs = len(producer.output_info)
            if not 0 <= source.preceding_port < n_outputs:
                raise ModelImportError(
                    f"node '{node.name}': input {k} reads output {source.preceding_port} of node "
                    f"'{producer.name}', which has {n_outputs} output(s)"
                )
        for predecessor in node.control_input:
            if predecessor not in op_of_id:
                raise ModelImportError(
                    f"node '{node.name}': control input refers to unknown node id {predecessor}"
                )
        for port, output in enumerate(node.output_info):
            if output.size < 0:
                raise ModelImportError(
                    f"tensor '{node.name}:{port}': size must be >= 0, got {output.size}"
                )
            alias = _alias_port(output, len(node.input_info))
            if alias is not None and alias >= len(node.input_info):
                raise ModelImportError(
                    f"tensor '{node.name}:{port}': aliases input {alias} of node "
                    f"'{node.name}', which has {len(node.input_info)} input(s)"
                )
        if node.persistent_memory_size < 0:
            raise ModelImportError(
                f"node '{node.name}': persistent_memory_size must be >= 0, "
                f"got {node.persistent_memory_size}"
            )


def _alias_port(output: Message, n_inputs: int) -> int | None:
    """The input port an output aliases, or None (negative: TensorFlow's -1 for no alias).

    TensorFlow writes these files from proto3 messages, which omit zero values, and it writes -1
    explicitly for an output that aliases nothing; so an absent field means port 0 when the node
    has inputs.
    """
    if not output.HasField("alias_input_port"):
        return 0 if n_inputs > 0 else None
    return int(output.alias_input_port) if output.alias_input_port >= 0 else None


def _resolve_aliases(
    aliased: dict[tuple[int, int], tuple[int, int]],
) -> dict[tuple[int, int], tuple[int, int]]:
    """The allocating output each alias ends at, following chains of aliases.

    An alias chain that loops has no allocating output; it is left out, and the dependency cycle
    it implies is reported when the graph is built.
    """
    owner: dict[tuple[int, int], tuple[int, int]] = {}
    for start in aliased:
        chain = {start: None}
        key = aliased[start]
        while key in aliased and key not in owner and key not in chain:
            chain[key] = None
            key = aliased[key]
        if key in chain:
            continue
        target = owner.get(key, key)
        owner.update(dict.fromkeys(chain, target))
    return owner


def _tensor_attrs(output: Message) -> dict[str, Any]:
    """`shape` and `dtype` of an output, when the file gives them."""
    attrs: dict[str, Any] = {}
    if output.HasField("shape") and not output.shape.unknown_rank:
        attrs["shape"] = [int(d.size) for d in output.shape.dim]
    if output.HasField("dtype"):
        attrs["dtype"] = (
            output.DESCRIPTOR.fields_by_name["dtype"].enum_type.values_by_number[output.dtype].name
        )
    return attrs


@cache
def _message_class() -> type[Message]:
    """The `tensorflow.CostGraphDef` class, built once in a private descriptor pool.

    A private pool keeps these types apart from TensorFlow's own, should both be loaded.
    """
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.CostGraphDef"))


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """TensorFlow's cost graph, tensor shape and data type definitions, in one proto2 file."""
    file = descriptor_pb2.FileDescriptorProto(
        name="graphopt/tensorflow_cost_graph.proto", package="tensorflow", syntax="proto2"
    )
    data_type = file.enum_type.add(name="DataType")
    for number, type_name in enumerate(_DATA_TYPES):
        data_type.value.add(name=type_name, number=number)
    for number, type_name in enumerate(_DATA_TYPES[1:], start=101):
        data_type.value.add(name=f"{type_name}_REF", number=number)

    shape = file.message_type.add(name="TensorShapeProto")
    dim = shape.nested_type.add(name="Dim")
    _field(dim, "size", 1, _FieldType.TYPE_INT64)
    _field(dim, "name", 2, _FieldType.TYPE_STRING)
    _field(shape, "dim", 2, _FieldType.TYPE_MESSAGE, ".tensorflow.TensorShapeProto.Dim", True)
    _field(shape, "unknown_rank", 3, _FieldType.TYPE_BOOL)

    costgraph = file.message_type.add(name="CostGraphDef")
    node = costgraph.nested_type.add(name="Node")
    input_info = node.nested_type.add(name="InputInfo")
    _field(input_info, "preceding_node", 1, _FieldType.TYPE_INT32)
    _field(input_info, "preceding_port", 2, _FieldType.TYPE_INT32)
    output_info = node.nested_type.add(name="OutputInfo")
    _field(output_info, "size", 1, _FieldType.TYPE_INT64)
    _field(output_info, "alias_input_port", 2, _FieldType.TYPE_INT64)
    _field(output_info, "shape", 3, _FieldType.TYPE_MESSAGE, ".tensorflow.TensorShapeProto")
    _field(output_info, "dtype", 4, _FieldType.TYPE_ENUM, ".tensorflow.DataType")
    prefix = ".tensorflow.CostGraphDef.Node"
    _field(node, "name", 1, _FieldType.TYPE_STRING)
    _field(node, "device", 2, _FieldType.TYPE_STRING)
    _field(node, "id", 3, _FieldType.TYPE_INT32)
    _field(node, "input_info", 4, _FieldType.TYPE_MESSAGE, f"{prefix}.InputInfo", True)
    _field(node, "output_info", 5, _FieldType.TYPE_MESSAGE, f"{prefix}.OutputInfo", True)
    _field(node, "temporary_memory_size", 6, _FieldType.TYPE_INT64)
    _field(node, "persistent_memory_size", 12, _FieldType.TYPE_INT64)
    _field(node, "host_temp_memory_size", 10, _FieldType.TYPE_INT64)
    _field(node, "device_temp_memory_size", 11, _FieldType.TYPE_INT64)
    _field(node, "device_persistent_memory_size", 16, _FieldType.TYPE_INT64)
    _field(node, "compute_cost", 9, _FieldType.TYPE_INT64)
    _field(node, "compute_time", 14, _FieldType.TYPE_INT64)
    _field(node, "memory_time", 15, _FieldType.TYPE_INT64)
    _field(node, "is_final", 7, _FieldType.TYPE_BOOL)
    _field(node, "control_input", 8, _FieldType.TYPE_INT32, repeated=True)
    _field(node, "inaccurate", 17, _FieldType.TYPE_BOOL)
    cost = costgraph.nested_type.add(name="AggregatedCost")
    _field(cost, "cost", 1, _FieldType.TYPE_FLOAT)
    _field(cost, "dimension", 2, _FieldType.TYPE_STRING)
    _field(costgraph, "node", 1, _FieldType.TYPE_MESSAGE, prefix, True)
    _field(
        costgraph,
        "cost",
        2,
        _FieldType.TYPE_MESSAGE,
        ".tensorflow.CostGraphDef.AggregatedCost",
        True,
    )
    return file


def _field(
    message: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    kind: int,
    type_name: str = "",
    repeated: bool = False,
) -> None:
    """Adds a proto2 optional (or repeated) field to a message descriptor."""
    message.field.add(
        name=name,
        number=number,
        type=kind,
        type_name=type_name or None,
        label=_FieldType.LABEL_REPEATED if repeated else _FieldType.LABEL_OPTIONAL,
    )
