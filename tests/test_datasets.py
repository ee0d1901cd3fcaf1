"""Dataset pipeline: split rule, augmentation, reproducible storage, lazy loading, configs."""

from __future__ import annotations

import importlib.util
import json
import pickle
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from builders import assert_same_graph, tiny
from graphopt.datasets import (
    DEFAULT_CONFIG,
    SPLITS,
    Dataset,
    DatasetConfig,
    SyntheticSource,
    ZooSource,
    assign_splits,
    build_dataset,
    read_manifest,
)
from graphopt.errors import GraphoptError
from graphopt.ir.generators import augment, generate
from graphopt.ir.io import write_graph

SMALL = {
    "name": "small",
    "seed": 7,
    "copies": 3,
    "synthetic": [
        {"family": "erdos_renyi", "sizes": [12, 20, 28], "count": 2},
        {"family": "layered", "sizes": [16, 24], "count": 2, "params": {"fan_in": 2.0}},
    ],
}


def small_config(**changes) -> DatasetConfig:
    return DatasetConfig.from_dict({**SMALL, **changes})


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("small")
    return out, build_dataset(small_config(), out, progress=True)


def loaded(directory: Path) -> dict[str, Dataset]:
    return {split: Dataset.open(directory, split) for split in SPLITS}


# ------------------------------------------------------------------------------ split rule
def test_runs_of_five_are_split_three_one_one() -> None:
    rng = np.random.default_rng(0)
    op_counts = rng.permutation(np.arange(100, 123))  # 23 distinct counts: 4 runs + 3 left
    assigned = assign_splits(op_counts, (3, 1, 1), seed=1)
    by_size = assigned[np.argsort(op_counts)]
    for start in range(0, 20, 5):
        assert sorted(by_size[start : start + 5].tolist()) == [0, 0, 0, 1, 2]
    assert by_size[20:].tolist() == [0, 0, 0]  # a short last run fills train first


def test_remainder_of_four_gives_train_then_valid() -> None:
    assigned = assign_splits(np.arange(9), (3, 1, 1), seed=0)
    assert sorted(assigned[5:].tolist()) == [0, 0, 0, 1]


def test_paper_split_sizes_and_seeded_shuffle() -> None:
    op_counts = np.arange(372)
    assigned = assign_splits(op_counts, (3, 1, 1), seed=0)
    assert np.bincount(assigned).tolist() == [224, 74, 74]  # paper 001, section 4.1
    np.testing.assert_array_equal(assigned, assign_splits(op_counts, (3, 1, 1), seed=0))
    assert not np.array_equal(assigned, assign_splits(op_counts, (3, 1, 1), seed=1))


def test_ties_keep_the_given_order() -> None:
    assigned = assign_splits([5] * 10, (1, 1, 0), seed=3)
    for start in (0, 2, 4, 6, 8):
        assert sorted(assigned[start : start + 2].tolist()) == [0, 1]


def test_split_proportions_are_checked() -> None:
    with pytest.raises(GraphoptError, match="split: at least one"):
        assign_splits([1, 2], (0, 0, 0), seed=0)
    with pytest.raises(GraphoptError, match=r"split\[1\]: must be an integer >= 0"):
        assign_splits([1, 2], (3, -1, 1), seed=0)


def test_no_topology_in_two_splits(built) -> None:
    out, manifest = built
    datasets = loaded(out)
    split_of = {t["name"]: t["split"] for t in manifest["topology_table"]}
    for split, dataset in datasets.items():
        for name in dataset.names:
            assert split_of[name.split("/aug")[0]] == split
    counts = Counter(split_of.values())
    assert (counts["train"], counts["valid"], counts["test"]) == (6, 2, 2)


# ---------------------------------------------------------------------------- augmentation
def test_copies_share_their_topology_and_split(built) -> None:
    out, manifest = built
    for dataset in loaded(out).values():
        ids = dataset.topology_ids
        assert (np.bincount(ids) == 4).all()  # the original + 3 copies
        for k in range(dataset.n_topologies):
            members = np.flatnonzero(ids == k)
            original = dataset[int(members[0])]
            assert [dataset.names[i] for i in members] == [
                original.name,
                *(f"{original.name}/aug{c}" for c in range(3)),
            ]
            for i in members[1:]:
                copy = dataset[int(i)]
                np.testing.assert_array_equal(copy.consumer_op, original.consumer_op)
                low = np.floor(0.5 * original.tensor_size)
                high = np.ceil(1.5 * original.tensor_size)
                assert ((copy.tensor_size >= low) & (copy.tensor_size <= high)).all()
                assert not np.array_equal(copy.tensor_size, original.tensor_size)


