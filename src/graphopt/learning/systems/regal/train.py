"""Training REGAL (and GAS, IDRS) with REINFORCE, top to bottom (paper 001 section 3.4, A.5).

Each step samples `rollouts.batch_graphs` training graphs, runs the policy on their features,
samples `rollouts.samples_per_graph` action vectors per graph, turns each into a BRKGA run of
`rollouts.train_evaluations` (feature run included) and a reward r = -objective / objective of
uniform BRKGA at the same budget (cached per graph, mean over `rollouts.reference_seeds` runs).
The loss is REINFORCE with the learned baseline, -(r - b(G)) log p(y | G) + lambda/2
(r - b(G))^2, minimized with Adam and gradient clipping. Every `run.validate_every` steps the
greedy policy is scored on the validation graphs at `rollouts.validation_evaluations` and the
best policy is kept in `best.pt`.

Everything random in step s is seeded by (run.seed, s), so a run killed and resumed from `last.pt`
continues exactly as the uninterrupted run would. Every logged row goes to log.csv and, as
scalars, to TensorBoard event files in tensorboard/; a resumed run hides the events its killed
predecessor logged after the checkpoint. Non-finite rewards, losses or gradients stop
training with an error and leave the last good checkpoint as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphopt.configs import FieldError, read_config
from graphopt.ir.io import read_json
from graphopt.learning.batching import make_batch
from graphopt.learning.features import FEATURE_EVALUATIONS
from graphopt.learning.objectives.reinforce import ReinforceConfig, ReinforceLoss, reinforce_loss
from graphopt.learning.optim import AdamConfig, clipped_step
from graphopt.learning.records import RunCheckpoint
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import (
    Phase,
    RunConfig,
    RunState,
    check_finite,
    config_path,
    training_graphs,
    unwatched,
)
from graphopt.learning.saving import save_checkpoint
from graphopt.learning.systems.regal.checkpoints import (
    policy_fields_of,
    policy_record,
    restore_weights,
)
from graphopt.learning.systems.regal.config import PolicyConfig
from graphopt.learning.systems.regal.env import (
    SEARCHES,
    EnvSpec,
    InnerSearch,
    Prepared,
    RolloutEnv,
    RolloutTask,
    Search,
    relative_rewards,
)
from graphopt.learning.systems.regal.network import (
    RegalPolicy,
    antithetic_actions,
    entropy,
    greedy_actions,
    log_probability,
    sample_actions,
)
from graphopt.learning.systems.regal.records import MAX_FEATURE_EVALUATIONS, REGAL_FORMAT
from graphopt.learning.training import Run, Session, System
from graphopt.learning.workers import Workers, make_workers
from graphopt.solvers.base import Objective


@dataclass(frozen=True)
class RolloutConfig:
    """How REGAL's steps and validations sample and score rollouts.

    A section of its own rather than part of `RunConfig` because it is REGAL's: other trainers
    have no BRKGA budgets or uniform-BRKGA references to score against.

    Attributes:
        batch_graphs: graphs per step (paper 001 A.5: 4).
        samples_per_graph: action vectors sampled per graph per step.
        train_evaluations: budget of a training rollout and its reference (A.5: 1,000).
        validation_evaluations: budget of validation runs (paper: 5,000).
        reference_seeds: uniform BRKGA runs averaged into each graph's reference.
        antithetic: draw a graph's samples in antithetic pairs (`antithetic_actions`; needs
            an even samples_per_graph).
    """

    batch_graphs: int = 4
    samples_per_graph: int = 4
    train_evaluations: int = 1000
    validation_evaluations: int = 5000
    reference_seeds: int = 2
    antithetic: bool = False

    def __post_init__(self) -> None:
        for name in ("batch_graphs", "samples_per_graph", "reference_seeds"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be >= 1, got {getattr(self, name)}")
        if not 1 <= self.validation_evaluations <= MAX_FEATURE_EVALUATIONS:
            raise FieldError(
                "validation_evaluations",
                f"must be in [1, {MAX_FEATURE_EVALUATIONS}], got {self.validation_evaluations}",
            )
        if self.antithetic and self.samples_per_graph % 2:
            raise FieldError(
                "samples_per_graph",
                f"antithetic samples come in pairs: must be even, got {self.samples_per_graph}",
            )


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a REGAL training run (saved with every checkpoint).

    Each section is a config of its own, checked when it is built; this class checks only what
    ties sections together. The sections that any trainer has (`run`, `optimizer`) come from
    the modules other trainers share, the policy and its search from the modules that run it.

    Attributes:
        name: the run's name.
        dataset: a built dataset directory, a dataset config JSON, or the name of a shipped
            dataset config ('default', 'regal'), built into the run directory on first use.
        objective: 'peak-memory' or 'makespan'.
        search: 'brkga' (REGAL, GAS) or 'random' (IDRS).
        feature_evaluations: evaluations of each graph's feature run (A.1: 400).
        policy: the network (A.5: width 32, 16 rounds; `encoder` 'lstm' for GAS) and its
            actions (table 3).
        inner: how BRKGA continues after the feature run (preset, chromosomes kept).
        reinforce: the loss's advantage and weights.
        optimizer: Adam and gradient clipping (A.5).
        rollouts: graphs and samples per step, budgets and references of the rewards.
        run: steps, validation and checkpoint cadence, graphs used, seed and workers.
    """

    name: str = "regal"
    dataset: str = "regal"
    objective: str = "peak-memory"
    search: Search = "brkga"
    feature_evaluations: int = FEATURE_EVALUATIONS
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    inner: InnerSearch = field(default_factory=InnerSearch)
    reinforce: ReinforceConfig = field(default_factory=ReinforceConfig)
    optimizer: AdamConfig = field(default_factory=AdamConfig)
    rollouts: RolloutConfig = field(default_factory=RolloutConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        Objective.parse(self.objective)
        least = 4 if self.rollouts.antithetic else 2
        if self.reinforce.advantage == "sample-mean" and self.rollouts.samples_per_graph < least:
            raise TrainingError(
                f"advantage 'sample-mean' needs samples_per_graph >= {least}"
                + (" with antithetic pairs" if self.rollouts.antithetic else "")
            )
        if self.search not in SEARCHES:
            raise TrainingError(f"search must be 'brkga' or 'random', got {self.search!r}")
        if not 1 <= self.feature_evaluations <= MAX_FEATURE_EVALUATIONS:
            raise FieldError(
                "feature_evaluations",
                f"must be in [1, {MAX_FEATURE_EVALUATIONS}], got {self.feature_evaluations}",
            )
        train, valid = self.rollouts.train_evaluations, self.rollouts.validation_evaluations
        if not self.feature_evaluations < train <= valid:
            raise TrainingError(
                "evaluations must satisfy feature_evaluations < train_evaluations <= "
                f"validation_evaluations, got {self.feature_evaluations}, {train}, {valid}"
            )

    @classmethod
    def from_dict(cls, data: Any) -> TrainConfig:
        """A config from a JSON object, through the shared loader (`graphopt.configs`).

        The flat layout of configs and checkpoints from before the sections is read too
        (`FLAT_FIELDS`), its fields named by their flat keys in messages. Unknown fields and
        values of the wrong type are refused, naming them.
        """
        names = {"inner": "inner search"}
        if isinstance(data, dict) and _is_flat(data):
            data = _nest(data)
            names.update({".".join(path): key for key, path in FLAT_FIELDS.items()})
        return read_config(cls, data, "training config", TrainingError, names)

    @classmethod
    def load(cls, source: str | Path) -> TrainConfig:
        """A config from a JSON file, or the shipped config of that name."""
        path = config_path(source)
        try:
            data = read_json(path, TrainingError)
        except TrainingError as error:
            raise TrainingError(f"{path}: {error}") from None
        if not isinstance(data, dict):
            raise TrainingError(f"{path}: a training config is a JSON object")
        return cls.from_dict(data)


FLAT_FIELDS: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "dataset": ("dataset",),
    "objective": ("objective",),
    "search": ("search",),
    "feature_evaluations": ("feature_evaluations",),
    "n_devices": ("policy", "n_devices"),
    "encoder": ("policy", "encoder"),
    "hidden": ("policy", "hidden"),
    "rounds": ("policy", "rounds"),
    "aggregation": ("policy", "aggregation"),
    "levels": ("policy", "actions", "levels"),
    "placement": ("policy", "actions", "placement"),
    "scheduling": ("policy", "actions", "scheduling"),
    "elite_bias": ("policy", "actions", "elite_bias"),
    "initial_mode_logit": ("policy", "initial_mode_logit"),
    "anchor": ("policy", "anchor"),
    "brkga_preset": ("inner", "brkga"),
    "kept_from_feature_run": ("inner", "kept"),
    "advantage": ("reinforce", "advantage"),
    "baseline_weight": ("reinforce", "baseline_weight"),
    "entropy_weight": ("reinforce", "entropy_weight"),
    "learning_rate": ("optimizer", "learning_rate"),
    "adam_betas": ("optimizer", "betas"),
    "adam_eps": ("optimizer", "eps"),
    "grad_clip": ("optimizer", "grad_clip"),
    "batch_graphs": ("rollouts", "batch_graphs"),
    "samples_per_graph": ("rollouts", "samples_per_graph"),
    "train_evaluations": ("rollouts", "train_evaluations"),
    "validation_evaluations": ("rollouts", "validation_evaluations"),
    "reference_seeds": ("rollouts", "reference_seeds"),
    "steps": ("run", "steps"),
    "validate_every": ("run", "validate_every"),
    "checkpoint_every": ("run", "checkpoint_every"),
    "seed": ("run", "seed"),
    "workers": ("run", "workers"),
    "max_train_ops": ("run", "max_train_ops"),
    "validation_graphs": ("run", "validation_graphs"),
}
"""Each key of the flat layout (shipped configs and checkpoints before the sections) and the
path of its field in `TrainConfig`; the five top-level fields keep their place."""

