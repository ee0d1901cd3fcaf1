"""Convolutional image classifiers: ResNet and an Inception-style multi-branch network.

Hand-written (no torchvision) so the zoo depends on torch alone and each size is one call:

- ResNet: K. He, X. Zhang, S. Ren, J. Sun, "Deep Residual Learning for Image Recognition",
  CVPR 2016. Basic blocks (two 3x3 convs) for ResNet-18-style nets, bottleneck blocks
  (1x1 / 3x3 / 1x1, 4x expansion) for ResNet-50 and deeper; each conv is followed by batch norm.
- Inception: C. Szegedy et al., "Going Deeper with Convolutions", CVPR 2015 (GoogLeNet), with the
  batch norm after each conv of S. Ioffe, C. Szegedy, "Batch Normalization", ICML 2015. Each
  module runs 1x1, 1x1->3x3, 1x1->5x5 and 3x3-pool->1x1 branches in parallel and concatenates
  them: the fan-out / fan-in that placement across devices can exploit.

Inputs are small images (32x32 or 64x64) so that builds, exports and traces stay fast; the graph
structure does not depend on the spatial size. The batch is 2, since training-mode batch norm
needs more than one value per channel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch
from torch import nn

from graphopt.importers.zoo._base import ZooModel, classification_loss


def _conv_bn(c_in: int, c_out: int, kernel: int, stride: int = 1) -> nn.Sequential:
    """Conv (same padding, no bias: batch norm supplies it) followed by batch norm."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=False),
        nn.BatchNorm2d(c_out),
    )