def test_loaded_graphs_equal_regenerated_originals(built) -> None:
    out, manifest = built
    datasets = loaded(out)
    graphs = {g.name: g for dataset in datasets.values() for g in dataset}
    assert len(graphs) == manifest["graphs"] == 40
    for row in manifest["topology_table"]:
        source = row["source"]
        params = SMALL["synthetic"][source["entry"]].get("params", {})
        original = generate(source["family"], source["n"], seed=source["seed"], **params)
        assert_same_graph(graphs[original.name], original)
        for copy in augment(original, 3, seed=row["augment_seed"]):
            assert_same_graph(graphs[copy.name], copy)
    for dataset in datasets.values():
        np.testing.assert_array_equal(dataset.op_counts, [g.n_ops for g in dataset])


# ------------------------------------------------------------------------- storage, manifest
def test_same_config_and_seed_give_identical_bytes(built, tmp_path) -> None:
    out, _ = built
    build_dataset(small_config(), tmp_path, progress=False)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in tmp_path.iterdir())
    assert names == ["README.md", "manifest.json", "test.npz", "train.npz", "valid.npz"]
    for name in names:
        assert (out / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_another_seed_gives_another_dataset(built, tmp_path) -> None:
    out, _ = built
    build_dataset(small_config(seed=8), tmp_path, progress=False)
    assert (out / "train.npz").read_bytes() != (tmp_path / "train.npz").read_bytes()


def test_archives_are_plain_npz(built) -> None:
    out, manifest = built
    with np.load(out / "train.npz") as archive:
        assert archive["tensor_size"].shape[0] == manifest["splits"]["train"]["ops"]


def test_manifest_and_card(built) -> None:
    out, manifest = built
    assert read_manifest(out) == manifest
    assert manifest["config"] == small_config().to_dict()
    assert DatasetConfig.from_dict(manifest["config"]) == small_config()
    train = manifest["splits"]["train"]
    assert (train["graphs"], train["topologies"]) == (24, 6)
    assert sum(train["op_count_histogram"]["counts"]) == 24
    assert sum(train["tensor_size_histogram"]["counts"]) == train["ops"]
    bins = {split["op_count_histogram"]["bins"][0] for split in manifest["splits"].values()}
    assert len(bins) == 1  # shared bins
    assert sum(train["sources"].values()) == 6
    card = (out / "README.md").read_text()
    assert "random weights" in card and "graphopt dataset build" in card and "| test | 8 |" in card


def test_dataset_access(built) -> None:
    out, _ = built
    dataset = Dataset.open(out, "valid")
    assert len(dataset) == 8 and dataset.n_topologies == 2
    assert_same_graph(dataset[-1], dataset[7])
    assert_same_graph(pickle.loads(pickle.dumps(dataset))[3], dataset[3])
    with pytest.raises(IndexError):
        dataset[8]
    with pytest.raises(GraphoptError, match="unknown split 'dev'"):
        Dataset.open(out, "dev")
    with pytest.raises(GraphoptError, match="no such dataset archive"):
        Dataset.open(out / "missing", "train")


# ---------------------------------------------------------------------------- file sources
def test_file_sources_by_glob(tmp_path) -> None:
    (tmp_path / "graphs").mkdir()
    generated = generate("barabasi_albert", 15, seed=3)
    write_graph(tiny(), tmp_path / "graphs" / "a.json")
    write_graph(generated, tmp_path / "graphs" / "b.npz")
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps({"copies": 1, "split": [1, 1, 0], "files": ["graphs/*"]}))
    config = DatasetConfig.from_json(config_path)
    assert config.name == "config"
    manifest = build_dataset(config, tmp_path / "out", progress=False)
    rows = {row["name"]: row for row in manifest["topology_table"]}
    assert rows["tiny"]["source"] == {"kind": "files", "entry": 0, "path": "graphs/a.json"}
    graphs = {g.name: g for split in SPLITS for g in Dataset.open(tmp_path / "out", split)}
    assert_same_graph(graphs["tiny"], tiny())  # op attrs (types) survive
    assert_same_graph(graphs[generated.name], generated)
    assert {rows["tiny"]["split"], rows[generated.name]["split"]} == {"train", "valid"}