_SECTIONS = frozenset(path[0] for path in FLAT_FIELDS.values() if len(path) > 1)
"""The nested layout's sections."""


def _is_flat(data: dict[Any, Any]) -> bool:
    """Whether `data` uses the flat layout (a key that only it has, and no section).

    Raises:
        TrainingError: when it mixes flat keys and sections.
    """
    flat = sorted(str(k) for k in data if len(FLAT_FIELDS.get(k, ())) > 1)
    nested = sorted(str(k) for k in data if k in _SECTIONS)
    if flat and nested:
        raise TrainingError(
            f"training config mixes flat fields ({', '.join(flat)}) with sections "
            f"({', '.join(nested)}); use one layout"
        )
    return bool(flat)


def _nest(data: dict[Any, Any]) -> dict[str, Any]:
    """The nested form of a flat-layout config, its keys moved to their paths (`FLAT_FIELDS`).

    Raises:
        TrainingError: naming unknown flat keys.
    """
    unknown = sorted(str(key) for key in data if key not in FLAT_FIELDS)
    if unknown:
        raise TrainingError(
            f"unknown training config field(s): {', '.join(unknown)}; "
            f"valid: {', '.join(sorted(FLAT_FIELDS))}"
        )
    nested: dict[str, Any] = {}
    for key, value in data.items():
        *sections, name = FLAT_FIELDS[key]
        section = nested
        for part in sections:
            section = section.setdefault(part, {})
        section[name] = value
    return nested


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


