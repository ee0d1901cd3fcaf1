"""REGAL's actions: quantized Beta distributions and elite biases per op (paper 001 A.2).

For each Beta distribution the policy picks two integers m, v in {0..k-1}: the mean is
mu = (m + 1) / (k + 1) and the variance sigma^2 = mu (1 - mu) (v + 1) / (k + 1), which give
beta = mu (1 - mu)^2 / sigma^2 - 1 + mu and alpha = beta mu / (1 - mu). An elite bias is one
integer c in {0..k-1}, read as 0.5 (1 + c / k). An op has one Beta distribution per device
(its placement genes) and one for its scheduling priority; which of the three kinds of action
the policy takes is configurable (paper 001 table 3), the others keep the values of the BRKGA
configuration the search runs with (by default uniform genes and elite bias 0.7).

Paper 000 (A.2) leaves the transfer priorities uniform. Here each transfer's priority genes
follow the priority distribution of the tensor's producer instead: the decoder ranks transfers
and ops in one queue, so uniform transfer keys against, say, low op keys would run transfers
early whatever the policy meant. With this rule, an action shared by all ops gives mutants
whose ranks are distributed exactly as uniform BRKGA's (only the ranks of iid keys matter):
the policy can only gain by telling ops apart.

With `--fusion search` (`Problem.fusion`) the chromosome ends with one fusion priority per op,
which no policy predicts: those genes keep the search's mutant distribution and elite bias, so
the policy steers the genes it was trained on and BRKGA searches fusion as it does alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.configs import FieldError
from graphopt.solvers.brkga import BRKGAConfig, GeneDistributions
from graphopt.solvers.random_keys import ChromosomeLayout

MAX_LEVELS = 1024
"""Most quantization levels of an action."""


@dataclass(frozen=True)
class ActionConfig:
    """Which actions the policy takes and how finely they are quantized.

    Attributes:
        levels: k, the number of levels of every quantized parameter.
        placement: predict the Beta distribution of each op-to-device affinity gene.
        scheduling: predict the Beta distribution of each op's priority gene.
        elite_bias: predict each op's elite bias (used for all of the op's genes).
    """

    levels: int = 4
    placement: bool = True
    scheduling: bool = True
    elite_bias: bool = False

    def __post_init__(self) -> None:
        if not 2 <= self.levels <= MAX_LEVELS:
            raise FieldError("levels", f"must be in [2, {MAX_LEVELS}], got {self.levels}")
        if not (self.placement or self.scheduling or self.elite_bias):
            raise ValueError("the policy must take at least one kind of action")

    def beta_slots(self, n_devices: int) -> int:
        """Beta distributions predicted per op: d placement genes and/or one priority gene."""
        return n_devices * self.placement + self.scheduling

    def n_heads(self, n_devices: int) -> int:
        """Categorical choices per op: (m, v) per Beta slot, plus c for the elite bias."""
        return 2 * self.beta_slots(n_devices) + self.elite_bias


def beta_parameters(m: np.ndarray, v: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, beta) of the Beta distributions with quantized mean m and variance v."""
    mu = (np.asarray(m, dtype=np.float64) + 1.0) / (levels + 1.0)
    variance = mu * (1.0 - mu) * (np.asarray(v, dtype=np.float64) + 1.0) / (levels + 1.0)
    beta = mu * (1.0 - mu) ** 2 / variance - 1.0 + mu
    return beta * mu / (1.0 - mu), beta


def elite_bias(c: np.ndarray, levels: int) -> np.ndarray:
    """Elite-bias probabilities 0.5 (1 + c / k) of quantized actions c."""
    return 0.5 * (1.0 + np.asarray(c, dtype=np.float64) / levels)


def gene_distributions(
    actions: np.ndarray,
    config: ActionConfig,
    layout: ChromosomeLayout,
    tensor_producer: np.ndarray,
    defaults: BRKGAConfig | None = None,
) -> GeneDistributions:
    """BRKGA's per-gene distributions for one graph's actions.

    Args:
        actions: [n_ops, n_heads] integers in [0, k): per Beta slot (placement devices
            0..d-1, then priority) the pair (m, v), then c when elite biases are predicted.
        config: which actions these are.
        layout: the chromosome's layout (its fusion priorities, if any, keep the defaults).
        tensor_producer: [n_tensors] producer op of each tensor (its transfers' genes follow
            the producer's priority gene).
        defaults: the search's BRKGA configuration, whose mutant distribution and elite bias
            the genes the policy does not predict keep (None: paper 001's defaults).
    """
    n_ops, d = layout.n_ops, layout.n_devices
    defaults = defaults or BRKGAConfig()
    alpha = np.full(layout.size, defaults.mutant_alpha)
    beta = np.full(layout.size, defaults.mutant_beta)
    bias = np.full(layout.size, defaults.elite_bias)
    actions = np.asarray(actions)
    slot = 0
    if config.placement:
        a, b = beta_parameters(actions[:, 0 : 2 * d : 2], actions[:, 1 : 2 * d : 2], config.levels)
        alpha[: n_ops * d], beta[: n_ops * d] = a.reshape(-1), b.reshape(-1)
        slot = d
    transfer_source = np.repeat(np.asarray(tensor_producer), d)
    ops = slice(layout.op_priority, layout.transfer_priority)
    transfers = slice(layout.transfer_priority, layout.fusion_priority)
    if config.scheduling:
        a, b = beta_parameters(actions[:, 2 * slot], actions[:, 2 * slot + 1], config.levels)
        alpha[ops], beta[ops] = a, b
        alpha[transfers], beta[transfers] = a[transfer_source], b[transfer_source]
    if config.elite_bias:
        per_op = elite_bias(actions[:, -1], config.levels)
        bias[: n_ops * d] = np.repeat(per_op, d)
        bias[ops] = per_op
        bias[transfers] = per_op[transfer_source]
    return GeneDistributions(alpha, beta, bias)
