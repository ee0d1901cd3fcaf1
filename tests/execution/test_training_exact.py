"""Training through fused attention is eager autograd's: the backend, capture, measure, replay.

make_fx and AOT autograd apply a decomposition below autograd, which still records the op's own
backward. torch.export's default table rewrites CPU flash attention into the math path, whose
second output is the attention weights [N, H, L, S] where the op's backward reads its logsumexp
[N, H, L]: every model through CPU SDPA trained on garbage gradients while the reordered program
still matched the captured one bit for bit. Here losses and gradients are compared with eager
autograd at each of several SGD steps, from eager's weights at that step, on the same inputs.

Tolerance: float32 reassociation, the one `measure` and `replay` use (`EAGER_RTOL` 1e-4,
`EAGER_ATOL` 1e-5). The programs run decomposed kernels (softmax, layer norm, GELU as separate
ATen ops) where eager runs fused ones; the largest gradient difference seen is ~1e-5 of a
tensor's largest gradient (resnet-tiny's batch norms), while the broken attention gradients were
off by more than the gradients themselves.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from graphopt.execution.backend import backend
from graphopt.execution.measure import EAGER_ATOL, EAGER_RTOL, measure_orders
from graphopt.execution.replay import replay
from graphopt.importers import torch_export
from graphopt.importers.torch_export import capture_training_step
from graphopt.importers.zoo.hf import LogitsOnly
from graphopt.ir.solution import random_schedule

CLOSE = {"rtol": EAGER_RTOL, "atol": EAGER_ATOL}
"""Losses and gradients against eager autograd's: float32 reassociation (module docstring)."""
STEPS = 3
LEARNING_RATE = 0.1
"""Eager's SGD rate: large enough that the weights change visibly from step to step."""
FORWARD = "aten._scaled_dot_product_flash_attention_for_cpu"
BACKWARD = "aten._scaled_dot_product_flash_attention_for_cpu_backward"


class SelfAttention(nn.Module):
    """nn.MultiheadAttention without weights: its fast path calls CPU flash attention."""

    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)
        self.out = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.attention(x, x, x, need_weights=False)[0])


class TwoAttentions(nn.Module):
    """F.scaled_dot_product_attention twice: causal, then not, over a different key length."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.memory = nn.Linear(16, 32)
        self.out = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, length, _ = x.shape
        q, k, v = self.qkv(x).view(n, length, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        k2, v2 = self.memory(x[:, :3]).view(n, 3, 2, 2, 8).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(y, k2, v2)
        return self.out(y.transpose(1, 2).reshape(n, length, 16))


def _self_attention() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return SelfAttention(), (torch.randn(2, 5, 16),)


def _two_attentions() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return TwoAttentions(), (torch.randn(2, 5, 16),)


def _encoder_layer() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    return layer, (torch.randn(2, 5, 16),)


def _transformer(
    model_class: str, config_class: str, **config: object
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A one-layer `transformers` model with SDPA attention: random weights, nothing downloaded.

    T5 (an encoder-decoder) also takes decoder input ids.
    """
    import transformers

    settings = getattr(transformers, config_class)(
        vocab_size=50, use_cache=False, attn_implementation="sdpa", **config
    )
    model = getattr(transformers, model_class)(settings)
    names = ("input_ids", "decoder_input_ids") if model_class.startswith("T5") else ("input_ids",)
    return LogitsOnly(model, names), tuple(torch.randint(0, 50, (1, 8)) for _ in names)


def _gpt2() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _transformer(
        "GPT2LMHeadModel",
        "GPT2Config",
        n_layer=1,
        n_embd=16,
        n_head=2,
        n_positions=16,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )


def _bert() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _transformer(
        "BertForMaskedLM",
        "BertConfig",
        num_hidden_layers=1,
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def _t5() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _transformer(
        "T5ForConditionalGeneration",
        "T5Config",
        num_layers=1,
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_heads=2,
        dropout_rate=0.0,
    )


def _llama() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _transformer(
        "LlamaForCausalLM",
        "LlamaConfig",
        num_hidden_layers=1,
        hidden_size=16,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=32,
        attention_dropout=0.0,
    )


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "mha": _self_attention,
    "sdpa-causal-and-not": _two_attentions,
    "encoder-layer": _encoder_layer,
    "gpt2-sdpa": _gpt2,
    "bert-sdpa": _bert,
    "t5-sdpa": _t5,
    "llama-sdpa": _llama,
}
FAST = ("mha", "sdpa-causal-and-not")
"""Models the default run trains (a few seconds); the others are `slow`."""
ZOO_BYTES = 64 * 2**20
"""Zoo models whose training step holds at most this many tensor bytes train in the slow run."""


Loss = Callable[[torch.Tensor, tuple[torch.Tensor, ...]], torch.Tensor]


def _build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return MODELS[name]()


def _loss(output: torch.Tensor, inputs: tuple[torch.Tensor, ...] = ()) -> torch.Tensor:
    return output.float().square().mean()


def _params(fast: tuple[str, ...], names: list[str]) -> list[object]:
    return [pytest.param(n, marks=() if n in fast else pytest.mark.slow) for n in names]


