"""Whether a run directory may start or continue a run, checked without importing torch or numba.

`graphopt train ... --resume` on a directory that holds no run is refused before the seconds
of imports a run begins with, and a new run never overwrites one; every trainer opens its
directory through `runs.open_run`, which applies the same check.
"""

from __future__ import annotations

from pathlib import Path

from graphopt.errors import GraphoptError

LAST = "last.pt"
"""A run's resumable checkpoint: a directory holds a run when it has one."""


class TrainingError(GraphoptError):
    """Training cannot go on: a bad config, a clash with an existing run, or a non-finite value."""


def check_run_dir(run_dir: str | Path, resume: bool) -> Path:
    """The last.pt of `run_dir`, after checking that a run may start there or continue there.

    Raises:
        TrainingError: `run_dir` holds a run and `resume` is off, or holds none and it is on.
    """
    last = Path(run_dir) / LAST
    if resume and not last.exists():
        raise TrainingError(
            f"{run_dir}: no run to resume (no {LAST}); start a new run there without --resume"
        )
    if last.exists() and not resume:
        raise TrainingError(f"{run_dir} already holds a run; resume it or choose another directory")
    return last
