"""The on-disk dataset format: one memory-mapped archive per split, `graphopt.dataset/1`.

A dataset of thousands of graphs is a handful of files, not thousands: `train.npz`, `valid.npz`
and `test.npz` each hold every graph of the split as arrays concatenated end to end, with
offsets to slice them apart, plus `manifest.json` and a `README.md` card written by the builder.

The noisy copies of a topology (REGAL's augmentation) differ only in tensor sizes and names, so
the structure of each topology (runtimes, scratch memory, producers, CSR consumers, names and
extra fields) is stored once, and each graph adds only its tensor sizes: ten times smaller than
storing every copy, for ten copies per topology.

Each archive is a valid, uncompressed `.npz` (`np.load` reads it), written deterministically: sorted
members, a fixed 1980-01-01 timestamp, and padding that starts every array's data on a 64-byte
boundary. The reader memory-maps the file once and views each member in place, so DataLoader
workers share the pages and a graph is built only when indexed.

An archive is user input, so nothing in it is trusted: opening a split checks every member's
name, zip headers, CRC-32 (one pass over the file: a flipped bit is refused, not read as another
graph) and .npy header, then the header, the graph names and every offset array (in bounds, not
decreasing), so indexing never slices out of range; building a topology checks its metadata and
applies the contract's rules, those of the JSON reader included. `read_manifest` checks every
field of the manifest and its counts against each other.

Members (all 1-D; T topologies, G graphs; `ptr` arrays have T + 1 or G + 1 entries from 0):
    header: UTF-8 JSON {"format", "split", "graphs", "topologies"} as uint8.
    topology_op_ptr, topology_tensor_ptr, topology_edge_ptr, topology_meta_ptr: int64 offsets
        of topology k's ops, tensors, edges and metadata bytes.
    op_runtime (float64), op_temp_memory (int64): per op, by topology_op_ptr.
    tensor_producer (int32, topology-local op index), tensor_persistent (bool), tensor_output
        (bool; optional, archives written before graph outputs existed lack it): per tensor.
    consumer_ptr (int64): each topology's own consumer_ptr (n_tensors + 1 entries, from 0),
        concatenated: topology k's starts at topology_tensor_ptr[k] + k.
    consumer_op (int32, topology-local op index): by topology_edge_ptr.
    topology_meta (uint8): per topology, UTF-8 JSON {"name", "op_names", "tensor_names",
        "op_attrs", "tensor_attrs", "attrs"} (attrs lists are null when all empty).
    graph_topology (int32): the topology of each graph.
    graph_tensor_ptr (int64), tensor_size (int64): each graph's tensor sizes.
    graph_names: UTF-8 JSON list of graph names as uint8.
"""

from __future__ import annotations

import functools
import io
import json
import math
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphopt._messages import describe, reason, record_fields
from graphopt.datasets.config import DatasetConfig
from graphopt.errors import GraphError, GraphoptError
from graphopt.ir.graph import GRAPH_FIELDS, OP_FIELDS, TENSOR_FIELDS, Graph
from graphopt.ir.io import graph_from_json, graph_to_json

FORMAT = "graphopt.dataset/1"
"""The format tag of split archives and manifests."""
SPLITS = ("train", "valid", "test")
"""Split names, in the order of a config's `split` proportions."""
MANIFEST = "manifest.json"
"""File name of the manifest inside a dataset directory."""

_EPOCH = (1980, 1, 1, 0, 0, 0)
_ALIGN = 64
_PADDING_ID = 0xD935  # the extra-field id zipalign uses for alignment padding
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., file name length, extra length
_TOPOLOGY_CACHE = 64

# Structural arrays every copy of a topology shares, checked when a group is added.
_SHARED = (
    "op_runtime",
    "op_temp_memory",
    "tensor_producer",
    "tensor_persistent",
    "tensor_output",
    "consumer_ptr",
    "consumer_op",
)


def split_file(split: str) -> str:
    """File name of a split's archive."""
    return f"{split}.npz"