class BasicBlock(nn.Module):
    """Two 3x3 convs with an identity (or 1x1 projection, where the shape changes) shortcut."""

    expansion = 1

    def __init__(self, c_in: int, width: int, stride: int) -> None:
        super().__init__()
        c_out = width * self.expansion
        self.body = self.make_body(c_in, width, stride)
        self.shortcut = (
            _conv_bn(c_in, c_out, 1, stride) if stride != 1 or c_in != c_out else nn.Identity()
        )

    @staticmethod
    def make_body(c_in: int, width: int, stride: int) -> nn.Sequential:
        """3x3 (strided) conv, ReLU, 3x3 conv."""
        return nn.Sequential(_conv_bn(c_in, width, 3, stride), nn.ReLU(), _conv_bn(width, width, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual sum, then ReLU."""
        return torch.relu(self.body(x) + self.shortcut(x))


class Bottleneck(BasicBlock):
    """A basic block whose body is 1x1 reduce, 3x3 (strided), 1x1 expand by 4."""

    expansion = 4

    @staticmethod
    def make_body(c_in: int, width: int, stride: int) -> nn.Sequential:
        """1x1 conv to `width`, 3x3 (strided) conv, 1x1 conv to 4 * `width`."""
        return nn.Sequential(
            _conv_bn(c_in, width, 1),
            nn.ReLU(),
            _conv_bn(width, width, 3, stride),
            nn.ReLU(),
            _conv_bn(width, width * Bottleneck.expansion, 1),
        )


class ResNet(nn.Module):
    """7x7/2 stem and max pool, four stages (widths w, 2w, 4w, 8w; stride 2 from stage 2), head."""

    def __init__(
        self, block: type[BasicBlock], depths: Sequence[int], width: int, n_classes: int
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            _conv_bn(3, width, 7, 2), nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1)
        )
        blocks: list[nn.Module] = []
        c_in = width
        for stage, depth in enumerate(depths):
            stage_width = width * 2**stage
            for i in range(depth):
                blocks.append(block(c_in, stage_width, 2 if stage > 0 and i == 0 else 1))
                c_in = stage_width * block.expansion
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(c_in, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, classes)."""
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class InceptionModule(nn.Module):
    """Four parallel branches concatenated on channels: 1x1, 1x1->3x3, 1x1->5x5, pool->1x1."""

    def __init__(
        self, c_in: int, c1: int, c3_reduce: int, c3: int, c5_reduce: int, c5: int, pool: int
    ) -> None:
        super().__init__()
        self.branch1 = nn.Sequential(_conv_bn(c_in, c1, 1), nn.ReLU())
        self.branch3 = nn.Sequential(
            _conv_bn(c_in, c3_reduce, 1), nn.ReLU(), _conv_bn(c3_reduce, c3, 3), nn.ReLU()
        )
        self.branch5 = nn.Sequential(
            _conv_bn(c_in, c5_reduce, 1), nn.ReLU(), _conv_bn(c5_reduce, c5, 5), nn.ReLU()
        )
        self.branch_pool = nn.Sequential(
            nn.MaxPool2d(3, stride=1, padding=1), _conv_bn(c_in, pool, 1), nn.ReLU()
        )
        self.c_out = c1 + c3 + c5 + pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The branches' outputs stacked on the channel axis."""
        return torch.cat(
            [self.branch1(x), self.branch3(x), self.branch5(x), self.branch_pool(x)], dim=1
        )


# Branch widths (c1, c3_reduce, c3, c5_reduce, c5, pool) of GoogLeNet's modules 3a..5b; None marks
# the stride-2 max pools between groups.
_GOOGLENET = (
    (64, 96, 128, 16, 32, 32),
    (128, 128, 192, 32, 96, 64),
    None,
    (192, 96, 208, 16, 48, 64),
    (160, 112, 224, 24, 64, 64),
    (128, 128, 256, 24, 64, 64),
    (112, 144, 288, 32, 64, 64),
    (256, 160, 320, 32, 128, 128),
    None,
    (256, 160, 320, 32, 128, 128),
    (384, 192, 384, 48, 128, 128),
)

_INCEPTION_TINY = ((8, 8, 16, 4, 8, 8), None, (16, 16, 24, 4, 8, 8))

_INCEPTION_SMALL = (
    (16, 16, 32, 8, 16, 16),
    (32, 32, 48, 8, 24, 16),
    None,
    (48, 32, 64, 8, 24, 24),
    (64, 48, 96, 12, 32, 32),
)


class InceptionNet(nn.Module):
    """A conv stem, inception modules with max pools between groups, global average pool, head."""

    def __init__(
        self,
        stem: Callable[[], nn.Module],
        c_stem: int,
        modules: Sequence[tuple[int, ...] | None],
        n_classes: int,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [stem()]
        c_in = c_stem
        for widths in modules:
            if widths is None:
                layers.append(nn.MaxPool2d(3, stride=2, padding=1))
            else:
                module = InceptionModule(c_in, *widths)
                layers.append(module)
                c_in = module.c_out
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, classes)."""
        return self.head(self.features(x).mean(dim=(2, 3)))


def _small_stem(width: int, stride: int) -> nn.Sequential:
    """One 3x3 conv: the small nets skip GoogLeNet's downsampling stem on their small inputs."""
    return nn.Sequential(_conv_bn(3, width, 3, stride), nn.ReLU())


def _googlenet_stem() -> nn.Sequential:
    """GoogLeNet's stem: 7x7/2 conv, pool, 1x1 and 3x3 convs, pool (64x64 -> 8x8, 192 channels)."""
    return nn.Sequential(
        _conv_bn(3, 64, 7, 2),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
        _conv_bn(64, 64, 1),
        nn.ReLU(),
        _conv_bn(64, 192, 3),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
    )


def _build(
    make: Callable[[], nn.Module], image: int, seed: int = 0
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Seeds, builds the module in eval mode and draws one 3-channel square image."""
    torch.manual_seed(seed)
    module = make().eval()
    return module, (torch.randn(2, 3, image, image),)


def _entry(
    name: str, family: str, description: str, make: Callable[[], nn.Module], image: int
) -> ZooModel:
    """A classifier entry whose build draws one `image` x `image` input."""
    return ZooModel(name, family, description, partial(_build, make, image), classification_loss)


MODELS = (
    _entry(
        "resnet-tiny",
        "resnet",
        "ResNet, basic blocks [1,1,1,1], width 16, 10 classes, input 1x3x32x32",
        partial(ResNet, BasicBlock, (1, 1, 1, 1), 16, 10),
        32,
    ),
    _entry(
        "resnet18",
        "resnet",
        "ResNet-18, basic blocks [2,2,2,2], width 64, 1000 classes, input 1x3x64x64",
        partial(ResNet, BasicBlock, (2, 2, 2, 2), 64, 1000),
        64,
    ),
    _entry(
        "resnet50",
        "resnet",
        "ResNet-50, bottleneck blocks [3,4,6,3], width 64, 1000 classes, input 1x3x64x64",
        partial(ResNet, Bottleneck, (3, 4, 6, 3), 64, 1000),
        64,
    ),
    _entry(
        "resnet152",
        "resnet",
        "ResNet-152, bottleneck blocks [3,8,36,3], width 64, 1000 classes, input 1x3x64x64",
        partial(ResNet, Bottleneck, (3, 8, 36, 3), 64, 1000),
        64,
    ),
    _entry(
        "inception-tiny",
        "inception",
        "Inception, 16-channel 3x3 stem, 2 modules (40, 56 channels), 10 classes, input 1x3x32x32",
        partial(
            InceptionNet,
            partial(_small_stem, 16, 1),
            16,
            _INCEPTION_TINY,
            10,
        ),
        32,
    ),
    _entry(
        "inception-small",
        "inception",
        "Inception, 32-channel 3x3/2 stem, 4 modules (80-224 channels), 100 classes, "
        "input 1x3x64x64",
        partial(InceptionNet, partial(_small_stem, 32, 2), 32, _INCEPTION_SMALL, 100),
        64,
    ),
    _entry(
        "googlenet",
        "inception",
        "GoogLeNet (BN), 9 inception modules 3a-5b (256-1024 channels), 1000 classes, "
        "input 1x3x64x64",
        partial(InceptionNet, _googlenet_stem, 192, _GOOGLENET, 1000),
        64,
    ),
)
"""The CNN entries, smallest first within each family."""
