"""Reading and writing graphs and solutions, in JSON and a compact `.npz` form of graphs.

`graphopt.graph/1` and `graphopt.solution/1` are docs/format.md sections 1 and 2; `.npz` holds
the graph's arrays for datasets.

Loading validates every rule of the contract and raises `GraphError` / `SolutionError` with one
line naming the offending item; nothing is silently repaired. Fields the contract does not score
(`type`, `flops`, `shape`, ...) are kept and written back.
"""

from __future__ import annotations

import difflib
import json
import lzma
import math
import os
import struct
import sys
import tempfile
import tokenize
import zipfile
import zlib
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from graphopt._messages import describe, reason
from graphopt.errors import GraphError, GraphoptError, SolutionError
from graphopt.ir.graph import GRAPH_FIELDS, OP_FIELDS, TENSOR_FIELDS, Graph
from graphopt.ir.solution import Solution, decode_event
from graphopt.limits import MAX_DEVICES, MAX_TOTAL_BYTES

GRAPH_FORMAT = "graphopt.graph/1"
SOLUTION_FORMAT = "graphopt.solution/1"

# The contract's own vocabulary per object (docs/format.md sections 1, 2 and 13): a key
# missing from these lists but close to one of them is a misspelling and is refused; other
# keys are metadata.
_VOCABULARY = {
    "graph": (*GRAPH_FIELDS, "kernel"),
    "op": (
        *OP_FIELDS, "fusion", "compute_time", "recomputable", "deterministic", "type", "flops",
        "bytes_accessed", "shape",
    ),
    "tensor": (*TENSOR_FIELDS, "output"),
    "solution": (
        "format", "graph", "devices", "placement", "schedule", "objective", "solver", "machine",
        "fusion", "remat",
    ),
    "machine": ("devices", "capacity", "latency", "bandwidth", "mode"),
    "objective": ("peak_memory", "makespan", "speedup", "peak_memory_per_device", "feasible"),
}  # fmt: skip
_OP_KEYS = frozenset(OP_FIELDS)
_TENSOR_KEYS = frozenset(TENSOR_FIELDS)
# Metadata keys graphopt's own importers and generators write, never taken for misspellings.
_PROJECT_EXTRAS = frozenset(
    {"dtype", "module", "kind", "device", "id", "inaccurate", "memory_time", "alias_of"}
)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _byte_count(value: Any, where: str, field: str, error: type[GraphoptError]) -> int:
    """An integer number of bytes >= 0 (an integral JSON float such as 1e6 is the same integer)."""
    if _is_number(value) and (
        isinstance(value, int) or math.isfinite(value) and value == int(value)
    ):
        count = int(value)
        if 0 <= count <= MAX_TOTAL_BYTES:
            return count
    if _finite_number(value) and value > MAX_TOTAL_BYTES:
        raise error(f"{where}: {field} must be at most 2**53 (docs/format.md), got {value:.6g}")
    raise error(f"{where}: {field} must be an integer >= 0, got {describe(value)}")


def _seconds(value: Any, where: str, field: str, error: type[GraphoptError]) -> float:
    if _is_number(value):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    raise error(f"{where}: {field} must be a finite number >= 0, got {describe(value)}")


