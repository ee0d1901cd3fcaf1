"""Fuzzing policy checkpoints and training runs' `last.pt` (issue 15, item 1).

Seeds: a shipped policy (`regal-peak-memory-d2.pt`, a torch zip archive) and the `last.pt` of a
tiny training run. Mutants: zip- and byte-level mutations of the files (members dropped,
renamed, truncated, with bad CRCs, a pickle replaced by one that would run code), and the
unpickled record mutated as a document (fields deleted, misspelt, retyped, set to edge values;
tensors given NaNs, other dtypes, shapes, layouts or devices) and saved again with torch.

`load_policy` must refuse a mutant with the project's one-line error, or return a usable policy:
its greedy and sampled actions on a small graph give valid gene distributions. The resume path
(`records.read_run` and restoring the weights and Adam's state) must refuse a mutant or leave
a network and optimizer that can take a finite training step. No mutant may run code: torch's
`weights_only` unpickler refuses the pickles that would. Samples go through `graphopt optimize
--solver regal --policy` and `graphopt train regal --resume`.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import shutil
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from builders import tiny
from fuzz.harness import (
    FAST_EXAMPLES,
    SLOW_EXAMPLES,
    Defect,
    fuzz_settings,
    outcome,
    record,
    run_cli,
)
from fuzz.mutators import mutated_archive, mutated_document, read_members, write_members
from fuzz.test_fuzz_datasets import TINY
from graphopt.costmodels.machine import Machine
from graphopt.datasets import DatasetConfig, build_dataset
from graphopt.ir.io import write_graph
from graphopt.learning.batching import make_batch
from graphopt.learning.features import FEATURE_SET, node_feature_names
from graphopt.learning.formats import CheckpointError
from graphopt.learning.saving import read_checkpoint, save_checkpoint
from graphopt.learning.systems.regal.checkpoints import load_policy
from graphopt.learning.systems.regal.env import compute_features
from graphopt.learning.systems.regal.inference import predict_genes
from graphopt.learning.systems.regal.network import RegalPolicy
from graphopt.learning.systems.regal.records import REGAL_FORMAT
from graphopt.learning.systems.regal.train import SYSTEM, TrainConfig
from graphopt.learning.training import train
from graphopt.solvers.base import Budget, Problem, Tracker
from graphopt.solvers.random_keys import RandomKeyDecoder

SHIPPED = resources.files("graphopt.policies")
MARKER = Path(os.environ.get("TMPDIR", "/tmp")) / "graphopt-fuzz-code-ran"
"""What the malicious pickles below would create if they were ever unpickled unsafely."""

RUN = dict(
    hidden=8,
    rounds=1,
    feature_evaluations=20,
    train_evaluations=40,
    validation_evaluations=40,
    reference_seeds=1,
    validation_graphs=1,
    batch_graphs=1,
    samples_per_graph=1,
    workers=0,
    validate_every=1,
    checkpoint_every=1,
    steps=2,
)


class _RunsCode:
    """Unpickling this (unsafely) would call `function(*arguments)`."""

    def __init__(self, function: Any, *arguments: Any) -> None:
        self.call = (function, arguments)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.call


EVIL_PICKLES = [
    pickle.dumps(_RunsCode(os.system, f"touch {MARKER}"), protocol=2),
    pickle.dumps(_RunsCode(exec, f"open({str(MARKER)!r}, 'w').close()"), protocol=2),
    pickle.dumps(_RunsCode(eval, f"open({str(MARKER)!r}, 'w')"), protocol=4),
    pickle.dumps({"format": REGAL_FORMAT.tag, "x": _RunsCode(os.system, f"touch {MARKER}")}),
    pickle.dumps(_RunsCode(shutil.rmtree, "/nonexistent-graphopt-fuzz"), protocol=2),
]
"""Pickles that run code when a plain `pickle.load` reads them."""

VOCABULARY = (
    REGAL_FORMAT.tag,
    FEATURE_SET,
    "peak-memory",
    "makespan",
    "brkga",
    "random",
    "tuned",
    "mpnn",
    "lstm",
    "mean",
    "add",
    "format",
    "policy_config",
    "model_state",
    "metadata",
    "inner_search",
    "optimizer_state",
    "param_groups",
    "state",
    "step",
    "history",
    "train_config",
    *node_feature_names(2),
)


class Seeds:
    """The seed files, their records, and a small problem to use accepted policies on."""

    def __init__(self, run_dir: Path, dataset: Path) -> None:
        self.policy_path = Path(str(SHIPPED.joinpath("regal-peak-memory-d2.pt")))
        self.policy = self.policy_path.read_bytes()
        self.others = [Path(str(SHIPPED.joinpath(n))).read_bytes() for n in ("gas-makespan-d2.pt",)]
        self.run_path = run_dir / "last.pt"
        self.run = self.run_path.read_bytes()
        self.run_dir = run_dir
        self.dataset = dataset
        self.policy_record = torch.load(io.BytesIO(self.policy), weights_only=True)
        self.run_record = torch.load(io.BytesIO(self.run), weights_only=True)
        self.train_config = TrainConfig.from_dict(json.loads(self.run_record["train_config"]))
        self.names = sorted(
            {m.name for data in (self.policy, self.run) for m in read_members(data)}
        )
        self.problem = Problem(tiny(), Machine(n_devices=2), "peak-memory")
        self._features: dict[int, Any] = {}

    def features(self, evaluations: int):
        """Features of the small problem (cached: they do not depend on the policy)."""
        if evaluations not in self._features:
            tracker = Tracker(self.problem, Budget(evaluations=evaluations))
            run = compute_features(self.problem, tracker, np.random.default_rng(0), evaluations)
            self._features[evaluations] = run.features
        return self._features[evaluations]


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Seeds:
    directory = tmp_path_factory.mktemp("fuzz-checkpoints")
    build_dataset(DatasetConfig.from_dict(TINY), directory / "dataset", progress=False)
    train(
        "regal",
        TrainConfig.from_dict({"dataset": str(directory / "dataset"), **RUN}),
        directory / "run",
    )
    return Seeds(directory / "run", directory / "dataset")


def _clean_marker() -> None:
    MARKER.unlink(missing_ok=True)


def _no_code_ran() -> None:
    if MARKER.exists():
        MARKER.unlink()
        raise Defect("a checkpoint mutant ran code while loading")


# ------------------------------------------------------------------------------- the oracles
def check_policy(seeds: Seeds, path: Path) -> None:
    """The mutant policy is refused, or its actions give valid gene distributions."""
    _clean_marker()
    result = outcome(load_policy, path)
    _no_code_ran()
    record(result)
    if not result.accepted:
        return
    policy = result.value
    if policy.config.n_devices != 2:
        return  # the small problem has 2 devices; the shapes matched another device count
    features = seeds.features(min(policy.feature_evaluations, 100))
    decoder = RandomKeyDecoder(seeds.problem)
    for greedy in (True, False):
        genes = outcome(predict_genes, policy, features, decoder, greedy, np.random.default_rng(1))
        if not genes.accepted:
            raise Defect(f"accepted policy refused a graph: {genes.error}")
        outcome(genes.value.check, decoder.n_genes)


def _fresh_run(config: TrainConfig) -> tuple[RegalPolicy, torch.optim.Adam]:
    """A network and optimizer as `train` makes them before resuming."""
    torch.manual_seed(config.run.seed)
    network = RegalPolicy(config.policy)
    optimizer = config.optimizer.optimizer(network.parameters())
    return network, optimizer


def check_run(seeds: Seeds, path: Path) -> None:
    """The mutant `last.pt` is refused, or the restored run takes a finite step."""
    _clean_marker()
    network, optimizer = _fresh_run(seeds.train_config)
    result = outcome(SYSTEM.restore, path, seeds.train_config, network, optimizer)
    _no_code_ran()
    record(result)
    if not result.accepted:
        return
    state = result.value
    assert state.step >= 0 and len(state.history) == state.step + 1
    batch = make_batch([seeds.features(20)])
    loss = network(batch).logsumexp(-1).mean() + network.baseline(batch).square().mean()
    optimizer.zero_grad()
    loss.backward()
    clip = seeds.train_config.optimizer.grad_clip
    if not math.isfinite(float(torch.nn.utils.clip_grad_norm_(network.parameters(), clip))):
        return  # training stops here with its own error (non-finite gradients), as it should
    optimizer.step()
    for name, value in network.state_dict().items():
        if not bool(torch.isfinite(value).all()):
            raise Defect(f"restored run: a training step made {name} non-finite")


# ----------------------------------------------------------------------------- file mutants
def file_mutants(seed: bytes, seeds: Seeds) -> st.SearchStrategy[bytes]:
    return mutated_archive(seed, names=seeds.names, blobs=EVIL_PICKLES, splice=seeds.others)


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@fuzz_settings(FAST_EXAMPLES // 2)
@given(data=st.data())
def test_policy_file_mutants(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(file_mutants(seeds.policy, seeds))
    check_policy(seeds, _write(tmp_path_factory.getbasetemp() / "mutant" / "p.pt", mutant))


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=st.data())
def test_policy_file_mutants_slow(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(file_mutants(seeds.policy, seeds))
    check_policy(seeds, _write(tmp_path_factory.getbasetemp() / "mutant" / "p.pt", mutant))


@fuzz_settings(FAST_EXAMPLES // 2)
@given(data=st.data())
def test_run_file_mutants(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(file_mutants(seeds.run, seeds))
    check_run(seeds, _write(tmp_path_factory.getbasetemp() / "mutant" / "last.pt", mutant))


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=st.data())
def test_run_file_mutants_slow(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(file_mutants(seeds.run, seeds))
    check_run(seeds, _write(tmp_path_factory.getbasetemp() / "mutant" / "last.pt", mutant))


# --------------------------------------------------------------------------- record mutants
def tensor_mutants(value: Any) -> st.SearchStrategy[Any] | None:
    """A tensor's mutants: non-finite or huge values, other dtypes, shapes, layouts, devices."""
    if not isinstance(value, torch.Tensor) or value.layout != torch.strided or value.is_meta:
        return None  # an earlier mutation made it sparse or data-less: the generic ones apply
    flat = value.detach().reshape(-1)

    def poked(fill: float) -> torch.Tensor:
        changed = value.detach().clone()
        if changed.numel():
            changed.reshape(-1)[0] = fill
        return changed

    options = [
        st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e38, -1e30]).map(poked),
        st.sampled_from(
            [torch.float64, torch.float16, torch.int64, torch.bool, torch.complex64]
        ).map(lambda dtype: value.detach().to(dtype)),
        st.just(flat),
        st.just(flat[:-1] if flat.numel() else flat),
        st.just(torch.cat([flat, flat[:1]]).reshape(-1)),
        st.just(value.detach().unsqueeze(0)),
        st.just(torch.empty(0)),
        st.just(torch.tensor(1.0)),
        st.just(value.detach().to("meta")),
        st.just(torch.nn.Parameter(value.detach().clone(), requires_grad=False)),
    ]
    if value.dim() == 2:
        options.append(st.just(value.detach().t()))
        options.append(st.just(value.detach().to_sparse()))
    return st.one_of(options)