def test_file_pattern_matching_nothing(tmp_path) -> None:
    config = DatasetConfig.from_dict({"name": "x", "files": ["none/*.json"]}, base_dir=tmp_path)
    with pytest.raises(GraphoptError, match=r"files\[0\]: 'none/\*.json' matches no file"):
        build_dataset(config, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_duplicate_topology_names_are_refused(tmp_path) -> None:
    write_graph(tiny(), tmp_path / "a.json")
    write_graph(tiny(), tmp_path / "b.json")
    config = DatasetConfig.from_dict({"name": "x", "files": ["*.json"]}, base_dir=tmp_path)
    with pytest.raises(GraphoptError, match="graph name 'tiny' comes from both files"):
        build_dataset(config, tmp_path / "out", progress=False)


# -------------------------------------------------------------------------------- configs
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"copies": -1}, r"copies: must be an integer >= 0"),
        ({"seed": "zero"}, r"seed: must be an integer >= 0"),
        ({"split": [3, 1]}, r"split: must have 3 values"),
        ({"split": [0, 0, 0]}, r"split: at least one"),
        ({"size_noise": [1.5, 0.5]}, r"size_noise: low must be <= high"),
        ({"size_noise": [-1, 0.5]}, r"size_noise\[0\]: must be a finite number"),
        ({"colour": "red"}, r"config: unknown field 'colour'"),
        ({"synthetic": [{"family": "nope", "sizes": [10]}]}, r"synthetic\[0\]\.family: unknown"),
        ({"synthetic": [{"sizes": [10]}]}, r"synthetic\[0\]: missing required field 'family'"),
        ({"synthetic": [{"family": "layered", "sizes": [10, 0]}]}, r"synthetic\[0\]\.sizes\[1\]"),
        ({"synthetic": [{"family": "layered", "sizes": 10}]}, r"synthetic\[0\]\.sizes: must be"),
        (
            {"synthetic": [{"family": "layered", "sizes": [10], "count": 0}]},
            r"synthetic\[0\]\.count",
        ),
        (
            {"synthetic": [{"family": "layered", "sizes": [10], "params": {"bogus": 1}}]},
            r"synthetic\[0\]\.params: unknown parameter 'bogus'",
        ),
        (
            {"synthetic": [{"family": "layered", "sizes": [10], "params": {"seed": 1}}]},
            r"synthetic\[0\]\.params\.seed: is set by the dataset builder",
        ),
        (
            {"synthetic": [{"family": "sbm", "sizes": [10], "params": {"sizes": {"low": 0}}}]},
            r"synthetic\[0\]\.params\.sizes: SizeDistribution: low",
        ),
        ({"zoo": [{"name": "resnet18", "training": "yes"}]}, r"zoo\[0\]\.training"),
        ({"zoo": [{"model": "resnet18"}]}, r"zoo\[0\]: unknown field 'model'"),
        ({"files": [""]}, r"files\[0\]: must be a non-empty"),
        ({"synthetic": [], "zoo": [], "files": []}, r"no sources"),
    ],
)
def test_bad_config_names_the_field(tmp_path, changes, message) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**SMALL, **changes}))
    with pytest.raises(GraphoptError, match=rf"^{path}: {message}"):
        DatasetConfig.from_json(path)


