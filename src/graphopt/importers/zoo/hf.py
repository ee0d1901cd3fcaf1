"""Transformer models from `transformers`, built from config objects with random weights.

Nothing is downloaded: each entry makes a config (dropout 0, `use_cache=False`) and the model class
initialises its weights from the seeded global generator. Attention is "eager" by default, so that
the score matmul, mask and softmax are separate ops of the graph; entries ending in "-sdpa" use
`torch.nn.functional.scaled_dot_product_attention` instead, one fused op per layer.

- GPT-2: A. Radford et al., "Language Models are Unsupervised Multitask Learners", OpenAI 2019.
- BERT: J. Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers for Language
  Understanding", NAACL 2019 (masked-LM head; the tiny size is the 2-layer, 128-wide model of
  I. Turc et al., "Well-Read Students Learn Better", arXiv:1908.08962, 2019).
- T5: C. Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
  Transformer", JMLR 2020.
- Llama: H. Touvron et al., "LLaMA: Open and Efficient Foundation Language Models",
  arXiv:2302.13971, 2023 (RMSNorm, rotary embeddings, SwiGLU; grouped-query attention here).
- ViT: A. Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers for Image Recognition
  at Scale", ICLR 2021.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from graphopt.importers.zoo._base import (
    Loss,
    ZooModel,
    classification_loss,
    next_token_loss,
    same_token_loss,
    tokens,
)

if TYPE_CHECKING:
    from types import ModuleType

    from transformers import PretrainedConfig, PreTrainedModel


def _transformers() -> ModuleType:
    """The `transformers` package, imported on first use.

    Importing it takes one to two seconds, which listing the zoo or building any of its other
    models would pay for nothing.
    """
    import transformers

    return transformers


class LogitsOnly(nn.Module):
    """A `transformers` model called with positional tensors, returning only its logits.

    `torch.export` and `make_fx` want plain tensors in and out: this binds the positional inputs
    to the model's keyword arguments and unwraps the `ModelOutput`.
    """

    def __init__(self, model: PreTrainedModel, input_names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.input_names = input_names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """The model's logits for `inputs`, given in the order of `input_names`."""
        return self.model(**dict(zip(self.input_names, inputs, strict=True))).logits


