"""Fuzzing dataset archives and manifests (issue 15, item 1).

Seeds: a tiny built dataset (4 topologies of 6 to 9 ops, one noisy copy each; train holds 2
topologies). Mutants of `train.npz` come from four angles: zip- and byte-level mutations of the
file; the archive's JSON members (header, graph names, each topology's metadata) mutated as
documents and stored again in a well-formed archive; its arrays mutated as lists (edge values,
deleted, duplicated, reordered items) and stored again; and mutants of `manifest.json`.

Every mutant must be refused with the project's one-line error, or accepted with every graph
of the split valid: scored identically by the fast and the reference scorer, and read back the
same from its own JSON. A sample also goes through `graphopt bench dataset:DIR:train:N`.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
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
from fuzz.mutators import mutated_archive, mutated_bytes, mutated_document, mutated_json
from fuzz.test_fuzz_graphs import CONTRACT_WORDS
from graphopt.datasets import SPLITS, Dataset, DatasetConfig, build_dataset, read_manifest
from graphopt.datasets.store import write_archive
from graphopt.ir.graph import Graph
from graphopt.ir.io import graph_from_json, graph_to_json

TINY = {
    "name": "fuzz",
    "seed": 1,
    "copies": 1,
    "split": [2, 1, 1],
    "synthetic": [
        {"family": "layered", "sizes": [6, 9], "count": 1},
        {"family": "erdos_renyi", "sizes": [7, 8], "count": 1},
    ],
}
"""4 topologies: 2 in train, 1 in valid, 1 in test, each with one noisy copy."""

JSON_MEMBERS = ("header", "graph_names", "topology_meta")


class Seeds:
    """The tiny dataset and what the mutations draw from."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.manifest = json.loads((directory / "manifest.json").read_text())
        self.archive = (directory / "train.npz").read_bytes()
        self.others = [(directory / f"{s}.npz").read_bytes() for s in ("valid", "test")]
        with np.load(directory / "train.npz") as archive:
            self.arrays = {key: archive[key] for key in archive.files}
        self.members = [f"{key}.npy" for key in self.arrays]
        train = Dataset.open(directory, "train")
        names = [n for g in train for n in (*g.op_names, *g.tensor_names)]
        self.vocabulary = sorted({*names, *CONTRACT_WORDS, *SPLITS, *self.manifest})


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Seeds:
    directory = tmp_path_factory.mktemp("fuzz-dataset")
    build_dataset(DatasetConfig.from_dict(TINY), directory, progress=False)
    return Seeds(directory)


@pytest.fixture(scope="module")
def work(seeds, tmp_path_factory) -> Path:
    """A copy of the dataset whose files each mutant replaces."""
    directory = tmp_path_factory.mktemp("fuzz-work")
    for path in seeds.directory.iterdir():
        shutil.copy(path, directory / path.name)
    return directory


def _replace(path: Path, data: bytes) -> None:
    """Writes a mutant into a new file: earlier datasets still map the old one's pages."""
    path.unlink(missing_ok=True)
    path.write_bytes(data)


def _load(directory: Path) -> list[Graph]:
    dataset = Dataset.open(directory, "train")
    graphs = list(dataset)
    assert len(graphs) == len(dataset.names) == dataset.op_counts.shape[0]
    assert dataset.op_counts.tolist() == [g.n_ops for g in graphs]
    return graphs


def check_split(directory: Path) -> None:
    """The mutant split is refused, or every graph of it is a valid graph."""
    result = outcome(_load, directory)
    record(result)
    for i, graph in enumerate(result.value or ()):
        assert_scored_identically(graph, seed=i)
        assert_same_graph(graph_from_json(graph_to_json(graph)), graph)


# --------------------------------------------------------------------------- archive bytes
def archive_mutants(seeds: Seeds) -> st.SearchStrategy[bytes]:
    return mutated_archive(seeds.archive, names=seeds.members, splice=seeds.others)


def check_archive_mutant(work: Path, mutant: bytes) -> None:
    _replace(work / "train.npz", mutant)
    check_split(work)


@fuzz_settings(FAST_EXAMPLES)
@given(data=st.data())
def test_archive_mutants(seeds, work, data) -> None:
    check_archive_mutant(work, data.draw(archive_mutants(seeds)))


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=st.data())
def test_archive_mutants_slow(seeds, work, data) -> None:
    check_archive_mutant(work, data.draw(archive_mutants(seeds)))


# ------------------------------------------------------------------- JSON members as documents
def _documents(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The archive's JSON members, each topology's metadata apart."""
    ptr = arrays["topology_meta_ptr"]
    meta = arrays["topology_meta"]
    documents = {key: json.loads(arrays[key].tobytes()) for key in ("header", "graph_names")}
    for k in range(ptr.shape[0] - 1):
        documents[f"topology_meta[{k}]"] = json.loads(meta[ptr[k] : ptr[k + 1]].tobytes())
    return documents


@st.composite
def document_mutants(draw: st.DrawFn, seeds: Seeds) -> dict[str, np.ndarray]:
    """The archive's arrays with one JSON member mutated, offsets kept consistent."""
    documents = _documents(seeds.arrays)
    target = draw(st.sampled_from(sorted(documents)))
    text = draw(mutated_json(documents[target], seeds.vocabulary))
    encoded = {key: json.dumps(doc).encode() for key, doc in documents.items()}
    encoded[target] = text.encode("utf-8", errors="surrogatepass")
    arrays = dict(seeds.arrays)
    for key in ("header", "graph_names"):
        arrays[key] = np.frombuffer(encoded[key], dtype=np.uint8)
    metas = [encoded[f"topology_meta[{k}]"] for k in range(len(documents) - 2)]
    arrays["topology_meta"] = np.frombuffer(b"".join(metas), dtype=np.uint8)
    arrays["topology_meta_ptr"] = np.cumsum([0, *map(len, metas)], dtype=np.int64)
    return arrays


def check_arrays_mutant(work: Path, arrays: dict[str, np.ndarray]) -> None:
    (work / "train.npz").unlink(missing_ok=True)
    write_archive(work / "train.npz", arrays)
    check_split(work)


@fuzz_settings(FAST_EXAMPLES)
@given(data=st.data())
def test_json_member_mutants(seeds, work, data) -> None:
    check_arrays_mutant(work, data.draw(document_mutants(seeds)))


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=st.data())
def test_json_member_mutants_slow(seeds, work, data) -> None:
    check_arrays_mutant(work, data.draw(document_mutants(seeds)))


