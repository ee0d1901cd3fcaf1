"""GO's multi-task policy as a solver (paper 002): placement, scheduling and fusion in one pass.

The policy decides every op's device, scheduling level and (when the problem may fuse, `optimize
--fusion search`) fusion level; GO's decoder (`go_decoder`) turns them into a contract solution and
the scorer scores it. The solver offers, one evaluation each: the partition hint (the placement
fastest once fused, `GOEnv.step`) with critical-path order and every fusable op fused, then with
the compiler's order and fusion (so it never returns worse than its start), the policy's most
likely decisions (zero-shot), with `finetune` > 0 every sample of that many PPO steps on this graph
alone and the most likely decisions again, then `samples` samples. The tracker keeps the best.
Pinned ops keep their pins in every solution scored, fine-tuning's included. A policy without a
fusion head (mode without 'fu') on a problem that searches fusion is refused naming both; on a
graph without fusion classes the fusion head has nothing to decide, and the solution says fusion
was skipped. Without a `policy`, the shipped one (`graphopt/policies/go-makespan.pt`) is used.
With `search` (the registry's `go`; `go-policy` is the policy alone), `auto`'s search, fusion
included, then spends the rest of the budget from the policy's best distinct solutions, as GDP's
does (`learning.seeding`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from graphopt.learning.seeding import Elite
from graphopt.learning.systems.gdp.solver import GDP, SEARCH_SAMPLES, GDPSolverConfig
from graphopt.learning.systems.go.config import GO_FORMAT, MODES, TASKS, GOConfig, GOTrainConfig
from graphopt.learning.systems.go.env import (
    GOEnv,
    GOGraphs,
    most_likely_actions,
    sample_actions,
    stage_behaviour,
)
from graphopt.learning.systems.go.network import Behaviour, GOPolicy
from graphopt.solvers.base import Problem, Rng, SolverError, Tracker
from graphopt.solvers.go_baselines import offer_decoded


@dataclass(frozen=True)
class GOSolverConfig(GDPSolverConfig):
    """How the trained policy is used: GDP's options (`GDPSolverConfig`) and two of GO's.

    Attributes:
        mode: the mode the caller expects the checkpoint to have (None: whatever it has).
        compiler_fusion: on a problem that fuses, let a policy without a fusion head keep the
            compiler's default fusion (GO fig. 6's modes without 'fu') instead of refusing.
        explore: with `finetune`, search locally (`go.train.CentredGOTrainer`): sample around
            the best decisions so far, changing about this many decisions per task. None: sample
            the policy's own priors, as GO's paper does.
        learn: take PPO's updates while fine-tuning; False runs the same search on the
            unchanging network (the control for what learning adds).
    """

    mode: str | None = None
    compiler_fusion: bool = False
    explore: float | None = 1.0
    learn: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode is not None and self.mode not in MODES:
            raise SolverError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.explore is not None and not 0 < self.explore <= 1e6:
            raise SolverError(f"explore must be in (0, 1e6] decisions, got {self.explore}")


class GO(GDP):
    """Placement, order and fusion from a trained GO policy, zero-shot or fine-tuned.

    Args:
        config: the checkpoint, fine-tuning steps, samples and expected mode.
    """

    name = "go"
    system = "go"
    network = GOPolicy
    network_config = GOConfig
    trained_config = GOTrainConfig
    form = GO_FORMAT
    places_only = False
    config: GOSolverConfig

    def __init__(self, config: GOSolverConfig | None = None) -> None:
        self.config = config or GOSolverConfig()

    def _check(self, path: str, config: GOConfig, problem: Problem) -> None:
        """Refuses another mode than requested, or fusion without a fusion head, naming both."""
        if self.config.mode is not None and self.config.mode != config.mode:
            raise SolverError(
                f"{path} is a {config.mode!r} policy; the request asks for mode "
                f"{self.config.mode!r}"
            )
        if problem.fusion and "fusion" not in config.tasks and not self.config.compiler_fusion:
            raise SolverError(
                f"{path} is a {config.mode!r} policy without a fusion head; --fusion search "
                "needs one (a mode with 'fu'), or fuse after it with --fusion default"
            )
        n_devices = problem.machine.n_devices
        if n_devices > config.max_devices:
            raise SolverError(
                f"{path} places onto 1..{config.max_devices} devices, the machine has {n_devices}"
            )

    def _offer_policy(self, problem: Problem, tracker: Tracker, rng: Rng, elite: Elite) -> None:
        """Fine-tunes (if asked), then offers the start, the most likely and sampled decisions."""
        graph, machine = problem.graph, problem.machine
        policy, trained = self._checkpoint(problem, rng)
        fusing = bool(problem.fusion)
        graphs = GOGraphs(
            {"train": [graph]},
            machine,
            policy.hint_strength is not None,
            policy.go.levels,
            "default" if fusing else "none",
            fusion_levels=fusing,
            pinned=problem.pinned,
            hint_fusion=policy.go.places_fused,
        )
        task = graphs.get("train", 0)
        env = task.env
        assert isinstance(env, GOEnv)
        decides = [t for t in policy.go.tasks if t != "fusion" or fusing]
        if fusing and not env.fusable.any():
            tracker.note(
                f"fusion skipped: no op of graph '{graph.name}' has a fusion class (op field "
                "'fusion') with a 'kernel'; placement and scheduling decided"
            )

        def undecided(actions: np.ndarray, tasks: Sequence[str] = decides) -> np.ndarray:
            """A copy of actions [S, 3, n] with the tasks not in `tasks` at -1."""
            actions = np.array(actions)
            for slot, task_name in enumerate(TASKS):
                if task_name not in tasks:
                    actions[:, slot] = -1
            return actions

        def offer(actions: np.ndarray) -> None:
            """Offers actions [S, 3, n] (undecided tasks -1), pinned by `env`, as many as fit."""
            actions = undecided(actions[: tracker.remaining])
            if len(actions):
                decoded = env.decode(actions)
                elite.add_decoded(decoded, fusing)
                offer_decoded(problem, tracker, decoded, fusing)

        placement = env.fixed_placement if task.hint is None else task.hint.numpy()
        start = undecided(env.default_actions(placement[None]))
        offer(start)  # the hint (or the expert placement), critical path, fuse what may
        compiler = start.copy()
        compiler[:, 1:] = -1
        offer(compiler)  # the same placement with the compiler's order and fusion
        likely = most_likely_actions(policy, task)
        offer(likely[None])
        behaviour: dict[str, Behaviour] = dict.fromkeys(decides, "sample")
        centre = None
        if self.config.finetune:
            from graphopt.learning.systems.go.finetune import fine_tune

            opening = stage_behaviour(policy.go, 0, self.config.finetune)
            candidates = undecided(
                np.concatenate([start, likely[None]]), [t for t in decides if t in opening]
            )
            tuner = fine_tune(
                policy, graphs, trained, self.config.finetune, rng, offer, candidates,
                self.config.explore, self.config.learn,
            )  # fmt: skip
            centre = tuner.centre
            last = {t: b for t, b in tuner.behaviour.items() if t in decides}
            if "sample" in last.values():  # the last stage's, as a '|' mode decides alone
                behaviour = last
            offer(most_likely_actions(policy, task)[None])
        if self.config.samples:
            generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
            sampled, _ = sample_actions(
                policy, task, self.config.samples, generator, behaviour, centre
            )
            offer(sampled)


class GOAlone(GO):
    """GO's policy alone, no search after it: paper 002's decisions, and `go`'s ablation."""

    name = "go-policy"

    def __init__(self, config: GOSolverConfig | None = None) -> None:
        super().__init__(replace(config or GOSolverConfig(), search=False))


def go(policy: str | None = None, finetune: int = 0) -> GO:
    """GO with the checkpoint at `policy` (None: the shipped one), then `auto`'s search."""
    return GO(GOSolverConfig(policy=policy, finetune=finetune, samples=SEARCH_SAMPLES))


def go_policy(policy: str | None = None, finetune: int = 0) -> GOAlone:
    """GO's policy alone with the checkpoint at `policy` (None: the shipped one)."""
    return GOAlone(GOSolverConfig(policy=policy, finetune=finetune))
