"""What every training run does, whatever it trains: the pieces a `train_*.py` loop imports.

A run trains on a built dataset (`resolve_dataset` builds one from a config on first use), on
graphs picked the same way each time (`select_graphs`), and repeats one cadence (`run_steps`):
validate the untrained policy at step 0, then after each gradient step validate every
`validate_every` steps (keeping the best policy) and checkpoint every `checkpoint_every` steps,
logging every row to log.csv and TensorBoard (`RunLog`). A killed run resumes from its last
checkpoint and continues exactly as the uninterrupted run would, provided each step seeds
everything random from (seed, step), which the loops do. `RunConfig` is the config section that
says all this for any trainer. Whatever may take seconds before or between the steps (a dataset
build, reference runs, validations) is announced to a `Phase`, which the CLI shows; `smoke`
shrinks any trainer's config to a run of seconds.
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

import numpy as np

from graphopt.configs import FieldError, read_config
from graphopt.datasets import DEFAULT_CONFIG, MANIFEST, Dataset, DatasetConfig, build_dataset
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph, read_json
from graphopt.learning.formats import (
    CheckpointError,
    json_field,
)
from graphopt.learning.run_dir import TrainingError, check_run_dir

Config = TypeVar("Config")
Network = TypeVar("Network")

Row = dict[str, float]
"""One log row: `step` and named scalars."""

Phase = Callable[[str, int], Callable[[int], None]]
"""Announces a phase of a run that may take seconds: what it does and how many items it counts
(0: none); returns the call that says how many of them are done (`progress.Phases.phase`)."""


def unwatched(what: str, total: int) -> Callable[[int], None]:
    """The `Phase` of a run that nobody watches."""
    return lambda done: None


SMOKE_PREFIX = "smoke:"
"""A `dataset` that names a dataset config to build shrunk (`smoke_dataset`), for `smoke` runs."""


def resolve_dataset(spec: str, run_dir: Path, phase: Phase = unwatched) -> Path:
    """The built dataset a config names, building it into run_dir/dataset when needed."""
    smoke = spec.startswith(SMOKE_PREFIX)
    spec = spec.removeprefix(SMOKE_PREFIX)
    path = Path(spec)
    if (path / MANIFEST).is_file() and not smoke:
        return path
    built = run_dir / "dataset"
    if (built / MANIFEST).is_file():
        return built
    if path.is_file():
        config = DatasetConfig.from_json(path)
    else:
        shipped = DEFAULT_CONFIG.parent / f"{spec}.json"
        if not shipped.is_file():
            raise TrainingError(
                f"dataset {spec!r} is neither a built dataset, a dataset config file, nor a "
                "shipped dataset config name"
            )
        config = DatasetConfig.from_json(shipped)
    if smoke:
        config = smoke_dataset(config)
    phase(f"building dataset {config.name} in {built}", 0)
    build_dataset(config, built, progress=True)
    return built


SMOKE_OPS = 30
"""The size of a smoke dataset's synthetic graphs (a family's smallest, when smaller)."""


def smoke_dataset(config: DatasetConfig) -> DatasetConfig:
    """`config` shrunk to a few small topologies with one noisy copy each, built in seconds.

    One run of its split rule (3-1-1: five topologies), so that every split gets its share:
    its synthetic families at `SMOKE_OPS` ops, as many of each as that takes; zoo models
    (whose exports take seconds each) only when it has no synthetic family, and graph files
    only when it has neither.
    """
    topologies = sum(config.split)
    synthetic = tuple(
        replace(
            source,
            sizes=(min(*source.sizes, SMOKE_OPS),),
            count=math.ceil(topologies / len(config.synthetic)),
        )
        for source in config.synthetic
    )
    zoo = () if synthetic else config.zoo[:topologies]
    return replace(
        config,
        name=f"{config.name}-smoke",
        copies=min(config.copies, 1),
        synthetic=synthetic,
        zoo=zoo,
        files=() if synthetic or zoo else config.files,
    )


SMOKE_STEPS = 1
"""Steps of a smoke run (`smoke`)."""
SMOKE_VALIDATION_GRAPHS = 2
"""Validation graphs of a smoke run."""


def smoke(config: Config) -> Config:
    """Any trainer's `config` shrunk to a run of seconds that still does everything a run does.

    `SMOKE_STEPS` steps, validated and checkpointed at the end, on `SMOKE_VALIDATION_GRAPHS`
    validation graphs and at most one worker; a dataset the config would build is built shrunk
    (`smoke_dataset`), while a built dataset or graph files are used as they are. The other
    sections are the trainer's and stay, so the run exercises the config itself.
    """
    run = config.run
    steps = min(run.steps, SMOKE_STEPS)
    dataset = config.dataset
    if not (
        dataset.startswith((GRAPH_PREFIX, SMOKE_PREFIX)) or (Path(dataset) / MANIFEST).is_file()
    ):
        dataset = SMOKE_PREFIX + dataset
    return replace(
        config,
        name=f"{config.name}-smoke",
        dataset=dataset,
        run=replace(
            run,
            steps=steps,
            validate_every=min(run.validate_every, steps),
            checkpoint_every=min(run.checkpoint_every, steps),
            workers=min(run.workers, 1),
            validation_graphs=min(run.validation_graphs, SMOKE_VALIDATION_GRAPHS),
        ),
    )


def open_run(run_dir: str | Path, resume: bool) -> tuple[Path, Path]:
    """The run directory (created) and its last.pt, once `check_run_dir` allows the run there.

    Raises:
        TrainingError: when `run_dir` holds a run and `resume` is off, or none and it is on.
    """
    last = check_run_dir(run_dir, resume)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    return Path(run_dir), last


def write_config(run_dir: Path, config: Any) -> None:
    """config.json: the run's config dataclass as JSON (after a resume has accepted it)."""
    (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=2) + "\n")