Step = tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, torch.Tensor]]
"""One eager SGD step: the weights it starts from, its loss and its gradients."""


def _eager_steps(
    module: nn.Module, inputs: tuple[torch.Tensor, ...], loss_of: Loss = _loss
) -> list[Step]:
    """`STEPS` SGD steps of eager autograd (step k seeded with k)."""
    optimizer = torch.optim.SGD(module.parameters(), lr=LEARNING_RATE)
    steps = []
    for k in range(STEPS):
        torch.manual_seed(k)
        weights = {key: p.detach().clone() for key, p in module.named_parameters()}
        optimizer.zero_grad()
        loss = loss_of(module(*inputs), inputs)
        loss.backward()
        grads = {key: p.grad.clone() for key, p in module.named_parameters()}
        steps.append((weights, loss.detach(), grads))
        optimizer.step()
    return steps


def _assert_step(
    step: int, loss: torch.Tensor, grads: dict[str, torch.Tensor], expected: Step
) -> None:
    """A step's loss and every gradient equal eager's within `CLOSE`."""
    torch.testing.assert_close(loss, expected[1], **CLOSE, msg=f"loss at step {step}")
    assert grads.keys() == expected[2].keys()
    for key, grad in expected[2].items():
        torch.testing.assert_close(grads[key], grad, **CLOSE, msg=f"{key} at step {step}")


def check_backend_trains_like_eager(
    module: nn.Module, inputs: tuple[torch.Tensor, ...], loss_of: Loss = _loss
) -> None:
    """`STEPS` SGD steps through graphopt's torch.compile backend against eager autograd.

    Each step starts from eager's weights at that step, so that the steps do not amplify float
    reassociation into chaos (a resnet's loss moves by a third per step at this rate) while the
    compiled forward and backward still run on new weights every step. The order comes from the
    compilers' best (a second per graph): values depend on the decompositions, not the order,
    which `test_execution.py` varies.
    """
    torch._dynamo.reset()
    module.train()
    expected = _eager_steps(copy.deepcopy(module), inputs, loss_of)
    compiler = backend(solver="compiler-best", seconds=None)
    compiled = torch.compile(module, backend=compiler)
    named = dict(module.named_parameters())
    try:
        for k, step in enumerate(expected):
            with torch.no_grad():
                for key, value in step[0].items():
                    named[key].copy_(value)
            module.zero_grad()
            torch.manual_seed(k)
            loss = loss_of(compiled(*inputs), inputs)
            loss.backward()
            _assert_step(k, loss.detach(), {key: p.grad for key, p in named.items()}, step)
    finally:
        torch._dynamo.reset()
    types = {a.get("type") for _, graph, _ in compiler.solutions for a in graph.op_attrs}
    assert {FORWARD, BACKWARD} <= types  # the fused op and its own backward ran


def check_capture_trains_like_eager(
    module: nn.Module, inputs: tuple[torch.Tensor, ...], loss_of: Loss = _loss
) -> None:
    """The captured training step at each of eager's `STEPS` SGD steps, from its weights.

    Captured with learning rate 1, its updated parameters are p - g, so p minus them gives the
    gradients to a few ulps of p.
    """
    module.train()
    expected = _eager_steps(copy.deepcopy(module), inputs, loss_of)
    capture = capture_training_step(module, inputs, loss=loss_of, learning_rate=1.0)
    _, buffers, *_ = capture.args
    buffers = {key: value.clone() for key, value in buffers.items()}  # the module keeps its own
    for k, step in enumerate(expected):
        torch.manual_seed(k)
        loss, *updated = capture.program(step[0], buffers, *inputs)
        trainable = [key for key, p in module.named_parameters() if p.requires_grad]
        grads = {key: step[0][key] - value for key, value in zip(trainable, updated, strict=True)}
        _assert_step(k, loss, grads, step)


@pytest.mark.parametrize("name", _params(FAST[1:], list(MODELS)))
def test_backend_trains_like_eager(name: str) -> None:
    check_backend_trains_like_eager(*_build(name))


@pytest.mark.parametrize("name", _params(FAST, list(MODELS)))
def test_captured_training_step_trains_like_eager(name: str) -> None:
    check_capture_trains_like_eager(*_build(name))


def _small_zoo_models() -> list[str]:
    from graphopt.importers.zoo import ZOO
    from graphopt.importers.zoo_sizes import zoo_sizes

    return [name for name in ZOO if zoo_sizes(name)["train"]["tensor_bytes"] <= ZOO_BYTES]


@pytest.mark.slow
@pytest.mark.parametrize("name", _small_zoo_models())
def test_zoo_training_steps_train_like_eager(name: str) -> None:
    """Every zoo model small enough, with its own loss: the captured step against eager."""
    from graphopt.importers.zoo import get_model

    entry = get_model(name)
    check_capture_trains_like_eager(*entry.build(), entry.loss)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2-tiny-sdpa", "llama-tiny-sdpa"])
