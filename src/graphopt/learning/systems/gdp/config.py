"""GDP's configs: the placement network's shape, the machine, and a training run's settings.

A checkpoint stores them; the solver reads them back (`load_system_checkpoint`) without
importing the trainer, and `network` builds the network of a `GDPConfig`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from graphopt.configs import FieldError
from graphopt.costmodels.machine import Machine
from graphopt.learning.formats import run_format
from graphopt.learning.objectives.ppo import PPOConfig
from graphopt.learning.optim import AdamConfig
from graphopt.learning.placement.env import check_schedulers
from graphopt.learning.runs import RunConfig, TrainingConfig
from graphopt.solvers.base import SolverError

GDP_MAX_DEVICES = 8
"""Most devices one GDP network places onto (paper 003 evaluates 2, 4 and 8)."""


@dataclass(frozen=True)
class GDPConfig:
    """The placement network's shape.

    Attributes:
        hidden: width of every state.
        sage_layers: GraphSAGE layers of the encoder (neighbourhood hops).
        placer_layers: attention layers of the segmented placer.
        heads: attention heads per placer layer (must divide `hidden`).
        segment: ops per segment of the placer; each attends to itself and to the previous
            segment's states, so attention costs O(n_ops * segment).
        max_devices: device counts 2..max_devices share the network (d is one of its inputs).
        pipeline_prior: initial strength a of a learned pull of op j toward device
            d * position_j (its topological position in [0, 1]): logits get
            -a (k + 1/2 - d * position_j)^2 for device k. It breaks the devices' symmetry, which
            otherwise holds an untrained per-op policy at the uniform placement (every device
            is as good for one op when the others are placed at random). None: no prior.
        partition_prior: initial strength b of a learned pull toward a classical placement
            given with the graph (`placement.hint.partition_hint`): the hinted device's logit
            gets +b. None: the network takes no hint.
    """

    hidden: int = 64
    sage_layers: int = 3
    placer_layers: int = 2
    heads: int = 4
    segment: int = 128
    max_devices: int = GDP_MAX_DEVICES
    pipeline_prior: float | None = 1.0
    partition_prior: float | None = None

    def __post_init__(self) -> None:
        for name, low, high in (
            ("hidden", 1, 4096),
            ("sage_layers", 0, 64),
            ("placer_layers", 0, 64),
            ("heads", 1, 64),
            ("segment", 1, 1 << 20),
            ("max_devices", 2, GDP_MAX_DEVICES),
        ):
            if not low <= getattr(self, name) <= high:
                raise FieldError(name, f"must be in [{low}, {high}], got {getattr(self, name)}")
        for name in ("pipeline_prior", "partition_prior"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise FieldError(name, f"must be > 0 (or null), got {value}")
        if self.hidden % self.heads:
            raise FieldError("heads", f"must divide hidden ({self.hidden}), got {self.heads}")


GDP_FORMAT = run_format("graphopt.gdp-policy/1", "GDP policy", ("policy_config", "machine"))
"""GDP checkpoints: the policy with its machine and training config, and a training run's state
with them (last.pt)."""


@dataclass(frozen=True)
class MachineConfig:
    """The machine placements are scored on (contract section 3).

    Attributes:
        devices: d, the devices the policy places onto (2..the policy's max_devices).
        latency: seconds added to every transfer.
        bandwidth: bytes per second of a transfer (None: unlimited; JSON has no infinity).
        mode: 'sync' (a receive occupies its device) or 'async'.
        capacity: bytes of memory per device (None: unlimited); a placement over it gets
            `placement.env.INFEASIBLE_REWARD`.
    """

    devices: int = 4
    latency: float = 1e-5
    bandwidth: float | None = 1e10
    mode: Literal["sync", "async"] = "sync"
    capacity: int | None = None

    def __post_init__(self) -> None:
        if not 2 <= self.devices:
            raise FieldError("devices", f"must be >= 2, got {self.devices}")
        if not self.latency >= 0:
            raise FieldError("latency", f"must be >= 0, got {self.latency}")
        if self.bandwidth is not None and not self.bandwidth > 0:
            raise FieldError("bandwidth", f"must be > 0 (or null: unlimited), got {self.bandwidth}")
        if self.capacity is not None and not self.capacity > 0:
            raise FieldError("capacity", f"must be > 0 (or null: unlimited), got {self.capacity}")

    def machine(self) -> Machine:
        """The `Machine` these settings describe."""
        bandwidth = math.inf if self.bandwidth is None else self.bandwidth
        return Machine(
            self.devices, self.capacity, latency=self.latency, bandwidth=bandwidth, mode=self.mode
        )


@dataclass(frozen=True)
class ImitationConfig:
    """Supervised steps toward a search's placements: expert iteration's (issue 45).

    Attributes:
        labels: a labels directory (`graphopt dataset label`) of the run's training graphs,
            made on the run's device count; unlabelled training graphs get PPO's steps only.
        weight: the weight of the imitation loss (`objectives.imitation`).
        ppo: also take PPO's steps each step; False: imitation alone (the ablation).
    """

    labels: str
    weight: float = 1.0
    ppo: bool = True

    def __post_init__(self) -> None:
        if not self.labels:
            raise FieldError("imitation.labels", "must name a labels directory")
        if not self.weight > 0:
            raise FieldError("imitation.weight", f"must be > 0, got {self.weight}")


@dataclass(frozen=True)
class TrainConfig(TrainingConfig):
    """Everything that defines a GDP training run (saved with every checkpoint).

    Attributes:
        name: the run's name.
        dataset: a built dataset directory, a dataset config JSON, a shipped config name, or
            `graph:PATH[,PATH...]`: graph files, each trained and validated on (GDP-one: one).
        policy: the network.
        machine: devices and transfer model of every placement.
        schedulers: how a placement becomes a schedule (`placement.env.SCHEDULERS`; the
            best of them counts): GO's 'ready-queue' alone, or with HEFT-style 'timeline'.
        samples: placements sampled per graph and step (PPO's batch, split in minibatches).
        graphs_per_step: training graphs per step (GDP-batch; all of them when fewer).
        validation_samples: placements sampled per validation graph beside the most likely
            one, the best of them scored (0: the most likely alone, the zero-shot argmax; the
            `gdp` solver offers 64).
        ppo: clipping, epochs, minibatches, entropy bonus, decays.
        optimizer: Adam and gradient clipping.
        run: steps, cadence, graphs used, seed.
        imitation: supervised steps toward a search's labels beside (or instead of) PPO's;
            None: PPO alone, the papers' method.
    """

    what: ClassVar[str] = "GDP training config"
    name: str = "gdp"
    dataset: str = "default"
    policy: GDPConfig = field(default_factory=GDPConfig)
    machine: MachineConfig = field(default_factory=MachineConfig)
    schedulers: tuple[str, ...] = ("ready-queue",)
    samples: int = 16
    graphs_per_step: int = 4
    validation_samples: int = 0
    ppo: PPOConfig = field(default_factory=lambda: PPOConfig(epochs=4, minibatches=2))
    optimizer: AdamConfig = field(default_factory=lambda: AdamConfig(learning_rate=1e-3))
    run: RunConfig = field(default_factory=RunConfig)
    imitation: ImitationConfig | None = None

    def __post_init__(self) -> None:
        try:
            check_schedulers(self.schedulers)
        except SolverError as error:
            raise FieldError("schedulers", str(error).removeprefix("schedulers: ")) from None
        if not 2 <= self.samples <= 1 << 16:
            raise FieldError("samples", f"must be in [2, 65536], got {self.samples}")
        if self.ppo.minibatches > self.samples:
            raise FieldError(
                "ppo.minibatches", f"must be at most samples ({self.samples}), got "
                f"{self.ppo.minibatches}",
            )  # fmt: skip
        if not 0 <= self.validation_samples <= 1 << 16:
            raise FieldError(
                "validation_samples", f"must be in [0, 65536], got {self.validation_samples}"
            )
        if self.graphs_per_step < 1:
            raise FieldError("graphs_per_step", f"must be >= 1, got {self.graphs_per_step}")
        if self.machine.devices > self.policy.max_devices:
            raise FieldError(
                "machine.devices",
                f"must be at most policy.max_devices ({self.policy.max_devices}), got "
                f"{self.machine.devices}",
            )
