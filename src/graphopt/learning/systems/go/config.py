"""GO's configs: the multi-task network's shape and mode, and a training run's settings.

A checkpoint stores them; the solver reads them back without importing the trainer, and
`network` builds the network of a `GOConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from graphopt.configs import FieldError
from graphopt.learning.formats import run_format
from graphopt.learning.systems.gdp.config import GDPConfig, TrainConfig

TASKS = ("placement", "scheduling", "fusion")
"""GO's tasks, in the order one forward pass decides them (paper 002 section 4.4)."""
ABBREVIATIONS = {"pl": "placement", "sch": "scheduling", "fu": "fusion"}
"""How a mode names the tasks (GO fig. 6)."""
MODES = ("pl", "pl|sch", "pl+sch", "sch+fu", "pl|sch|fu", "pl+sch+fu")
"""GO fig. 6's modes: '+' joins tasks decided together (one stage, residual action
connections), '|' separates stages trained one after the other, each with the earlier stages'
most likely decisions fixed and the later stages' tasks at the compiler's default, so that a
task is optimized knowing only the decisions made before it (GO: "optimizing all tasks, one at
a time"). A task a mode leaves out takes the compiler's default: the expert placement,
critical-path order, XLA-like default fusion ('pl' is GO's pl-only)."""


def mode_stages(mode: str) -> tuple[tuple[str, ...], ...]:
    """The mode's stages, each a tuple of task names in `TASKS` order."""
    return tuple(
        tuple(sorted((ABBREVIATIONS[t] for t in stage.split("+")), key=TASKS.index))
        for stage in mode.split("|")
    )


@dataclass(frozen=True)
class GOConfig:
    """The multi-task network's shape and mode.

    Attributes:
        mode: one of `MODES`: which tasks the network decides and how they are trained.
        placer: the shared trunk (GraphSAGE + segmented placer layers, with superposition) and
            the placement head's priors, as GDP's network.
        levels: L, priority levels of the scheduling and fusion heads (GO's quantization).
        task_layers: recurrent attention layers of each task, over the trunk's states.
        schedule_prior: initial strength of a learned pull of every op's scheduling level
            toward the middle level, where all ops tie and the critical path orders them (GO's
            default); None: no prior.
        fusion_prior: initial strength of a learned pull toward the upper half of the fusion
            levels, where the priority decoder fuses (fusing every legal pair beat XLA-like
            default fusion by 31 % on gpt2-tiny's training graph on one device); None: none.
    """

    mode: str = "pl+sch+fu"
    placer: GDPConfig = field(
        default_factory=lambda: GDPConfig(pipeline_prior=None, partition_prior=4.0)
    )
    levels: int = 8
    task_layers: int = 1
    schedule_prior: float | None = 4.0
    fusion_prior: float | None = 4.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise FieldError("mode", f"must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not 2 <= self.levels <= 256 or self.levels % 2:
            raise FieldError("levels", f"must be even and in [2, 256], got {self.levels}")
        if not 1 <= self.task_layers <= 64:
            raise FieldError("task_layers", f"must be in [1, 64], got {self.task_layers}")
        for name in ("schedule_prior", "fusion_prior"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise FieldError(name, f"must be > 0 (or null), got {value}")

    @property
    def max_devices(self) -> int:
        """Most devices the network places onto (its trunk's)."""
        return self.placer.max_devices

    @property
    def stages(self) -> tuple[tuple[str, ...], ...]:
        """The mode's training stages (`mode_stages`)."""
        return mode_stages(self.mode)

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks the network decides, in `TASKS` order."""
        return tuple(t for t in TASKS if any(t in stage for stage in self.stages))

    @property
    def places_fused(self) -> bool:
        """Whether the placement is chosen knowing the fusion search's decisions.

        False when the mode places before fusion is searched, or never searches it: its
        placement then sees the compiler's default fusion, its partition hint included.
        """
        stage = next((s for s in self.stages if "placement" in s), None)
        return stage is None or "fusion" in stage

    @property
    def residual(self) -> bool:
        """Whether one task's actions feed the next task's layer (tasks decided together)."""
        return len(self.stages) == 1 and len(self.tasks) > 1


GO_FORMAT = run_format("graphopt.go-policy/1", "GO policy", ("policy_config", "machine"))
"""GO checkpoints, as GDP's (the policy, its machine and training config, and last.pt's state)."""


@dataclass(frozen=True)
class GOTrainConfig(TrainConfig):
    """Everything that defines a GO training run: GDP's fields with GO's network and fusion.

    Attributes:
        policy: the multi-task network and its mode.
        compiler_fusion: how graphs fuse when the mode has no fusion task: 'default'
            (XLA-like, the compiler's) or 'none'.
        schedulers: GO orders events with its priority ready queues only: 'ready-queue'.
    """

    what: ClassVar[str] = "GO training config"
    name: str = "go"
    policy: GOConfig = field(default_factory=GOConfig)
    compiler_fusion: Literal["none", "default"] = "default"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.imitation is not None:
            raise FieldError("imitation", "GO learns by PPO alone; imitation is GDP's (null)")
        if self.schedulers != ("ready-queue",):
            raise FieldError(
                "schedulers",
                f"GO orders events with its priority ready queues: ['ready-queue'], got "
                f"{list(self.schedulers)}",
            )