def _object(value: Any, where: str, error: type[GraphoptError]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise error(f"{where}: must be a JSON object, got {describe(value)}")
    return value


def _list(value: Any, where: str, error: type[GraphoptError]) -> list[Any]:
    if not isinstance(value, list):
        raise error(f"{where}: must be a JSON list, got {describe(value)}")
    return value


def _name(item: Mapping[str, Any], where: str, error: type[GraphoptError]) -> str:
    if "name" not in item:
        raise error(f"{where}: missing required field 'name'")
    name = item["name"]
    if not isinstance(name, str) or not name:
        raise error(f"{where}: name must be a non-empty string, got {describe(name)}")
    return name


def _check_format(data: Mapping[str, Any], expected: str, error: type[GraphoptError]) -> None:
    if "format" not in data:
        raise error(f"missing field 'format' (expected '{expected}')")
    if data["format"] != expected:
        raise error(f"format must be '{expected}', got {describe(data['format'])}")


@lru_cache(maxsize=1024)
def _misspelling(key: str, kind: str) -> str | None:
    """The vocabulary field `key` most likely misspells, or None for a genuine extra field."""
    vocabulary = _VOCABULARY[kind]
    if key in vocabulary or key in _PROJECT_EXTRAS:
        return None
    folded = key.lower().replace("_", "").replace("-", "").replace(" ", "")
    for field in vocabulary:
        if field.replace("_", "") == folded:
            return field
    close = difflib.get_close_matches(key.lower(), vocabulary, n=1, cutoff=0.8)
    return close[0] if close else None


def _check_fields(
    item: Mapping[str, Any], kind: str, where: str, error: type[GraphoptError]
) -> None:
    """Refuses a key of `item` that misspells a field of the contract's vocabulary."""
    for key in item:
        if not isinstance(key, str):
            continue
        if (field := _misspelling(key, kind)) is not None:
            raise error(
                f"{where}: unknown field {describe(key)}: did you mean '{field}'? (extra "
                "fields are kept as metadata, but not ones this close to a field of the format)"
            )


# ---------------------------------------------------------------------------------- graphs
def graph_from_json(data: Any) -> Graph:
    """Validates a parsed `graphopt.graph/1` document and builds the graph.

    Raises:
        GraphError: naming the first offending field, op or tensor and the rule it breaks.
    """
    data = _object(data, "graph", GraphError)
    _check_format(data, GRAPH_FORMAT, GraphError)
    _check_fields(data, "graph", "graph", GraphError)
    name = data.get("name", "")
    if not isinstance(name, str):
        raise GraphError(f"name must be a string, got {describe(name)}")
    for field in ("ops", "tensors"):
        if field not in data:
            raise GraphError(f"missing required field '{field}'")
    ops = _list(data["ops"], "ops", GraphError)
    tensors = _list(data["tensors"], "tensors", GraphError)

    op_names: list[str] = []
    runtime = np.zeros(len(ops), dtype=np.float64)
    temp = np.zeros(len(ops), dtype=np.int64)
    op_attrs: list[dict[str, Any]] = []
    op_index: dict[str, int] = {}
    for i, op in enumerate(ops):
        op = _object(op, f"ops[{i}]", GraphError)
        op_name = _name(op, f"ops[{i}]", GraphError)
        if op_name in op_index:
            raise GraphError(f"op '{op_name}': name is not unique")
        if not op.keys() <= _OP_KEYS:
            _check_fields(op, "op", f"op '{op_name}'", GraphError)
        op_index[op_name] = i
        op_names.append(op_name)
        runtime[i] = _seconds(op.get("runtime", 0.0), f"op '{op_name}'", "runtime", GraphError)
        temp[i] = _byte_count(
            op.get("temp_memory", 0), f"op '{op_name}'", "temp_memory", GraphError
        )
        op_attrs.append({k: v for k, v in op.items() if k not in OP_FIELDS})

    tensor_names: list[str] = []
    size = np.zeros(len(tensors), dtype=np.int64)
    producer = np.zeros(len(tensors), dtype=np.int64)
    persistent = np.zeros(len(tensors), dtype=bool)
    output = np.zeros(len(tensors), dtype=bool)
    consumer_count = np.zeros(len(tensors), dtype=np.int64)
    consumers: list[int] = []
    tensor_attrs: list[dict[str, Any]] = []
    seen_tensors: set[str] = set()
    for i, tensor in enumerate(tensors):
        tensor = _object(tensor, f"tensors[{i}]", GraphError)
        tensor_name = _name(tensor, f"tensors[{i}]", GraphError)
        where = f"tensor '{tensor_name}'"
        if tensor_name in seen_tensors:
            raise GraphError(f"{where}: name is not unique")
        seen_tensors.add(tensor_name)
        tensor_names.append(tensor_name)
        if not tensor.keys() <= _TENSOR_KEYS:
            _check_fields(tensor, "tensor", where, GraphError)
        if "size" not in tensor:
            raise GraphError(f"{where}: missing required field 'size'")
        size[i] = _byte_count(tensor["size"], where, "size", GraphError)
        if "producer" not in tensor:
            raise GraphError(f"{where}: missing required field 'producer'")
        made_by = tensor["producer"]
        if not isinstance(made_by, str) or made_by not in op_index:
            raise GraphError(f"{where}: producer {describe(made_by)} is not an op of the graph")
        producer[i] = op_index[made_by]
        used_by = _list(tensor.get("consumers", []), f"{where}: consumers", GraphError)
        for consumer in used_by:
            if not isinstance(consumer, str) or consumer not in op_index:
                raise GraphError(
                    f"{where}: consumer {describe(consumer)} is not an op of the graph"
                )
            if consumer == made_by:
                raise GraphError(f"{where}: lists its producer '{made_by}' as a consumer")
            consumers.append(op_index[consumer])
        consumer_count[i] = len(used_by)
        for field, flags in (("persistent", persistent), ("output", output)):
            flag = tensor.get(field, False)
            if not isinstance(flag, bool):
                raise GraphError(f"{where}: {field} must be true or false, got {describe(flag)}")
            flags[i] = flag
        tensor_attrs.append({k: v for k, v in tensor.items() if k not in TENSOR_FIELDS})

    consumer_ptr = np.zeros(len(tensors) + 1, dtype=np.int64)
    np.cumsum(consumer_count, out=consumer_ptr[1:])
    return Graph.from_arrays(
        name,
        op_names,
        runtime,
        tensor_names,
        size,
        producer,
        consumer_ptr,
        np.array(consumers, dtype=np.int64),
        op_temp_memory=temp,
        tensor_persistent=persistent,
        tensor_output=output,
        op_attrs=op_attrs,
        tensor_attrs=tensor_attrs,
        attrs={k: v for k, v in data.items() if k not in GRAPH_FIELDS},
    )


def graph_to_json(graph: Graph) -> dict[str, Any]:
    """The `graphopt.graph/1` document of a graph (defaults omitted, extra fields kept)."""
    ops = []
    for j, name in enumerate(graph.op_names):
        op: dict[str, Any] = {"name": name, "runtime": float(graph.op_runtime[j])}
        if graph.op_temp_memory[j]:
            op["temp_memory"] = int(graph.op_temp_memory[j])
        op.update(graph.op_attrs[j])
        ops.append(op)
    tensors = []
    for t, name in enumerate(graph.tensor_names):
        tensor: dict[str, Any] = {
            "name": name,
            "size": int(graph.tensor_size[t]),
            "producer": graph.op_names[graph.tensor_producer[t]],
            "consumers": [graph.op_names[c] for c in graph.consumers(t)],
        }
        if graph.tensor_persistent[t]:
            tensor["persistent"] = True
        if graph.tensor_output[t]:
            tensor["output"] = True
        tensor.update(graph.tensor_attrs[t])
        tensors.append(tensor)
    return {
        "format": GRAPH_FORMAT,
        "name": graph.name,
        **graph.attrs,
        "ops": ops,
        "tensors": tensors,
    }


_NPZ_ARRAYS = {  # array -> dtype kinds it may have (b: bool, i/u: integers, f: floats)
    "op_runtime": "iuf",
    "op_temp_memory": "iu",
    "tensor_size": "iu",
    "tensor_producer": "iu",
    "tensor_persistent": "b",
    "tensor_output": "b",
    "consumer_ptr": "iu",
    "consumer_op": "iu",
}
_NPZ_STRINGS = {"format": 0, "name": 0, "extras": 0, "op_names": 1, "tensor_names": 1}
"""String arrays of the .npz form and their number of dimensions."""
_NPZ_OPTIONAL = ("extras", "tensor_output")
"""Members a .npz graph may lack: files written before graph outputs existed have no outputs."""
_NPZ_REQUIRED = tuple(
    k
    for k in ("format", "name", "op_names", "tensor_names", *_NPZ_ARRAYS)
    if k not in _NPZ_OPTIONAL
)
_DEFLATE_RATIO = 1100
"""Deflate never expands data more than about 1032-fold: a member claiming more is corrupt."""
_ARCHIVE_ERRORS = (
    OSError, EOFError, ValueError, RuntimeError, NotImplementedError, SyntaxError, struct.error,
    tokenize.TokenError, zipfile.BadZipFile, zlib.error, lzma.LZMAError,
)  # fmt: skip
"""What zipfile and numpy raise on a damaged archive, member or .npy header (numpy parses the
header's Python literal with `tokenize` and `ast`)."""


def _write_npz(graph: Graph, file: BinaryIO) -> None:
    extras = {
        "graph": dict(graph.attrs),
        "ops": list(graph.op_attrs) if any(graph.op_attrs) else None,
        "tensors": list(graph.tensor_attrs) if any(graph.tensor_attrs) else None,
    }
    np.savez(
        file,
        format=np.array(GRAPH_FORMAT),
        name=np.array(graph.name),
        op_names=np.array(graph.op_names, dtype=str),
        tensor_names=np.array(graph.tensor_names, dtype=str),
        extras=np.array(_dumps(extras)),
        **{key: getattr(graph, key) for key in _NPZ_ARRAYS},
    )


def _npz_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, key: str) -> np.ndarray:
    """One array of the archive, its .npy header checked against the rules before any read."""
    with archive.open(info) as stream:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise GraphError(f"array '{key}': .npy version {version} is not 1.0 or 2.0")
    ndim = _NPZ_STRINGS.get(key, 1)
    kinds = _NPZ_ARRAYS.get(key, "U")
    if dtype.hasobject or dtype.kind not in kinds or len(shape) != ndim:
        wanted = "a string" if ndim == 0 else f"1-D of kind '{kinds}'"
        raise GraphError(f"array '{key}' must be {wanted}, got {dtype} {shape}")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > info.file_size or nbytes > info.compress_size * _DEFLATE_RATIO + 2**16:
        raise GraphError(
            f"array '{key}': its header promises {nbytes:,} bytes but the archive member "
            f"holds {info.file_size:,}"
        )
    with archive.open(info) as stream:
        array = np.lib.format.read_array(stream, allow_pickle=False)
    if dtype.kind == "U" and array.size:
        codes = np.frombuffer(array.tobytes(), dtype=f"{dtype.str[0]}u4")
        if codes.max() > sys.maxunicode:
            raise GraphError(f"array '{key}' holds a character code beyond Unicode")
    return array