def training_graphs(
    spec: str, run_dir: Path, run: RunConfig, phase: Phase = unwatched
) -> tuple[Path, np.ndarray, np.ndarray]:
    """(dataset, training ids, validation ids) of a run: `resolve_dataset`, then `select_graphs`."""
    dataset = resolve_dataset(spec, run_dir, phase)
    train_ids, valid_ids = select_graphs(dataset, run.max_train_ops, run.validation_graphs)
    return dataset, train_ids, valid_ids


RESUMABLE = ("run.steps", "run.workers")
"""The fields a resumed run may change (by their paths): they change nothing already done."""

NEVER_TRAINED = (
    "sampling.inference_sigma",
    "sampling.inference_logit_temperature",
    "sampling.inference_locality",
)
"""Fields training never reads (how a trained GFlowNet samples by default, set after training
from its validation graphs): a resumed run may change them too, and they are not named."""


def check_resumable(path: Path, stored: Any, current: Any) -> None:
    """Refuses to resume the run of checkpoint `path` (config `stored`) with another config.

    Raises:
        TrainingError: naming, by path, every field that differs besides `RESUMABLE` and
            `NEVER_TRAINED`.
    """
    before, now = _leaves(asdict(stored)), _leaves(asdict(current))
    free = (*RESUMABLE, *NEVER_TRAINED)
    differs = sorted(k for k in now if k not in free and before.get(k) != now[k])
    if differs:
        raise TrainingError(
            f"{path} was trained with another config ({', '.join(differs)} differ); resume "
            f"with the same config (only {' and '.join(RESUMABLE)} may change)"
        )


