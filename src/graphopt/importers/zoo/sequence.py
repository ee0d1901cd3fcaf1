"""Sequence models: WaveNet, LSTM language models and a GNMT-style translation model.

- WaveNet: A. van den Oord et al., "WaveNet: A Generative Model for Raw Audio", arXiv:1609.03499,
  2016. Stacks of dilated causal convolutions (dilation doubling to 512, then repeating) with gated
  tanh * sigmoid units, residual and skip connections, predicting the next 8-bit mu-law sample.
- LSTM language model: S. Hochreiter, J. Schmidhuber, "Long Short-Term Memory", Neural
  Computation 1997; sizes of W. Zaremba, I. Sutskever, O. Vinyals, "Recurrent Neural Network
  Regularization", arXiv:1409.2329, 2014 (2 layers of 650 on a 10,000-word vocabulary). One
  variant runs `nn.LSTM` (one fused op per layer); the other unrolls `nn.LSTMCell` over time in
  Python, so the graph has ops per time step and its size grows with the sequence length.
- GNMT: Y. Wu et al., "Google's Neural Machine Translation System", arXiv:1609.08144, 2016. An
  LSTM encoder whose first layer is bidirectional, an LSTM decoder whose bottom layer's output
  queries additive attention (D. Bahdanau, K. Cho, Y. Bengio, ICLR 2015) over the encoder states,
  the context feeding every upper decoder layer, and residual connections from the third layer
  on. Unrolled with `nn.LSTMCell` and trained with teacher forcing.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from graphopt.importers.zoo._base import ZooModel, next_token_loss, tokens


class WaveNetLayer(nn.Module):
    """Dilated causal conv into a gated unit, a 1x1 residual conv and a 1x1 skip conv.

    The last layer has no residual conv: only its skip output is used, and an unused parameter
    would have no gradient in the training step.
    """

    def __init__(self, residual: int, skip: int, dilation: int, last: bool) -> None:
        super().__init__()
        self.pad = dilation
        self.dilated = nn.Conv1d(residual, 2 * residual, kernel_size=2, dilation=dilation)
        self.residual = None if last else nn.Conv1d(residual, residual, kernel_size=1)
        self.skip = nn.Conv1d(residual, skip, kernel_size=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (residual stream, skip contribution); left padding keeps the conv causal."""
        filt, gate = self.dilated(F.pad(x, (self.pad, 0))).chunk(2, dim=1)
        z = torch.tanh(filt) * torch.sigmoid(gate)
        return (x if self.residual is None else x + self.residual(z)), self.skip(z)


