"""GO's environment (paper 002 sections 3-5): per-op decisions of three tasks to rewards.

A multi-task policy outputs, per op, a device, a scheduling level and a fusion level
(`go.network.Acted.actions`, [S, 3, n], -1 where a task is not decided). `go_decoder.decode`
turns them into one contract solution each: GO's ready queues ordered by the levels (critical
path among equals) and GO's priority fusion decoder on the fusion levels; a task left undecided
takes the compiler's default (the expert placement, `expert.expert_placement`; critical-path
order; the env's `compiler_fusion`). Solutions are scored exactly (docs/format.md sections 5, 6
and 13) and rewarded as GDP's placements are (`PlacementEnv.outcome`): `-sqrt(makespan /
reference)`, with the unfused reference of `PlacementEnv`, or -10 over capacity.

`GOGraphs` builds one environment per graph; `act`, `most_likely_actions` and `sample_actions`
are the policy's decisions on one, for the solver and the trainer alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import torch

from graphopt.costmodels.machine import Machine
from graphopt.ir.graph import Graph
from graphopt.ir.solution import Solution
from graphopt.learning.placement.env import PlacementEnv, PlacementOutcome
from graphopt.learning.systems.gdp.env import Graphs, GraphSource, PlacementTask
from graphopt.learning.systems.go.config import TASKS, GOConfig
from graphopt.learning.systems.go.network import Acted, Behaviour, GOPolicy
from graphopt.solvers.base import SolverError
from graphopt.solvers.expert import expert_placement
from graphopt.solvers.go_decoder import CompilerFusion, Decoded, decode


class GOEnv(PlacementEnv):
    """One graph on one machine: GO's actions in, exact makespans and rewards out.

    Args:
        graph: the graph.
        machine: devices, capacity and transfer model.
        levels: L, the scheduling and fusion levels.
        compiler_fusion: what fuses when no fusion levels are given ('none' or 'default').
        reference: makespan that scores -1 (None: as `PlacementEnv`).
        fusion_levels: whether fusion levels decide the groups; False (a problem that does
            not search fusion): they are ignored and `compiler_fusion` decides.
        pinned: pins every placement scored keeps (`PlacementEnv`'s).
        hint_fusion: whether `step` (what the partition hint ranks its candidates by) fuses
            with the fusion levels' default; False: as the compiler fuses, for a mode that
            places before fusion is searched (`GOConfig.places_fused`).
    """

    def __init__(
        self,
        graph: Graph,
        machine: Machine,
        levels: int = 8,
        compiler_fusion: CompilerFusion = "default",
        reference: float | None = None,
        fusion_levels: bool = True,
        pinned: np.ndarray | None = None,
        hint_fusion: bool = True,
    ) -> None:
        super().__init__(graph, machine, reference=reference, pinned=pinned)
        self.levels = levels
        self.compiler_fusion = compiler_fusion
        self.fusion_levels = fusion_levels
        self.hint_fusion = hint_fusion

    @cached_property
    def fixed_placement(self) -> np.ndarray:
        """[n_ops] the expert placement, used when the placement is not decided."""
        return expert_placement(self.graph, self.n_devices).astype(np.int32)

    @cached_property
    def fusable(self) -> np.ndarray:
        """[n_ops] bool: ops whose fusion level can matter, all False when none can.

        An op's level matters when it has a fusion class, the graph has a kernel and fusion
        levels decide the groups.
        """
        classes = self.graph.op_fusion != 0
        usable = self.fusion_levels and classes.any() and self.graph.kernel is not None
        return classes if usable else np.zeros_like(classes)

    def decode(self, actions: np.ndarray) -> Decoded:
        """The solutions of actions [S, 3, n] (or [3, n]), scored."""
        actions = np.asarray(actions)
        if actions.ndim == 2:
            actions = actions[None]
        if actions.ndim != 3 or actions.shape[1:] != (len(TASKS), self.graph.n_ops):
            raise SolverError(
                f"actions: expected shape [S, {len(TASKS)}, {self.graph.n_ops}], "
                f"got {actions.shape}"
            )
        decided = {}
        for slot, task in enumerate(TASKS):
            values = actions[:, slot]
            off = values < 0
            if off.any() and not off.all():
                raise SolverError(f"actions: the {task} task is decided for some ops only")
            decided[task] = None if off.all() and values.size else values
        if not self.fusion_levels:
            decided["fusion"] = None
        placements = decided["placement"]
        if placements is None:
            placements = np.broadcast_to(self.fixed_placement, (len(actions), self.graph.n_ops))
        return decode(
            self.graph,
            self.machine,
            self.check(placements),
            decided["scheduling"],
            decided["fusion"],
            self.levels,
            self.compiler_fusion,
            self.scorer,
        )

    def score(self, actions: np.ndarray) -> PlacementOutcome:
        """Scores a batch of actions ([S, 3, n] or [3, n])."""
        decoded = self.decode(actions)
        return self.outcome(decoded.peaks, decoded.makespans)

    def step(self, placements: np.ndarray) -> PlacementOutcome:
        """Scores placements ([B, n] or [n]) with the untrained policy's other decisions.

        That is critical-path order and, when fusion levels decide and `hint_fusion`, every op
        in the fusing half (`default_actions`), so that the partition hint (`placement.hint`)
        picks the placement that is fastest once fused: on gpt2-tiny's training graph on 4
        devices the fastest unfused split fused to 0.84 ms where another candidate fuses to
        about 0.36 ms. Without `hint_fusion` the compiler fuses.
        """
        actions = self.default_actions(self.check(placements))
        if not self.hint_fusion:
            actions[:, 2] = -1
        return self.score(actions)

    def default_actions(self, placements: np.ndarray) -> np.ndarray:
        """[B, 3, n] placements with the middle scheduling level and the top fusion level.

        The fusion level is -1 (not decided) when fusion levels do not decide the groups.
        """
        actions = np.empty((len(placements), len(TASKS), self.graph.n_ops), dtype=np.int64)
        actions[:, 0] = placements
        actions[:, 1] = self.levels // 2
        actions[:, 2] = self.levels - 1 if self.fusion_levels else -1
        return actions

    def actions_solution(self, actions: np.ndarray) -> Solution:
        """The contract solution of one sample's actions [3, n], re-scorable."""
        return self.decode(actions).solution(0, self.n_devices)


class GOGraphs(Graphs):
    """A run's graphs with GO's environments (`GOEnv`)."""

    def __init__(
        self,
        splits: dict[str, Sequence[Graph]],
        machine: Machine,
        hints: bool,
        levels: int,
        compiler_fusion: Literal["none", "default"],
        fusion_levels: bool = True,
        pinned: np.ndarray | None = None,
        hint_fusion: bool = True,
    ) -> None:
        super().__init__(splits, machine, hints, pinned=pinned)
        self.levels = levels
        self.compiler_fusion = compiler_fusion
        self.fusion_levels = fusion_levels
        self.hint_fusion = hint_fusion

    def make_env(self, graph: Graph) -> GOEnv:
        """GO's environment of one graph."""
        return GOEnv(
            graph, self.machine, self.levels, self.compiler_fusion,
            fusion_levels=self.fusion_levels, pinned=self.pinned, hint_fusion=self.hint_fusion,
        )  # fmt: skip


@dataclass(frozen=True)
class GOGraphSource(GraphSource):
    """`GraphSource` for GO: the levels, compiler fusion and hint fusion its environments need."""

    levels: int = 8
    compiler_fusion: Literal["none", "default"] = "default"
    hint_fusion: bool = True

    def graphs(self) -> GOGraphs:
        """The run's graphs with GO's environments."""
        return GOGraphs(
            self.splits(), self.machine.machine(), self.hints, self.levels, self.compiler_fusion,
            hint_fusion=self.hint_fusion,
        )  # fmt: skip


def stage_behaviour(config: GOConfig, step: int, steps: int) -> dict[str, Behaviour]:
    """Each task's behaviour in step `step` of `steps`: its stage's sampled, earlier ones greedy.

    The later stages' tasks are left out (undecided: the compiler's defaults).
    """
    stages = config.stages
    k = min(step * len(stages) // max(steps, 1), len(stages) - 1)
    done = {task for stage in stages[:k] for task in stage}
    return {
        task: "sample" if task in stages[k] else "greedy"
        for task in config.tasks
        if task in stages[k] or task in done
    }


def act(
    policy: GOPolicy,
    task: PlacementTask,
    behaviour: dict[str, Behaviour],
    samples: int = 1,
    generator: torch.Generator | None = None,
    actions: torch.Tensor | None = None,
    centre: np.ndarray | None = None,
) -> Acted:
    """The policy's decisions on one graph (`GOPolicy.act` with the task's inputs)."""
    env = task.env
    assert isinstance(env, GOEnv)
    fusable = torch.from_numpy(env.fusable)
    pulled = None if centre is None else torch.from_numpy(centre)
    return policy.act(
        task.batch, task.n_devices, task.hint, behaviour, samples, generator, actions, fusable,
        pulled,
    )  # fmt: skip


def most_likely_actions(policy: GOPolicy, task: PlacementTask) -> np.ndarray:
    """[3, n_ops] every task's most likely action (zero-shot inference)."""
    policy.eval()
    with torch.no_grad():
        acted = act(policy, task, dict.fromkeys(policy.go.tasks, "greedy"))
    return acted.actions[0].numpy()


def sample_actions(
    policy: GOPolicy,
    task: PlacementTask,
    samples: int,
    generator: torch.Generator,
    behaviour: dict[str, Behaviour] | None = None,
    centre: np.ndarray | None = None,
) -> tuple[np.ndarray, torch.Tensor]:
    """Sampled actions [samples, 3, n_ops] (every task, or as `behaviour` says) and log-probs.

    With `centre` ([3, n_ops]) the priors pull toward it instead of the defaults.
    """
    behaviour = behaviour or dict.fromkeys(policy.go.tasks, "sample")
    with torch.no_grad():
        acted = act(policy, task, behaviour, samples, generator, centre=centre)
    return acted.actions.numpy(), acted.log_p
