"""`graphopt warmup` compiles every numba kernel signature the commands use (issue 43).

The slow test is the real check: a warm-up into a fresh numba cache, then the README's commands,
every solver and fusion choice included, must add no file to that cache. The fast tests check
what the warm-up runs against what the CLI accepts, so that a new solver or fusion policy that
the warm-up does not run fails at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphopt import warmup
from graphopt.optimize import FUSION_CHOICES
from graphopt.solvers.registry import FUSION_SEARCHERS, SOLVERS, default_fusion


def planned() -> set[tuple[str, str]]:
    """(solver, fusion) of every run of the warm-up; "none" for a run without `--fusion`."""
    return {
        (name, fusion or "none")
        for name, _, fusion in (run.partition(warmup.FUSION_FLAG) for run in warmup.runs())
    }


def test_every_run_names_a_solver_and_a_fusion_choice() -> None:
    for name, fusion in planned():
        assert name in SOLVERS and fusion in FUSION_CHOICES, (name, fusion)


def test_every_solver_is_warmed() -> None:
    assert {name for name, fusion in planned() if fusion == "none"} == set(SOLVERS)


def test_every_fusion_choice_and_default_is_warmed() -> None:
    fusions = {fusion for _, fusion in planned()}
    assert fusions == set(FUSION_CHOICES)
    searched = {name for name, fusion in planned() if fusion == "search"}
    assert set(FUSION_SEARCHERS) <= searched
    for name in SOLVERS:  # what a solver fuses with when the command names no fusion
        assert (name, default_fusion(name, fusable=True)) in planned()


def signature(kernel: str, n: int) -> str:
    return f"graphopt.module.{kernel} (array(int{n}, 1d, C),)"


def test_overlap_is_by_kernel_not_by_signature() -> None:
    # Two processes compiling different signatures of one function may write the same cache
    # file: that is an overlap; a signature the shared part compiled first is not.
    shared = frozenset({signature("shared", 64)})
    groups = [
        warmup._Part(1, signatures=frozenset({signature("f", 64), signature("shared", 64)})),
        warmup._Part(1, signatures=frozenset({signature("f", 32), signature("shared", 64)})),
        warmup._Part(1, signatures=frozenset({signature("g", 64)})),
    ]
    assert warmup.overlap(groups, shared) == ("graphopt.module.f",)
    assert warmup.overlap(groups[1:], shared | {signature("f", 32)}) == ()


def test_signatures_see_kernels_behind_wrappers() -> None:
    # `ir._algorithms` wraps its numba kernels (compiled on first use): the warm-up's counts
    # must see them, or a part that compiles them reports nothing and no overlap.
    from graphopt.ir.generators import generate

    graph = generate("layered", 12, seed=0)
    graph.reachable_bits(forward=True)
    seen = warmup.signatures("cache_misses") | warmup.signatures("cache_hits")
    assert any(s.startswith("graphopt.ir._algorithms.reachable ") for s in seen)


def cache_files(folder: Path) -> set[Path]:
    """The compiled-code (.nbc) and index (.nbi) files of a numba cache folder."""
    return {*folder.rglob("*.nbc"), *folder.rglob("*.nbi")}


COMMANDS = (
    "info {graph}",
    "optimize {graph} --devices 2 --time 2 -o {out}/s.json",
    "score {graph} {out}/s.json",
    "score {graph} {out}/s.json --devices 4 --capacity 16GiB --mode async --json",
    "score {graph} {out}/s.json --target noisy:0.1",
    "optimize {graph} --objective makespan --devices 4 --latency 1e-5 --bandwidth 2.5e10 "
    "--solver heft -o {out}/o.json",
    "plot {graph} {out}/s.json -o {out}/p.png",
    "compare {graph} {out}/s.json {out}/o.json -o {out}/c.png",
    *(
        f"optimize {{fused}} --objective {objective} --devices {devices} --fusion {fusion} "
        "--time 1 -o {out}/f.json"
        for fusion in ("search", "default", "xla-priority", "greedy", "anneal")
        for objective, devices in (("makespan", 1), ("peak-memory", 2))
    ),
    *(
        f"optimize {{graph}} --objective {objective} --solver {solver} --budget 1000 "
        "-o {out}/o.json"
        for solver in ("regal", "gas", "idrs")
        for objective in ("peak-memory", "makespan")
    ),
    "optimize {small} --objective makespan --devices 4 --solver gflownet --budget 200 "
    "--candidates {out}/top --top-k 10 --target noisy:0.5 -o {out}/o.json",
    "optimize {graph} --objective makespan --devices 4 --solver gdp -o {out}/o.json",
    "optimize {small} --objective makespan --devices 4 --solver gdp --finetune 1 -o {out}/o.json",
    "optimize {fused} --objective makespan --devices 4 --solver go --fusion search -o {out}/o.json",
    "optimize {graph} --objective makespan --devices 4 --solver go -o {out}/o.json",
    "optimize {small} --objective makespan --devices 2 --solver hdp -o {out}/o.json",
    "optimize {fused} --objective makespan --devices 4 --solver compiler-default -o {out}/o.json",
    "optimize {fused} --objective makespan --devices 4 --solver go-anneal --time 1 -o {out}/o.json",
)
"""The README's commands on small graphs with short budgets: every solver and fusion choice.
{graph}: 200 ops; {fused}: 60 ops with fusion classes; {small}: 30 ops; {out}: a folder."""


def commands(**paths: Path) -> list[list[str]]:
    """`COMMANDS` as argument lists, with the paths filled in."""
    return [[part.format(**paths) for part in command.split()] for command in COMMANDS]


@pytest.mark.slow
def test_no_command_compiles_after_a_warmup(tmp_path: Path) -> None:
    cache = tmp_path / "numba-cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}

    def graphopt_command(*args: str | Path) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            [sys.executable, "-m", "graphopt", *map(str, args)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert completed.returncode == 0, (args, completed.stderr)
        return completed

    warmed = graphopt_command("warmup")
    assert "warning" not in warmed.stderr, warmed.stderr  # the parallel groups share no kernel
    compiled = cache_files(cache)
    assert compiled
    graph, fused, small = tmp_path / "g.json", tmp_path / "fused.json", tmp_path / "small.json"
    graphopt_command("generate", "layered", "-n", "200", "-o", graph)
    graphopt_command("generate", "layered", "-n", "60", "-p", "fusion=true", "-o", fused)
    graphopt_command("generate", "layered", "-n", "30", "-o", small)
    for command in commands(graph=graph, fused=fused, small=small, out=tmp_path):
        graphopt_command(*command)
        new = sorted(path.name for path in cache_files(cache) - compiled)
        assert not new, (command, new)