EXTRA = (torch.zeros(3), torch.tensor(400), torch.tensor(float("nan")), torch.zeros(0))


def record_mutants(seed: dict[str, Any]) -> st.SearchStrategy[bytes]:
    def saved(document: Any) -> bytes:
        buffer = io.BytesIO()
        torch.save(document, buffer)
        return buffer.getvalue()

    return mutated_document(
        seed, VOCABULARY, max_mutations=2, extra=EXTRA, leaf=tensor_mutants
    ).map(saved)


@fuzz_settings(FAST_EXAMPLES // 2)
@given(data=st.data())
def test_policy_record_mutants(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(record_mutants(seeds.policy_record))
    check_policy(seeds, _write(tmp_path_factory.getbasetemp() / "mutant" / "p.pt", mutant))


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=st.data())
def test_policy_record_mutants_slow(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(record_mutants(seeds.policy_record))
    check_policy(seeds, _write(tmp_path_factory.getbasetemp() / "mutant" / "p.pt", mutant))


@fuzz_settings(FAST_EXAMPLES // 2)
@given(data=st.data())
def test_run_record_mutants(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(record_mutants(seeds.run_record))
    check_run(seeds, _write(tmp_path_factory.getbasetemp() / "mutant" / "last.pt", mutant))


@pytest.mark.slow
@fuzz_settings(SLOW_EXAMPLES)
@given(data=st.data())
def test_run_record_mutants_slow(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(record_mutants(seeds.run_record))
    check_run(seeds, _write(tmp_path_factory.getbasetemp() / "mutant" / "last.pt", mutant))


# ------------------------------------------------------------------------- targeted checks
def test_the_seeds_are_accepted(seeds, tmp_path) -> None:
    check_policy(seeds, seeds.policy_path)
    assert outcome(load_policy, seeds.policy_path).accepted
    check_run(seeds, seeds.run_path)
    network, optimizer = _fresh_run(seeds.train_config)
    assert outcome(SYSTEM.restore, seeds.run_path, seeds.train_config, network, optimizer).accepted
    for name in ("gas-makespan-d2.pt", "regal-makespan-d2.pt", "gas-peak-memory-d2.pt"):
        assert outcome(load_policy, Path(str(SHIPPED.joinpath(name)))).accepted


@pytest.mark.parametrize("index", range(len(EVIL_PICKLES)))
def test_pickles_that_run_code_are_refused(seeds, tmp_path, index) -> None:
    members = read_members(seeds.policy)
    pickled = next(m for m in members if m.name.endswith("data.pkl"))
    replaced = [m if m is not pickled else type(m)(m.name, EVIL_PICKLES[index]) for m in members]
    for data in (write_members(replaced), EVIL_PICKLES[index]):  # in the archive, and bare
        path = _write(tmp_path / "evil.pt", data)
        _clean_marker()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning would be a second line on stderr
            with pytest.raises(CheckpointError, match="not a readable policy checkpoint"):
                load_policy(path)
        _no_code_ran()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"feature_evaluations": 10**30}, r"feature_evaluations: must be an integer in \[1, "),
        ({"feature_evaluations": True}, r"feature_evaluations: must be an integer"),
        ({"objective": ["makespan"]}, r"objective: must be one of peak-memory, makespan"),
        ({"search": "evolve"}, r"search: must be one of brkga, random, got 'evolve'"),
        ({"inner_search": {"brkga": "../../x"}}, r"inner_search.brkga: must be a BRKGA preset"),
        ({"inner_search": {"brkga": "nope"}}, r"inner_search: no BRKGA preset named 'nope'"),
        ({"metadata": {"step": torch.zeros(2)}}, r"metadata: must map names to plain values"),
        ({"metdata": {}}, r"checkpoint: unknown field 'metdata'"),
        ({"node_features": "x"}, r"node_features: must be a list of names"),
        ({"feature_set": torch.zeros(1)}, r"was trained on feature set a Tensor"),
    ],
)
def test_malformed_policy_fields_are_named(seeds, tmp_path, change, message) -> None:
    save_checkpoint(tmp_path / "p.pt", {**seeds.policy_record, **change})
    with pytest.raises(CheckpointError, match=message):
        load_policy(tmp_path / "p.pt")
    outcome(load_policy, tmp_path / "p.pt")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rounds": 10**9}, r"policy_config.rounds: must be an integer in \[0, 256\]"),
        ({"hidden": 10**6}, r"policy_config.hidden: must be an integer in \[1, 4096\]"),
        ({"hidden": 64}, r"model_state\['encoder.*must be a torch.float32 tensor of shape"),
        ({"encoder": "gnn"}, r"policy_config.encoder: must be one of mpnn, lstm, got 'gnn'"),
        ({"anchor": float("nan")}, r"policy_config.anchor: must be finite, got NaN"),
        ({"colour": 1}, r"policy_config: unknown field 'colour'"),
        ({"initial_mode_logit": None}, r"policy_config.initial_mode_logit: must be a number"),
    ],
)
def test_malformed_policy_configs_are_named(seeds, tmp_path, change, message) -> None:
    config = {**seeds.policy_record["policy_config"], **change}
    save_checkpoint(tmp_path / "p.pt", {**seeds.policy_record, "policy_config": config})
    with pytest.raises(CheckpointError, match=message):
        load_policy(tmp_path / "p.pt")


