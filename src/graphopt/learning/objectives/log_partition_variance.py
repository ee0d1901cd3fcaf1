"""The log-partition variance loss of paper 004 (section 3.2, equations 7-8).

For a trajectory s ending in x, zeta(s) = log R(x) + sum_t log P_B(s_{t-1} | s_t)
- sum_t log P_F(s_t | s_{t-1}) equals log Z for every trajectory of the same graph and
temperature once the flow is consistent, so the loss is the variance of zeta over a mini-batch
of such trajectories: no log Z has to be regressed, which is what made trajectory balance
(`trajectory_balance.py`) slow to start across graphs of different sizes.
"""

from __future__ import annotations

import torch


def log_partition_variance_loss(
    log_reward: torch.Tensor, log_pf: torch.Tensor, log_pb: torch.Tensor
) -> torch.Tensor:
    """Mean of (zeta - mean zeta)^2 over trajectories of one graph at one temperature.

    Args:
        log_reward: [B] log R(x) of each trajectory's schedule (no gradient needed).
        log_pf: [B] sum of the forward policy's log-probabilities along each trajectory.
        log_pb: [B] sum of the backward policy's log-probabilities along it.
    """
    zeta = log_reward + log_pb - log_pf
    return ((zeta - zeta.mean()) ** 2).mean()
