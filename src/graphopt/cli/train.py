"""The `train` commands: learned optimizers, with torch imported only when one runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from graphopt.cli.common import user_errors
from graphopt.progress import progress_bar

app = typer.Typer(
    help="Train learned optimizers (checkpoints resume exactly).", no_args_is_help=True
)


@app.command("regal")
@user_errors
def train_regal(
    config: Annotated[
        str,
        typer.Argument(
            help="Training config JSON, or a shipped config name (regal-peak-memory, ...)."
        ),
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Run directory (checkpoints, log.csv, tensorboard/)."),
    ],
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in OUTPUT from last.pt.")
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(help="Run rollouts on the Ray cluster at this address ('local': in-process)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Rollout workers (0: in this process) (default: the config's)."),
    ] = None,
    steps: Annotated[
        int | None, typer.Option(help="Gradient steps (default: the config's).")
    ] = None,
) -> None:
    """Train a REGAL (or GAS, IDRS) policy with REINFORCE; best.pt is the trained policy."""
    import dataclasses

    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from graphopt.learning.train_regal import TrainConfig, train

    settings = TrainConfig.load(config)
    overrides = {k: v for k, v in (("workers", workers), ("steps", steps)) if v is not None}
    settings = dataclasses.replace(settings, run=dataclasses.replace(settings.run, **overrides))
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
    ]
    with progress_bar(*columns, TimeElapsedColumn()) as bar:
        task = bar.add_task(f"train {settings.name}", total=settings.run.steps, info="preparing")
        validation = [""]

        def progress(row: dict[str, float]) -> None:
            if "validation_reward" in row:
                validation[0] = f", validation {row['validation_improvement_pct']:+.2f}%"
            reward = f"reward {row['reward']:.4f}" if "reward" in row else "validated"
            info = f"{reward}{validation[0]}"
            bar.update(task, completed=row["step"], info=info)

        state = train(settings, output, resume=resume, ray_address=ray, progress=progress)
    typer.echo(
        f"trained {state.step} steps in {state.seconds:.0f} s; best validation reward "
        f"{state.best_validation:.4f} ({100 * (1 + state.best_validation):+.2f}% vs uniform "
        f"BRKGA) at step {state.best_step}; policy: {output / 'best.pt'}"
    )


@app.command("gflownet")
@user_errors
def train_gflownet(
    config: Annotated[Path, typer.Argument(help="GFlowNet training config JSON.")],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Run directory (checkpoints, log.csv, tensorboard/)."),
    ],
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in OUTPUT from last.pt.")
    ] = False,
    steps: Annotated[
        int | None, typer.Option(help="Gradient steps (default: the config's).")
    ] = None,
) -> None:
    """Train a GFlowNet scheduler (paper 004); best.pt is the trained policy."""
    import dataclasses

    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from graphopt.learning.train_gflownet import TrainConfig, train

    settings = TrainConfig.load(config)
    if steps is not None:
        settings = dataclasses.replace(settings, run=dataclasses.replace(settings.run, steps=steps))
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
    ]
    with progress_bar(*columns, TimeElapsedColumn()) as bar:
        task = bar.add_task(f"train {settings.name}", total=settings.run.steps, info="preparing")
        validation = [""]

        def progress(row: dict[str, float]) -> None:
            if "validation_speedup" in row:
                validation[0] = f", validation speedup {row['validation_speedup']:.3f}"
            sampled = f"speedup {row['speedup']:.3f}" if "speedup" in row else "validated"
            bar.update(task, completed=row["step"], info=f"{sampled}{validation[0]}")

        state = train(settings, output, resume=resume, progress=progress)
    typer.echo(
        f"trained {state.step} steps in {state.seconds:.0f} s; best validation speedup "
        f"{state.best_validation:.3f} at step {state.best_step}; policy: {output / 'best.pt'}"
    )