def test_config_file_errors(tmp_path) -> None:
    with pytest.raises(GraphoptError, match="no such config file"):
        DatasetConfig.from_json(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(GraphoptError, match=r"broken.json: not valid JSON"):
        DatasetConfig.from_json(tmp_path / "broken.json")


def test_direct_construction_is_validated() -> None:
    with pytest.raises(GraphoptError, match=r"synthetic\[0\]\.sizes\[0\]"):
        DatasetConfig("x", synthetic=(SyntheticSource("layered", (0,)),))
    config = DatasetConfig("x", synthetic=[SyntheticSource("layered", [10])], zoo=[ZooSource("m")])
    assert config.synthetic[0].sizes == (10,) and isinstance(config.zoo, tuple)


def test_default_config_is_a_few_thousand_graphs() -> None:
    config = DatasetConfig.from_json(DEFAULT_CONFIG)
    synthetic = sum(len(s.sizes) * s.count for s in config.synthetic)
    graphs = (synthetic + len(config.zoo)) * (config.copies + 1)
    assert 2000 <= graphs <= 5000
    assert {s.family for s in config.synthetic} == {
        "erdos_renyi",
        "layered",
        "sbm",
        "watts_strogatz",
        "barabasi_albert",
    }
    assert len({(z.name, z.training) for z in config.zoo}) == 20


# ------------------------------------------------------------------------------ overwriting
def test_non_empty_directory_is_refused_unless_overwrite(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    config = small_config(synthetic=[{"family": "layered", "sizes": [10], "count": 1}])
    with pytest.raises(GraphoptError, match="directory is not empty"):
        build_dataset(config, tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    build_dataset(config, tmp_path, progress=False, overwrite=True)
    build_dataset(config, tmp_path, progress=False, overwrite=True)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert len(Dataset.open(tmp_path, "train")) == 4
    assert len(Dataset.open(tmp_path, "test")) == 0


def test_output_path_that_is_a_file(tmp_path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(GraphoptError, match="is not a directory"):
        build_dataset(small_config(), tmp_path / "file", progress=False, overwrite=True)


# -------------------------------------------------------------------------------------- zoo
def _fake_zoo(monkeypatch, export_graph=None) -> list[tuple]:
    """Stands in for graphopt.importers.zoo (heavy, and written separately); records calls."""
    calls: list[tuple] = []
    module = types.ModuleType("graphopt.importers.zoo")
    if export_graph is None:

        def export_graph(name: str, *, training: bool = False, device: str = "a100"):
            calls.append((name, training, device))
            return tiny()

    module.export_graph = export_graph
    monkeypatch.setitem(sys.modules, "graphopt.importers.zoo", module)
    return calls


def test_zoo_sources_are_named_by_model_and_mode(tmp_path, monkeypatch) -> None:
    calls = _fake_zoo(monkeypatch)
    zoo = [{"name": "m", "training": False}, {"name": "m", "training": True, "device": "h100"}]
    config = DatasetConfig.from_dict({"name": "zoo", "copies": 1, "split": [1, 1, 0], "zoo": zoo})
    manifest = build_dataset(config, tmp_path, progress=False)
    assert calls == [("m", False, "a100"), ("m", True, "h100")]
    rows = {row["name"]: row["source"] for row in manifest["topology_table"]}
    assert rows["m.training"] == {
        "kind": "zoo",
        "entry": 1,
        "name": "m",
        "training": True,
        "device": "h100",
    }
    graphs = {g.name: g for split in SPLITS for g in Dataset.open(tmp_path, split)}
    assert sorted(graphs) == ["m.inference", "m.inference/aug0", "m.training", "m.training/aug0"]
    assert graphs["m.training"].op_attrs == tiny().op_attrs


def test_zoo_errors_name_the_entry(tmp_path, monkeypatch) -> None:
    def failing(name: str, **_: object):
        raise GraphoptError(f"unknown zoo model {name!r}")

    _fake_zoo(monkeypatch, failing)
    config = DatasetConfig.from_dict({"name": "zoo", "zoo": [{"name": "nope"}]})
    with pytest.raises(GraphoptError, match=r"zoo\[0\] \(nope.inference\): unknown zoo model"):
        build_dataset(config, tmp_path / "out", progress=False)
    monkeypatch.setitem(sys.modules, "graphopt.importers.zoo", types.ModuleType("empty"))
    with pytest.raises(GraphoptError, match="zoo sources need graphopt.importers.zoo.export_graph"):
        build_dataset(config, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def _has_zoo_exporter() -> bool:
    if importlib.util.find_spec("graphopt.importers.zoo") is None:
        return False
    return hasattr(importlib.import_module("graphopt.importers.zoo"), "export_graph")


@pytest.mark.skipif(not _has_zoo_exporter(), reason="graphopt.importers.zoo.export_graph missing")
def test_zoo_source_resnet18(tmp_path) -> None:
    from graphopt.importers.zoo import export_graph

    config = DatasetConfig.from_dict({"name": "zoo", "copies": 1, "zoo": [{"name": "resnet18"}]})
    manifest = build_dataset(config, tmp_path, progress=False)
    assert manifest["topology_table"][0]["source"]["kind"] == "zoo"
    train = Dataset.open(tmp_path, "train")
    assert train.names == ("resnet18.inference", "resnet18.inference/aug0")
    exported = export_graph("resnet18", training=False)
    np.testing.assert_array_equal(train[0].tensor_size, exported.tensor_size)
    assert train[0].op_attrs == exported.op_attrs