def _npz_arrays(path: Path) -> dict[str, np.ndarray]:
    """The archive's known arrays, each read once and validated; other members are skipped."""
    try:
        with zipfile.ZipFile(path) as archive:
            arrays: dict[str, np.ndarray] = {}
            for info in archive.infolist():
                key = info.filename.removesuffix(".npy")
                if key not in _NPZ_STRINGS and key not in _NPZ_ARRAYS:
                    continue
                if key in arrays:
                    raise GraphError(f"array '{key}' appears twice in the archive")
                try:
                    arrays[key] = _npz_member(archive, info, key)
                except GraphError:
                    raise
                except _ARCHIVE_ERRORS as error:
                    raise GraphError(f"array '{key}' cannot be read ({reason(error)})") from None
                except MemoryError:
                    raise GraphError(f"array '{key}' is too large to load") from None
    except GraphError:
        raise
    except _ARCHIVE_ERRORS as error:
        raise GraphError(f"not a readable .npz archive ({reason(error)})") from None
    missing = [key for key in _NPZ_REQUIRED if key not in arrays]
    if missing:
        raise GraphError(f"missing array '{missing[0]}' in the .npz graph")
    return arrays


def _npz_extras(text: str) -> dict[str, Any]:
    """The JSON of the `extras` array: graph, op and tensor metadata, each checked for shape."""
    extras = parse_json(text, GraphError, "array 'extras' is not valid JSON")
    if not isinstance(extras, dict):
        raise GraphError("array 'extras' must hold a JSON object")
    for key, wanted in (("graph", dict), ("ops", list), ("tensors", list)):
        value = extras.get(key)
        if value is not None and not isinstance(value, wanted):
            kind = "an object" if wanted is dict else "a list or null"
            raise GraphError(f"array 'extras': '{key}' must be {kind}")
    return extras