def _json_default(value: Any) -> Any:
    """Numpy scalars and arrays in attrs become plain JSON numbers and lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _json_bytes(value: Any, what: str) -> np.ndarray:
    try:
        text = json.dumps(value, default=_json_default, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise GraphoptError(f"{what}: cannot be stored as JSON ({error})") from None
    return np.frombuffer(text.encode(), dtype=np.uint8)


class SplitWriter:
    """Collects one split's topology groups and writes them as one archive.

    Args:
        split: the split's name, recorded in the archive's header.
    """

    def __init__(self, split: str) -> None:
        self.split = split
        self._topologies: list[Graph] = []
        self._meta: list[np.ndarray] = []
        self._graph_topology: list[int] = []
        self._graph_names: list[str] = []
        self._sizes: list[np.ndarray] = []

    def add(self, group: Sequence[Graph]) -> None:
        """Adds one topology: its original graph first, then its noisy copies.

        Raises:
            GraphoptError: when the group is empty or a member differs from the first in
                anything but its tensor sizes and name (it would not be a copy of the topology).
        """
        if not group:
            raise GraphoptError("a topology group needs at least one graph")
        first = group[0]
        for graph in group[1:]:
            same = (
                graph.op_names == first.op_names
                and graph.tensor_names == first.tensor_names
                and all(np.array_equal(getattr(graph, k), getattr(first, k)) for k in _SHARED)
                and graph.op_attrs == first.op_attrs
                and graph.tensor_attrs == first.tensor_attrs
                and dict(graph.attrs) == dict(first.attrs)
            )
            if not same:
                raise GraphoptError(
                    f"graph '{graph.name}': differs from '{first.name}' in more than tensor "
                    "sizes, so it is not a copy of that topology"
                )
        index = len(self._topologies)
        self._topologies.append(first)
        self._meta.append(
            _json_bytes(
                {
                    "name": first.name,
                    "op_names": first.op_names,
                    "tensor_names": first.tensor_names,
                    "op_attrs": list(first.op_attrs) if any(first.op_attrs) else None,
                    "tensor_attrs": list(first.tensor_attrs) if any(first.tensor_attrs) else None,
                    "attrs": dict(first.attrs),
                },
                f"graph '{first.name}'",
            )
        )
        for graph in group:
            self._graph_topology.append(index)
            self._graph_names.append(graph.name)
            self._sizes.append(graph.tensor_size)

    @property
    def n_graphs(self) -> int:
        """Graphs added so far."""
        return len(self._graph_names)

    @property
    def graph_names(self) -> tuple[str, ...]:
        """Names of the graphs added so far."""
        return tuple(self._graph_names)

    @property
    def n_topologies(self) -> int:
        """Topologies added so far."""
        return len(self._topologies)

    @property
    def op_counts(self) -> np.ndarray:
        """[n_graphs] int64 op count of each graph added so far."""
        per_topology = np.array([g.n_ops for g in self._topologies], dtype=np.int64)
        return per_topology[np.array(self._graph_topology, dtype=np.int64)]

    @property
    def tensor_sizes(self) -> np.ndarray:
        """All tensor sizes of all graphs added so far, concatenated (int64)."""
        return _concat(self._sizes, np.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        """The archive's members, by name (see the module docstring)."""
        topologies = self._topologies
        header = {
            "format": FORMAT,
            "split": self.split,
            "graphs": self.n_graphs,
            "topologies": self.n_topologies,
        }
        return {
            "header": _json_bytes(header, "header"),
            "topology_op_ptr": _offsets([g.n_ops for g in topologies]),
            "topology_tensor_ptr": _offsets([g.n_tensors for g in topologies]),
            "topology_edge_ptr": _offsets([g.n_edges for g in topologies]),
            "topology_meta_ptr": _offsets([m.shape[0] for m in self._meta]),
            "topology_meta": _concat(self._meta, np.uint8),
            "op_runtime": _concat([g.op_runtime for g in topologies], np.float64),
            "op_temp_memory": _concat([g.op_temp_memory for g in topologies], np.int64),
            "tensor_producer": _concat([g.tensor_producer for g in topologies], np.int32),
            "tensor_persistent": _concat([g.tensor_persistent for g in topologies], np.bool_),
            "tensor_output": _concat([g.tensor_output for g in topologies], np.bool_),
            "consumer_ptr": _concat([g.consumer_ptr for g in topologies], np.int64),
            "consumer_op": _concat([g.consumer_op for g in topologies], np.int32),
            "graph_topology": np.array(self._graph_topology, dtype=np.int32),
            "graph_tensor_ptr": _offsets([s.shape[0] for s in self._sizes]),
            "tensor_size": self.tensor_sizes,
            "graph_names": _json_bytes(self._graph_names, "graph names"),
        }

    def write(self, path: Path) -> None:
        """Writes the archive (byte-identical for identical content)."""
        write_archive(path, self.arrays())


