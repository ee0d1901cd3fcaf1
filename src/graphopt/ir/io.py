"""Reading and writing graphs and solutions, in JSON and a compact `.npz` form of graphs.

`graphopt.graph/1` and `graphopt.solution/1` are COST_MODEL.md sections 1 and 3; `.npz` holds
the graph's arrays for datasets.

Loading validates every rule of the contract and raises `GraphError` / `SolutionError` with one
line naming the offending item; nothing is silently repaired. Fields the contract does not score
(`type`, `flops`, `shape`, ...) are kept and written back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.errors import GraphError, GraphoptError, SolutionError
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution, decode_event

GRAPH_FORMAT = "graphopt.graph/1"
SOLUTION_FORMAT = "graphopt.solution/1"
_OP_FIELDS = ("name", "runtime", "temp_memory")
_TENSOR_FIELDS = ("name", "size", "producer", "consumers", "persistent")
_GRAPH_FIELDS = ("format", "name", "ops", "tensors")
_INT64_MAX = np.iinfo(np.int64).max


def _describe(value: Any) -> str:
    text = json.dumps(value) if _jsonable(value) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _byte_count(value: Any, where: str, field: str, error: type[GraphoptError]) -> int:
    """An integer number of bytes >= 0 (an integral JSON float such as 1e6 is the same integer)."""
    if _is_number(value) and (
        isinstance(value, int) or math.isfinite(value) and value == int(value)
    ):
        count = int(value)
        if 0 <= count <= _INT64_MAX:
            return count
    raise error(f"{where}: {field} must be an integer >= 0, got {_describe(value)}")


def _seconds(value: Any, where: str, field: str, error: type[GraphoptError]) -> float:
    if _is_number(value):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    raise error(f"{where}: {field} must be a finite number >= 0, got {_describe(value)}")


def _object(value: Any, where: str, error: type[GraphoptError]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise error(f"{where}: must be a JSON object, got {_describe(value)}")
    return value


def _list(value: Any, where: str, error: type[GraphoptError]) -> list[Any]:
    if not isinstance(value, list):
        raise error(f"{where}: must be a JSON list, got {_describe(value)}")
    return value


def _name(item: Mapping[str, Any], where: str, error: type[GraphoptError]) -> str:
    if "name" not in item:
        raise error(f"{where}: missing required field 'name'")
    name = item["name"]
    if not isinstance(name, str) or not name:
        raise error(f"{where}: name must be a non-empty string, got {_describe(name)}")
    return name


def _check_format(data: Mapping[str, Any], expected: str, error: type[GraphoptError]) -> None:
    if "format" not in data:
        raise error(f"missing field 'format' (expected '{expected}')")
    if data["format"] != expected:
        raise error(f"format must be '{expected}', got {_describe(data['format'])}")


# ---------------------------------------------------------------------------------- graphs
def graph_from_json(data: Any) -> Graph:
    """Validates a parsed `graphopt.graph/1` document and builds the graph.

    Raises:
        GraphError: naming the first offending field, op or tensor and the rule it breaks.
    """
    data = _object(data, "graph", GraphError)
    _check_format(data, GRAPH_FORMAT, GraphError)
    name = data.get("name", "")
    if not isinstance(name, str):
        raise GraphError(f"name must be a string, got {_describe(name)}")
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
        op_index[op_name] = i
        op_names.append(op_name)
        runtime[i] = _seconds(op.get("runtime", 0.0), f"op '{op_name}'", "runtime", GraphError)
        temp[i] = _byte_count(
            op.get("temp_memory", 0), f"op '{op_name}'", "temp_memory", GraphError
        )
        op_attrs.append({k: v for k, v in op.items() if k not in _OP_FIELDS})

    tensor_names: list[str] = []
    size = np.zeros(len(tensors), dtype=np.int64)
    producer = np.zeros(len(tensors), dtype=np.int64)
    persistent = np.zeros(len(tensors), dtype=bool)
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
        if "size" not in tensor:
            raise GraphError(f"{where}: missing required field 'size'")
        size[i] = _byte_count(tensor["size"], where, "size", GraphError)
        if "producer" not in tensor:
            raise GraphError(f"{where}: missing required field 'producer'")
        made_by = tensor["producer"]
        if not isinstance(made_by, str) or made_by not in op_index:
            raise GraphError(f"{where}: producer {_describe(made_by)} is not an op of the graph")
        producer[i] = op_index[made_by]
        used_by = _list(tensor.get("consumers", []), f"{where}: consumers", GraphError)
        for consumer in used_by:
            if not isinstance(consumer, str) or consumer not in op_index:
                raise GraphError(
                    f"{where}: consumer {_describe(consumer)} is not an op of the graph"
                )
            if consumer == made_by:
                raise GraphError(f"{where}: lists its producer '{made_by}' as a consumer")
            consumers.append(op_index[consumer])
        consumer_count[i] = len(used_by)
        flag = tensor.get("persistent", False)
        if not isinstance(flag, bool):
            raise GraphError(f"{where}: persistent must be true or false, got {_describe(flag)}")
        persistent[i] = flag
        tensor_attrs.append({k: v for k, v in tensor.items() if k not in _TENSOR_FIELDS})

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
        op_attrs=op_attrs,
        tensor_attrs=tensor_attrs,
        attrs={k: v for k, v in data.items() if k not in _GRAPH_FIELDS},
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
    "consumer_ptr": "iu",
    "consumer_op": "iu",
}


def _write_npz(graph: Graph, path: Path) -> None:
    extras = {
        "graph": dict(graph.attrs),
        "ops": list(graph.op_attrs) if any(graph.op_attrs) else None,
        "tensors": list(graph.tensor_attrs) if any(graph.tensor_attrs) else None,
    }
    with path.open("wb") as file:
        np.savez(
            file,
            format=np.array(GRAPH_FORMAT),
            name=np.array(graph.name),
            op_names=np.array(graph.op_names, dtype=str),
            tensor_names=np.array(graph.tensor_names, dtype=str),
            extras=np.array(json.dumps(extras)),
            **{key: getattr(graph, key) for key in _NPZ_ARRAYS},
        )


def _read_npz(path: Path) -> Graph:
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise GraphError(f"not a readable .npz archive ({error})") from None
    with archive:
        missing = [
            k
            for k in ("format", "name", "op_names", "tensor_names", *_NPZ_ARRAYS)
            if k not in archive
        ]
        if missing:
            raise GraphError(f"missing array '{missing[0]}' in the .npz graph")
        if str(archive["format"]) != GRAPH_FORMAT:
            raise GraphError(f"format must be '{GRAPH_FORMAT}', got '{archive['format']}'")
        arrays = {}
        for key, kinds in _NPZ_ARRAYS.items():
            array = archive[key]
            if array.dtype.kind not in kinds or array.ndim != 1:
                raise GraphError(
                    f"array '{key}' must be 1-D of kind '{kinds}', got {array.dtype} {array.shape}"
                )
            arrays[key] = array
        op_names, tensor_names = archive["op_names"], archive["tensor_names"]
        for key, names in (("op_names", op_names), ("tensor_names", tensor_names)):
            if names.dtype.kind != "U" or names.ndim != 1:
                raise GraphError(f"array '{key}' must be a 1-D array of strings")
        extras: dict[str, Any] = {}
        if "extras" in archive:
            try:
                extras = json.loads(str(archive["extras"]))
            except json.JSONDecodeError as error:
                raise GraphError(f"array 'extras' is not valid JSON ({error.msg})") from None
            if not isinstance(extras, dict):
                raise GraphError("array 'extras' must hold a JSON object")
        return Graph.from_arrays(
            str(archive["name"]),
            op_names.tolist(),
            arrays["op_runtime"],
            tensor_names.tolist(),
            arrays["tensor_size"],
            arrays["tensor_producer"],
            arrays["consumer_ptr"],
            arrays["consumer_op"],
            op_temp_memory=arrays["op_temp_memory"],
            tensor_persistent=arrays["tensor_persistent"],
            op_attrs=extras.get("ops") or None,
            tensor_attrs=extras.get("tensors") or None,
            attrs=extras.get("graph") or None,
        )


def read_json(path: Path, error: type[GraphoptError]) -> Any:
    """A JSON file's content; `error` saying where the JSON is broken (or not UTF-8) otherwise."""
    try:
        with path.open("rb") as file:
            return json.load(file)
    except json.JSONDecodeError as decode_error:
        raise error(
            f"not valid JSON ({decode_error.msg} at line {decode_error.lineno} "
            f"column {decode_error.colno})"
        ) from None
    except UnicodeDecodeError:
        raise error("not valid JSON (the file is not UTF-8 text)") from None


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
        _write_npz(graph, path)
        return
    with path.open("w") as file:
        json.dump(graph_to_json(graph), file, indent=1)
        file.write("\n")


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
    for field in ("devices", "placement", "schedule"):
        if field not in data:
            raise SolutionError(f"missing required field '{field}'")
    solved = data.get("graph", graph.name)
    if not isinstance(solved, str):
        raise SolutionError(f"graph must be a string, got {_describe(solved)}")
    if solved and graph.name and solved != graph.name:
        raise SolutionError(f"solution is for graph '{solved}', not '{graph.name}'")
    devices = data["devices"]
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
        raise SolutionError(f"devices must be an integer >= 1, got {_describe(devices)}")
    d = devices if n_devices is None else n_devices

    placement_map = _object(data["placement"], "placement", SolutionError)
    placement = np.full(graph.n_ops, -1, dtype=np.int32)
    for op_name, device in placement_map.items():
        op = graph.op_ids.get(op_name)
        if op is None:
            raise SolutionError(
                f"placement: {_describe(op_name)} is not an op of graph '{graph.name}'"
            )
        if not isinstance(device, int) or isinstance(device, bool) or not 0 <= device < d:
            raise SolutionError(
                f"placement: op '{op_name}': device must be an integer in [0, {d}), "
                f"got {_describe(device)}"
            )
        placement[op] = device
    unplaced = np.flatnonzero(placement < 0)
    if unplaced.size:
        raise SolutionError(f"placement: op '{graph.op_names[unplaced[0]]}' has no device")

    schedule = _list(data["schedule"], "schedule", SolutionError)
    order = np.empty(len(schedule), dtype=np.int64)
    for position, event in enumerate(schedule):
        order[position] = _event_code(event, position, graph, d)
    extras = {}
    for field in ("objective", "solver", "machine"):
        extras[field] = dict(_object(data.get(field, {}), field, SolutionError))
    return Solution(placement=placement, order=order, n_devices=d, **extras)