def _read_npz(path: Path) -> Graph:
    arrays = _npz_arrays(path)
    if str(arrays["format"]) != GRAPH_FORMAT:
        raise GraphError(f"format must be '{GRAPH_FORMAT}', got {describe(str(arrays['format']))}")
    extras = _npz_extras(str(arrays["extras"])) if "extras" in arrays else {}
    return Graph.from_arrays(
        str(arrays["name"]),
        arrays["op_names"].tolist(),
        arrays["op_runtime"],
        arrays["tensor_names"].tolist(),
        arrays["tensor_size"],
        arrays["tensor_producer"],
        arrays["consumer_ptr"],
        arrays["consumer_op"],
        op_temp_memory=arrays["op_temp_memory"],
        tensor_persistent=arrays["tensor_persistent"],
        tensor_output=arrays.get("tensor_output"),
        op_attrs=extras.get("ops"),
        tensor_attrs=extras.get("tensors"),
        attrs=extras.get("graph"),
    )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object that names no key twice (json would silently keep the last)."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise _DuplicateKey(repeated)
    return document


class _DuplicateKey(ValueError):
    """Raised inside the JSON parser; `parse_json` turns it into the caller's error type."""


def parse_json(text: str | bytes, error: type[GraphoptError], what: str = "not valid JSON") -> Any:
    """Parses JSON strictly (no key named twice in an object); `error` says what is broken.

    Every way the parser can fail (syntax, encoding, nesting deeper than Python's recursion
    limit, an integer of more than 4,300 digits) becomes `error(f"{what} (reason)")`.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as decode_error:
        reason = f"{decode_error.msg} at line {decode_error.lineno} column {decode_error.colno}"
    except _DuplicateKey as duplicate:
        reason = f"an object names the key {describe(duplicate.args[0])} twice"
    except UnicodeDecodeError:
        reason = "the text is not UTF-8"
    except RecursionError:
        reason = "values are nested too deeply"
    except ValueError as value_error:
        reason = str(value_error)
    raise error(f"{what} ({reason})")


def _dumps(document: Any, **options: Any) -> str:
    """JSON text of a document whose metadata may hold numpy scalars or arrays."""
    try:
        return json.dumps(document, default=_json_value, **options)
    except RecursionError:
        raise GraphoptError("metadata is nested too deeply to write as JSON") from None


def _json_value(value: Any) -> Any:
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise GraphoptError(
        f"metadata holds a {type(value).__name__}, which JSON cannot store: {describe(value)}"
    )


def read_json(path: Path, error: type[GraphoptError]) -> Any:
    """A JSON file's content, parsed by `parse_json`."""
    with path.open("rb") as file:
        return parse_json(file.read(), error)


