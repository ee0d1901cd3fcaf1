"""The shape of a REGAL policy network, without torch (checkpoints and numpy inference read it).

`network` builds the network of a `PolicyConfig`; this module holds only the config, so that a
shipped policy can be loaded and run (`numpy_policy`) without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from graphopt.configs import FieldError
from graphopt.learning.features import node_feature_names
from graphopt.learning.systems.regal.actions import ActionConfig
from graphopt.limits import MAX_DEVICES

Encoder = Literal["mpnn", "lstm"]
"""How ops are encoded: message passing (REGAL) or a sequence model in topological order (GAS)."""
ENCODERS: tuple[str, ...] = get_args(Encoder)
Aggregation = Literal["mean", "add"]
"""How a message-passing round combines an op's messages."""
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)
MAX_HIDDEN = 4096
"""Widest network a checkpoint may describe."""
MAX_ROUNDS = 256
"""Most message-passing rounds: they share weights, so the file's size does not bound them."""


@dataclass(frozen=True)
class PolicyConfig:
    """The policy network's shape.

    Attributes:
        n_devices: devices the placement heads and features are built for.
        encoder: 'mpnn' (REGAL) or 'lstm' (GAS, graph as a topological sequence).
        hidden: width of every state and MLP (paper 001 A.5: 32).
        rounds: message-passing rounds T (paper 001 A.5: 16; table 3 / fig. 8 sweep it).
        aggregation: 'mean' or 'add' aggregation of messages.
        actions: which actions the heads predict, and their quantization.
        initial_mode_logit: how much more likely than the others each head's initial action
            is, in logits (0: uniform sampling at first; the start is neutral either way).
        anchor: initial strength a of the feature anchor on the mean heads (None: none,
            the paper's network). Anchored heads start with no mean preference of their own
            and the narrowest variance level as their most likely one.
    """

    n_devices: int = 2
    encoder: Encoder = "mpnn"
    hidden: int = 32
    rounds: int = 16
    aggregation: Aggregation = "mean"
    actions: ActionConfig = field(default_factory=ActionConfig)
    initial_mode_logit: float = 3.0
    anchor: float | None = None

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise FieldError(
                "encoder", f"must be one of {', '.join(ENCODERS)}, got {self.encoder!r}"
            )
        if self.aggregation not in AGGREGATIONS:
            raise FieldError("aggregation", f"must be 'mean' or 'add', got {self.aggregation!r}")
        for name, low, high in (
            ("n_devices", 2, MAX_DEVICES),
            ("hidden", 1, MAX_HIDDEN),
            ("rounds", 0, MAX_ROUNDS),
        ):
            if not low <= getattr(self, name) <= high:
                raise FieldError(name, f"must be in [{low}, {high}], got {getattr(self, name)}")
        if self.anchor is not None and not (self.actions.placement or self.actions.scheduling):
            raise ValueError("the feature anchor needs placement or scheduling actions")

    def anchor_targets(self) -> list[tuple[slice, bool]]:
        """The node-feature columns the anchored slots pull towards, and whether each is flipped.

        Placement slots read the feature run's expected device shares; the scheduling slot reads
        1 - the expected position (an early op gets a high priority). One list for the torch
        network and its numpy twin, which must compute the same targets.
        """
        names = node_feature_names(self.n_devices)
        targets = []
        if self.actions.placement:
            first = names.index("expected_device_0")
            targets.append((slice(first, first + self.n_devices), False))
        if self.actions.scheduling:
            position = names.index("expected_position")
            targets.append((slice(position, position + 1), True))
        return targets