def test_zoo_sdpa_models_train_like_eager_through_the_backend(name: str) -> None:
    from graphopt.importers.zoo import get_model

    entry = get_model(name)
    check_backend_trains_like_eager(*entry.build(), entry.loss)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("capture", ["training step", "inference", "inference fx"])
def test_capture_restores_the_callers_modes(training: bool, capture: str) -> None:
    from graphopt.importers.torch_export import capture_module, import_module

    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1), torch.nn.ReLU())
    inputs = (torch.randn(4, 8),)
    module.train(training)
    module[1].eval()  # a submodule in another mode than its parent keeps it
    if capture == "training step":
        capture_training_step(module, inputs)
    elif capture == "inference":
        capture_module(module, inputs)
    else:
        import_module(module, inputs, method="fx")
    assert module.training is training and module[0].training is training
    assert module[1].training is False


class _Calls(TorchDispatchMode):
    """Records the ATen calls (op, real arguments) that a table decomposes."""

    def __init__(self, table: dict) -> None:
        super().__init__()
        self.table, self.calls = table, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if func in self.table:
            self.calls.append((func, tree_map(_copy, (args, kwargs))))
        return func(*args, **kwargs)


def _copy(value: object) -> object:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _shapes(value: object) -> list[object]:
    leaves = tree_flatten(value)[0]
    return [(tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else v for v in leaves]


def test_training_decompositions_return_what_each_op_returns() -> None:
    """Each decomposition the models' forward and backward reach, on their real arguments.

    A decomposition autograd traces through must return the op's outputs (count, shapes and
    dtypes), since the op's own backward reads them; CPU flash attention's in the default table
    does not, and must be left out.
    """
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    table = torch_export.training_decompositions()
    assert op in torch.export.default_decompositions() and op not in table
    recorder = _Calls(dict(torch.export.default_decompositions().items()))
    for name in ("mha", "sdpa-causal-and-not", "encoder-layer"):
        module, inputs = _build(name)
        with recorder:
            _loss(module(*inputs)).backward()
    reached = {func for func, _ in recorder.calls}
    assert op in reached and len(reached) > 10
    for func, (args, kwargs) in recorder.calls:
        if func not in table:
            continue
        real = func(*tree_map(_copy, args), **tree_map(_copy, kwargs))
        decomposed = table[func](*tree_map(_copy, args), **tree_map(_copy, kwargs))
        assert _shapes(decomposed) == _shapes(real), func


def test_attention_ops_are_priced_by_what_they_compute_and_save() -> None:
    """The fused ops that now stay: matmul FLOPs (causal half), output + logsumexp saved."""
    from graphopt.costmodels.roofline import attention_flops

    module, inputs = _build("sdpa-causal-and-not")
    graph = capture_training_step(module, inputs).graph
    forward = [j for j, a in enumerate(graph.op_attrs) if a.get("type") == FORWARD]
    backward = [j for j, a in enumerate(graph.op_attrs) if a.get("type") == BACKWARD]
    assert len(forward) == len(backward) == 2
    n, h, length, e, memory = 2, 2, 5, 8, 3
    causal = 2 * n * h * e * length * (length + 1)  # two products over L(L+1)/2 pairs
    full = 2 * 2 * n * h * e * length * memory
    assert [graph.op_attrs[j]["flops"] for j in forward] == [causal, full]
    assert [graph.op_attrs[j]["flops"] for j in backward] == [2.5 * causal, 2.5 * full]
    assert attention_flops((n, h, length, e), (n, h, memory, e), (n, h, memory, e)) == full
    for j in forward:  # output [N, H, L, E] and logsumexp [N, H, L], no [N, H, L, S] weights
        sizes = [graph.tensor_size[t] for t in graph.outputs(j) if graph.tensor_size[t]]
        assert sorted(sizes) == [4 * n * h * length, 4 * n * h * length * e]
    for j in forward + backward:
        assert graph.op_attrs[j]["fusion"] == "contraction"
        assert graph.op_runtime[j] > 0


def test_measure_and_replay_compare_with_eager(monkeypatch) -> None:
    """Rows and replays say whether the values match eager autograd, beside the capture check.

    With the default table (the broken decomposition) the reordered program still equals the
    captured one bit for bit, and only the comparison with eager shows the gradients wrong.
    """
    module, inputs = _build("mha")
    capture = capture_training_step(module, inputs)
    graph = capture.graph
    rng = np.random.default_rng(0)
    order = random_schedule(graph, np.zeros(graph.n_ops, np.int32), 1, rng)
    rows = measure_orders(capture, {"random": order}, repeats=1)
    assert all(row.identical and row.eager is not None and row.eager.close for row in rows)
    two = random_schedule(graph, rng.integers(0, 2, graph.n_ops).astype(np.int32), 2, rng)
    result = replay(capture, two)
    assert result.eager is not None and result.eager.close

    monkeypatch.setattr(
        torch_export, "training_decompositions", torch.export.default_decompositions
    )
    broken = capture_training_step(module, inputs)
    rows = measure_orders(broken, {}, repeats=1)
    assert rows[0].identical and rows[0].eager is not None and not rows[0].eager.close
    assert rows[0].eager.difference > 10 * EAGER_ATOL