def _open_error(path: Path, error: type[GraphoptError]) -> GraphoptError | None:
    if not path.exists():
        return error(f"{path}: no such file")
    if not path.is_file():
        return error(f"{path}: not a file")
    return None


def read_graph(path: str | Path) -> Graph:
    """Loads a graph from `.json` (`graphopt.graph/1`) or `.npz`, validating every rule.

    Raises:
        GraphError: prefixed with the file name.
    """
    path = Path(path)
    if (problem := _open_error(path, GraphError)) is not None:
        raise problem
    try:
        if path.suffix == ".npz":
            return _read_npz(path)
        return graph_from_json(read_json(path, GraphError))
    except GraphError as error:
        raise GraphError(f"{path}: {error}") from None


def write_graph(graph: Graph, path: str | Path) -> None:
    """Saves a graph as `.npz` if the name ends so, else as `graphopt.graph/1` JSON."""
    path = Path(path)
    if path.suffix == ".npz":
        _replace_atomically(path, lambda file: _write_npz(graph, file))
        return
    text = _dumps(graph_to_json(graph), indent=1) + "\n"
    _replace_atomically(path, lambda file: file.write(text.encode()))


# ------------------------------------------------------------------------------- solutions
def solution_from_json(data: Any, graph: Graph, n_devices: int | None = None) -> Solution:
    """Validates a parsed `graphopt.solution/1` document against `graph` and encodes it.

    Args:
        data: the parsed document.
        graph: the graph it solves.
        n_devices: device count to use instead of the document's `devices` (to score the same
            placement on a larger machine).

    Raises:
        SolutionError: naming the offending field, op or event. Whether the schedule obeys the
            ordering rules is checked by the scorer, which names the breaking event.
    """
    data = _object(data, "solution", SolutionError)
    _check_format(data, SOLUTION_FORMAT, SolutionError)
    _check_fields(data, "solution", "solution", SolutionError)
    for field in ("devices", "placement", "schedule"):
        if field not in data:
            raise SolutionError(f"missing required field '{field}'")
    solved = data.get("graph", graph.name)
    if not isinstance(solved, str):
        raise SolutionError(f"graph must be a string, got {describe(solved)}")
    if solved and graph.name and solved != graph.name:
        raise SolutionError(f"solution is for graph '{solved}', not '{graph.name}'")
    devices = _device_count(data["devices"], "devices")
    d = devices if n_devices is None else _device_count(n_devices, "the device count asked for")
    extras = {}
    for field in ("objective", "solver", "machine"):
        extras[field] = dict(_object(data.get(field, {}), field, SolutionError))
    _check_record(extras["objective"], "objective")
    _check_record(extras["machine"], "machine")
    recorded = extras["machine"].get("devices", devices)
    if recorded != devices:
        raise SolutionError(
            f"machine: devices {describe(recorded)} contradicts the solution's devices {devices}"
        )

    placement_map = _object(data["placement"], "placement", SolutionError)
    placement = np.full(graph.n_ops, -1, dtype=np.int32)
    for op_name, device in placement_map.items():
        op = graph.op_ids.get(op_name)
        if op is None:
            raise SolutionError(
                f"placement: {describe(op_name)} is not an op of graph '{graph.name}'"
            )
        if not isinstance(device, int) or isinstance(device, bool) or not 0 <= device < d:
            raise SolutionError(
                f"placement: op '{op_name}': device must be an integer in [0, {d}), "
                f"got {describe(device)}"
            )
        placement[op] = device
    unplaced = np.flatnonzero(placement < 0)
    if unplaced.size:
        raise SolutionError(f"placement: op '{graph.op_names[unplaced[0]]}' has no device")

    schedule = _list(data["schedule"], "schedule", SolutionError)
    order = np.empty(len(schedule), dtype=np.int64)
    for position, event in enumerate(schedule):
        order[position] = _event_code(event, position, graph, d)
    fusion = _fusion_groups(data.get("fusion", []), graph)
    remat = data.get("remat", False)
    if not isinstance(remat, bool):
        raise SolutionError(f"remat must be true or false, got {describe(remat)}")
    return Solution(
        placement=placement, order=order, n_devices=d, fusion=fusion, remat=remat, **extras
    )