def _build(
    model_cls: str,
    config: Callable[[], PretrainedConfig],
    inputs: Callable[[], dict[str, torch.Tensor]],
    seed: int = 0,
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Seeds, builds the wrapped model in eval mode and draws its named inputs.

    The model class is looked up by name only here: `transformers` imports each model's module
    lazily, and the registry should not pay seconds of imports for models it does not build.
    """
    torch.manual_seed(seed)
    model = getattr(_transformers(), model_cls)(config())
    named = inputs()
    return LogitsOnly(model, tuple(named)).eval(), tuple(named.values())


def _entry(
    name: str,
    family: str,
    description: str,
    model_cls: str,
    config: Callable[[], PretrainedConfig],
    inputs: Callable[[], dict[str, torch.Tensor]],
    loss: Loss,
) -> ZooModel:
    """A `transformers` entry; `model_cls` names a class exported by `transformers`."""
    return ZooModel(name, family, description, lambda: _build(model_cls, config, inputs), loss)


def _attention(sdpa: bool) -> str:
    """The `attn_implementation` name: fused SDPA, or eager (separate matmul and softmax ops)."""
    return "sdpa" if sdpa else "eager"


def _sizes(layers: int, width: int, heads: int, ff: int) -> dict[str, int]:
    """The size fields that `transformers`' BERT, Llama and ViT configs name alike."""
    return {
        "num_hidden_layers": layers,
        "hidden_size": width,
        "num_attention_heads": heads,
        "intermediate_size": ff,
    }


def _gpt2(
    name: str, layers: int, width: int, heads: int, vocab: int, seq: int, sdpa: bool = False
) -> ZooModel:
    """A GPT-2 LM entry; token ids at the vocabulary's end are its bos/eos, as in GPT-2."""
    return _entry(
        name,
        "gpt2",
        f"GPT-2 LM, {layers} layers, {heads} heads, d={width}, vocab {vocab}, "
        f"{_attention(sdpa)} attention, input 1x{seq} tokens",
        "GPT2LMHeadModel",
        lambda: _transformers().GPT2Config(
            n_layer=layers,
            n_embd=width,
            n_head=heads,
            vocab_size=vocab,
            n_positions=max(seq, 1024),
            bos_token_id=vocab - 1,
            eos_token_id=vocab - 1,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            use_cache=False,
            attn_implementation=_attention(sdpa),
        ),
        lambda: {"input_ids": tokens(1, seq, vocab)},
        next_token_loss,
    )


def _bert(name: str, layers: int, width: int, heads: int, vocab: int, seq: int) -> ZooModel:
    """A BERT masked-LM entry (feed-forward 4x the width)."""
    return _entry(
        name,
        "bert",
        f"BERT masked LM, {layers} layers, {heads} heads, d={width}, vocab {vocab}, "
        f"input 1x{seq} tokens",
        "BertForMaskedLM",
        lambda: _transformers().BertConfig(
            **_sizes(layers, width, heads, 4 * width),
            vocab_size=vocab,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            use_cache=False,
            attn_implementation="eager",
        ),
        lambda: {"input_ids": tokens(1, seq, vocab)},
        same_token_loss,
    )


def _t5(name: str, layers: int, width: int, heads: int, ff: int, vocab: int, seq: int) -> ZooModel:
    """A T5 encoder-decoder entry, trained on next-token prediction of the decoder's input."""
    return _entry(
        name,
        "t5",
        f"T5, {layers}+{layers} layers, {heads} heads, d={width}, ff {ff}, vocab {vocab}, "
        f"inputs 1x{seq} source + 1x{seq} target tokens",
        "T5ForConditionalGeneration",
        lambda: _transformers().T5Config(
            num_layers=layers,
            d_model=width,
            d_kv=width // heads,
            d_ff=ff,
            num_heads=heads,
            vocab_size=vocab,
            dropout_rate=0.0,
            use_cache=False,
            attn_implementation="eager",
        ),
        lambda: {"input_ids": tokens(1, seq, vocab), "decoder_input_ids": tokens(1, seq, vocab)},
        next_token_loss,
    )


def _llama(
    name: str,
    layers: int,
    width: int,
    heads: int,
    kv_heads: int,
    ff: int,
    vocab: int,
    seq: int,
    sdpa: bool = False,
) -> ZooModel:
    """A Llama causal-LM entry with grouped-query attention (`kv_heads` key/value heads)."""
    return _entry(
        name,
        "llama",
        f"Llama LM, {layers} layers, {heads} heads ({kv_heads} kv), d={width}, ff {ff}, "
        f"vocab {vocab}, {_attention(sdpa)} attention, input 1x{seq} tokens",
        "LlamaForCausalLM",
        lambda: _transformers().LlamaConfig(
            **_sizes(layers, width, heads, ff),
            num_key_value_heads=kv_heads,
            vocab_size=vocab,
            max_position_embeddings=max(seq, 2048),
            attention_dropout=0.0,
            use_cache=False,
            attn_implementation=_attention(sdpa),
        ),
        lambda: {"input_ids": tokens(1, seq, vocab)},
        next_token_loss,
    )


def _vit(
    name: str, layers: int, width: int, heads: int, image: int, patch: int, classes: int
) -> ZooModel:
    """A ViT image-classifier entry (MLP 4x the width)."""
    return _entry(
        name,
        "vit",
        f"ViT classifier, {layers} layers, {heads} heads, d={width}, patch {patch}, "
        f"{classes} classes, input 1x3x{image}x{image}",
        "ViTForImageClassification",
        lambda: _transformers().ViTConfig(
            **_sizes(layers, width, heads, 4 * width),
            image_size=image,
            patch_size=patch,
            num_labels=classes,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            attn_implementation="eager",
        ),
        lambda: {"pixel_values": torch.randn(1, 3, image, image)},
        classification_loss,
    )


MODELS = (
    _gpt2("gpt2-tiny", 2, 64, 2, 1000, 32),
    _gpt2("gpt2-tiny-sdpa", 2, 64, 2, 1000, 32, sdpa=True),
    _gpt2("gpt2", 12, 768, 12, 50257, 64),
    _bert("bert-tiny", 2, 128, 2, 30522, 32),
    _bert("bert-base", 12, 768, 12, 30522, 128),
    _t5("t5-tiny", 2, 64, 4, 128, 1000, 16),
    _t5("t5-small", 6, 512, 8, 2048, 32128, 64),
    _llama("llama-tiny", 2, 64, 4, 2, 176, 1000, 32),
    _llama("llama-tiny-sdpa", 2, 64, 4, 2, 176, 1000, 32, sdpa=True),
    _llama("llama-small", 12, 768, 12, 4, 2048, 32000, 64),
    _vit("vit-tiny", 2, 64, 2, 32, 8, 10),
    _vit("vit-base", 12, 768, 12, 224, 16, 1000),
)
"""The `transformers` entries, smallest first within each family."""