def _with_weight(seeds: Seeds, value: float) -> dict[str, Any]:
    state = dict(seeds.policy_record["model_state"])
    key = next(iter(state))
    state[key] = state[key].clone().fill_(value)
    return {**seeds.policy_record, "model_state": state}


def test_weights_must_be_finite_and_give_finite_outputs(seeds, tmp_path) -> None:
    save_checkpoint(tmp_path / "p.pt", _with_weight(seeds, float("nan")))
    with pytest.raises(CheckpointError, match="holds NaN or infinite values"):
        load_policy(tmp_path / "p.pt")
    save_checkpoint(tmp_path / "p.pt", _with_weight(seeds, 3e38))
    with pytest.raises(CheckpointError, match="the weights give non-finite outputs"):
        load_policy(tmp_path / "p.pt")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"step": -1}, r"step: must be an integer in \[0, "),
        ({"history": "[]"}, r"history: must list 3 rows"),
        ({"history": "[" * 100_000}, r"history: not valid JSON"),
        ({"train_config": 7}, r"train_config: must be JSON text, got 7"),
        ({"seconds": float("inf")}, r"seconds: must be finite"),
        ({"best_step": 5}, r"best_step: must be an integer in \[0, 2\]"),
    ],
)
def test_malformed_run_fields_are_named(seeds, tmp_path, change, message) -> None:
    save_checkpoint(tmp_path / "last.pt", {**seeds.run_record, **change})
    network, optimizer = _fresh_run(seeds.train_config)
    with pytest.raises(CheckpointError, match=message):
        SYSTEM.restore(tmp_path / "last.pt", seeds.train_config, network, optimizer)