def _fusion_groups(value: Any, graph: Graph) -> np.ndarray | None:
    """[n_ops] group of each op from the `fusion` list of op-name lists (None when empty).

    The rules that need the placement and the schedule are the scorer's (section 13); here each
    group must name known ops, none twice, and no op may sit in two groups.
    """
    groups = _list(value, "fusion", SolutionError)
    if not groups:
        return None
    fusion = np.full(graph.n_ops, -1, dtype=np.int32)
    for index, names in enumerate(groups):
        where = f"fusion[{index}]"
        if not isinstance(names, list):
            raise SolutionError(f"{where} must be a list of op names, got {describe(names)}")
        if len(names) < 2:
            raise SolutionError(f"{where} has {len(names)} op(s); a group holds at least two")
        for name in names:
            op = graph.op_ids.get(name) if isinstance(name, str) else None
            if op is None:
                raise SolutionError(
                    f"{where}: {describe(name)} is not an op of graph '{graph.name}'"
                )
            if fusion[op] == index:
                raise SolutionError(f"{where}: op '{name}' is listed twice")
            if fusion[op] >= 0:
                raise SolutionError(
                    f"{where}: op '{name}' is already in fusion[{fusion[op]}]; an op is in at "
                    "most one group"
                )
            fusion[op] = index
    return fusion


