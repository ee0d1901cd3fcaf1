"""REGAL at scale (issue 16): shipped policies' numpy inference against the torch reference,
the phase timings, and the benchmark that measures them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from degenerate_graphs import empty, isolated, no_edges, one_op, only_persistent
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.batching import make_batch
from graphopt.learning.formats import shipped_policy_path
from graphopt.learning.saving import save_checkpoint
from graphopt.learning.systems.regal import numpy_policy
from graphopt.learning.systems.regal import solver as regal
from graphopt.learning.systems.regal.actions import ActionConfig
from graphopt.learning.systems.regal.checkpoints import load_policy, policy_record
from graphopt.learning.systems.regal.config import PolicyConfig
from graphopt.learning.systems.regal.env import compute_features
from graphopt.learning.systems.regal.inference import predict_genes
from graphopt.learning.systems.regal.network import RegalPolicy
from graphopt.learning.systems.regal.records import REGAL_FORMAT
from graphopt.learning.systems.regal.solver import PHASES, Regal, RegalConfig, timed_solve
from graphopt.solvers.base import Budget, Problem, Tracker
from graphopt.solvers.random_keys import RandomKeyDecoder

ROOT = Path(__file__).parents[1]
GRAPHS = [("layered", 40, 1), ("erdos_renyi", 70, 2), ("sbm", 120, 3), ("layered", 300, 4)]
"""(family, ops, seed) of the random graphs the twins are compared on."""

CONFIGS = [
    PolicyConfig(rounds=3),
    PolicyConfig(n_devices=3, rounds=2, aggregation="add", actions=ActionConfig(elite_bias=True)),
    PolicyConfig(rounds=2, anchor=4.0, actions=ActionConfig(levels=5)),
    PolicyConfig(encoder="lstm", hidden=16),
    PolicyConfig(encoder="lstm", n_devices=3, anchor=1.0, actions=ActionConfig(scheduling=False)),
]


def _features(graph, devices=2, objective="peak-memory", seed=0):
    problem = Problem(graph, Machine(n_devices=devices), objective)
    tracker = Tracker(problem, Budget(evaluations=400))
    return problem, compute_features(problem, tracker, np.random.default_rng(seed)).features


def _random_policy(config: PolicyConfig, seed: int, tmp_path: Path) -> tuple[RegalPolicy, Path]:
    """A network with every weight random (heads included), saved as a checkpoint."""
    torch.manual_seed(seed)
    network = RegalPolicy(config)
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.normal_(0.0, 0.2)
    network.eval()
    path = tmp_path / f"policy-{seed}.pt"
    save_checkpoint(path, policy_record(network, "peak-memory", "brkga", 400))
    return network, path


@pytest.mark.parametrize("config", CONFIGS)
def test_state_shapes_are_the_torch_networks(config) -> None:
    expected = {key: tuple(value.shape) for key, value in RegalPolicy(config).state_dict().items()}
    assert numpy_policy.state_shapes(config) == expected


def test_read_record_reads_what_torch_loads(tmp_path) -> None:
    paths = [_random_policy(CONFIGS[1], 0, tmp_path)[1]]
    paths += [
        Path(shipped_policy_path(method, objective, 2))
        for method in ("regal", "gas")
        for objective in ("peak-memory", "makespan")
    ]
    for path in paths:
        record = numpy_policy.read_record(path)
        reference = torch.load(path, map_location="cpu", weights_only=True)
        assert record.keys() == reference.keys() and record["format"] == REGAL_FORMAT.tag
        for key, value in reference.items():
            if key == "model_state":
                assert list(record[key]) == list(value)
                for name, tensor in value.items():
                    assert record[key][name].dtype == np.float32
                    np.testing.assert_array_equal(record[key][name], tensor.numpy())
            else:
                assert record[key] == value


def test_read_record_runs_no_code_and_refuses_other_files(tmp_path) -> None:
    class Evil:
        def __reduce__(self):
            return (print, ("unpickled",))

    path = tmp_path / "evil.pt"
    torch.save({"format": REGAL_FORMAT.tag, "x": Evil()}, path)
    with pytest.raises(numpy_policy.Unsupported, match="print"):
        numpy_policy.read_record(path)
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    with pytest.raises(numpy_policy.Unsupported):
        numpy_policy.read_record(tmp_path / "junk.pt")
    double = tmp_path / "double.pt"
    torch.save({"format": REGAL_FORMAT.tag, "t": torch.zeros(3, dtype=torch.float64)}, double)
    with pytest.raises(numpy_policy.Unsupported, match="DoubleStorage"):
        numpy_policy.read_record(double)
    # A file the numpy loader does not take is left to torch's loader (None, not an error).
    assert numpy_policy.load(path, "peak-memory", 2) is None
    # A damaged tensor fails its member's CRC.
    _, good = _random_policy(CONFIGS[0], 1, tmp_path)
    data = bytearray(good.read_bytes())
    with zipfile.ZipFile(good) as archive:
        member = max(archive.infolist(), key=lambda info: info.file_size)  # a weight matrix
    data[member.header_offset + 200 + member.file_size // 2] ^= 0xFF  # inside the tensor
    (tmp_path / "damaged.pt").write_bytes(bytes(data))
    with pytest.raises(numpy_policy.Unsupported):
        numpy_policy.read_record(tmp_path / "damaged.pt")


@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_numpy_logits_are_torchs_within_their_bounds(index, tmp_path) -> None:
    config = CONFIGS[index]
    network, path = _random_policy(config, index, tmp_path)
    policy = numpy_policy.load(path, "peak-memory", config.n_devices)
    assert policy is not None
    for family, ops, seed in GRAPHS:
        _, features = _features(generate(family, ops, seed=seed), config.n_devices)
        with torch.inference_mode():
            reference = network(make_batch([features])).numpy()
        logits, bound = policy.logits(features)
        assert logits.shape == reference.shape and logits.dtype == np.float32
        assert np.all(np.abs(logits - reference) <= bound)
        # Where the bounds decide every op's action, the actions are torch's.
        actions = numpy_policy.greedy_actions(logits, bound)
        if actions is not None:
            np.testing.assert_array_equal(actions, reference.argmax(axis=-1))
        # Ops whose best level the bounds leave in doubt are a small minority.
        best = np.sort(logits, axis=-1)
        assert np.mean(best[..., -1] - best[..., -2] <= 2 * bound.max(axis=-1)) < 0.01
    with torch.inference_mode():
        probe = numpy_policy._probe_for(config)
        reference = network.baseline(make_batch([probe])).numpy()
    np.testing.assert_allclose(policy.baseline(probe), reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_encoder_bound_bounds_the_encoders_outputs(index, tmp_path) -> None:
    config = CONFIGS[index]
    network, path = _random_policy(config, index, tmp_path)
    policy = numpy_policy.load(path, "peak-memory", config.n_devices)
    for family, ops, seed in GRAPHS:
        _, features = _features(generate(family, ops, seed=seed), config.n_devices)
        with torch.inference_mode():
            h = network.encoder(make_batch([features])).numpy()
        assert np.abs(h).max() <= policy.encoder_bound(features) < numpy_policy.LARGEST


@pytest.mark.parametrize("objective", ["peak-memory", "makespan"])
def test_constant_heads_skip_the_encoder_exactly(objective, tmp_path) -> None:
    """The shipped REGAL heads' last layers are zeros: the encoder can be left out."""
    path = shipped_policy_path("regal", objective, 2)
    policy = numpy_policy.load(path, objective, 2)
    assert policy.constant_heads
    for family, ops, seed in [*GRAPHS, ("layered", 1500, 5)]:
        _, features = _features(generate(family, ops, seed=seed), 2, objective)
        assert policy._constant_heads(features)
        skipped, reference = policy.logits(features), policy.logits(features, skip_encoder=False)
        for mine, theirs in zip(skipped, reference, strict=True):
            np.testing.assert_array_equal(mine, theirs)
    # Heads that read the encoder, or an encoder that may overflow, are run.
    _, random_path = _random_policy(CONFIGS[0], 3, tmp_path)
    assert not numpy_policy.load(random_path, "peak-memory", 2).constant_heads
    policy.weights = {
        **policy.weights,
        "encoder.update.2.weight": policy.weights["encoder.update.2.weight"] * np.float32(1e20),
    }
    assert policy.encoder_bound(features) == np.inf and not policy._constant_heads(features)


