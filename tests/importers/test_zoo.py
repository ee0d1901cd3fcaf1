"""The model zoo: every entry builds deterministically, runs, trains, exports and traces."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphopt.errors import GraphError
from graphopt.importers.zoo import ZOO, ZooModel, get_model

# Entries whose build, forward, backward and export each take well under a second or two.
TINY = {
    "resnet-tiny",
    "inception-tiny",
    "wavenet-tiny",
    "lstm-lm-tiny",
    "lstm-lm-unrolled-32",
    "gnmt-tiny",
    "gpt2-tiny",
    "gpt2-tiny-sdpa",
    "bert-tiny",
    "t5-tiny",
    "llama-tiny",
    "llama-tiny-sdpa",
    "vit-tiny",
}
# Entries whose exported inference graph has fewer than ~5,000 call_function nodes.
SMALL = TINY | {
    "resnet18",
    "resnet50",
    "resnet152",
    "inception-small",
    "googlenet",
    "wavenet",
    "lstm-lm",
    "gnmt-small",
    "gpt2",
    "bert-base",
    "t5-small",
    "llama-small",
    "vit-base",
}
# A tiny entry whose export takes a few seconds and adds nothing over gnmt-tiny (LSTMCell unrolled).
SLOW_EXPORT = {"lstm-lm-unrolled-32"}
BIG_TRAINING = "lstm-lm-unrolled-512"
FAMILIES = {
    "resnet",
    "inception",
    "wavenet",
    "lstm-lm",
    "gnmt",
    "gpt2",
    "bert",
    "t5",
    "llama",
    "vit",
}


def by_size(names: set[str] | list[str], fast: set[str]) -> list:
    """The names as pytest params, those outside `fast` marked slow."""
    return [
        pytest.param(name, marks=() if name in fast else pytest.mark.slow) for name in sorted(names)
    ]


def call_function_nodes(gm: torch.fx.GraphModule) -> int:
    return sum(node.op == "call_function" for node in gm.graph.nodes)


def trace_train_step(entry: ZooModel) -> torch.fx.GraphModule:
    """The training step (forward, loss, gradients of every parameter) traced with fake tensors."""
    module, inputs = entry.build()
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())

    def train_step(params, buffers, *inputs):
        output = torch.func.functional_call(module, (params, buffers), inputs)
        return torch.autograd.grad(entry.loss(output, inputs), list(params.values()))

    return make_fx(train_step, tracing_mode="fake")(params, buffers, *inputs)


def test_registry_is_keyed_by_name_and_covers_every_family() -> None:
    assert all(entry.name == name for name, entry in ZOO.items())
    assert {entry.family for entry in ZOO.values()} == FAMILIES
    assert all(entry.description and "\n" not in entry.description for entry in ZOO.values())
    assert set(ZOO) == SMALL | {BIG_TRAINING, "gnmt"}
    assert get_model("resnet18") is ZOO["resnet18"]


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(GraphError, match="unknown zoo model 'resnet-9000'") as info:
        get_model("resnet-9000")
    assert all(name in str(info.value) for name in ("resnet18", "gpt2-tiny", BIG_TRAINING))


@pytest.mark.parametrize("name", by_size(list(ZOO), TINY))
def test_build_is_deterministic(name: str) -> None:
    (m1, in1), (m2, in2) = ZOO[name].build(), ZOO[name].build()
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert list(s1) == list(s2)
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert len(in1) == len(in2) >= 1
    assert all(torch.equal(a, b) for a, b in zip(in1, in2, strict=True))


@pytest.mark.parametrize("name", by_size(list(ZOO), TINY))
def test_forward_and_loss_gradients(name: str) -> None:
    entry = ZOO[name]
    module, inputs = entry.build()
    assert not module.training
    assert all(x.shape[0] >= 1 for x in inputs)
    with torch.no_grad():
        output = module(*inputs)
    assert isinstance(output, torch.Tensor)
    assert torch.isfinite(output).all()
    loss = entry.loss(module(*inputs), inputs)
    assert loss.ndim == 0 and torch.isfinite(loss)
    params = list(module.parameters())
    grads = torch.autograd.grad(loss, params)
    assert all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("name", by_size(SMALL, TINY - SLOW_EXPORT))
def test_exports_and_matches_eager(name: str) -> None:
    module, inputs = ZOO[name].build()
    program = torch.export.export(module, inputs, strict=False).run_decompositions()
    assert 0 < call_function_nodes(program.graph_module) < 5_000
    with torch.no_grad():
        expected = module(*inputs)
        actual = program.module()(*inputs)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)


def test_training_step_traces_with_a_gradient_per_parameter() -> None:
    entry = ZOO["gpt2-tiny"]
    gm = trace_train_step(entry)
    module, _ = entry.build()
    (output,) = [node for node in gm.graph.nodes if node.op == "output"]
    assert len(output.args[0]) == len(list(module.parameters()))
    assert 300 < call_function_nodes(gm) < 5_000


@pytest.mark.slow
def test_unrolled_lstm_training_step_has_over_25k_nodes() -> None:
    assert call_function_nodes(trace_train_step(ZOO[BIG_TRAINING])) >= 25_000
