"""The zoo entry type and the losses and inputs its model families share.

Kept apart from the package's `__init__` so that the family modules can import it without a cycle
through the registry that imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

Build = Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]
Loss = Callable[[Any, tuple[torch.Tensor, ...]], torch.Tensor]


@dataclass(frozen=True)
class ZooModel:
    """A named model with example inputs and a training loss, for importing real graphs.

    Attributes:
        name: Registry key, e.g. "resnet18".
        family: Architecture family, e.g. "resnet", "gpt2".
        description: One line: architecture and size (layers, width, input shape).
        build: Returns the module in eval mode and its example inputs (static shapes); seeded so
            two calls give identical parameters and inputs.
        loss: Scalar training loss from (module output, inputs), with targets derived
            deterministically from the inputs so a traced training step needs no extra tensors.
    """

    name: str
    family: str
    description: str
    build: Build
    loss: Loss


def image_labels(images: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Class labels derived from the images: the brightest pixel's index modulo the class count.

    Deterministic and different per image, so a classifier's loss depends only on its inputs.
    """
    return images.flatten(1).argmax(dim=1) % n_classes


def classification_loss(logits: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Cross-entropy of (batch, classes) logits against `image_labels` of the first input."""
    return F.cross_entropy(logits, image_labels(inputs[0], logits.shape[-1]))


def next_token_loss(logits: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Cross-entropy of (batch, time, vocab) logits against the last input shifted by one step.

    The last input holds the tokens the model read (or, for encoder-decoders, the decoder's
    teacher-forced tokens), so position t is trained to predict token t + 1.
    """
    tokens = inputs[-1]
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())


def same_token_loss(logits: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Cross-entropy of (batch, time, vocab) logits against the input tokens at the same positions.

    The masked-LM objective with every position a target: the graph of a bidirectional encoder's
    training step is the same whichever positions are masked.
    """
    return F.cross_entropy(logits.flatten(0, 1), inputs[0].flatten())


def tokens(batch: int, length: int, vocab: int) -> torch.Tensor:
    """Random token ids of shape (batch, length), drawn from the global (seeded) generator."""
    return torch.randint(0, vocab, (batch, length))
