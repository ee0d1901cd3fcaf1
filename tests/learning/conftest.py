from pathlib import Path

import pytest

from graphopt.datasets import DatasetConfig, build_dataset
from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph
from graphopt.learning.optim import AdamConfig
from graphopt.learning.runs import RunConfig
from graphopt.learning.systems.gdp.config import GDPConfig, MachineConfig, TrainConfig
from graphopt.learning.training import train

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


def train_toy_gdp(folder: Path, **shape: float | None) -> str:
    """best.pt of a 4-step GDP run on one toy graph (a small network, 2 devices)."""
    write_graph(generate("layered", 40, seed=1), folder / "toy.json")
    config = TrainConfig(
        dataset=f"graph:{folder / 'toy.json'}",
        policy=GDPConfig(
            hidden=16, sage_layers=1, placer_layers=1, segment=16, max_devices=4, **shape
        ),
        machine=MachineConfig(devices=2, latency=0.05, bandwidth=3e5),
        samples=8,
        optimizer=AdamConfig(learning_rate=1e-2),
        run=RunConfig(steps=4, validate_every=2, checkpoint_every=2),
    )
    train("gdp", config, folder / "run")
    return str(folder / "run" / "best.pt")


@pytest.fixture(scope="session")
def gdp_policy(tmp_path_factory) -> str:
    """A toy GDP policy with the pipeline prior."""
    return train_toy_gdp(tmp_path_factory.mktemp("gdp"))


@pytest.fixture(scope="session")
def hinted_gdp_policy(tmp_path_factory) -> str:
    """A toy GDP policy that takes a partition hint (no pipeline prior)."""
    return train_toy_gdp(
        tmp_path_factory.mktemp("gdp-hinted"), pipeline_prior=None, partition_prior=4.0
    )