@pytest.mark.parametrize("aggregation", ["mean", "add"])
def test_aggregation_is_torchs_scatter_bit_for_bit(aggregation) -> None:
    from graphopt.learning.encoders.mpnn import Aggregation

    rng = np.random.default_rng(5)
    for family, ops, seed in GRAPHS:
        graph = generate(family, ops, seed=seed)
        ends = [np.array(end, dtype=np.int64) for end in graph.edge_index]
        hub = np.full(40, ops // 2)  # an op with more edges than the slots: np.add.at's part
        ends.append(np.concatenate([ends[1], hub])[rng.permutation(len(ends[1]) + 40)])
        for at in ends:
            messages = rng.standard_normal((at.shape[0], 8)).astype(np.float32)
            nodes = torch.zeros(ops, 8)
            expected = Aggregation(torch.from_numpy(at), nodes, aggregation)(
                torch.from_numpy(messages)
            )
            mine = numpy_policy._Aggregation(at, ops, aggregation)(messages)
            np.testing.assert_array_equal(mine, expected.numpy())


def test_greedy_actions_decide_only_certain_argmaxes() -> None:
    logits = np.array([[[1.0, 2.0, 2.0, 0.0]]], dtype=np.float32)
    exact = np.zeros_like(logits)
    # Exact ties (both bounds 0) go to the first level, as torch's argmax does.
    np.testing.assert_array_equal(numpy_policy.greedy_actions(logits, exact), [[1]])
    assert numpy_policy.greedy_actions(logits, exact + 1e-3) is None
    assert numpy_policy.greedy_actions(logits + [[[0, 0.1, 0, 0]]], exact + 0.04) is not None
    assert numpy_policy.greedy_actions(logits + [[[0, 0.1, 0, 0]]], exact + 0.06) is None
    assert numpy_policy.greedy_actions(np.full_like(logits, np.inf), exact) is None


@pytest.mark.parametrize("method", ["regal", "gas"])
@pytest.mark.parametrize("objective", ["peak-memory", "makespan"])
def test_shipped_policies_give_torchs_genes(method, objective) -> None:
    path = shipped_policy_path(method, objective, 2)
    reference = load_policy(path, objective, 2)
    policy = numpy_policy.load(path, objective, 2)
    assert policy is not None and policy.inner == reference.inner
    assert policy.feature_evaluations == reference.feature_evaluations
    decided = 0
    for family, ops, seed in GRAPHS:
        problem, features = _features(generate(family, ops, seed=seed), 2, objective)
        decoder = RandomKeyDecoder(problem)
        genes = numpy_policy.predict_genes(policy, features, decoder)
        if genes is None:
            continue
        decided += 1
        expected = predict_genes(reference, features, decoder, True, np.random.default_rng(0))
        for name in ("alpha", "beta", "elite_bias"):
            np.testing.assert_array_equal(getattr(genes, name), getattr(expected, name))
    # REGAL's shipped heads give each level's logit exactly (zero last layers); GAS's trained
    # ones leave near ties on some graphs to torch.
    assert decided == len(GRAPHS) if method == "regal" else decided >= 1


@pytest.mark.parametrize(
    ("solver", "objective"),
    [("regal", "peak-memory"), ("regal", "makespan"), ("gas", "peak-memory"), ("idrs", "makespan")],
)
def test_numpy_inference_solves_exactly_as_torch(solver, objective, monkeypatch) -> None:
    from graphopt.solvers.registry import make_solver

    for family, ops, seed in GRAPHS[:3]:
        problem = Problem(generate(family, ops, seed=seed), Machine(n_devices=2), objective)
        results = []
        for numpy_inference in (True, False):
            monkeypatch.setattr(regal, "NUMPY_INFERENCE", numpy_inference)
            results.append(make_solver(solver).solve(problem, Budget(evaluations=1200), seed))
        fast, reference = results
        assert fast.value == reference.value
        np.testing.assert_array_equal(fast.solution.placement, reference.solution.placement)
        np.testing.assert_array_equal(fast.solution.order, reference.solution.order)
        recorded = [{**r.solution.solver, "seconds": 0} for r in results]
        assert recorded[0] == recorded[1]


@pytest.mark.parametrize("solver", ["regal", "gas", "idrs"])
def test_numpy_inference_on_degenerate_graphs(solver, monkeypatch) -> None:
    from graphopt.solvers.registry import make_solver

    graphs = [empty(), one_op(), no_edges(), only_persistent(), isolated(50)]
    for graph in graphs:
        problem = Problem(graph, Machine(n_devices=2), "makespan")
        results = []
        for numpy_inference in (True, False):
            monkeypatch.setattr(regal, "NUMPY_INFERENCE", numpy_inference)
            results.append(make_solver(solver).solve(problem, Budget(evaluations=600), 0))
        assert results[0].value == results[1].value
        np.testing.assert_array_equal(results[0].solution.order, results[1].solution.order)


def test_a_tie_numpy_cannot_decide_falls_back_to_torch(monkeypatch) -> None:
    problem = Problem(generate("layered", 60, seed=3), Machine(n_devices=2), "makespan")
    reference = Regal().solve(problem, Budget(evaluations=1000), seed=1)
    monkeypatch.setattr(numpy_policy, "greedy_actions", lambda logits, bound: None)
    loads = []
    monkeypatch.setattr(regal.Regal, "policy", lambda self, p: loads.append(p) or _torch(p))
    fallback = Regal().solve(problem, Budget(evaluations=1000), seed=1)
    assert loads and fallback.value == reference.value
    np.testing.assert_array_equal(fallback.solution.order, reference.solution.order)


def _torch(problem):
    path = shipped_policy_path("regal", problem.objective.value, problem.machine.n_devices)
    return load_policy(path, problem.objective.value, problem.machine.n_devices)


def test_user_policies_and_sampled_actions_use_torch(tmp_path) -> None:
    problem = Problem(generate("layered", 30, seed=1), Machine(n_devices=2))
    _, path = _random_policy(CONFIGS[0], 7, tmp_path)
    assert Regal(RegalConfig(policy=str(path))).numpy_policy(problem) is None
    assert Regal(RegalConfig(greedy=False)).numpy_policy(problem) is None
    assert Regal().numpy_policy(problem) is not None


def test_a_shipped_regal_solve_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from graphopt.costmodels.machine import Machine\n"
        "from graphopt.ir.generators import generate\n"
        "from graphopt.solvers.base import Budget, Problem\n"
        "from graphopt.solvers.registry import make_solver\n"
        "for name in ('regal', 'gas', 'idrs'):\n"
        "    problem = Problem(generate('layered', 80, seed=0), Machine(n_devices=2))\n"
        "    make_solver(name).solve(problem, Budget(evaluations=600), 0)\n"
        "print('torch' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert completed.stdout.strip() == "False"


def test_timed_solve_reports_every_phase() -> None:
    # Makespan: a search that never stops early on its lower bound.
    problem = Problem(generate("layered", 60, seed=0), Machine(n_devices=2), "makespan")
    solver = Regal()
    result, seconds = timed_solve(solver, problem, Budget(evaluations=1000), seed=0)
    assert list(seconds) == list(PHASES)
    assert all(math.isfinite(s) and s >= 0 for s in seconds.values())
    assert seconds["feature_run"] > 0 and seconds["search"] > 0
    assert result.evaluations == 1000
    assert "clock" not in vars(solver)  # the solver is left as it was
    again = solver.solve(problem, Budget(evaluations=1000), seed=0)
    assert again.value == result.value
    # A budget spent by the feature run never reaches the later phases.
    _, short = timed_solve(Regal(), problem, Budget(evaluations=300), seed=0)
    assert short["search"] == 0.0


def test_bench_regal_scale(tmp_path) -> None:
    out = tmp_path / "scale.json"
    command = [
        sys.executable,
        str(ROOT / "benchmarks/bench_regal_scale.py"),
        "layered:60",
        "--devices",
        "2",
        "3",
        "--evaluations",
        "600",
        "--repeats",
        "1",
        "--cold-repeats",
        "1",
        "--json",
        str(out),
    ]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert "no shipped regal policy for peak-memory on 3 devices" in completed.stdout
    [row] = json.loads(out.read_text())
    assert row["ops"] == 60 and row["devices"] == 2 and row["regal_deterministic"]
    for key in ("brkga_s", "regal_s", "ratio", "cold_brkga_s", "cold_regal_s", "cold_ratio"):
        assert row[key] > 0
    assert row["ratio"] == pytest.approx(row["regal_s"] / row["brkga_s"])
    assert all(row[f"{phase}_s"] >= 0 for phase in PHASES)
    assert row["cold_regal_imports_torch"] is False and row["cold_evaluations"] == [600]
    assert row["cold_regal_value"] == row["regal_value"]
