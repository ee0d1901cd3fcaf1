"""Trajectory balance (Malkin et al. 2022), the ablation of paper 004 (section 5.4, fig. 4).

The squared log-ratio of the two sides of paper 004 equation 6, with log Z predicted from the
graph (and temperature) by a network head: (log Z + sum log P_F - log R - sum log P_B)^2.
"""

from __future__ import annotations

import torch


def trajectory_balance_loss(
    log_z: torch.Tensor, log_reward: torch.Tensor, log_pf: torch.Tensor, log_pb: torch.Tensor
) -> torch.Tensor:
    """Mean over trajectories of (log Z + log P_F - log R - log P_B)^2.

    Args:
        log_z: [B] (or a scalar) the predicted log-partition function of each trajectory's
            graph and temperature.
        log_reward: [B] log R(x) of each trajectory's schedule.
        log_pf: [B] sum of the forward policy's log-probabilities along each trajectory.
        log_pb: [B] sum of the backward policy's log-probabilities along it.
    """
    return ((log_z + log_pf - log_reward - log_pb) ** 2).mean()