def _event_code(event: Any, position: int, graph: Graph, n_devices: int) -> int:
    where = f"schedule[{position}]"
    shape = 'an event is {"op": name} or {"transfer": tensor, "to": device}'
    if not isinstance(event, dict):
        raise SolutionError(f"{where}: {shape}, got {_describe(event)}")
    if set(event) == {"op"}:
        op = event["op"]
        if not isinstance(op, str) or op not in graph.op_ids:
            raise SolutionError(f"{where}: {_describe(op)} is not an op of graph '{graph.name}'")
        return graph.op_ids[op]
    if set(event) == {"transfer", "to"}:
        tensor, device = event["transfer"], event["to"]
        if not isinstance(tensor, str) or tensor not in graph.tensor_ids:
            raise SolutionError(
                f"{where}: {_describe(tensor)} is not a tensor of graph '{graph.name}'"
            )
        if not isinstance(device, int) or isinstance(device, bool) or not 0 <= device < n_devices:
            raise SolutionError(
                f"{where}: 'to' must be a device in [0, {n_devices}), got {_describe(device)}"
            )
        return graph.n_ops + graph.tensor_ids[tensor] * n_devices + device
    raise SolutionError(f"{where}: {shape}, got {_describe(event)}")


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
    with Path(path).open("w") as file:
        json.dump(solution_to_json(graph, solution), file, indent=1)
        file.write("\n")
