"""Imitation of a search's placements, invariant to renaming the devices (issue 45).

A placement's devices are interchangeable on a homogeneous machine: a search's solution with
devices 0 and 1 swapped is the same solution. A plain per-op cross-entropy against the label
would punish a policy that names the devices otherwise, and average two equally good labels of
one graph into the uniform placement. So the label's devices are first renamed by the
permutation under which the policy finds it most likely (the min over all d! renamings of the
cross-entropy: a linear assignment on a d x d matrix, solved exactly by enumeration for
d <= 8), and the loss is the cross-entropy against that renamed label. Its gradient is the
plain cross-entropy's at the chosen renaming (the choice is piecewise constant).
"""

from __future__ import annotations

import itertools
from functools import cache
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

MAX_MATCHED_DEVICES = 8
"""Most devices whose renamings are enumerated (8! = 40,320 permutations)."""


class ImitationLoss(NamedTuple):
    """One graph's imitation loss and what it is logged with."""

    loss: Tensor
    """Mean per-op cross-entropy against the renamed label (with gradient)."""
    agreement: float
    """Share of ops whose most likely device is the renamed label's."""


@cache
def _permutations(n_devices: int) -> np.ndarray:
    """[n_devices!, n_devices] every renaming, in lexicographic order."""
    return np.array(list(itertools.permutations(range(n_devices))), dtype=np.int64)


def best_renaming(log_p: Tensor, label: np.ndarray, n_devices: int) -> np.ndarray:
    """[n_devices] the renaming r maximizing sum_j log_p[j, r[label[j]]] (ties: lex first).

    Args:
        log_p: [n_ops, >= n_devices] per-op log-probabilities of the devices.
        label: [n_ops] the search's device of each op, in 0..n_devices - 1.
        n_devices: d, at most `MAX_MATCHED_DEVICES`.
    """
    if not 1 <= n_devices <= MAX_MATCHED_DEVICES:
        raise ValueError(f"renamings are enumerated for 1..{MAX_MATCHED_DEVICES} devices")
    scores = log_p.detach()[:, :n_devices].double().numpy()
    gain = np.zeros((n_devices, n_devices))  # gain[a, b]: label a renamed b
    np.add.at(gain, np.asarray(label, dtype=np.int64), scores)
    permutations = _permutations(n_devices)
    totals = gain[np.arange(n_devices), permutations].sum(axis=1)
    return permutations[int(np.argmax(totals))]


def matched_cross_entropy(log_p: Tensor, label: np.ndarray, n_devices: int) -> ImitationLoss:
    """Cross-entropy of the policy against `label` renamed by `best_renaming`.

    Args:
        log_p: [n_ops, max_devices] the policy's per-op log-probabilities (devices >= d at -inf).
        label: [n_ops] a search's placement of the graph.
        n_devices: d, the devices of the label's machine.
    """
    renamed = torch.from_numpy(best_renaming(log_p, label, n_devices)[label])
    loss = -log_p.gather(1, renamed[:, None]).mean()
    agreement = float((log_p.detach().argmax(dim=1) == renamed).double().mean())
    return ImitationLoss(loss, agreement)