def _offsets(counts: Sequence[int]) -> np.ndarray:
    ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=ptr[1:])
    return ptr


def _concat(arrays: Sequence[np.ndarray], dtype: Any) -> np.ndarray:
    if not arrays:
        return np.zeros(0, dtype=dtype)
    return np.concatenate([np.asarray(a, dtype=dtype) for a in arrays])


def write_archive(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Writes arrays as an uncompressed `.npz` whose bytes depend only on the arrays.

    `np.savez` stamps the current time into every member, so two builds of the same data would
    differ; here members are sorted, dated 1980-01-01, and padded (with a zip extra field) so each
    array's data starts on a 64-byte boundary, which lets the reader view it in place.
    """
    with path.open("wb") as file, zipfile.ZipFile(file, "w", zipfile.ZIP_STORED) as archive:
        for key in sorted(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(arrays[key]))
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            # The .npy header already pads the array data to 64 bytes from the member's start.
            unpadded = file.tell() + _LOCAL_HEADER.size + len(info.filename) + 4
            pad = -unpadded % _ALIGN
            info.extra = struct.pack("<HH", _PADDING_ID, pad) + bytes(pad)
            archive.writestr(info, buffer.getvalue())


_MEMBERS = {  # member -> dtype it must have
    "header": np.uint8,
    "topology_op_ptr": np.int64,
    "topology_tensor_ptr": np.int64,
    "topology_edge_ptr": np.int64,
    "topology_meta_ptr": np.int64,
    "topology_meta": np.uint8,
    "op_runtime": np.float64,
    "op_temp_memory": np.int64,
    "tensor_producer": np.int32,
    "tensor_persistent": np.bool_,
    "tensor_output": np.bool_,
    "consumer_ptr": np.int64,
    "consumer_op": np.int32,
    "graph_topology": np.int32,
    "graph_tensor_ptr": np.int64,
    "tensor_size": np.int64,
    "graph_names": np.uint8,
}
_OPTIONAL_MEMBERS = ("tensor_output",)
"""Members older archives lack (all false then)."""
_HEADER_KEYS = ("format", "split", "graphs", "topologies")
_META_KEYS = ("name", "op_names", "tensor_names", "op_attrs", "tensor_attrs", "attrs")
_NPY_MAGIC = b"\x93NUMPY"
# A 1-D array's header as numpy writes it; at most 19 digits keep the length within int64.
_NPY_HEADER = re.compile(
    rb"\{'descr': '([^']*)', 'fortran_order': False, 'shape': \((\d{1,19}),\), \} *\n"
)
# Errors zipfile raises on a damaged directory (bad offsets, names that are not UTF-8, ...).
_ZIP_ERRORS = (OSError, EOFError, zipfile.BadZipFile, ValueError, struct.error, OverflowError)


def _map_archive(path: Path) -> dict[str, np.ndarray]:
    """Read-only views of the members of a split archive, over one memory map.

    Each member must be a stored (uncompressed) `.npy` of a known name, once, whose local
    header, size and CRC-32 agree with the zip directory, holding a 1-D array of its member's
    dtype that exactly fills it: a view never reaches into a neighbour's bytes, and a flipped
    bit anywhere in the data is refused instead of read as another graph.

    Raises:
        GraphoptError: naming the file, the member and what is wrong with it.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except _ZIP_ERRORS as error:
        raise GraphoptError(f"{path}: not a readable dataset archive ({reason(error)})") from None
    try:
        buffer = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as error:
        raise GraphoptError(f"{path}: not a readable dataset archive ({reason(error)})") from None
    arrays: dict[str, np.ndarray] = {}
    for info in infos:
        key = info.filename.removesuffix(".npy")
        where = f"{path}: member {describe(info.filename)}"
        if key not in _MEMBERS or not info.filename.endswith(".npy"):
            raise GraphoptError(f"{where}: not a member of a {FORMAT} archive")
        if key in arrays:
            raise GraphoptError(f"{where}: appears twice")
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
            raise GraphoptError(f"{where}: is compressed or encrypted; expected stored")
        data = _member_data(buffer, info, where)
        arrays[key] = _npy_view(data, np.dtype(_MEMBERS[key]), where)
    return arrays


def _member_data(buffer: np.ndarray, info: zipfile.ZipInfo, where: str) -> np.ndarray:
    """The bytes of a stored member, after checking its local header and CRC-32."""
    start = info.header_offset
    local = bytes(buffer[max(start, 0) : max(start, 0) + _LOCAL_HEADER.size])
    if start < 0 or len(local) < _LOCAL_HEADER.size or local[:4] != b"PK\x03\x04":
        raise GraphoptError(f"{where}: has no local header")
    _, name_length, extra_length = _LOCAL_HEADER.unpack(local)
    name_start = start + _LOCAL_HEADER.size
    encoding = "utf-8" if info.flag_bits & 0x800 else "cp437"
    if bytes(buffer[name_start : name_start + name_length]) != info.orig_filename.encode(
        encoding, errors="replace"
    ):
        raise GraphoptError(f"{where}: its local header names another file")
    begin = name_start + name_length + extra_length
    end = begin + info.compress_size
    if info.file_size != info.compress_size or end > buffer.shape[0]:
        raise GraphoptError(f"{where}: is truncated")
    data = buffer[begin:end]
    if zlib.crc32(data) != info.CRC:
        raise GraphoptError(f"{where}: is corrupt (its CRC-32 does not match its bytes)")
    return data


def _npy_view(data: np.ndarray, dtype: np.dtype, where: str) -> np.ndarray:
    """The 1-D array of `dtype` a member's `.npy` bytes hold, viewed in place.

    The header is matched exactly as numpy writes a 1-D array's (version 1.0 or 2.0), rather
    than evaluated as a Python literal: any other header is refused, and no malformed header
    can raise a parser's own exception.
    """
    version = bytes(data[:8])
    if version not in (_NPY_MAGIC + b"\x01\x00", _NPY_MAGIC + b"\x02\x00"):
        raise GraphoptError(f"{where}: is not a version 1.0 or 2.0 .npy array")
    width = 2 if version[6] == 1 else 4
    begin = 8 + width + int.from_bytes(bytes(data[8 : 8 + width]), "little")
    match = _NPY_HEADER.fullmatch(bytes(data[8 + width : begin]))
    if match is None or match[1] != dtype.str.encode():
        raise GraphoptError(f"{where}: must be a 1-D {dtype} .npy array")
    size = int(match[2]) * dtype.itemsize
    if begin + size != data.shape[0]:
        raise GraphoptError(
            f"{where}: holds {max(data.shape[0] - begin, 0)} bytes of data, its header says {size}"
        )
    return data[begin:].view(dtype)


def _json_member(raw: np.ndarray, where: str) -> Any:
    """A UTF-8 JSON document stored as bytes."""
    try:
        return json.loads(raw.tobytes().decode("utf-8"))
    except (ValueError, RecursionError) as error:  # JSON, UTF-8 and integer-size errors
        raise GraphoptError(f"{where}: is not valid UTF-8 JSON ({reason(error)})") from None


def _check_offsets(
    path: Path, arrays: dict[str, np.ndarray], name: str, count: int, end: int
) -> None:
    """Refuses an offsets member unless it has count + 1 entries from 0, not decreasing, to end.

    Negative or decreasing offsets would slice backwards from the end of an array: another
    graph's data, read without an error.
    """
    ptr = arrays[name]
    if ptr.shape[0] != count + 1 or ptr[0] != 0 or ptr[-1] != end or np.any(np.diff(ptr) < 0):
        raise GraphoptError(
            f"{path}: member '{name}' must hold {count + 1} offsets from 0, not decreasing, "
            f"to {end}"
        )


def _check_archive(path: Path, split: str, arrays: dict[str, np.ndarray]) -> tuple[str, ...]:
    """Checks the header and every offset of a split archive; returns the graph names.

    What one graph needs is checked here, once, vectorized over all graphs: indexing can then
    never slice out of bounds; each topology's own rules are checked when it is first built.
    """
    for key in _MEMBERS:
        if key not in arrays and key not in _OPTIONAL_MEMBERS:
            raise GraphoptError(f"{path}: missing member '{key}'")
    header = _json_member(arrays["header"], f"{path}: header")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise GraphoptError(f"{path}: header: format must be '{FORMAT}'")
    if sorted(header) != sorted(_HEADER_KEYS):
        raise GraphoptError(f"{path}: header: must hold exactly {', '.join(_HEADER_KEYS)}")
    if header["split"] != split:
        raise GraphoptError(
            f"{path}: header: holds split {describe(header['split'])}, not '{split}'"
        )
    n_topologies = arrays["topology_op_ptr"].shape[0] - 1
    n_graphs = arrays["graph_topology"].shape[0]
    if n_topologies < 0:
        raise GraphoptError(f"{path}: member 'topology_op_ptr' must hold at least one offset")
    for key, count in (("topologies", n_topologies), ("graphs", n_graphs)):
        value = header[key]
        if not isinstance(value, int) or isinstance(value, bool) or value != count:
            raise GraphoptError(
                f"{path}: header: {key} is {describe(value)}, the arrays hold {count}"
            )
    names = _json_member(arrays["graph_names"], f"{path}: graph_names")
    if not isinstance(names, list) or len(names) != n_graphs:
        raise GraphoptError(f"{path}: graph_names: must be a JSON list of {n_graphs} names")
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise GraphoptError(
                f"{path}: graph_names[{i}]: must be a non-empty string, got {describe(name)}"
            )
    if len(set(names)) != len(names):
        seen: set[str] = set()
        twice = next(name for name in names if name in seen or seen.add(name))
        raise GraphoptError(f"{path}: graph_names: {describe(twice)} appears twice")
    for per_op in ("op_runtime", "op_temp_memory"):
        _check_offsets(path, arrays, "topology_op_ptr", n_topologies, arrays[per_op].shape[0])
    flags = [key for key in ("tensor_persistent", "tensor_output") if key in arrays]
    for per_tensor in ("tensor_producer", *flags):
        _check_offsets(
            path, arrays, "topology_tensor_ptr", n_topologies, arrays[per_tensor].shape[0]
        )
    n_tensors = arrays["tensor_producer"].shape[0]
    _check_offsets(path, arrays, "topology_edge_ptr", n_topologies, arrays["consumer_op"].shape[0])
    _check_offsets(
        path, arrays, "topology_meta_ptr", n_topologies, arrays["topology_meta"].shape[0]
    )
    if arrays["consumer_ptr"].shape[0] != n_tensors + n_topologies:
        raise GraphoptError(
            f"{path}: member 'consumer_ptr' must hold one offset per tensor plus one per "
            f"topology ({n_tensors + n_topologies})"
        )
    for key in flags:
        if np.any(arrays[key].view(np.uint8) > 1):
            raise GraphoptError(f"{path}: member '{key}' holds bytes other than 0 and 1")
    topology = arrays["graph_topology"]
    if np.any((topology < 0) | (topology >= n_topologies)):
        raise GraphoptError(
            f"{path}: member 'graph_topology' must hold topology indices in [0, {n_topologies})"
        )
    _check_offsets(path, arrays, "graph_tensor_ptr", n_graphs, arrays["tensor_size"].shape[0])
    tensors_per_topology = np.diff(arrays["topology_tensor_ptr"])
    wrong = np.flatnonzero(np.diff(arrays["graph_tensor_ptr"]) != tensors_per_topology[topology])
    if wrong.size:
        i = int(wrong[0])
        raise GraphoptError(
            f"{path}: graph {i} ({describe(names[i])}): has "
            f"{int(np.diff(arrays['graph_tensor_ptr'])[i])} tensor sizes, its topology "
            f"{int(topology[i])} has {int(tensors_per_topology[topology[i]])} tensors"
        )
    return tuple(names)


class Dataset:
    """One split of a built dataset: a lazy, indexable sequence of graphs.

    Opening maps the split's archive and checks its structure (header, offsets, CRCs);
    `dataset[i]` slices the arrays of graph i and validates them into a `Graph` (each
    topology's structure is decoded and validated once and cached, since its copies sit next to
    each other). Picklable, so it can be handed to DataLoader workers, which reopen the file.

    Use `Dataset.open(directory, split)`.
    """

    def __init__(
        self, path: Path, split: str, arrays: dict[str, np.ndarray], names: tuple[str, ...]
    ) -> None:
        self.path = path
        self.split = split
        self._arrays = arrays
        self._names = names
        self._topology = functools.lru_cache(maxsize=_TOPOLOGY_CACHE)(self._load_topology)

    @classmethod
    def open(cls, directory: str | Path, split: str) -> Dataset:
        """Opens split `split` ("train", "valid" or "test") of the dataset in `directory`.

        Raises:
            GraphoptError: when the split is unknown or its archive is missing or malformed.
        """
        if split not in SPLITS:
            raise GraphoptError(
                f"unknown split {describe(split)}; valid splits: {', '.join(SPLITS)}"
            )
        path = Path(directory) / split_file(split)
        if not path.is_file():
            raise GraphoptError(f"{path}: no such dataset archive (build the dataset first)")
        arrays = _map_archive(path)
        return cls(path, split, arrays, _check_archive(path, split, arrays))

    def __reduce__(self) -> tuple[Any, tuple[Path, str]]:
        return Dataset.open, (self.path.parent, self.split)

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[Graph]:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, index: int) -> Graph:
        """Graph `index` (negative counts from the end).

        Raises:
            GraphError: when the stored graph breaks a rule of the contract, naming the file
                and the graph.
        """
        n = len(self)
        if not isinstance(index, int | np.integer) or isinstance(index, bool):
            raise TypeError(f"dataset indices must be integers, got {type(index).__name__}")
        if not -n <= index < n:
            raise IndexError(f"graph index {index} out of range for {n} graphs")
        i = int(index) % n
        ptr = self._arrays["graph_tensor_ptr"]
        sizes = self._arrays["tensor_size"][ptr[i] : ptr[i + 1]]
        topology = self._topology(int(self._arrays["graph_topology"][i]))
        try:
            return topology.with_tensor_sizes(sizes, name=self._names[i])
        except GraphError as error:
            raise GraphError(
                f"{self.path}: graph {i} ({describe(self._names[i])}): {error}"
            ) from None

    def __repr__(self) -> str:
        return f"Dataset({str(self.path)!r}, graphs={len(self)}, topologies={self.n_topologies})"

    @property
    def names(self) -> tuple[str, ...]:
        """Name of each graph."""
        return self._names

    @property
    def topology_ids(self) -> np.ndarray:
        """[len] int32 split-local topology of each graph (copies share one)."""
        return self._arrays["graph_topology"]

    @property
    def n_topologies(self) -> int:
        """Number of distinct topologies in the split."""
        return int(self._arrays["topology_op_ptr"].shape[0] - 1)

    @property
    def op_counts(self) -> np.ndarray:
        """[len] int64 op count of each graph, without building any graph."""
        return np.diff(self._arrays["topology_op_ptr"])[self.topology_ids]

    def _load_topology(self, k: int) -> Graph:
        """Builds topology k with zero tensor sizes (each graph sets its own), validating it.

        Raises:
            GraphError: naming the file and the topology, when its metadata or structure breaks
                a rule of the format or of the contract.
        """
        a = self._arrays
        where = f"{self.path}: topology {k}"
        ops = slice(a["topology_op_ptr"][k], a["topology_op_ptr"][k + 1])
        tensors = slice(a["topology_tensor_ptr"][k], a["topology_tensor_ptr"][k + 1])
        edges = slice(a["topology_edge_ptr"][k], a["topology_edge_ptr"][k + 1])
        meta_bytes = a["topology_meta"][a["topology_meta_ptr"][k] : a["topology_meta_ptr"][k + 1]]
        meta = _check_meta(
            _json_member(meta_bytes, where),
            where,
            ops.stop - ops.start,
            tensors.stop - tensors.start,
        )
        try:
            topology = Graph.from_arrays(
                meta["name"],
                meta["op_names"],
                a["op_runtime"][ops],
                meta["tensor_names"],
                np.zeros(tensors.stop - tensors.start, dtype=np.int64),
                a["tensor_producer"][tensors],
                a["consumer_ptr"][tensors.start + k : tensors.stop + k + 1],
                a["consumer_op"][edges],
                op_temp_memory=a["op_temp_memory"][ops],
                tensor_persistent=a["tensor_persistent"][tensors],
                tensor_output=a["tensor_output"][tensors] if "tensor_output" in a else None,
                op_attrs=meta["op_attrs"],
                tensor_attrs=meta["tensor_attrs"],
                attrs=meta["attrs"],
            )
            # The JSON reader's rules for the extra fields (misspelt, unsupported or malformed
            # contract fields) hold for every graph, however it is stored: apply them.
            graph_from_json(graph_to_json(topology))
        except GraphError as error:
            raise GraphError(f"{where} ({describe(meta['name'])}): {error}") from None
        return topology