def prepare_graphs(
    rollouts: Workers[RolloutEnv],
    dataset: Path,
    split: str,
    ids: np.ndarray,
    evaluations: int,
    config: TrainConfig,
    phase: Phase = unwatched,
) -> dict[int, Prepared]:
    """Features and uniform-BRKGA references of the graphs, computed in the workers.

    References are the costly part (`reference_seeds` BRKGA runs per graph) and depend only on
    the dataset and the settings below, so they are cached in the dataset directory
    (cache/references-*.npz) and shared by every run on it. Each part is announced to `phase`
    and counted as its graphs are done.
    """
    cache = (
        dataset
        / "cache"
        / (
            f"references-{split}-{config.objective}-d{config.policy.n_devices}-"
            f"f{config.feature_evaluations}-e{evaluations}-s{config.rollouts.reference_seeds}.npz"
        )
    )
    known: dict[int, float] = {}
    if cache.is_file():
        with np.load(cache) as stored:
            known = dict(zip(stored["index"].tolist(), stored["reference"].tolist(), strict=True))
    missing = [int(i) for i in ids if int(i) not in known]
    computed = _counted_map(
        rollouts,
        RolloutEnv.prepare,
        [(split, i, evaluations, config.rollouts.reference_seeds) for i in missing],
        config.run.workers,
        phase,
        f"features and uniform-BRKGA references of the {split} graphs",
    )
    prepared = dict(zip(missing, computed, strict=True))
    cached = [int(i) for i in ids if int(i) in known]
    features = _counted_map(
        rollouts,
        RolloutEnv.features,
        [(split, i) for i in cached],
        config.run.workers,
        phase,
        f"features of the {split} graphs (references cached)",
    )
    prepared.update({i: Prepared(f, known[i]) for i, f in zip(cached, features, strict=True)})
    if missing:
        known.update({i: p.reference for i, p in prepared.items()})
        cache.parent.mkdir(exist_ok=True)
        partial = cache.with_name(cache.name + ".partial.npz")
        index = np.array(sorted(known), dtype=np.int64)
        np.savez(partial, index=index, reference=np.array([known[i] for i in index.tolist()]))
        partial.replace(cache)
    return prepared