def test_a_stored_learning_rate_cannot_override_the_config(seeds, tmp_path) -> None:
    state = seeds.run_record["optimizer_state"]
    groups = [{**state["param_groups"][0], "lr": 10.0}]
    mutant = {**seeds.run_record, "optimizer_state": {**state, "param_groups": groups}}
    save_checkpoint(tmp_path / "last.pt", mutant)
    network, optimizer = _fresh_run(seeds.train_config)
    with pytest.raises(CheckpointError, match="param_groups differ from the run's Adam"):
        SYSTEM.restore(tmp_path / "last.pt", seeds.train_config, network, optimizer)


def test_read_checkpoint_keeps_the_run_fields(seeds) -> None:
    assert read_checkpoint(seeds.run_path, REGAL_FORMAT)["step"] == 2


# ---------------------------------------------------------------------------------- the CLI
# Slow tier only: a `graphopt` process that loads a policy imports torch_geometric, 12 to 15 s
# on the 2-core development VM.
def check_optimize(directory: Path, mutant: bytes) -> None:
    graph = directory / "tiny.json"
    if not graph.exists():
        write_graph(tiny(), graph)
    policy = _write(directory / "cli.pt", mutant)
    solution = directory / "s.json"
    run_cli(
        "optimize", graph, "--devices", 2, "--solver", "regal", "--policy", policy,
        "--budget", 600, "-o", solution, "--json",
    )  # fmt: skip


@pytest.mark.slow
@fuzz_settings(12)
@given(data=st.data())
def test_optimize_with_mutant_policies_slow(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(
        st.one_of(file_mutants(seeds.policy, seeds), record_mutants(seeds.policy_record))
    )
    check_optimize(tmp_path_factory.getbasetemp(), mutant)


def check_resume(seeds: Seeds, directory: Path, mutant: bytes) -> None:
    run = directory / "run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(seeds.run_dir, run)
    (run / "last.pt").write_bytes(mutant)
    config = directory / "train.json"
    config.write_text(seeds.run_record["train_config"])
    run_cli("train", "regal", config, "-o", run, "--resume")


@pytest.mark.slow
@fuzz_settings(8)
@given(data=st.data())
def test_resume_with_mutant_runs_slow(seeds, tmp_path_factory, data) -> None:
    mutant = data.draw(st.one_of(file_mutants(seeds.run, seeds), record_mutants(seeds.run_record)))
    check_resume(seeds, tmp_path_factory.getbasetemp(), mutant)