class WaveNet(nn.Module):
    """Sample embedding, causal conv, dilated layers, summed skips, two 1x1 convs to logits."""

    def __init__(
        self, stacks: int, layers_per_stack: int, residual: int, skip: int, classes: int = 256
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(classes, residual)
        self.causal = nn.Conv1d(residual, residual, kernel_size=2)
        dilations = [2**i for _ in range(stacks) for i in range(layers_per_stack)]
        self.layers = nn.ModuleList(
            WaveNetLayer(residual, skip, d, last=k == len(dilations) - 1)
            for k, d in enumerate(dilations)
        )
        self.out1 = nn.Conv1d(skip, skip, kernel_size=1)
        self.out2 = nn.Conv1d(skip, classes, kernel_size=1)

    def forward(self, samples: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, time, classes); position t sees samples up to t only."""
        x = self.causal(F.pad(self.embed(samples).transpose(1, 2), (1, 0)))
        skips = []
        for layer in self.layers:
            x, skip = layer(x)
            skips.append(skip)
        out = self.out2(torch.relu(self.out1(torch.relu(torch.stack(skips).sum(dim=0)))))
        return out.transpose(1, 2)


class LSTMLanguageModel(nn.Module):
    """Token embedding, stacked `nn.LSTM`, linear head over the vocabulary."""

    def __init__(self, vocab: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, time, vocab)."""
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


def _unroll(
    cell: nn.LSTMCell, steps: list[torch.Tensor], reverse: bool = False
) -> list[torch.Tensor]:
    """Runs `cell` over per-step inputs from zero state; returns the hidden state of each step."""
    batch = steps[0].shape[0]
    state = (
        steps[0].new_zeros(batch, cell.hidden_size),
        steps[0].new_zeros(batch, cell.hidden_size),
    )
    outputs = []
    for x in reversed(steps) if reverse else steps:
        state = cell(x, state)
        outputs.append(state[0])
    return outputs[::-1] if reverse else outputs


class UnrolledLSTMLanguageModel(nn.Module):
    """Like `LSTMLanguageModel`, with each layer an `nn.LSTMCell` called once per time step."""

    def __init__(self, vocab: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.cells = nn.ModuleList(nn.LSTMCell(hidden, hidden) for _ in range(layers))
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, time, vocab)."""
        steps = list(self.embed(tokens).unbind(1))
        for cell in self.cells:
            steps = _unroll(cell, steps)
        return self.head(torch.stack(steps, dim=1))


class GNMT(nn.Module):
    """Bidirectional-first LSTM encoder, attention LSTM decoder, residuals from layer 3.

    Both stacks need at least 2 layers: the attention context feeds the decoder's upper layers.
    """

    def __init__(self, vocab: int, hidden: int, encoder_layers: int, decoder_layers: int) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(vocab, hidden)
        self.tgt_embed = nn.Embedding(vocab, hidden)
        self.encoder_fwd = nn.LSTMCell(hidden, hidden)
        self.encoder_bwd = nn.LSTMCell(hidden, hidden)
        self.encoder = nn.ModuleList(
            nn.LSTMCell(2 * hidden if i == 0 else hidden, hidden) for i in range(encoder_layers - 1)
        )
        self.query = nn.Linear(hidden, hidden, bias=False)
        self.key = nn.Linear(hidden, hidden, bias=False)
        self.score = nn.Linear(hidden, 1, bias=False)
        self.decoder = nn.ModuleList(
            nn.LSTMCell(hidden if i == 0 else 2 * hidden, hidden) for i in range(decoder_layers)
        )
        self.head = nn.Linear(hidden, vocab)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """Encoder states of shape (batch, source length, hidden)."""
        steps = list(self.src_embed(src).unbind(1))
        fwd, bwd = _unroll(self.encoder_fwd, steps), _unroll(self.encoder_bwd, steps, reverse=True)
        steps = [torch.cat(pair, dim=1) for pair in zip(fwd, bwd, strict=True)]
        for i, cell in enumerate(self.encoder):
            out = _unroll(cell, steps)
            steps = [o + s for o, s in zip(out, steps, strict=True)] if i >= 1 else out
        return torch.stack(steps, dim=1)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Logits (batch, target length, vocab); the decoder reads `tgt` (teacher forcing)."""
        memory = self.encode(src)
        keys = self.key(memory)
        batch, hidden = src.shape[0], memory.shape[-1]
        zeros = memory.new_zeros(batch, hidden)
        states = [(zeros, zeros)] * len(self.decoder)
        outputs = []
        for y in self.tgt_embed(tgt).unbind(1):
            states[0] = self.decoder[0](y, states[0])
            x = states[0][0]
            scores = self.score(torch.tanh(keys + self.query(x).unsqueeze(1))).squeeze(-1)
            context = torch.bmm(torch.softmax(scores, dim=1).unsqueeze(1), memory).squeeze(1)
            for i in range(1, len(self.decoder)):
                states[i] = self.decoder[i](torch.cat([x, context], dim=1), states[i])
                x = states[i][0] + x if i >= 2 else states[i][0]
            outputs.append(x)
        return self.head(torch.stack(outputs, dim=1))


def _build(
    make: Callable[[], nn.Module], lengths: tuple[int, ...], vocab: int, seed: int = 0
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Seeds, builds the module in eval mode and draws one batch-1 token sequence per length."""
    torch.manual_seed(seed)
    module = make().eval()
    return module, tuple(tokens(1, length, vocab) for length in lengths)


def _entry(
    name: str,
    family: str,
    description: str,
    make: Callable[[], nn.Module],
    lengths: tuple[int, ...],
    vocab: int,
) -> ZooModel:
    """A token-sequence entry trained to predict the next token of its last input."""
    return ZooModel(
        name,
        family,
        description,
        lambda: _build(make, lengths, vocab),
        next_token_loss,
    )


def _lstm_lm(
    name: str, unrolled: bool, vocab: int, hidden: int, layers: int, steps: int
) -> ZooModel:
    """An LSTM LM entry, fused (`nn.LSTM`) or unrolled (`nn.LSTMCell` per step)."""
    kind = "unrolled nn.LSTMCell" if unrolled else "nn.LSTM"
    cls = UnrolledLSTMLanguageModel if unrolled else LSTMLanguageModel
    return _entry(
        name,
        "lstm-lm",
        f"LSTM LM, {layers} x {hidden} {kind}, vocab {vocab}, input 1x{steps} tokens",
        lambda: cls(vocab, hidden, layers),
        (steps,),
        vocab,
    )


def _wavenet(name: str, stacks: int, layers: int, residual: int, skip: int, steps: int) -> ZooModel:
    """A WaveNet entry on 8-bit mu-law samples."""
    return _entry(
        name,
        "wavenet",
        f"WaveNet, {stacks} x {layers} dilated layers (dilation 1..{2 ** (layers - 1)}), "
        f"{residual} residual / {skip} skip channels, input 1x{steps} samples",
        lambda: WaveNet(stacks, layers, residual, skip),
        (steps,),
        256,
    )


def _gnmt(name: str, vocab: int, hidden: int, layers: int, length: int) -> ZooModel:
    """A GNMT entry with `layers` encoder and decoder layers and equal source/target lengths."""
    return _entry(
        name,
        "gnmt",
        f"GNMT, {layers}+{layers} LSTM layers x {hidden} (bidirectional first), additive "
        f"attention, vocab {vocab}, inputs 1x{length} source + 1x{length} target tokens",
        lambda: GNMT(vocab, hidden, layers, layers),
        (length, length),
        vocab,
    )


MODELS = (
    _wavenet("wavenet-tiny", 1, 4, 16, 32, 64),
    _wavenet("wavenet", 3, 10, 64, 256, 1024),
    _lstm_lm("lstm-lm-tiny", False, 1000, 64, 2, 16),
    _lstm_lm("lstm-lm", False, 10000, 650, 2, 35),
    _lstm_lm("lstm-lm-unrolled-32", True, 1000, 128, 2, 32),
    _lstm_lm("lstm-lm-unrolled-512", True, 10000, 650, 2, 512),
    _gnmt("gnmt-tiny", 1000, 64, 2, 8),
    _gnmt("gnmt-small", 8000, 256, 4, 16),
    _gnmt("gnmt", 32000, 1024, 8, 32),
)
"""The sequence-model entries, smallest first within each family."""
