"""One training skeleton for every learned system: `train(system, config, run_dir, resume)`.

The skeleton owns what every run does alike: the run directory (refusing to overwrite a run or to
resume none), the seed, the network and Adam, restoring last.pt, config.json, the log, the step
loop with its validation and checkpoint cadence (`runs.run_steps`), best.pt and last.pt, and
closing the workers. A system says only what is its own (`System`): its network, its graphs and
workers, one training step, one validation, and what its checkpoints record (`fields`; the
convention, one writer and one reader for all, is `records.py`). Everything random
in step s is seeded by (run.seed, s) inside the system's step, so a resumed run continues
exactly as the uninterrupted one.

Systems are found by name (`SYSTEMS`, module paths imported on demand, like the solver
registry's), so the platform imports no system and `graphopt train NAME` needs no table of its
own.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from graphopt.learning.formats import CheckpointError, CheckpointFormat
from graphopt.learning.records import RunCheckpoint, policy_record, read_run, run_fields
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import (
    Phase,
    Row,
    RunLog,
    RunState,
    check_resumable,
    open_run,
    run_steps,
    unwatched,
    write_config,
)
from graphopt.learning.saving import load_adam, load_weights, save_checkpoint
from graphopt.learning.threads import one_torch_thread


def nothing() -> None:
    """A session with nothing to close."""


@dataclass
class Session:
    """One run's system-side state, made by `System.start` once the run is set up.

    Attributes:
        step: one gradient step from step number s (0-based); returns its log row.
        validate: the validation row at step number s (with its `validation_reward`).
        close: releases what the session holds (worker processes, a Ray connection).
    """

    step: Callable[[int], Row]
    validate: Callable[[int], Row]
    close: Callable[[], None] = field(default=nothing)


@dataclass(frozen=True)
class Run:
    """What a system starts a run from.

    Attributes:
        config: the run's training config.
        network: the network (restored on resume).
        optimizer: Adam over it (restored on resume).
        run_dir: the run's directory.
        phase: announces what takes seconds besides the steps.
        ray_address: the Ray cluster to roll out on ('local': in-process), or None.
    """

    config: Any
    network: torch.nn.Module
    optimizer: torch.optim.Optimizer
    run_dir: Path
    phase: Phase
    ray_address: str | None


class System(ABC):
    """What one learned system adds to the skeleton.

    Attributes:
        name: how `graphopt train` and `SYSTEMS` name it.
        form: its checkpoints' format.
        log_columns: every name a log row may use, in log.csv's column order.
        config_class: its training config (`from_dict` and `load`, `runs.TrainingConfig`).
    """

    name: str
    form: CheckpointFormat
    log_columns: Sequence[str]
    config_class: Any

    def parse(self, data: Any) -> Any:
        """A training config from a JSON object."""
        return self.config_class.from_dict(data)

    def load(self, source: str | Path) -> Any:
        """A training config from a JSON file or a shipped config name."""
        return self.config_class.load(source)

    @abstractmethod
    def network(self, config: Any) -> torch.nn.Module:
        """The untrained network of a run's config (built right after seeding)."""

    @abstractmethod
    def start(self, run: Run) -> Session:
        """The run's graphs and workers, ready to step (closing what it opened if it fails)."""

    def updates_per_step(self, config: Any) -> int:
        """Optimizer steps per training step (bounds Adam's step count on resume)."""
        return 1

    def fields(self, config: Any) -> dict[str, Any]:
        """What this system's checkpoints record besides the weights (`records.py`)."""
        return {}

    def policy_facts(self, config: Any, state: RunState) -> dict[str, Any]:
        """What best.pt says of the run that made it (`formats.POLICY_FACTS`)."""
        return {
            "train_config": json.dumps(asdict(config)),
            "step": state.step,
            "best_validation": state.best_validation,
            "best_step": state.best_step,
        }

    def save(
        self,
        path: Path,
        network: torch.nn.Module,
        optimizer: torch.optim.Optimizer | None,
        config: Any,
        state: RunState,
    ) -> None:
        """Writes best.pt (no optimizer: the policy) or last.pt (resumable)."""
        record = policy_record(self.form, self.fields(config), network)
        if optimizer is None:
            record.update(self.policy_facts(config, state))
        else:
            record.update(run_fields(config, optimizer, state))
        save_checkpoint(path, record)

    def load_run_weights(self, run: RunCheckpoint, config: Any, network: torch.nn.Module) -> None:
        """Loads last.pt's weights into the run's network, once they are checked to fit it."""
        weights = run.record["model_state"]
        load_weights(network, weights, f"{run.path}: model_state")

    def restore(
        self,
        path: Path,
        config: Any,
        network: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
    ) -> RunState:
        """The run state of last.pt, with the weights and Adam's state loaded into the run's.

        Raises:
            CheckpointError: a malformed last.pt, or one whose weights or Adam's state do not
                fit the run.
            TrainingError: a last.pt trained with another config (`runs.check_resumable`).
        """
        run = read_run(path, self.form, self.log_columns)
        try:
            stored = self.parse(run.train_config)
        except TrainingError as error:
            raise CheckpointError(f"{path}: train_config: {error}") from None
        check_resumable(path, stored, config)
        self.load_run_weights(run, config, network)
        steps = run.state.step * self.updates_per_step(config)
        load_adam(optimizer, run.record["optimizer_state"], steps, config.optimizer.grad_clip, path)
        return run.state


