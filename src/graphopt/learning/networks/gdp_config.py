"""The shape of a GDP placement network, without torch (checkpoints read it before building).

`graphopt.learning.networks.gdp` builds the network of a `GDPConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphopt.configs import FieldError
from graphopt.learning.formats import CheckpointFormat

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
            given with the graph (`placement_hint.partition_hint`): the hinted device's logit
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


GDP_FORMAT = CheckpointFormat(
    "graphopt.gdp-policy/1",
    "GDP policy",
    (
        "format",
        "policy_config",
        "machine",
        "model_state",
        "train_config",
        "step",
        "best_validation",
        "best_step",
    ),
    ("optimizer_state", "seconds", "history"),
)
"""GDP checkpoints: the policy with its machine and training config, and a training run's state
with them (last.pt)."""
