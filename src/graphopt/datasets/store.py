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
boundary. The reader memory-maps the file once and views each member in place, so opening a split
costs no reading, DataLoader workers share the pages, and a graph is built only when indexed.

Members (all 1-D; T topologies, G graphs; `ptr` arrays have T + 1 or G + 1 entries from 0):
    header: UTF-8 JSON {"format", "split", "graphs", "topologies"} as uint8.
    topology_op_ptr, topology_tensor_ptr, topology_edge_ptr, topology_meta_ptr: int64 offsets
        of topology k's ops, tensors, edges and metadata bytes.
    op_runtime (float64), op_temp_memory (int64): per op, by topology_op_ptr.
    tensor_producer (int32, topology-local op index), tensor_persistent (bool): per tensor.
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
import struct
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.errors import GraphoptError
from graphopt.ir.graph import Graph

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


def _map_archive(path: Path) -> dict[str, np.ndarray]:
    """Read-only views of every member of an uncompressed `.npz`, over one memory map."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (OSError, zipfile.BadZipFile) as error:
        raise GraphoptError(f"{path}: not a readable dataset archive ({error})") from None
    buffer = np.memmap(path, dtype=np.uint8, mode="r")
    arrays: dict[str, np.ndarray] = {}
    with path.open("rb") as file:
        for info in infos:
            key = info.filename.removesuffix(".npy")
            if info.compress_type != zipfile.ZIP_STORED:
                raise GraphoptError(f"{path}: member '{key}' is compressed; expected stored")
            file.seek(info.header_offset)
            signature, name_length, extra_length = _LOCAL_HEADER.unpack(
                file.read(_LOCAL_HEADER.size)
            )
            if signature != b"PK\x03\x04":
                raise GraphoptError(f"{path}: member '{key}' has no local header")
            file.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
            try:
                version = np.lib.format.read_magic(file)
                read_header = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0
                )
                shape, fortran, dtype = read_header(file)
            except ValueError as error:
                raise GraphoptError(
                    f"{path}: member '{key}' is not a .npy array ({error})"
                ) from None
            if len(shape) != 1 or fortran or dtype.hasobject:
                raise GraphoptError(f"{path}: member '{key}' must be a 1-D plain array")
            start = file.tell()
            stop = start + shape[0] * dtype.itemsize
            if stop > buffer.shape[0]:
                raise GraphoptError(f"{path}: member '{key}' is truncated")
            arrays[key] = buffer[start:stop].view(dtype)
    return arrays


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
    "consumer_ptr": np.int64,
    "consumer_op": np.int32,
    "graph_topology": np.int32,
    "graph_tensor_ptr": np.int64,
    "tensor_size": np.int64,
    "graph_names": np.uint8,
}


class Dataset:
    """One split of a built dataset: a lazy, indexable sequence of graphs.

    Opening maps the split's archive and reads only the graph names; `dataset[i]` slices the
    arrays of graph i and validates them into a `Graph` (each topology's structure is decoded
    once and cached, since its copies sit next to each other). Picklable, so it can be handed
    to DataLoader workers, which reopen the file.

    Use `Dataset.open(directory, split)`.
    """

    def __init__(self, path: Path, split: str, arrays: dict[str, np.ndarray]) -> None:
        self.path = path
        self.split = split
        self._arrays = arrays
        self._names: tuple[str, ...] = tuple(json.loads(arrays["graph_names"].tobytes()))
        self._topology = functools.lru_cache(maxsize=_TOPOLOGY_CACHE)(self._load_topology)

    @classmethod
    def open(cls, directory: str | Path, split: str) -> Dataset:
        """Opens split `split` ("train", "valid" or "test") of the dataset in `directory`.

        Raises:
            GraphoptError: when the split is unknown or its archive is missing or malformed.
        """
        if split not in SPLITS:
            raise GraphoptError(f"unknown split '{split}'; valid splits: {', '.join(SPLITS)}")
        path = Path(directory) / split_file(split)
        if not path.is_file():
            raise GraphoptError(f"{path}: no such dataset archive (build the dataset first)")
        arrays = _map_archive(path)
        for key, dtype in _MEMBERS.items():
            if key not in arrays:
                raise GraphoptError(f"{path}: missing member '{key}'")
            if arrays[key].dtype != np.dtype(dtype):
                raise GraphoptError(
                    f"{path}: member '{key}' must be {np.dtype(dtype)}, got {arrays[key].dtype}"
                )
        try:
            header = json.loads(arrays["header"].tobytes())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise GraphoptError(f"{path}: header is not valid JSON") from None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise GraphoptError(f"{path}: format must be '{FORMAT}'")
        dataset = cls(path, split, arrays)
        if len(dataset._names) != arrays["graph_topology"].shape[0]:
            raise GraphoptError(f"{path}: graph_names and graph_topology differ in length")
        return dataset

    def __reduce__(self) -> tuple[Any, tuple[Path, str]]:
        return Dataset.open, (self.path.parent, self.split)

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[Graph]:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, index: int) -> Graph:
        n = len(self)
        if not isinstance(index, int | np.integer) or isinstance(index, bool):
            raise TypeError(f"dataset indices must be integers, got {type(index).__name__}")
        if not -n <= index < n:
            raise IndexError(f"graph index {index} out of range for {n} graphs")
        i = int(index) % n
        ptr = self._arrays["graph_tensor_ptr"]
        sizes = self._arrays["tensor_size"][ptr[i] : ptr[i + 1]]
        topology = self._topology(int(self._arrays["graph_topology"][i]))
        return topology.with_tensor_sizes(sizes, name=self._names[i])

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
        """Builds topology k with zero tensor sizes (each graph sets its own), validating it."""
        a = self._arrays
        ops = slice(a["topology_op_ptr"][k], a["topology_op_ptr"][k + 1])
        tensors = slice(a["topology_tensor_ptr"][k], a["topology_tensor_ptr"][k + 1])
        edges = slice(a["topology_edge_ptr"][k], a["topology_edge_ptr"][k + 1])
        meta_bytes = a["topology_meta"][a["topology_meta_ptr"][k] : a["topology_meta_ptr"][k + 1]]
        meta = json.loads(meta_bytes.tobytes())
        return Graph.from_arrays(
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
            op_attrs=meta["op_attrs"],
            tensor_attrs=meta["tensor_attrs"],
            attrs=meta["attrs"],
        )


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of the dataset in `directory`.

    Raises:
        GraphoptError: when it is missing or not a `graphopt.dataset/1` manifest.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise GraphoptError(f"{path}: no such file (not a dataset directory)")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise GraphoptError(f"{path}: not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise GraphoptError(f"{path}: format must be '{FORMAT}'")
    return manifest