def _device_count(value: Any, field: str) -> int:
    """A device count in [1, MAX_DEVICES]; SolutionError naming `field` otherwise."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
        raise SolutionError(f"{field} must be an integer >= 1, got {describe(value)}")
    if value > MAX_DEVICES:
        raise SolutionError(
            f"{field} must be at most {MAX_DEVICES} (docs/format.md, limits), got "
            f"{describe(int(value))}"
        )
    return int(value)


def _finite_number(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


_RECORD_VALUES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "mode": (lambda value: value in ("sync", "async"), "'sync' or 'async'"),
    "feasible": (lambda value: isinstance(value, bool), "true or false"),
    "peak_memory_per_device": (
        lambda value: isinstance(value, list) and all(map(_finite_number, value)),
        "a list of numbers",
    ),
}
"""Rules for the values of the `objective` and `machine` records; others are finite numbers."""


def _check_record(record: Mapping[str, Any], kind: str) -> None:
    """The solution's `objective` and `machine` records: no misspelt key, values of their type."""
    _check_fields(record, kind, kind, SolutionError)
    for key in _VOCABULARY[kind]:
        value = record.get(key)
        valid, wanted = _RECORD_VALUES.get(key, (_finite_number, "a finite number"))
        if value is not None and not valid(value):
            raise SolutionError(f"{kind}: {key} must be {wanted}, got {describe(value)}")


def _event_code(event: Any, position: int, graph: Graph, n_devices: int) -> int:
    where = f"schedule[{position}]"
    shape = 'an event is {"op": name} or {"transfer": tensor, "to": device}'
    if not isinstance(event, dict):
        raise SolutionError(f"{where}: {shape}, got {describe(event)}")
    if set(event) == {"op"}:
        op = event["op"]
        if not isinstance(op, str) or op not in graph.op_ids:
            raise SolutionError(f"{where}: {describe(op)} is not an op of graph '{graph.name}'")
        return graph.op_ids[op]
    if set(event) == {"transfer", "to"}:
        tensor, device = event["transfer"], event["to"]
        if not isinstance(tensor, str) or tensor not in graph.tensor_ids:
            raise SolutionError(
                f"{where}: {describe(tensor)} is not a tensor of graph '{graph.name}'"
            )
        if not isinstance(device, int) or isinstance(device, bool) or not 0 <= device < n_devices:
            raise SolutionError(
                f"{where}: 'to' must be a device in [0, {n_devices}), got {describe(device)}"
            )
        return graph.n_ops + graph.tensor_ids[tensor] * n_devices + device
    raise SolutionError(f"{where}: {shape}, got {describe(event)}")


def solution_to_json(graph: Graph, solution: Solution) -> dict[str, Any]:
    """The `graphopt.solution/1` document of a solution (names instead of indices)."""
    schedule: list[dict[str, Any]] = []
    for code in solution.order:
        kind, item, device = decode_event(graph, int(code), solution.n_devices)
        if kind == "op":
            schedule.append({"op": graph.op_names[item]})
        else:
            schedule.append({"transfer": graph.tensor_names[item], "to": device})
    document: dict[str, Any] = {
        "format": SOLUTION_FORMAT,
        "graph": graph.name,
        "devices": solution.n_devices,
        "placement": {
            name: int(p) for name, p in zip(graph.op_names, solution.placement, strict=True)
        },
        "schedule": schedule,
    }
    if solution.n_groups:
        document["fusion"] = [
            [graph.op_names[op] for op in members] for members in solution.groups()
        ]
    if solution.remat:
        document["remat"] = True
    for field in ("objective", "solver", "machine"):
        if getattr(solution, field):
            document[field] = dict(getattr(solution, field))
    return document


def read_solution(path: str | Path, graph: Graph, n_devices: int | None = None) -> Solution:
    """Loads a `graphopt.solution/1` file for `graph` (see `solution_from_json`)."""
    path = Path(path)
    if (problem := _open_error(path, SolutionError)) is not None:
        raise problem
    try:
        return solution_from_json(read_json(path, SolutionError), graph, n_devices)
    except SolutionError as error:
        raise SolutionError(f"{path}: {error}") from None


def write_solution(graph: Graph, solution: Solution, path: str | Path) -> None:
    """Saves a solution as `graphopt.solution/1` JSON."""
    text = json.dumps(solution_to_json(graph, solution), indent=1) + "\n"
    _replace_atomically(Path(path), lambda file: file.write(text.encode()))


def _replace_atomically(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Writes a file next to `path`, then renames it over `path`.

    An interrupted write (Ctrl-C, a full disk) never leaves a half-written file, nor destroys
    the file that was there. The file gets the permissions a plain `open` would give it.
    """
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
