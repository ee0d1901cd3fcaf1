"""Models as a user writes them, behind `module:function` factories (import speed measurements).

`user_models:build` is a small GPT-style decoder (6 layers, width 256, 8 heads, causal attention
written out, vocabulary 5,000, 2 x 128 tokens); `user_models:build_cnn` a VGG-style CNN (8 conv +
BatchNorm + ReLU layers in 4 stages, 4 x 3 x 64 x 64 images). `benchmarks/import_phases.py` times
their import phase by phase, run from this directory.
"""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """Pre-norm decoder block: causal multi-head self-attention, then a GELU MLP."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=-1)
        q, k, v = (
            z.view(batch, time, self.heads, width // self.heads).transpose(1, 2) for z in (q, k, v)
        )
        scores = (q @ k.transpose(-2, -1)) / (width // self.heads) ** 0.5
        mask = torch.ones(time, time, dtype=torch.bool).tril()
        attention = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (attention @ v).transpose(1, 2).reshape(batch, time, width)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token and position embeddings, decoder blocks, final norm and an untied LM head."""

    def __init__(
        self,
        vocab: int = 5000,
        width: int = 256,
        heads: int = 8,
        layers: int = 6,
        context: int = 128,
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return GPT(), (torch.randint(0, 5000, (2, 128)),)


def build_cnn() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    channels = 3
    for width in (32, 64, 128, 256):
        for _ in range(2):
            layers += [nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
            channels = width
        layers.append(nn.MaxPool2d(2))
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(256 * 4 * 4, 100))
    return model, (torch.randn(4, 3, 64, 64),)
