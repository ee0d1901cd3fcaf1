"""The `train` commands: learned optimizers, with torch imported only when one runs.

Every phase of a run is shown as it begins (`progress.Phases`: a bar on a terminal, a line on
stdout elsewhere): the imports, a dataset build, reference runs, each validation, the steps.
A --resume that has no run to continue is refused before any of them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from graphopt.cli.common import check_output, user_errors
from graphopt.learning.run_dir import check_run_dir
from graphopt.progress import Phases

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
Smoke = Annotated[
    bool,
    typer.Option(
        "--smoke",
        help="Check the config end to end in seconds: 1 step, 2 validation graphs, at most 1 "
        "worker, and a dataset to build shrunk to 5 topologies of 30 ops; a normal run "
        "directory.",
    ),
]


Ray = Annotated[
    str | None,
    typer.Option(help="Run rollouts on the Ray cluster at this address ('local': in-process)."),
]
Workers = Annotated[
    int | None,
    typer.Option(help="Rollout workers (0: in this process) (default: the config's)."),
]


RegalConfig = Annotated[
    str,
    typer.Argument(help="Training config JSON, or a shipped config name (regal-peak-memory, ...)."),
]
PPOConfig = Annotated[
    str,
    typer.Argument(
        help="Training config JSON, or a shipped config name (gdp: train gdp; go: train go)."
    ),
]


def _rollout_command(
    name: str,
    doc: str,
    argument: Any,
    validation_info: Callable[[Row], str],
    summary: Callable[[RunState], str],
) -> None:
    """Adds `train NAME` for a system whose rollouts may run in workers or on Ray.

    REGAL, GDP and GO take the same options; what differs is the config argument's help (set as
    the `config` annotation, which typer reads), a validation's words and the closing summary.
    """

    def command(
        config: str,
        output: Output,
        resume: Resume = False,
        ray: Ray = None,
        workers: Workers = None,
        steps: Steps = None,
        smoke: Smoke = False,
    ) -> None:
        state, trained = _train(
            name,
            config,
            output,
            resume,
            smoke,
            {"workers": workers, "steps": steps},
            {"ray_address": ray},
            lambda row: f"reward {row['reward']:.4f}" if "reward" in row else "validated",
            validation_info,
        )
        typer.echo(f"{trained}; {summary(state)}; policy: {output / 'best.pt'}")

    command.__annotations__["config"] = argument
    app.command(name, help=doc)(user_errors(command))


_rollout_command(
    "regal",
    "Train a REGAL (or GAS, IDRS) policy with REINFORCE; best.pt is the trained policy.",
    RegalConfig,
    lambda row: f"validation {row['validation_improvement_pct']:+.2f}%",
    lambda state: (
        f"best validation reward {state.best_validation:.4f} "
        f"({100 * (1 + state.best_validation):+.2f}% vs uniform BRKGA) at step {state.best_step}"
    ),
)


@app.command("gflownet")
@user_errors
def train_gflownet(
    config: Annotated[
        str,
        typer.Argument(
            help="GFlowNet training config JSON, or a shipped config name (gflownet, gflownet-ppo)."
        ),
    ],
    output: Output,
    resume: Resume = False,
    steps: Steps = None,
    smoke: Smoke = False,
) -> None:
    """Train a GFlowNet scheduler (paper 004); best.pt is the trained policy."""
    state, trained = _train(
        "gflownet",
        config,
        output,
        resume,
        smoke,
        {"steps": steps},
        {},
        lambda row: f"speedup {row['speedup']:.3f}" if "speedup" in row else "validated",
        lambda row: f"validation speedup {row['validation_speedup']:.3f}",
    )
    typer.echo(
        f"{trained}; best validation speedup {state.best_validation:.3f} at step "
        f"{state.best_step}; policy: {output / 'best.pt'}"
    )


def _ppo_summary(state: RunState) -> str:
    """A PPO run's closing words: its best validation reward beside the untrained start's."""
    return (
        f"best validation reward {state.best_validation:.4f} at step {state.best_step} (step 0: "
        f"{state.history[0]['validation_reward']:.4f}, the untrained start)"
    )


_rollout_command(
    "gdp",
    "Train a GDP placement policy with PPO (papers 003, 002); best.pt is the trained policy.\n\n"
    "Sampled placements are scored in --workers processes or on a Ray cluster (--ray).",
    PPOConfig,
    lambda row: f"validation reward {row['validation_reward']:.4f}",
    _ppo_summary,
)
_rollout_command(
    "go",
    "Train a GO multi-task policy (placement, scheduling, fusion) with PPO (paper 002).\n\n"
    "The config's policy.mode says which tasks are decided and how they are trained (GO fig. 6). "
    "Sampled decisions are scored in --workers processes or on a Ray cluster (--ray).",
    PPOConfig,
    lambda row: f"validation reward {row['validation_reward']:.4f}",
    _ppo_summary,
)


def _train(
    name: str,
    config: str,
    output: Path,
    resume: bool,
    smoke: bool,
    run_values: dict[str, int | None],
    options: dict[str, Any],
    step_info: Callable[[Row], str],
    validation_info: Callable[[Row], str],
) -> tuple[RunState, str]:
    """Runs a trainer under `Phases`: its final state and 'trained N steps in S s'.

    Args:
        name: the system (`training.SYSTEMS`).
        config: the config file or shipped name.
        output: the run directory.
        resume: continue the run there.
        smoke: shrink the config (`runs.smoke`) first.
        run_values: `run` fields given on the command line (None: the config's).
        options: what `training.train` takes besides (`ray_address`).
        step_info: a step's row as a few words.
        validation_info: a validation's row as a few words.
    """
    started = time.perf_counter()
    check_output(output, "-o", folder=True)
    check_run_dir(output, resume)
    with Phases(f"train {Path(config).stem}") as phases:
        phases.phase("importing torch and the trainer", 0)
        from graphopt.learning.runs import smoke as shrunk
        from graphopt.learning.training import find_system, train

        system = find_system(name)
        settings = system.load(config)
        settings = _override_run(shrunk(settings) if smoke else settings, **run_values)
        total = settings.run.steps
        validation, first = [""], []

        def progress(row: Row) -> None:
            step = int(row["step"])
            if not first:
                first.append(max(step - 1, 0))
            validated = "validation_reward" in row
            if validated:
                validation[0] = f", {validation_info(row)}"
            info = f"step {step:,}/{total:,}: {step_info(row)}{validation[0]}"
            phases.update(step, total, info)
            phases.line(info, always=validated)

        state = train(
            system, settings, output, resume=resume, progress=progress, phase=phases.phase,
            **options,
        )  # fmt: skip
    begun = first[0] if first else state.step
    steps = state.step - begun
    resumed = f" (steps {begun + 1:,} to {state.step:,})" if begun and steps else ""
    seconds = time.perf_counter() - started
    return state, f"trained {steps:,} step{'' if steps == 1 else 's'}{resumed} in {seconds:.1f} s"


def _override_run(settings: Config, **values: int | None) -> Config:
    """`settings` with the `run` fields given on the command line (None: the config's)."""
    given = {name: value for name, value in values.items() if value is not None}
    return dataclasses.replace(settings, run=dataclasses.replace(settings.run, **given))