def _leaves(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config dict's values by dotted path."""
    leaves: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            leaves.update(_leaves(value, f"{prefix}{key}."))
        else:
            leaves[prefix + key] = value
    return leaves


def select_graphs(
    dataset: Path, max_train_ops: int | None, validation_graphs: int
) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation graph indices of a built dataset.

    Training graphs are those of at most `max_train_ops` ops (None keeps all); validation
    graphs are `validation_graphs` of those within the same limit, spread evenly.
    """
    train_counts = Dataset.open(dataset, "train").op_counts
    limit = max_train_ops or int(train_counts.max(initial=0))
    train_ids = np.flatnonzero(train_counts <= limit)
    valid_counts = Dataset.open(dataset, "valid").op_counts
    valid_all = np.flatnonzero(valid_counts <= limit)
    if train_ids.size == 0 or valid_all.size == 0:
        raise TrainingError(f"{dataset} has no training or validation graph of at most {limit} ops")
    return train_ids, spread(valid_all, validation_graphs)


def spread(ids: np.ndarray, count: int) -> np.ndarray:
    """`count` of `ids` spread evenly over them, ends included (all of them when fewer)."""
    return ids[np.unique(np.linspace(0, ids.size - 1, count).astype(int))]


def check_finite(step: int, **values: float) -> None:
    """Stops training on a non-finite value, before it reaches the weights or a checkpoint."""
    for name, value in values.items():
        if not math.isfinite(value):
            raise TrainingError(
                f"step {step + 1}: non-finite {name.replace('_', ' ')} ({value}); training "
                "stopped and the last checkpoint was left as it was"
            )


@dataclass
class RunState:
    """What a checkpoint restores besides the weights and the optimizer."""

    step: int = 0
    best_validation: float = -math.inf
    best_step: int = -1
    seconds: float = 0.0
    history: list[Row] = field(default_factory=list)


class RunLog:
    """A run's log rows as TensorBoard scalars (at once) and as log.csv (at checkpoints).

    Args:
        run_dir: the run's directory (tensorboard/ and log.csv go there).
        columns: every name a row may use, in the CSV's column order.
        resumed_at: the step of the checkpoint a resumed run continues from, or None: the
            events its killed predecessor logged after that step are hidden.
    """

    def __init__(self, run_dir: Path, columns: Sequence[str], resumed_at: int | None) -> None:
        self.path = run_dir / "log.csv"
        self.columns = columns
        purge = None if resumed_at is None else resumed_at + 1
        from torch.utils.tensorboard import SummaryWriter  # 0.2 s: only a training run pays it

        self.board = SummaryWriter(run_dir / "tensorboard", purge_step=purge)

    def add(self, row: Row) -> None:
        """A row as scalars (training/..., validation/...) at its step."""
        for name, value in row.items():
            if name != "step":
                group, _, short = name.partition("_")
                tag = f"validation/{short}" if group == "validation" else f"training/{name}"
                self.board.add_scalar(tag, value, row["step"])

    def write(self, history: Sequence[Row]) -> None:
        """Rewrites log.csv with every row so far (called with each checkpoint)."""
        with self.path.open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=self.columns, restval="")
            writer.writeheader()
            writer.writerows(history)

    def close(self) -> None:
        """Flushes the TensorBoard events."""
        self.board.close()


@dataclass(frozen=True)
class Cadence:
    """How often a run validates and checkpoints, in gradient steps."""

    steps: int
    validate_every: int
    checkpoint_every: int


CONFIGS = Path(__file__).parent / "configs"
"""Shipped training configs (`graphopt train regal NAME`, `graphopt train gflownet NAME`)."""


def config_path(source: str | Path) -> Path:
    """A training config file: `source` itself, or the shipped config of that name.

    Raises:
        TrainingError: neither exists (the shipped names are listed).
    """
    path = Path(source)
    if path.is_file():
        return path
    shipped = CONFIGS / f"{source}.json"
    if not shipped.is_file():
        names = ", ".join(sorted(p.stem for p in CONFIGS.glob("*.json")))
        raise TrainingError(f"no training config file {source} (shipped: {names})")
    return shipped


@dataclass(frozen=True)
class RunConfig:
    """How long a run trains, on which graphs, how often it validates and saves, and its seed.

    Nothing here depends on what is trained, so every trainer's config has this section.

    Attributes:
        steps: gradient steps.
        validate_every: steps between validations.
        checkpoint_every: steps between checkpoints.
        seed: seeds the network's initialization and every step.
        workers: rollout worker processes (0: rollouts in this process).
        max_train_ops: leave out training graphs with more ops (None: keep all).
        validation_graphs: validation graphs scored, spread evenly over the split.
    """

    steps: int = 2000
    validate_every: int = 100
    checkpoint_every: int = 25
    seed: int = 0
    workers: int = 2
    max_train_ops: int | None = None
    validation_graphs: int = 64

    def __post_init__(self) -> None:
        for name in ("steps", "validate_every", "checkpoint_every", "validation_graphs"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be >= 1, got {getattr(self, name)}")
        for name, low, high in (("workers", 0, 1024), ("seed", 0, 2**63 - 1)):
            if not low <= getattr(self, name) <= high:
                raise FieldError(name, f"must be in [{low}, {high}], got {getattr(self, name)}")

    @property
    def cadence(self) -> Cadence:
        """What `run_steps` repeats."""
        return Cadence(self.steps, self.validate_every, self.checkpoint_every)


def run_steps(
    state: RunState,
    cadence: Cadence,
    step: Callable[[int], Row],
    validate: Callable[[int], Row],
    save_best: Callable[[RunState], None],
    save_last: Callable[[RunState], None],
    log: RunLog,
    progress: Callable[[Row], None] | None = None,
    phase: Phase = unwatched,
) -> RunState:
    """The training cadence, from `state` (a fresh or a restored run) to `cadence.steps`.

    Args:
        state: the run so far; updated in place and returned.
        cadence: steps, and how often to validate and checkpoint.
        step: one gradient step from step number s (0-based); returns its log row.
        validate: the validation row at step number s (its `validation_reward` is compared
            with the best so far).
        save_best: writes the best policy (after a validation that improved on the best).
        save_last: writes the resumable checkpoint.
        log: the run's log.
        progress: called with every logged row.
        phase: announces each validation, which may take longer than many steps.
    """
    if state.step == 0:
        phase("validating the policy at step 0", 0)
        row = validate(0)
        state.history.append(row)
        log.add(row)
        state.best_validation, state.best_step = row["validation_reward"], 0
        save_best(state)
        if progress is not None:
            progress(row)
    clock = time.perf_counter() - state.seconds
    while state.step < cadence.steps:
        row = step(state.step)
        state.step += 1
        if state.step % cadence.validate_every == 0 or state.step == cadence.steps:
            phase(f"validating at step {state.step}", 0)
            row.update(validate(state.step))
            if row["validation_reward"] > state.best_validation:
                state.best_validation, state.best_step = row["validation_reward"], state.step
                save_best(state)
        state.seconds = time.perf_counter() - clock
        row["seconds"] = state.seconds
        state.history.append(row)
        log.add(row)
        if state.step % cadence.checkpoint_every == 0 or state.step == cadence.steps:
            save_last(state)
            log.write(state.history)
        if progress is not None:
            progress(row)
    return state


def stored_configs(
    record: dict[str, Any],
    path: str | Path,
    parse: Callable[[Any], Config],
    network_config: type[Network],
) -> tuple[Config, Network]:
    """A checkpoint's training config and network config, each error naming the file and field.

    Args:
        record: the checkpoint's fields (`saving.read_checkpoint`).
        path: the file, for messages.
        parse: the system's training config reader (`TrainConfig.from_dict`).
        network_config: the system's network config dataclass.
    """
    try:
        trained = parse(json_field(record["train_config"], f"{path}: train_config"))
    except TrainingError as error:
        raise CheckpointError(f"{path}: train_config: {error}") from None
    try:
        data = json.loads(record["policy_config"])
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: policy_config: must be JSON text ({error})") from None
    return trained, read_config(network_config, data, "policy_config", CheckpointError)


def load_config(cls: type[Config], source: str | Path, what: str) -> Config:
    """A trainer's config from a JSON file or a shipped config name, each error naming the file.

    Args:
        cls: the config dataclass.
        source: a file, or the name of a shipped config (`config_path`).
        what: how messages name it ('GDP training config').
    """
    path = config_path(source)
    try:
        return read_config(cls, read_json(path, TrainingError), what, TrainingError)
    except TrainingError as error:
        raise TrainingError(f"{path}: {error}") from None


class TrainingConfig:
    """How every trainer's config dataclass reads itself: `from_dict` and `load`.

    Attributes:
        what: how messages name the config ('GDP training config').
    """

    what: ClassVar[str] = "training config"

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """A config from a JSON object; unknown fields and wrong types are refused, named."""
        return read_config(cls, data, cls.what, TrainingError)

    @classmethod
    def load(cls, source: str | Path) -> Self:
        """A config from a JSON file, or the shipped config of that name."""
        return load_config(cls, source, cls.what)


GRAPH_PREFIX = "graph:"
"""A `dataset` naming graph files, comma-separated, instead of a built dataset."""


def graph_files(spec: str) -> list[Graph]:
    """The graphs of a `graph:PATH[,PATH...]` dataset, read and checked."""
    paths = [path.strip() for path in spec.removeprefix(GRAPH_PREFIX).split(",")]
    if not all(paths):
        raise TrainingError(f"dataset {spec!r}: an empty graph path (a stray comma?)")
    return [read_graph(path) for path in paths]