# ----------------------------------------------------------------------- arrays as documents
def _as_member(values: Any, dtype: np.dtype) -> np.ndarray:
    """Mutated values as an array: of the member's dtype when they fit it, else of objects."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.array(values, dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            pass
    items = values if isinstance(values, list) else [values]
    array = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        array[i] = item
    return array


@st.composite
def array_mutants(draw: st.DrawFn, seeds: Seeds) -> dict[str, np.ndarray]:
    """The archive's arrays with one numeric member mutated as a list of numbers."""
    numeric = sorted(key for key in seeds.arrays if key not in JSON_MEMBERS)
    target = draw(st.sampled_from(numeric))
    original = seeds.arrays[target]
    values = draw(mutated_document({target: original.tolist()}, max_mutations=2))
    arrays = dict(seeds.arrays)
    if isinstance(values, dict) and target in values:
        arrays[target] = _as_member(values[target], original.dtype)
    else:  # the mutation renamed or deleted the member
        del arrays[target]
        if isinstance(values, dict):
            arrays.update({str(k): _as_member(v, original.dtype) for k, v in values.items()})
    return arrays


@fuzz_settings(FAST_EXAMPLES)
@given(data=st.data())
def test_array_mutants(seeds, work, data) -> None:
    check_arrays_mutant(work, data.draw(array_mutants(seeds)))


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=st.data())
def test_array_mutants_slow(seeds, work, data) -> None:
    check_arrays_mutant(work, data.draw(array_mutants(seeds)))


# ------------------------------------------------------------------------------- manifests
def manifest_mutants(seeds: Seeds) -> st.SearchStrategy[bytes]:
    text = json.dumps(seeds.manifest, indent=1).encode()
    as_document = mutated_json(seeds.manifest, seeds.vocabulary).map(
        lambda t: t.encode("utf-8", errors="surrogatepass")
    )
    return st.one_of(as_document, mutated_bytes(text))


def check_manifest(manifest: dict[str, Any], seeds: Seeds) -> None:
    """What an accepted manifest must hold: the seed's fields, consistent counts, a config."""
    assert set(manifest) == set(seeds.manifest)
    assert set(manifest["splits"]) == set(SPLITS)
    for split, entry in manifest["splits"].items():
        assert set(entry) == set(seeds.manifest["splits"][split])
        assert entry["file"] == f"{split}.npz"
        assert entry["bytes"] == seeds.manifest["splits"][split]["bytes"]
        assert sum(entry["op_count_histogram"]["counts"]) == entry["graphs"]
        assert sum(entry["sources"].values()) == entry["topologies"]
    assert manifest["graphs"] == sum(e["graphs"] for e in manifest["splits"].values())
    assert len(manifest["topology_table"]) == manifest["topologies"]
    assert DatasetConfig.from_dict(manifest["config"]).to_dict() == manifest["config"]


def check_manifest_mutant(work: Path, seeds: Seeds, mutant: bytes) -> None:
    _replace(work / "manifest.json", mutant)
    result = outcome(read_manifest, work)
    record(result)
    if result.accepted:
        check_manifest(result.value, seeds)


@fuzz_settings(FAST_EXAMPLES)
@given(data=st.data())
def test_manifest_mutants(seeds, work, data) -> None:
    check_manifest_mutant(work, seeds, data.draw(manifest_mutants(seeds)))


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=st.data())
def test_manifest_mutants_slow(seeds, work, data) -> None:
    check_manifest_mutant(work, seeds, data.draw(manifest_mutants(seeds)))


def test_the_seeds_are_accepted(seeds, work) -> None:
    _replace(work / "train.npz", seeds.archive)
    _replace(work / "manifest.json", json.dumps(seeds.manifest).encode())
    assert outcome(read_manifest, work).value == seeds.manifest
    assert len(outcome(_load, work).value) == 4
    check_arrays_mutant(work, dict(seeds.arrays))
    assert len(outcome(_load, work).value) == 4


# ---------------------------------------------------------------------------------- the CLI
def check_bench(seeds: Seeds, directory: Path, mutant: bytes) -> None:
    directory.mkdir()
    (directory / "train.npz").write_bytes(mutant)
    spec = f"dataset:{directory}:train:3"
    output = directory / "bench"
    run_cli("bench", spec, "--solvers", "brkga", "--budget", 20, "--seeds", 1, "-o", output)


@fuzz_settings(3)
@given(data=st.data())
def test_bench_on_mutants(seeds, tmp_path_factory, data) -> None:
    directory = tmp_path_factory.mktemp("bench") / "d"
    check_bench(seeds, directory, data.draw(archive_mutants(seeds)))


@pytest.mark.slow
@fuzz_settings(100)
@given(data=st.data())
def test_bench_on_mutants_slow(seeds, tmp_path_factory, data) -> None:
    directory = tmp_path_factory.mktemp("bench") / "d"
    check_bench(seeds, directory, data.draw(archive_mutants(seeds)))
