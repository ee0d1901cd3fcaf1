"""Training REGAL (and GAS, IDRS) with REINFORCE, top to bottom (paper 001 section 3.4, A.5).

Each step samples `batch_graphs` training graphs, runs the policy on their features, samples
`samples_per_graph` action vectors per graph, turns each into a BRKGA run of
`train_evaluations` (feature run included) and a reward r = -objective / objective of uniform
BRKGA at the same budget (cached per graph, mean over `reference_seeds` runs). The loss is
REINFORCE with the learned baseline, -(r - b(G)) log p(y | G) + lambda/2 (r - b(G))^2, minimized
with Adam and gradient clipping. Every `validate_every` steps the greedy policy is scored on the
validation graphs at `validation_evaluations` and the best policy is kept in `best.pt`.

Everything random in step s is seeded by (seed, s), so a run killed and resumed from `last.pt`
continues exactly as the uninterrupted run would. Every logged row goes to log.csv and, as
scalars, to TensorBoard event files in tensorboard/; a resumed run hides the events its killed
predecessor logged after the checkpoint. Non-finite rewards, losses or gradients stop
training with an error and leave the last good checkpoint as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphopt._messages import describe
from graphopt.configs import read_config
from graphopt.ir.io import read_json
from graphopt.learning.actions import ActionConfig
from graphopt.learning.batching import make_batch
from graphopt.learning.checkpoints import policy_record, read_run_checkpoint
from graphopt.learning.envs.regal import (
    EnvSpec,
    InnerSearch,
    Prepared,
    RolloutEnv,
    RolloutTask,
    relative_rewards,
)
from graphopt.learning.features import FEATURE_EVALUATIONS
from graphopt.learning.networks.regal import (
    PolicyConfig,
    RegalPolicy,
    entropy,
    greedy_actions,
    log_probability,
    sample_actions,
)
from graphopt.learning.objectives.reinforce import ADVANTAGES, Advantage, reinforce_loss
from graphopt.learning.records import (
    MAX_FEATURE_EVALUATIONS,
    MAX_HIDDEN,
    MAX_LEVELS,
    MAX_ROUNDS,
)
from graphopt.learning.runs import (
    Cadence,
    RunLog,
    RunState,
    TrainingError,
    check_finite,
    resolve_dataset,
    run_steps,
    select_graphs,
)
from graphopt.learning.saving import save_checkpoint
from graphopt.learning.workers import Workers, make_workers
from graphopt.limits import MAX_DEVICES
from graphopt.solvers.base import Objective, SolverError

CONFIGS = Path(__file__).parent / "configs"
"""Shipped training configs (`graphopt train regal NAME` finds them by name)."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a REGAL training run (saved with every checkpoint).

    Attributes:
        name: the run's name.
        dataset: a built dataset directory, a dataset config JSON, or the name of a shipped
            dataset config ('default', 'regal'), built into the run directory on first use.
        objective: 'peak-memory' or 'makespan'.
        n_devices: devices of the machine (paper 001: 2; transfers free, no capacity).
        encoder: 'mpnn' (REGAL) or 'lstm' (GAS).
        search: 'brkga' (REGAL, GAS) or 'random' (IDRS).
        brkga_preset: BRKGA preset the inner search runs with (None: paper 001's defaults).
        kept_from_feature_run: the feature run's best chromosomes that start the inner
            search; the rest are drawn from the policy's distributions (None: all of them).
        hidden: network width (A.5: 32).
        rounds: message-passing rounds T (A.5: 16).
        aggregation: 'mean' or 'add' message aggregation.
        levels: k, quantization levels of every action.
        placement: learn placement-gene distributions (table 3).
        scheduling: learn priority-gene distributions (table 3).
        elite_bias: learn elite biases (table 3).
        initial_mode_logit: logit advantage of each head's initial action (exploration).
        anchor: initial strength of the policy's feature anchor (`PolicyConfig.anchor`;
            None: the paper's network).
        feature_evaluations: evaluations of each graph's feature run (A.1: 400).
        train_evaluations: budget of a training rollout and its reference (A.5: 1,000).
        validation_evaluations: budget of validation runs (paper: 5,000).
        reference_seeds: uniform BRKGA runs averaged into each graph's reference.
        max_train_ops: leave out training graphs with more ops (None: keep all).
        validation_graphs: validation graphs scored, spread evenly over the split.
        steps: gradient steps.
        batch_graphs: graphs per step (A.5: 4).
        samples_per_graph: action vectors sampled per graph per step.
        learning_rate: Adam's step size (A.5: 1e-4).
        adam_betas: Adam's (beta1, beta2) (A.5: 0.9, 0.999).
        adam_eps: Adam's epsilon (A.5: 1e-8).
        grad_clip: global L2 norm the gradient is clipped to (A.5: 10).
        baseline_weight: lambda, weight of the baseline's squared error (A.5: 1e-4).
        entropy_weight: weight of an entropy bonus (0 in the paper).
        advantage: 'baseline' (r - b(G), the paper's learned baseline) or 'sample-mean'
            (r minus the mean reward of the other samples of the same graph in the step,
            lower variance when samples_per_graph > 1; b(G) is still trained and logged).
        validate_every: steps between validations.
        checkpoint_every: steps between checkpoints.
        seed: seeds the network's initialization and every step.
        workers: rollout worker processes (0: rollouts in this process).
    """

    name: str = "regal"
    dataset: str = "regal"
    objective: str = "peak-memory"
    n_devices: int = 2
    encoder: str = "mpnn"
    search: str = "brkga"
    brkga_preset: str | None = None
    kept_from_feature_run: int | None = None
    hidden: int = 32
    rounds: int = 16
    aggregation: str = "mean"
    levels: int = 4
    placement: bool = True
    scheduling: bool = True
    elite_bias: bool = False
    initial_mode_logit: float = 3.0
    anchor: float | None = None
    feature_evaluations: int = FEATURE_EVALUATIONS
    train_evaluations: int = 1000
    validation_evaluations: int = 5000
    reference_seeds: int = 2
    max_train_ops: int | None = None
    validation_graphs: int = 64
    steps: int = 2000
    batch_graphs: int = 4
    samples_per_graph: int = 4
    learning_rate: float = 1e-4
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    grad_clip: float = 10.0
    baseline_weight: float = 1e-4
    entropy_weight: float = 0.0
    advantage: Advantage = "baseline"
    validate_every: int = 100
    checkpoint_every: int = 25
    seed: int = 0
    workers: int = 2

    def __post_init__(self) -> None:
        Objective.parse(self.objective)
        if self.advantage not in ADVANTAGES:
            raise TrainingError(
                f"advantage must be one of {', '.join(map(repr, ADVANTAGES))}, "
                f"got {self.advantage!r}"
            )
        if self.advantage == "sample-mean" and self.samples_per_graph < 2:
            raise TrainingError("advantage 'sample-mean' needs samples_per_graph >= 2")
        if self.search not in ("brkga", "random"):
            raise TrainingError(f"search must be 'brkga' or 'random', got {self.search!r}")
        for name in (
            "steps",
            "batch_graphs",
            "samples_per_graph",
            "validate_every",
            "checkpoint_every",
            "reference_seeds",
            "validation_graphs",
        ):
            if getattr(self, name) < 1:
                raise TrainingError(f"{name} must be >= 1, got {getattr(self, name)}")
        try:
            self.inner  # noqa: B018 (built to validate the fields)
        except SolverError as error:
            raise TrainingError(f"bad inner search: {error}") from None
        for name, low, high in (
            ("workers", 0, 1024),
            ("seed", 0, 2**63 - 1),
            ("n_devices", 2, MAX_DEVICES),
            ("hidden", 1, MAX_HIDDEN),
            ("rounds", 0, MAX_ROUNDS),
            ("levels", 2, MAX_LEVELS),
            ("feature_evaluations", 1, MAX_FEATURE_EVALUATIONS),
            ("validation_evaluations", 1, MAX_FEATURE_EVALUATIONS),
        ):
            if not low <= getattr(self, name) <= high:
                raise TrainingError(f"{name} must be in [{low}, {high}], got {getattr(self, name)}")
        for name in ("learning_rate", "adam_eps", "grad_clip"):
            if not getattr(self, name) > 0:
                raise TrainingError(f"{name} must be > 0, got {getattr(self, name)}")
        if not all(0 <= beta < 1 for beta in self.adam_betas):
            raise TrainingError(f"adam_betas must be in [0, 1), got {list(self.adam_betas)}")
        if not self.feature_evaluations < self.train_evaluations <= self.validation_evaluations:
            raise TrainingError(
                "evaluations must satisfy feature_evaluations < train_evaluations <= "
                f"validation_evaluations, got {self.feature_evaluations}, "
                f"{self.train_evaluations}, {self.validation_evaluations}"
            )

    @property
    def inner(self) -> InnerSearch:
        """How BRKGA continues after the feature run, in training and in the solver."""
        return InnerSearch(self.brkga_preset, self.kept_from_feature_run)

    @property
    def policy(self) -> PolicyConfig:
        """The network's shape."""
        actions = ActionConfig(self.levels, self.placement, self.scheduling, self.elite_bias)
        return PolicyConfig(
            self.n_devices,
            self.encoder,
            self.hidden,
            self.rounds,
            self.aggregation,
            actions,
            self.initial_mode_logit,
            self.anchor,
        )

    @classmethod
    def from_dict(cls, data: Any) -> TrainConfig:
        """A config from a JSON object, through the shared loader (`graphopt.configs`).

        Unknown fields and values of the wrong type are refused, naming them.
        """
        return read_config(cls, data, "training config", TrainingError)

    @classmethod
    def load(cls, source: str | Path) -> TrainConfig:
        """A config from a JSON file, or the shipped config of that name."""
        path = Path(source)
        if not path.is_file():
            shipped = CONFIGS / f"{source}.json"
            if not shipped.is_file():
                names = ", ".join(sorted(p.stem for p in CONFIGS.glob("*.json")))
                raise TrainingError(f"no training config file {source} (shipped: {names})")
            path = shipped
        try:
            data = read_json(path, TrainingError)
        except TrainingError as error:
            raise TrainingError(f"{path}: {error}") from None
        if not isinstance(data, dict):
            raise TrainingError(f"{path}: a training config is a JSON object")
        return cls.from_dict(data)


LOG_COLUMNS = (
    "step",
    "seconds",
    "reward",
    "baseline",
    "loss",
    "policy_loss",
    "baseline_loss",
    "entropy",
    "grad_norm",
    "validation_reward",
    "validation_improvement_pct",
)


def train(
    config: TrainConfig,
    run_dir: str | Path,
    resume: bool = False,
    ray_address: str | None = None,
    progress: Callable[[dict[str, float]], None] | None = None,
) -> RunState:
    """Trains a policy as `config` says, writing checkpoints and logs into `run_dir`.

    Files: config.json, log.csv, tensorboard/ (the log's rows as scalars), last.pt
    (resumable), best.pt (best validation; a shippable policy). Returns the final run state.

    Raises:
        TrainingError: bad config, an existing run without `resume` (or a resumed run with
            another config), or non-finite values (the last good checkpoint is kept).
    """
    run_dir = Path(run_dir)
    last = run_dir / "last.pt"
    if last.exists() and not resume:
        raise TrainingError(f"{run_dir} already holds a run; resume it or choose another directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    network = RegalPolicy(config.policy)
    optimizer = torch.optim.Adam(
        network.parameters(), config.learning_rate, config.adam_betas, eps=config.adam_eps
    )
    state = RunState()
    if resume and last.exists():
        state = _restore(last, config, network, optimizer)
    (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=2) + "\n")

    dataset = resolve_dataset(config.dataset, run_dir)
    train_ids, valid_ids = select_graphs(dataset, config.max_train_ops, config.validation_graphs)
    spec = EnvSpec(
        str(dataset),
        config.n_devices,
        config.objective,
        config.search,
        config.feature_evaluations,
        config.policy.actions,
        config.inner,
    )
    rollouts = make_workers(partial(RolloutEnv, spec), config.workers, ray_address)
    log = RunLog(run_dir, LOG_COLUMNS, state.step if resume else None)
    try:
        train_set = _prepare(
            rollouts, dataset, "train", train_ids, config.train_evaluations, config
        )
        valid_set = _prepare(
            rollouts, dataset, "valid", valid_ids, config.validation_evaluations, config
        )
        return run_steps(
            state,
            Cadence(config.steps, config.validate_every, config.checkpoint_every),
            lambda step: _step(config, network, optimizer, rollouts, train_ids, train_set, step),
            lambda step: _validation_row(
                step, validate(network, rollouts, valid_ids, valid_set, config)
            ),
            lambda state: _save_policy(run_dir / "best.pt", network, config, state),
            lambda state: _save_run(last, network, optimizer, config, state),
            log,
            progress,
        )
    finally:
        log.close()
        rollouts.close()


def _prepare(
    rollouts: Workers[RolloutEnv],
    dataset: Path,
    split: str,
    ids: np.ndarray,
    evaluations: int,
    config: TrainConfig,
) -> dict[int, Prepared]:
    """Features and uniform-BRKGA references of the graphs, computed in the workers.

    References are the costly part (`reference_seeds` BRKGA runs per graph) and depend only on
    the dataset and the settings below, so they are cached in the dataset directory
    (cache/references-*.npz) and shared by every run on it.
    """
    cache = (
        dataset
        / "cache"
        / (
            f"references-{split}-{config.objective}-d{config.n_devices}-"
            f"f{config.feature_evaluations}-e{evaluations}-s{config.reference_seeds}.npz"
        )
    )
    known: dict[int, float] = {}
    if cache.is_file():
        with np.load(cache) as stored:
            known = dict(zip(stored["index"].tolist(), stored["reference"].tolist(), strict=True))
    missing = [int(i) for i in ids if int(i) not in known]
    computed = rollouts.map(
        RolloutEnv.prepare, [(split, i, evaluations, config.reference_seeds) for i in missing]
    )
    prepared = dict(zip(missing, computed, strict=True))
    cached = [int(i) for i in ids if int(i) in known]
    features = rollouts.map(RolloutEnv.features, [(split, i) for i in cached])
    prepared.update({i: Prepared(f, known[i]) for i, f in zip(cached, features, strict=True)})
    if missing:
        known.update({i: p.reference for i, p in prepared.items()})
        cache.parent.mkdir(exist_ok=True)
        partial = cache.with_name(cache.name + ".partial.npz")
        index = np.array(sorted(known), dtype=np.int64)
        np.savez(partial, index=index, reference=np.array([known[i] for i in index.tolist()]))
        partial.replace(cache)
    return prepared


def _step(
    config: TrainConfig,
    network: RegalPolicy,
    optimizer: torch.optim.Optimizer,
    rollouts: Workers[RolloutEnv],
    train_ids: np.ndarray,
    train_set: dict[int, Prepared],
    step: int,
) -> dict[str, float]:
    """One REINFORCE step; everything random is seeded by (seed, step)."""
    rng = np.random.default_rng([config.seed, step])
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    chosen = [int(i) for i in rng.choice(train_ids, size=config.batch_graphs)]
    batch = make_batch([train_set[i].features for i in chosen])
    network.train()
    logits = network(batch)
    baseline = network.baseline(batch)
    samples = sample_actions(logits.detach(), generator, config.samples_per_graph)
    ptr = batch.ptr.tolist()
    # Common random numbers: the samples of a graph share the search's seed, so their rewards
    # differ by their actions, not by the search's luck.
    seeds = rng.integers(2**62, size=len(chosen))
    tasks = [
        RolloutTask(
            "train",
            index,
            actions[ptr[g] : ptr[g + 1]].numpy().astype(np.int8),
            config.train_evaluations,
            int(seeds[g]),
        )
        for actions in samples
        for g, index in enumerate(chosen)
    ]
    values = np.asarray(rollouts.map(RolloutEnv.rollout, tasks), dtype=np.float64)
    references = np.asarray([train_set[i].reference for i in chosen])
    rewards = relative_rewards(values.reshape(len(samples), len(chosen)), references)
    log_p = torch.stack(
        [log_probability(logits, actions, batch.batch, len(chosen)) for actions in samples]
    )
    loss = reinforce_loss(
        log_p,
        torch.from_numpy(rewards).float(),
        baseline,
        entropy(logits, batch.batch, len(chosen)),
        config.advantage,
        config.baseline_weight,
        config.entropy_weight,
    )
    check_finite(step, rewards=float(np.sum(rewards)), loss=float(loss.total.detach()))
    optimizer.zero_grad()
    loss.total.backward()
    norm = float(torch.nn.utils.clip_grad_norm_(network.parameters(), config.grad_clip))
    check_finite(step, gradient_norm=norm)
    optimizer.step()
    return {
        "step": step + 1,
        "reward": float(rewards.mean()),
        "baseline": float(baseline.detach().mean()),
        "loss": float(loss.total.detach()),
        "policy_loss": float(loss.policy.detach()),
        "baseline_loss": float(loss.baseline.detach()),
        "entropy": float(loss.entropy.detach()),
        "grad_norm": norm,
    }


def _validation_row(step: int, reward: float) -> dict[str, float]:
    """Log fields of a validation: mean reward and mean % improvement over uniform BRKGA."""
    return {
        "step": step,
        "validation_reward": reward,
        "validation_improvement_pct": 100.0 * (1.0 + reward),
    }


def validate(
    network: RegalPolicy,
    rollouts: Workers[RolloutEnv],
    ids: np.ndarray,
    prepared: dict[int, Prepared],
    config: TrainConfig,
) -> float:
    """Mean reward of the greedy policy on the validation graphs at the validation budget."""
    network.eval()
    features = [prepared[int(i)].features for i in ids]
    with torch.inference_mode():
        batch = make_batch(features)
        actions = greedy_actions(network(batch))
    tasks = [
        RolloutTask(
            "valid",
            int(i),
            actions[int(batch.ptr[g]) : int(batch.ptr[g + 1])].numpy().astype(np.int8),
            config.validation_evaluations,
            1000 + g,
        )
        for g, i in enumerate(ids)
    ]
    values = np.asarray(rollouts.map(RolloutEnv.rollout, tasks))
    references = np.asarray([prepared[int(i)].reference for i in ids])
    return float(np.mean(relative_rewards(values, references)))


def _save_policy(path: Path, network: RegalPolicy, config: TrainConfig, state: RunState) -> None:
    record = policy_record(
        network, config.objective, config.search, config.feature_evaluations, config.inner
    )
    record["metadata"] = {
        "train_config": json.dumps(asdict(config)),
        "step": state.step,
        "validation_reward": state.best_validation,
        "validation_improvement_pct": 100.0 * (state.best_validation + 1.0),
    }
    save_checkpoint(path, record)


def _save_run(
    path: Path,
    network: RegalPolicy,
    optimizer: torch.optim.Optimizer,
    config: TrainConfig,
    state: RunState,
) -> None:
    record = policy_record(
        network, config.objective, config.search, config.feature_evaluations, config.inner
    )
    record.update(
        train_config=json.dumps(asdict(config)),
        optimizer_state=optimizer.state_dict(),
        step=state.step,
        best_validation=state.best_validation,
        best_step=state.best_step,
        seconds=state.seconds,
        history=json.dumps(state.history),
    )
    save_checkpoint(path, record)


def _restore(
    path: Path, config: TrainConfig, network: RegalPolicy, optimizer: torch.optim.Optimizer
) -> RunState:
    run = read_run_checkpoint(path, LOG_COLUMNS)
    current = json.loads(json.dumps(asdict(config)))
    differs = sorted(
        k
        for k in current.keys() | run.train_config.keys()
        if k not in ("steps", "workers") and run.train_config.get(k) != current.get(k)
    )
    if differs:
        raise TrainingError(
            f"{path} was trained with another config "
            f"({', '.join(k if k in current else describe(k) for k in differs)} differ); resume "
            "with the same config (only steps and workers may change)"
        )
    run.restore(network, optimizer)
    return RunState(run.step, run.best_validation, run.best_step, run.seconds, run.history)
