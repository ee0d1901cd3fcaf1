import pytest
import torch

from graphopt.learning.formats import CheckpointError, CheckpointFormat
from graphopt.learning.saving import read_checkpoint, save_checkpoint
from graphopt.learning.systems.regal.checkpoints import load_policy, policy_record
from graphopt.learning.systems.regal.config import PolicyConfig
from graphopt.learning.systems.regal.env import InnerSearch
from graphopt.learning.systems.regal.network import RegalPolicy
from graphopt.learning.systems.regal.numpy_policy import load as load_numpy_policy


def _saved(path, devices=2, objective="peak-memory", **changes):
    torch.manual_seed(0)
    network = RegalPolicy(PolicyConfig(n_devices=devices, rounds=2))
    record = policy_record(network, objective, "brkga", 400)
    record.update(changes)
    save_checkpoint(path, record)
    return network


def test_round_trip(tmp_path) -> None:
    network = _saved(tmp_path / "p.pt")
    loaded = load_policy(tmp_path / "p.pt", "peak-memory", 2)
    assert loaded.config == network.config and loaded.search == "brkga"
    assert loaded.inner == InnerSearch()
    for key, value in network.state_dict().items():
        assert torch.equal(loaded.network.state_dict()[key], value)
    assert not (tmp_path / "p.pt.partial").exists()


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"n_devices": 3}, "trained for 2 devices; the machine has 3"),
        ({"objective": "makespan"}, "trained to minimize peak-memory, not makespan"),
    ],
)
def test_mismatched_use_is_refused(tmp_path, kwargs, message) -> None:
    _saved(tmp_path / "p.pt")
    with pytest.raises(CheckpointError, match=message):
        load_policy(tmp_path / "p.pt", **{"objective": None, "n_devices": None, **kwargs})


def test_other_feature_set_is_refused(tmp_path) -> None:
    _saved(tmp_path / "p.pt", feature_set="regal-a1-v0")
    with pytest.raises(CheckpointError, match="feature set 'regal-a1-v0'"):
        load_policy(tmp_path / "p.pt")


def test_not_a_checkpoint(tmp_path) -> None:
    with pytest.raises(CheckpointError, match="no policy checkpoint"):
        load_policy(tmp_path / "absent.pt")
    (tmp_path / "junk.pt").write_text("junk")
    with pytest.raises(CheckpointError, match="not a readable policy checkpoint"):
        load_policy(tmp_path / "junk.pt")
    torch.save({"something": 1}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a graphopt REGAL policy"):
        load_policy(tmp_path / "other.pt")


def test_each_system_reads_only_its_own_format(tmp_path) -> None:
    gflownet = CheckpointFormat("graphopt.gflownet-policy/1", "GFlowNet policy", ("format", "w"))
    save_checkpoint(tmp_path / "g.pt", {"format": gflownet.tag, "w": torch.zeros(2)})
    assert read_checkpoint(tmp_path / "g.pt", gflownet)["w"].shape == (2,)
    other = "not a graphopt REGAL policy checkpoint: its format is 'graphopt.gflownet-policy/1'"
    with pytest.raises(CheckpointError, match=other):
        load_policy(tmp_path / "g.pt")
    assert load_numpy_policy(tmp_path / "g.pt", "peak-memory", 2) is None  # torch's says why
    _saved(tmp_path / "p.pt")
    with pytest.raises(CheckpointError, match="format is 'graphopt.regal-policy/1', this graph"):
        read_checkpoint(tmp_path / "p.pt", gflownet)
    _saved(tmp_path / "v2.pt", format="graphopt.regal-policy/2")
    with pytest.raises(CheckpointError, match="this graphopt reads 'graphopt.regal-policy/1'"):
        load_policy(tmp_path / "v2.pt")
    save_checkpoint(tmp_path / "x.pt", {"format": gflownet.tag, "w": 1, "extra": 2})
    with pytest.raises(CheckpointError, match="unknown field"):
        read_checkpoint(tmp_path / "x.pt", gflownet)
    with pytest.raises(ValueError, match="starts with 'graphopt.'"):
        CheckpointFormat("regal/1", "REGAL policy", ("format",))


def test_the_inner_search_is_recorded(tmp_path) -> None:
    torch.manual_seed(0)
    network = RegalPolicy(PolicyConfig(rounds=2))
    inner = InnerSearch(brkga="tuned", kept=10)
    save_checkpoint(tmp_path / "p.pt", policy_record(network, "makespan", "brkga", 400, inner))
    assert load_policy(tmp_path / "p.pt", "makespan", 2).inner == inner


def test_a_checkpoint_from_before_the_inner_search_setting_uses_the_defaults(tmp_path) -> None:
    _saved(tmp_path / "p.pt")
    record = torch.load(tmp_path / "p.pt", weights_only=True)
    del record["inner_search"]
    save_checkpoint(tmp_path / "p.pt", record)
    assert load_policy(tmp_path / "p.pt").inner == InnerSearch()


def test_an_anchored_policy_round_trips(tmp_path) -> None:
    torch.manual_seed(0)
    network = RegalPolicy(PolicyConfig(rounds=2, anchor=2.5))
    save_checkpoint(tmp_path / "p.pt", policy_record(network, "makespan", "brkga", 400))
    loaded = load_policy(tmp_path / "p.pt", "makespan", 2).network
    assert loaded.config.anchor == 2.5
    assert loaded.anchor is not None and torch.equal(loaded.anchor, network.anchor)