def _check_meta(meta: Any, where: str, n_ops: int, n_tensors: int) -> dict[str, Any]:
    """A topology's metadata object, with names and attributes of the right kinds and counts.

    Attribute keys must not be the contract's own fields: written back to JSON they would
    overwrite the real runtime, size or producer of the graph.
    """
    if not isinstance(meta, dict) or sorted(meta) != sorted(_META_KEYS):
        raise GraphError(f"{where}: metadata must be an object of {', '.join(_META_KEYS)}")
    if not isinstance(meta["name"], str):
        raise GraphError(f"{where}: name must be a string, got {describe(meta['name'])}")
    for key, count, fields in (
        ("op_names", n_ops, OP_FIELDS),
        ("tensor_names", n_tensors, TENSOR_FIELDS),
    ):
        names = meta[key]
        if not isinstance(names, list) or len(names) != count:
            raise GraphError(f"{where}: {key} must be a list of {count} names")
        attrs_key = key.replace("_names", "_attrs")
        attrs = meta[attrs_key]
        if attrs is None:
            continue
        if not isinstance(attrs, list) or len(attrs) != count:
            raise GraphError(f"{where}: {attrs_key} must be null or a list of {count} objects")
        for i, item in enumerate(attrs):
            if not isinstance(item, dict) or not item.keys().isdisjoint(fields):
                raise GraphError(
                    f"{where}: {attrs_key}[{i}] must be an object without the fields "
                    f"{', '.join(fields)}"
                )
    if not isinstance(meta["attrs"], dict) or not meta["attrs"].keys().isdisjoint(GRAPH_FIELDS):
        raise GraphError(
            f"{where}: attrs must be an object without the fields {', '.join(GRAPH_FIELDS)}"
        )
    return meta