CHUNK = 8
"""Items per worker between two counts of a counted map (`_counted_map`)."""


def _counted_map(
    rollouts: Workers[RolloutEnv],
    call: Callable[[RolloutEnv, Any], Any],
    items: list[Any],
    workers: int,
    phase: Phase,
    what: str,
) -> list[Any]:
    """`rollouts.map(call, items)` as a phase (`what`, unless there are no items) counted by chunk.

    Chunks of `CHUNK` items per worker keep every worker busy; the results are the same, each
    depending on its item alone.
    """
    if not items:
        return []
    count = phase(what, len(items))
    size = CHUNK * max(workers, 1)
    results: list[Any] = []
    for start in range(0, len(items), size):
        results += rollouts.map(call, items[start : start + size])
        count(len(results))
    return results


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
    network.train()
    loss, rewards, baseline = step_loss(config, network, rollouts, train_ids, train_set, step)
    norm = clipped_step(network, optimizer, loss.total, step, config.optimizer.grad_clip)
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


def step_loss(
    config: TrainConfig,
    network: RegalPolicy,
    rollouts: Workers[RolloutEnv],
    train_ids: np.ndarray,
    train_set: dict[int, Prepared],
    step: int,
) -> tuple[ReinforceLoss, np.ndarray, torch.Tensor]:
    """Step `step`'s loss (with its graph), rewards [samples, graphs] and baselines.

    Separate from the update so that `benchmarks/regal_gradient_snr.py` can measure the
    gradients that each variance-reduction switch gives at one policy.
    """
    rng = np.random.default_rng([config.run.seed, step])
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    chosen = [int(i) for i in rng.choice(train_ids, size=config.rollouts.batch_graphs)]
    batch = make_batch([train_set[i].features for i in chosen])
    logits = network(batch)
    baseline = network.baseline(batch)
    draw = antithetic_actions if config.rollouts.antithetic else sample_actions
    samples = draw(logits.detach(), generator, config.rollouts.samples_per_graph)
    ptr = batch.ptr.tolist()
    # Common random numbers: the samples of a graph share the search's seed, so their rewards
    # differ by their actions, not by the search's luck.
    seeds = rng.integers(2**62, size=len(chosen))
    tasks = [
        RolloutTask(
            "train",
            index,
            actions[ptr[g] : ptr[g + 1]].numpy().astype(np.int8),
            config.rollouts.train_evaluations,
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
        config.reinforce.advantage,
        config.reinforce.baseline_weight,
        config.reinforce.entropy_weight,
        config.reinforce.normalize,
        config.rollouts.antithetic,
    )
    check_finite(step, rewards=float(np.sum(rewards)), loss=float(loss.total.detach()))
    return loss, rewards, baseline


def _validation_row(step: int, reward: float) -> dict[str, float]:
    """Log fields of a validation: mean reward and mean % improvement over uniform BRKGA."""
    return {
        "step": step,
        "validation_reward": reward,
        "validation_improvement_pct": 100.0 * (1.0 + reward),
    }


def _keep_validation(
    run_dir: Path,
    step: int,
    network: RegalPolicy,
    rollouts: Workers[RolloutEnv],
    ids: np.ndarray,
    prepared: dict[int, Prepared],
    config: TrainConfig,
) -> float:
    """The mean validation reward; each graph's reward and the policy are kept for the curves.

    Learning curves compare every validation with step 0 graph by graph (paired CIs), and a
    campaign's policies are tested afterwards at the test budget, so neither the mean alone
    nor best.pt alone is enough: validations/step-N.npz holds the graphs' ids and rewards,
    snapshots/step-N.pt the policy. A resumed run rewrites them identically.
    """
    rewards = validate(network, rollouts, ids, prepared, config)
    for folder in ("validations", "snapshots"):
        (run_dir / folder).mkdir(exist_ok=True)
    np.savez(run_dir / "validations" / f"step-{step:07d}.npz", index=ids, reward=rewards)
    record = policy_record(
        network, config.objective, config.search, config.feature_evaluations, config.inner
    )
    record["metadata"] = {"train_config": json.dumps(asdict(config)), "step": step}
    save_checkpoint(run_dir / "snapshots" / f"step-{step:07d}.pt", record)
    return float(np.mean(rewards))


def validate(
    network: RegalPolicy,
    rollouts: Workers[RolloutEnv],
    ids: np.ndarray,
    prepared: dict[int, Prepared],
    config: TrainConfig,
) -> np.ndarray:
    """Each validation graph's reward under the greedy policy at the validation budget."""
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
            config.rollouts.validation_evaluations,
            1000 + g,
        )
        for g, i in enumerate(ids)
    ]
    values = np.asarray(rollouts.map(RolloutEnv.rollout, tasks))
    references = np.asarray([prepared[int(i)].reference for i in ids])
    return relative_rewards(values, references)


