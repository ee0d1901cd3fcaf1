"""Datasets of computation graphs for training learned optimizers (REGAL, paper 001).

`build_dataset` gathers topologies from the model zoo, the synthetic families and graph files,
splits them by topology (paper 001, appendix A.1), augments each with noisy copies and stores the
splits as memory-mapped archives with a manifest and a dataset card; `Dataset.open` loads a split
lazily. `DEFAULT_CONFIG` is the shipped config of a few thousand graphs.
"""

from graphopt.datasets.build import assign_splits, build_dataset, derive_seed
from graphopt.datasets.card import CARD
from graphopt.datasets.config import DEFAULT_CONFIG, DatasetConfig, SyntheticSource, ZooSource
from graphopt.datasets.store import FORMAT, MANIFEST, SPLITS, Dataset, read_manifest

__all__ = [
    "CARD",
    "DEFAULT_CONFIG",
    "FORMAT",
    "MANIFEST",
    "SPLITS",
    "Dataset",
    "DatasetConfig",
    "SyntheticSource",
    "ZooSource",
    "assign_splits",
    "build_dataset",
    "derive_seed",
    "read_manifest",
]