# ---------------------------------------------------------------------------------- manifest
_MANIFEST_KEYS = (
    "format",
    "name",
    "graphopt_version",
    "seed",
    "config",
    "graphs",
    "topologies",
    "splits",
    "topology_table",
)
_SPLIT_KEYS = (
    "file",
    "bytes",
    "sha256",
    "graphs",
    "topologies",
    "ops",
    "op_count_histogram",
    "tensor_size_histogram",
    "sources",
)
_ROW_KEYS = ("name", "split", "ops", "tensors", "edges", "source", "augment_seed")
_SOURCE_KINDS = ("synthetic", "zoo", "files")


def _count(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise GraphoptError(f"{where}: must be an integer >= 0, got {describe(value)}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise GraphoptError(f"{where}: must be a non-empty string, got {describe(value)}")
    return value


def _check_histogram(value: Any, where: str, total: int | None) -> None:
    histogram = record_fields(value, where, ("bins", "counts"))
    bins, counts = histogram["bins"], histogram["counts"]
    numeric = isinstance(bins, list) and all(
        isinstance(b, int | float) and not isinstance(b, bool) and math.isfinite(b) for b in bins
    )
    if not numeric or len(bins) < 2 or any(b > c for b, c in zip(bins, bins[1:], strict=False)):
        raise GraphoptError(f"{where}.bins: must be at least 2 finite, increasing numbers")
    if not isinstance(counts, list) or len(counts) != len(bins) - 1:
        raise GraphoptError(f"{where}.counts: must be a list of {len(bins) - 1} counts")
    for i, count in enumerate(counts):
        _count(count, f"{where}.counts[{i}]")
    if total is not None and sum(counts) != total:
        raise GraphoptError(f"{where}.counts: must sum to {total}, got {sum(counts)}")


def _check_split_entry(directory: Path, split: str, value: Any, where: str) -> dict[str, Any]:
    entry = record_fields(value, where, _SPLIT_KEYS)
    if entry["file"] != split_file(split):
        raise GraphoptError(
            f"{where}.file: must be '{split_file(split)}', got {describe(entry['file'])}"
        )
    size = _count(entry["bytes"], f"{where}.bytes")
    archive = directory / split_file(split)
    if archive.is_file() and archive.stat().st_size != size:
        raise GraphoptError(
            f"{where}.bytes: says {size}, but {archive} has {archive.stat().st_size} bytes"
        )
    digest = entry["sha256"]
    if not isinstance(digest, str) or re.fullmatch(r"[0-9a-f]{64}", digest) is None:
        raise GraphoptError(f"{where}.sha256: must be 64 lowercase hex digits")
    for key in ("graphs", "topologies", "ops"):
        _count(entry[key], f"{where}.{key}")
    _check_histogram(entry["op_count_histogram"], f"{where}.op_count_histogram", entry["graphs"])
    _check_histogram(entry["tensor_size_histogram"], f"{where}.tensor_size_histogram", None)
    sources = entry["sources"]
    if not isinstance(sources, dict):
        raise GraphoptError(f"{where}.sources: must be a JSON object, got {describe(sources)}")
    for source, count in sources.items():
        _count(count, f"{where}.sources.{source}")
    if sum(sources.values()) != entry["topologies"]:
        raise GraphoptError(f"{where}.sources: must count {entry['topologies']} topologies")
    return entry


def _check_manifest(directory: Path, manifest: Any) -> dict[str, Any]:
    """Every field of a manifest, its counts against each other and its sizes against the files.

    The config must be one `DatasetConfig` reads back unchanged (no field left to a default).
    """
    manifest = record_fields(manifest, "manifest", _MANIFEST_KEYS)
    _text(manifest["name"], "name")
    _text(manifest["graphopt_version"], "graphopt_version")
    _count(manifest["seed"], "seed")
    config = DatasetConfig.from_dict(manifest["config"])
    if config.to_dict() != manifest["config"]:
        raise GraphoptError("config: is not the complete config of a build (a field is missing)")
    if (config.name, config.seed) != (manifest["name"], manifest["seed"]):
        raise GraphoptError("name and seed: must be those of the config")
    splits = record_fields(manifest["splits"], "splits", SPLITS)
    entries = {s: _check_split_entry(directory, s, splits[s], f"splits.{s}") for s in SPLITS}
    for key in ("graphs", "topologies"):
        total = sum(entry[key] for entry in entries.values())
        if _count(manifest[key], key) != total:
            raise GraphoptError(f"{key}: is {manifest[key]}, the splits hold {total}")
    table = manifest["topology_table"]
    if not isinstance(table, list) or len(table) != manifest["topologies"]:
        raise GraphoptError(f"topology_table: must list {manifest['topologies']} topologies")
    names: set[str] = set()
    per_split = dict.fromkeys(SPLITS, 0)
    for i, value in enumerate(table):
        where = f"topology_table[{i}]"
        row = record_fields(value, where, _ROW_KEYS)
        name = _text(row["name"], f"{where}.name")
        if name in names:
            raise GraphoptError(f"{where}.name: {describe(name)} appears twice")
        names.add(name)
        if row["split"] not in SPLITS:
            raise GraphoptError(
                f"{where}.split: must be one of {', '.join(SPLITS)}, got {describe(row['split'])}"
            )
        per_split[row["split"]] += 1
        for key in ("ops", "tensors", "edges", "augment_seed"):
            _count(row[key], f"{where}.{key}")
        source = row["source"]
        if not isinstance(source, dict) or source.get("kind") not in _SOURCE_KINDS:
            raise GraphoptError(
                f"{where}.source: must be an object whose kind is one of {', '.join(_SOURCE_KINDS)}"
            )
    for split, count in per_split.items():
        if count != entries[split]["topologies"]:
            raise GraphoptError(
                f"topology_table: lists {count} {split} topologies, splits.{split} has "
                f"{entries[split]['topologies']}"
            )
    return manifest


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of the dataset in `directory`, checked field by field.

    Raises:
        GraphoptError: when it is missing, not UTF-8 JSON, or a field breaks a rule of the
            `graphopt.dataset/1` manifest, naming the file and the field.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise GraphoptError(f"{path}: no such file (not a dataset directory)")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError) as error:  # JSON, UTF-8 and integer-size errors
        raise GraphoptError(f"{path}: not valid UTF-8 JSON ({reason(error)})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise GraphoptError(f"{path}: format must be '{FORMAT}'")
    try:
        return _check_manifest(Path(directory), manifest)
    except GraphoptError as error:
        raise GraphoptError(f"{path}: {error}") from None
