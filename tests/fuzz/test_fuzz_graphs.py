"""Fuzzing graph files: `graphopt.graph/1` JSON and `.npz` (issue 15, item 1).

Seeds: hand-made graphs with every optional field (persistent, zero-size and dead tensors,
temp memory, repeated consumers, metadata), a generated layered graph and the empty graph.
JSON mutants are structure-aware document mutations written as JSON text (with what only text
can carry: duplicate keys, 1e400, deep nesting) or byte mutations of the file; `.npz` mutants
are member- and byte-level mutations of the archive.

Every mutant must be refused with the project's one-line error, or accepted as a valid graph:
scored identically by the fast and the reference scorer, and written and read back unchanged in
both formats. A sample of mutants also goes through `graphopt info` and `graphopt score`.
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import assert_same_graph
from fuzz.harness import (
    FAST_EXAMPLES,
    SLOW_EXAMPLES,
    assert_scored_identically,
    fuzz_settings,
    outcome,
    record,
    run_cli,
)
from fuzz.mutators import mutated_archive, mutated_bytes, mutated_json
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.io import graph_from_json, graph_to_json, read_graph, write_graph

CONTRACT_WORDS = (
    "format",
    "name",
    "ops",
    "tensors",
    "runtime",
    "temp_memory",
    "size",
    "producer",
    "consumers",
    "persistent",
    "output",
    "fusion",
    "compute_time",
    "kernel",
    "type",
    "graphopt.graph/1",
)
NPZ_MEMBERS = (
    "format.npy",
    "name.npy",
    "op_names.npy",
    "tensor_names.npy",
    "extras.npy",
    "op_runtime.npy",
    "op_temp_memory.npy",
    "tensor_size.npy",
    "tensor_producer.npy",
    "tensor_persistent.npy",
    "consumer_ptr.npy",
    "consumer_op.npy",
)

HAND_MADE: dict[str, Any] = {
    "format": "graphopt.graph/1",
    "name": "fuzz",
    "source": "hand-made",
    "ops": [
        {"name": "w", "runtime": 0.0, "type": "Parameter"},
        {"name": "x", "runtime": 0.5},
        {"name": "mm", "runtime": 2.0, "temp_memory": 64, "type": "MatMul", "flops": 1e6},
        {"name": "relu", "runtime": 1.0, "module": "block.0"},
        {"name": "add", "runtime": 1.0},
        {"name": "dead", "runtime": 0.25},
    ],
    "tensors": [
        {"name": "w:0", "size": 4096, "producer": "w", "consumers": ["mm"], "persistent": True},
        {"name": "x:0", "size": 1024, "producer": "x", "consumers": ["mm", "add", "add"]},
        {"name": "mm:0", "size": 2048, "producer": "mm", "consumers": ["relu"], "shape": [4, 8]},
        {"name": "mm:ctl", "size": 0, "producer": "mm", "consumers": ["dead"]},
        {"name": "relu:0", "size": 2048, "producer": "relu", "consumers": ["add"]},
        {"name": "add:0", "size": 2048, "producer": "add", "consumers": []},
        {"name": "dead:0", "size": 512, "producer": "dead"},
    ],
}
EMPTY: dict[str, Any] = {"format": "graphopt.graph/1", "name": "empty", "ops": [], "tensors": []}
SEED_GRAPHS = (
    graph_from_json(HAND_MADE),
    graph_from_json(EMPTY),
    generate("layered", 12, seed=3),
)
SEED_DOCUMENTS = tuple(graph_to_json(graph) for graph in SEED_GRAPHS)
VOCABULARY = tuple(
    dict.fromkeys(
        [*CONTRACT_WORDS, *(n for g in SEED_GRAPHS for n in (*g.op_names, *g.tensor_names))]
    )
)


def _npz_bytes(graph: Graph) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "g.npz"
        write_graph(graph, path)
        return path.read_bytes()


SEED_NPZ = tuple(_npz_bytes(graph) for graph in SEED_GRAPHS)

json_mutants = st.one_of(
    st.sampled_from(SEED_DOCUMENTS).flatmap(lambda seed: mutated_json(seed, VOCABULARY)),
    st.sampled_from(SEED_DOCUMENTS).flatmap(
        lambda seed: mutated_bytes(graph_to_text(seed).encode(), max_mutations=3)
    ),
)
npz_mutants = st.sampled_from(SEED_NPZ).flatmap(
    lambda seed: mutated_archive(seed, names=NPZ_MEMBERS, splice=SEED_NPZ)
)


def graph_to_text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1)


@pytest.fixture(scope="module")
def folder() -> Path:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def check_graph_file(path: Path, data: bytes | str) -> None:
    """Loads a mutant; an accepted one must score identically and round-trip in both formats."""
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    result = outcome(read_graph, path)
    record(result)
    if not result.accepted:
        assert str(path) in str(result.error)
        return
    graph = result.value
    assert_scored_identically(graph)
    for suffix in (".json", ".npz"):
        copy = path.with_name(f"copy{suffix}")
        write_graph(graph, copy)
        assert_same_graph(read_graph(copy), graph)


def _check_json(folder: Path, text: str | bytes) -> None:
    check_graph_file(folder / "mutant.json", text)


def _check_npz(folder: Path, data: bytes) -> None:
    check_graph_file(folder / "mutant.npz", data)


@fuzz_settings(FAST_EXAMPLES)
@given(text=json_mutants)
def test_graph_json_mutants(folder: Path, text: str | bytes) -> None:
    _check_json(folder, text)


@fuzz_settings(FAST_EXAMPLES)
@given(data=npz_mutants)
def test_graph_npz_mutants(folder: Path, data: bytes) -> None:
    _check_npz(folder, data)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(text=json_mutants)
def test_graph_json_mutants_long(folder: Path, text: str | bytes) -> None:
    _check_json(folder, text)


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=npz_mutants)
def test_graph_npz_mutants_long(folder: Path, data: bytes) -> None:
    _check_npz(folder, data)


CLI_FAST, CLI_SLOW = 4, 200
"""Mutants run through the command line (each is a new process of about a second)."""


def _check_cli(folder: Path, data: bytes | str, suffix: str) -> None:
    path = folder / f"cli{suffix}"
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    run_cli("info", path, "--json", expected=(0, 2))


@fuzz_settings(CLI_FAST)
@given(text=json_mutants, data=npz_mutants)
def test_graph_mutants_through_the_cli(folder: Path, text: str | bytes, data: bytes) -> None:
    """`graphopt info` on mutants: exit 0, or exit 2 with exactly one `error: ` line."""
    _check_cli(folder, text, ".json")
    _check_cli(folder, data, ".npz")


@pytest.mark.slow
@fuzz_settings(CLI_SLOW)
@given(text=json_mutants, data=npz_mutants)
def test_graph_mutants_through_the_cli_long(folder: Path, text: str | bytes, data: bytes) -> None:
    _check_cli(folder, text, ".json")
    _check_cli(folder, data, ".npz")


def test_npz_member_header_is_checked_before_reading(tmp_path: Path) -> None:
    """A member whose header promises more data than the archive holds is refused at once."""
    path = tmp_path / "g.npz"
    write_graph(SEED_GRAPHS[0], path)
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (1000000000000,), }"
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(buffer, "w") as target:
        for info in source.infolist():
            data = npy if info.filename == "tensor_size.npy" else source.read(info)
            target.writestr(info.filename, data)
    path.write_bytes(buffer.getvalue())
    result = outcome(read_graph, path, limit=5.0)
    assert "array 'tensor_size': its header promises 8,000,000,000,000 bytes" in str(result.error)