class RegalSystem(System):
    """REGAL (and GAS, IDRS) for the training skeleton, its own fields in the common records.

    Files besides the skeleton's: per validation validations/step-N.npz and snapshots/step-N.pt
    (`_keep_validation`).
    """

    name = "regal"
    form = REGAL_FORMAT
    log_columns = LOG_COLUMNS
    config_class = TrainConfig

    def network(self, config: Any) -> torch.nn.Module:
        """The untrained policy network."""
        return RegalPolicy(config.policy)

    def start(self, run: Run) -> Session:
        """The rollout workers, with the training and validation graphs prepared on them."""
        config, network, optimizer, run_dir, phase = (
            run.config, run.network, run.optimizer, run.run_dir, run.phase,
        )  # fmt: skip
        dataset, train_ids, valid_ids = training_graphs(config.dataset, run_dir, config.run, phase)
        spec = EnvSpec(
            str(dataset),
            config.policy.n_devices,
            config.objective,
            config.search,
            config.feature_evaluations,
            config.policy.actions,
            config.inner,
        )
        rollouts = make_workers(partial(RolloutEnv, spec), config.run.workers, run.ray_address)
        try:
            train_set = prepare_graphs(
                rollouts, dataset, "train", train_ids, config.rollouts.train_evaluations, config,
                phase,
            )  # fmt: skip
            valid_set = prepare_graphs(
                rollouts, dataset, "valid", valid_ids, config.rollouts.validation_evaluations,
                config, phase,
            )  # fmt: skip
        except BaseException:
            rollouts.close()
            raise
        return Session(
            lambda step: _step(config, network, optimizer, rollouts, train_ids, train_set, step),
            lambda step: _validation_row(
                step,
                _keep_validation(run_dir, step, network, rollouts, valid_ids, valid_set, config),
            ),
            rollouts.close,
        )

    def fields(self, config: Any) -> dict[str, Any]:
        """What REGAL's loaders check before using the weights (`policy_fields_of`)."""
        return policy_fields_of(
            config.policy, config.objective, config.search, config.feature_evaluations, config.inner
        )

    def policy_facts(self, config: Any, state: RunState) -> dict[str, Any]:
        """best.pt's facts of the run, in REGAL's `metadata` (read by model cards)."""
        return {
            "metadata": {
                "train_config": json.dumps(asdict(config)),
                "step": state.step,
                "validation_reward": state.best_validation,
                "validation_improvement_pct": 100.0 * (state.best_validation + 1.0),
            }
        }

    def load_run_weights(self, run: RunCheckpoint, config: Any, network: torch.nn.Module) -> None:
        """last.pt's weights, their policy config and outputs checked (`restore_weights`)."""
        restore_weights(run, network)


SYSTEM = RegalSystem()
"""REGAL's system (`training.SYSTEMS['regal']`)."""
