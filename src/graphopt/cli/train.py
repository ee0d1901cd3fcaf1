"""The `train` commands: learned optimizers, with torch imported only when one runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from graphopt.cli.common import user_errors
from graphopt.progress import progress_bar

if TYPE_CHECKING:
    from graphopt.learning.runs import Row, RunState

Config = TypeVar("Config")

app = typer.Typer(
    help="Train learned optimizers (checkpoints resume exactly).", no_args_is_help=True
)

Output = Annotated[
    Path, typer.Option("--output", "-o", help="Run directory (checkpoints, log.csv, tensorboard/).")
]
Resume = Annotated[bool, typer.Option("--resume", help="Continue the run in OUTPUT from last.pt.")]
Steps = Annotated[int | None, typer.Option(help="Gradient steps (default: the config's).")]


Ray = Annotated[
    str | None,
    typer.Option(help="Run rollouts on the Ray cluster at this address ('local': in-process)."),
]
Workers = Annotated[
    int | None,
    typer.Option(help="Rollout workers (0: in this process) (default: the config's)."),
]


@app.command("regal")
@user_errors
def train_regal(
    config: Annotated[
        str,
        typer.Argument(
            help="Training config JSON, or a shipped config name (regal-peak-memory, ...)."
        ),
    ],
    output: Output,
    resume: Resume = False,
    ray: Ray = None,
    workers: Workers = None,
    steps: Steps = None,
) -> None:
    """Train a REGAL (or GAS, IDRS) policy with REINFORCE; best.pt is the trained policy."""
    from graphopt.learning.train_regal import TrainConfig, train

    settings = _override_run(TrainConfig.load(config), workers=workers, steps=steps)
    state = _with_progress(
        f"train {settings.name}",
        settings.run.steps,
        lambda row: f"reward {row['reward']:.4f}" if "reward" in row else "validated",
        lambda row: f"validation {row['validation_improvement_pct']:+.2f}%",
        lambda progress: train(settings, output, resume=resume, ray_address=ray, progress=progress),
    )
    typer.echo(
        f"trained {state.step} steps in {state.seconds:.0f} s; best validation reward "
        f"{state.best_validation:.4f} ({100 * (1 + state.best_validation):+.2f}% vs uniform "
        f"BRKGA) at step {state.best_step}; policy: {output / 'best.pt'}"
    )


@app.command("gflownet")
@user_errors
def train_gflownet(
    config: Annotated[Path, typer.Argument(help="GFlowNet training config JSON.")],
    output: Output,
    resume: Resume = False,
    steps: Steps = None,
) -> None:
    """Train a GFlowNet scheduler (paper 004); best.pt is the trained policy."""
    from graphopt.learning.train_gflownet import TrainConfig, train

    settings = _override_run(TrainConfig.load(config), steps=steps)
    state = _with_progress(
        f"train {settings.name}",
        settings.run.steps,
        lambda row: f"speedup {row['speedup']:.3f}" if "speedup" in row else "validated",
        lambda row: f"validation speedup {row['validation_speedup']:.3f}",
        lambda progress: train(settings, output, resume=resume, progress=progress),
    )
    typer.echo(
        f"trained {state.step} steps in {state.seconds:.0f} s; best validation speedup "
        f"{state.best_validation:.3f} at step {state.best_step}; policy: {output / 'best.pt'}"
    )


@app.command("gdp")
@user_errors
def train_gdp(
    config: Annotated[
        str, typer.Argument(help="GDP training config JSON, or a shipped config name (gdp).")
    ],
    output: Output,
    resume: Resume = False,
    ray: Ray = None,
    workers: Workers = None,
    steps: Steps = None,
) -> None:
    """Train a GDP placement policy with PPO (papers 003, 002); best.pt is the trained policy.

    Sampled placements are scored in --workers processes or on a Ray cluster (--ray).
    """
    from graphopt.learning.train_gdp import TrainConfig, train

    _train_ppo(TrainConfig.load(config), train, output, resume, ray, workers, steps)


@app.command("go")
@user_errors
def train_go(
    config: Annotated[
        str, typer.Argument(help="GO training config JSON, or a shipped config name (go).")
    ],
    output: Output,
    resume: Resume = False,
    ray: Ray = None,
    workers: Workers = None,
    steps: Steps = None,
) -> None:
    """Train a GO multi-task policy (placement, scheduling, fusion) with PPO (paper 002).

    The config's policy.mode says which tasks are decided and how they are trained (GO fig. 6).
    Sampled decisions are scored in --workers processes or on a Ray cluster (--ray).
    """
    from graphopt.learning.train_go import GOTrainConfig, train

    _train_ppo(GOTrainConfig.load(config), train, output, resume, ray, workers, steps)


def _train_ppo(
    config: Any,
    train: Callable[..., RunState],
    output: Path,
    resume: bool,
    ray: str | None,
    workers: int | None,
    steps: int | None,
) -> None:
    """`train gdp` and `train go`: a PPO run under a progress bar, then its best validation."""
    settings = _override_run(config, workers=workers, steps=steps)
    state = _with_progress(
        f"train {settings.name}",
        settings.run.steps,
        lambda row: f"reward {row['reward']:.4f}" if "reward" in row else "validated",
        lambda row: f"validation reward {row['validation_reward']:.4f}",
        lambda progress: train(settings, output, resume=resume, progress=progress, ray_address=ray),
    )
    typer.echo(
        f"trained {state.step} steps in {state.seconds:.0f} s; best validation reward "
        f"{state.best_validation:.4f} at step {state.best_step} (step 0: "
        f"{state.history[0]['validation_reward']:.4f}, the untrained start); policy: "
        f"{output / 'best.pt'}"
    )


def _with_progress(
    title: str,
    steps: int,
    step_info: Callable[[Row], str],
    validation_info: Callable[[Row], str],
    run: Callable[[Callable[[Row], None]], RunState],
) -> RunState:
    """Runs a training loop under a progress bar with each step's and the last validation's info."""
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
    ]
    with progress_bar(*columns, TimeElapsedColumn()) as bar:
        task = bar.add_task(title, total=steps, info="preparing")
        validation = [""]

        def progress(row: Row) -> None:
            if "validation_reward" in row:
                validation[0] = f", {validation_info(row)}"
            bar.update(task, completed=row["step"], info=f"{step_info(row)}{validation[0]}")

        return run(progress)


def _override_run(settings: Config, **values: int | None) -> Config:
    """`settings` with the `run` fields given on the command line (None: the config's)."""
    given = {name: value for name, value in values.items() if value is not None}
    return dataclasses.replace(settings, run=dataclasses.replace(settings.run, **given))
