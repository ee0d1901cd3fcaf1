"""REINFORCE with a learned baseline (Williams 1992; paper 001 section 3.4 and A.5).

The loss is -(r - b(G)) log p(y | G) + lambda / 2 (r - b(G))^2 - beta H(p), averaged over the
samples: the policy term pushes up the log-probability of actions that did better than the
baseline, the baseline term fits b(G) to the rewards, and the optional entropy bonus keeps the
policy exploring. With several samples per graph, the mean reward of a graph's other samples is
an unbiased, lower-variance baseline (`advantage='sample-mean'`, the leave-one-out baseline);
b(G) is still trained. With antithetic samples (sample i + S/2 mirrors sample i's uniforms), a
sample's partner is left out of its baseline too, which keeps the baseline independent of the
sample and the gradient unbiased. `normalize` divides each graph's advantages by the standard
deviation of its samples' rewards, so graphs whose rewards spread widely do not drown the rest
(biased by the division, as in GRPO; a config switch measured by `regal_gradient_snr.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

import torch

from graphopt.configs import FieldError

Advantage = Literal["baseline", "sample-mean"]
ADVANTAGES: tuple[str, ...] = get_args(Advantage)


@dataclass(frozen=True)
class ReinforceConfig:
    """The loss's settings, a trainer's config section (`reinforce_loss` says what they do).

    Attributes:
        advantage: 'baseline' (r - b(G), the paper's learned baseline) or 'sample-mean'
            (r minus the mean reward of the other samples of the same graph in the step,
            lower variance with several samples per graph; b(G) is still trained and logged).
        baseline_weight: lambda, weight of the baseline's squared error (paper 001 A.5: 1e-4).
        entropy_weight: beta, weight of an entropy bonus (0 in the paper).
        normalize: divide each graph's advantages by its samples' reward deviation.
    """

    advantage: Advantage = "baseline"
    baseline_weight: float = 1e-4
    entropy_weight: float = 0.0
    normalize: bool = False

    def __post_init__(self) -> None:
        if self.advantage not in ADVANTAGES:
            raise FieldError(
                "advantage",
                f"must be one of {', '.join(map(repr, ADVANTAGES))}, got {self.advantage!r}",
            )


class ReinforceLoss(NamedTuple):
    """The loss to minimize and its terms (scalars), for the log."""

    total: torch.Tensor
    policy: torch.Tensor
    baseline: torch.Tensor
    entropy: torch.Tensor


def reinforce_loss(
    log_p: torch.Tensor,
    reward: torch.Tensor,
    baseline: torch.Tensor,
    entropy: torch.Tensor,
    advantage: Advantage = "baseline",
    baseline_weight: float = 1e-4,
    entropy_weight: float = 0.0,
    normalize: bool = False,
    antithetic: bool = False,
) -> ReinforceLoss:
    """REINFORCE's loss for `samples` action vectors on each of a batch's graphs.

    Args:
        log_p: [samples, graphs] log-probability of each sampled action vector.
        reward: [samples, graphs] its reward (higher is better).
        baseline: [graphs] the learned baseline b(G).
        entropy: [graphs] the policy's entropy on each graph.
        advantage: 'baseline' (r - b(G)) or 'sample-mean' (r minus the mean reward of the
            graph's other samples; needs samples >= 2, or >= 4 with `antithetic`).
        baseline_weight: lambda, weight of the baseline's squared error.
        entropy_weight: beta, weight of the entropy bonus.
        normalize: divide each graph's advantages by the deviation of its rewards.
        antithetic: samples i and i + samples/2 are antithetic pairs (`sample-mean` then
            leaves both out of each one's baseline).
    """
    if advantage == "sample-mean":
        s = reward.shape[0]
        others = reward.sum(dim=0, keepdim=True) - reward
        if antithetic:
            others = others - reward.roll(s // 2, dims=0)
        gain = reward - others / (s - 2 if antithetic else s - 1)
    else:
        gain = (reward - baseline).detach()
    if normalize:
        gain = gain / (reward.std(dim=0, keepdim=True) + 1e-8)
    policy_loss = -(gain * log_p).mean()
    baseline_loss = 0.5 * ((reward - baseline) ** 2).mean()
    mean_entropy = entropy.mean()
    total = policy_loss + baseline_weight * baseline_loss - entropy_weight * mean_entropy
    return ReinforceLoss(total, policy_loss, baseline_loss, mean_entropy)