SYSTEMS = {
    "regal": "graphopt.learning.systems.regal.train",
    "gflownet": "graphopt.learning.systems.gflownet.train",
    "gdp": "graphopt.learning.systems.gdp.train",
    "go": "graphopt.learning.systems.go.train",
}
"""The systems trained offline, by name -> the module whose `SYSTEM` it is (imported on demand).
HDP is not here: it has no pre-training, every solve trains it from scratch."""


def find_system(name: str) -> System:
    """The system called `name` (`SYSTEMS`)."""
    found = importlib.import_module(SYSTEMS[name]).SYSTEM
    assert isinstance(found, System)
    return found


def train(
    system: System | str,
    config: Any,
    run_dir: str | Path,
    resume: bool = False,
    progress: Callable[[Row], None] | None = None,
    ray_address: str | None = None,
    phase: Phase = unwatched,
) -> RunState:
    """Trains `system` as `config` says, writing checkpoints and logs into `run_dir`.

    Files: config.json, log.csv, tensorboard/, last.pt (resumable), best.pt (the policy with the
    best validation; step 0 is the untrained start, which a trained policy must beat), and what
    the system adds. Rollouts or scoring run in `run.workers` processes, or on the Ray cluster
    at `ray_address` ('local': in-process), for the systems that use workers; the run is the
    same. `progress` gets every logged row, `phase` what takes seconds besides the steps. The
    steps and validations run on one torch thread (`one_torch_thread`): beside another job, two
    threads made a GFlowNet step 20-50x slower on 2 cores (0.1-0.9 s against 3-10 s).

    Raises:
        TrainingError: an existing run without `resume` (or `resume` without one), a resumed
            run with another config, or non-finite values (the last good checkpoint is kept).
    """
    chosen = find_system(system) if isinstance(system, str) else system
    run_dir, last = open_run(run_dir, resume)
    torch.manual_seed(config.run.seed)
    network = chosen.network(config)
    optimizer = config.optimizer.optimizer(network.parameters())
    state = chosen.restore(last, config, network, optimizer) if resume else RunState()
    write_config(run_dir, config)
    log = RunLog(run_dir, chosen.log_columns, state.step if resume else None)
    try:
        session = chosen.start(Run(config, network, optimizer, run_dir, phase, ray_address))
        try:
            with one_torch_thread():
                return run_steps(
                    state,
                    config.run.cadence,
                    session.step,
                    session.validate,
                    lambda state: chosen.save(run_dir / "best.pt", network, None, config, state),
                    lambda state: chosen.save(last, network, optimizer, config, state),
                    log,
                    progress,
                    phase,
                )
        finally:
            session.close()
    finally:
        log.close()
