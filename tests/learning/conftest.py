from pathlib import Path

import pytest

from graphopt.datasets import DatasetConfig, build_dataset

TOY = {
    "name": "toy",
    "seed": 3,
    "copies": 3,
    "synthetic": [
        {"family": "layered", "sizes": [20, 30], "count": 5},
        {"family": "erdos_renyi", "sizes": [20, 30], "count": 5},
    ],
}
"""20 topologies of 20-30 ops, split 12/4/4, four graphs each (48/16/16 graphs)."""


@pytest.fixture(scope="session")
def toy_dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy-dataset")
    build_dataset(DatasetConfig.from_dict(TOY), out, progress=False)
    return out
