"""HDP's two networks: the grouper (op -> group) and the placer (group -> device)."""

from __future__ import annotations

import torch
from torch import nn

from graphopt.learning.placement.features import PLACEMENT_FEATURE_NAMES

GROUP_FEATURES = len(PLACEMENT_FEATURE_NAMES) + 2
"""What the placer reads of a group: its ops' mean features, log1p(size), size / n_ops."""


class Grouper(nn.Module):
    """Per-op group logits from per-op features: a two-layer feed-forward net (HDP's grouper)."""

    def __init__(self, n_features: int, hidden: int, groups: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_features, hidden), nn.Tanh(), nn.Linear(hidden, groups)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """[n_ops, F] features -> [n_ops, G] logits."""
        return self.net(features)


class Placer(nn.Module):
    """Per-group device logits: an LSTM over the groups 0..G-1 in order (HDP's placer)."""

    def __init__(self, n_features: int, hidden: int, n_devices: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(n_features, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, n_devices)

    def forward(self, groups: torch.Tensor) -> torch.Tensor:
        """[B, G, F] group features -> [B, G, d] logits."""
        encoded, _ = self.lstm(groups)
        return self.head(encoded)


class HDPPolicy(nn.Module):
    """HDP's two networks, trained jointly with one optimizer: the grouper, then the placer.

    Args:
        n_features: per-op features the grouper reads.
        hidden: width of the grouper's hidden layer and of each direction of the placer's LSTM.
        groups: G, the groups.
        n_devices: d, the devices.
    """

    def __init__(self, n_features: int, hidden: int, groups: int, n_devices: int) -> None:
        super().__init__()
        self.grouper = Grouper(n_features, hidden, groups)
        self.placer = Placer(GROUP_FEATURES, hidden, n_devices)
