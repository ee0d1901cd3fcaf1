"""PyTorch importer: op structure, views, FLOPs against torch's counter, training steps, errors."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from graphopt.costmodels.roofline import DEVICE_SPECS, annotate_runtimes
from graphopt.costmodels.score import score
from graphopt.errors import ModelImportError
from graphopt.importers.torch_export import _quiet_torch, import_module, import_training_step
from graphopt.ir.solution import topological_schedule

REGISTRY_TYPES = {
    str(p._qualified_op_name).replace("::", ".")
    for p in flop_registry
    if hasattr(p, "_qualified_op_name")
}


def mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), (torch.randn(3, 4),)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.max_pool2d(torch.relu(self.bn(self.conv1(x))), 2)
        return self.fc(self.conv2(y).flatten(1)).softmax(-1)


def cnn() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return SmallCNN(), (torch.randn(2, 3, 16, 16),)


def single_device_peak(graph) -> int:
    solution = topological_schedule(graph, np.zeros(graph.n_ops, np.int32), 1)
    return score(graph, solution).peak_memory


def test_mlp_matches_a_hand_computed_graph():
    graph = import_module(*mlp())
    names = set(graph.op_names)
    assert {
        "0.weight",
        "0.bias",
        "2.weight",
        "2.bias",
        "input",
        "addmm",
        "relu",
        "addmm_1",
    } == names
    sizes = dict(zip(graph.tensor_names, graph.tensor_size.tolist(), strict=True))
    assert sizes == {
        "0.weight:0": 128,
        "0.bias:0": 32,
        "2.weight:0": 64,
        "2.bias:0": 8,
        "input:0": 48,
        "addmm:0": 96,
        "relu:0": 96,
        "addmm_1:0": 24,
    }
    # The transposed weights are views: addmm reads the weight itself.
    assert "0.weight:0" in {graph.tensor_names[t] for t in graph.inputs(graph.op_ids["addmm"])}
    assert graph.tensor_persistent.sum() == 5
    # Persistent 280 B; at relu, addmm:0 (96) and relu:0 (96) are both resident; the returned
    # addmm_1:0 is a graph output.
    assert single_device_peak(graph) == 472 <= graph.total_tensor_size
    assert [graph.tensor_names[t] for t in np.flatnonzero(graph.tensor_output)] == ["addmm_1:0"]


def test_ops_carry_fusion_classes_compute_times_and_the_kernel():
    graph = import_module(*mlp(), device="a100")
    fusion = {name: graph.op_attrs[j]["fusion"] for j, name in enumerate(graph.op_names)}
    assert fusion["addmm"] == fusion["addmm_1"] == "contraction"
    assert fusion["relu"] == "elementwise" and fusion["input"] == "none"
    spec = DEVICE_SPECS["a100"]
    addmm = graph.op_ids["addmm"]
    assert graph.op_compute_time[addmm] == graph.op_attrs[addmm]["flops"] / spec.fp32_flops
    assert graph.kernel == (spec.memory_bandwidth, spec.launch_overhead)
    training = import_training_step(*mlp())
    classes = {attrs.get("type"): attrs["fusion"] for attrs in training.op_attrs}
    assert classes["aten.sum"] == "reduction" and classes["aten.mm"] == "contraction"
    assert classes["aten.where"] == classes["aten.le"] == "elementwise"  # tagged pointwise
    assert classes["aten.full_like"] == "none"


def test_cnn_flops_match_torch_flop_counter_and_modules_are_kept():
    module, inputs = cnn()
    graph = import_module(module, inputs)
    with FlopCounterMode(display=False) as counter:
        module(*inputs)
    flops = graph.op_metadata("flops")
    counted = [t in REGISTRY_TYPES for t in graph.op_types]
    assert flops[counted].sum() == counter.get_total_flops()
    assert flops[~np.isnan(flops)].sum() > counter.get_total_flops()  # relu, softmax counted too
    modules = {a.get("module") for a in graph.op_attrs}
    assert {"conv1", "bn", "conv2", "fc"} <= modules
    # max_pool2d_with_indices yields two tensors; only values are read downstream.
    pool = graph.op_ids["max_pool2d_with_indices"]
    assert len(graph.outputs(pool)) == 2
    assert single_device_peak(graph) <= graph.total_tensor_size


def test_views_allocate_nothing():
    class Views(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * 2
            parts = y.view(4, 4).split(2)
            return parts[0].reshape(-1) + parts[1].reshape(-1)

    graph = import_module(Views(), (torch.randn(16),))
    assert sorted(graph.op_types) == ["", "aten.add", "aten.mul"]
    assert graph.total_tensor_size == 64 + 64 + 32  # input, mul, add
    add = graph.op_ids["add"]
    assert [graph.tensor_names[t] for t in graph.inputs(add)] == ["mul:0"]


def test_fx_fallback_agrees_with_export_on_flops():
    module, inputs = cnn()
    exported = import_module(module, inputs)
    traced = import_module(module, inputs, method="fx")
    assert np.nansum(traced.op_metadata("flops")) == np.nansum(exported.op_metadata("flops"))
    assert traced.attrs["source"] == "torch.fx"
    assert single_device_peak(traced) <= traced.total_tensor_size
    # Every tensor carries its shape and dtype, as the export path's do, and they match its size.
    for attrs, size in zip(traced.tensor_attrs, traced.tensor_size, strict=True):
        itemsize = np.dtype(attrs["dtype"]).itemsize
        assert size == itemsize * int(np.prod(attrs["shape"], dtype=np.int64))


def test_runtimes_are_the_roofline_of_the_chosen_device():
    module, inputs = mlp()
    graph = import_module(module, inputs, device="h100")
    assert graph.attrs["runtime_source"] == "roofline:h100"
    again = annotate_runtimes(graph, DEVICE_SPECS["h100"])
    np.testing.assert_array_equal(graph.op_runtime, again.op_runtime)
    kernels = np.array([a.get("kind") is None for a in graph.op_attrs])
    assert (graph.op_runtime[kernels] >= DEVICE_SPECS["h100"].launch_overhead).all()
    assert (graph.op_runtime[~kernels] == 0).all()


def test_training_step_has_backward_and_update_and_scores():
    module, inputs = cnn()
    graph = import_training_step(module, inputs, loss=lambda out, _: out.square().mean())
    inference = import_module(module, inputs)
    types = set(graph.op_types)
    assert {"aten.convolution", "aten.convolution_backward", "aten.sub"} <= types
    assert graph.n_ops > 2 * inference.n_ops
    assert graph.attrs["training"] is True
    forward_modules = {
        a.get("module") for a in graph.op_attrs if a.get("type") == "aten.convolution"
    }
    assert forward_modules == {"conv1", "conv2"}
    # BatchNorm's running-stat counter is updated in place: an op with a zero-size ordering edge.
    assert any(name.endswith(":done") for name in graph.tensor_names)
    assert single_device_peak(graph) <= graph.total_tensor_size
    assert module.training  # both imports leave the caller's mode (a new module's: train)


class DataDependent(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x


class WrongWidth(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


@pytest.mark.parametrize(
    ("module", "options", "pattern"),
    [
        (DataDependent(), {}, r"torch.export failed for DataDependent: .*\(hint: try method=fx\)"),
        (DataDependent(), {"strict": True}, r"failed for DataDependent: .*hint: try strict=False"),
        (DataDependent(), {"method": "fx"}, r"symbolic_trace failed for DataDependent"),
        (
            WrongWidth(),
            {"method": "fx"},
            r"shape propagation failed for WrongWidth at op 'fc': RuntimeError: a and b must",
        ),
    ],
)
def test_export_failure_is_one_line_and_torch_prints_nothing(capsys, module, options, pattern):
    # torch prints the partial graph, ShapeProp a traceback, the loggers more: all silenced.
    with pytest.raises(ModelImportError, match=pattern) as error:
        import_module(module, (torch.randn(3, 4),), **options)
    assert "\n" not in str(error.value)
    assert capsys.readouterr() == ("", "")


def test_quiet_torch_silences_torch_logs_and_warnings_then_restores_them(monkeypatch):
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    shapes = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    levels = {name: logging.getLogger(name).level for name in ("torch", shapes.name)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        with _quiet_torch():
            assert not shapes.isEnabledFor(logging.CRITICAL)
            assert not logging.getLogger("torch._dynamo").isEnabledFor(logging.ERROR)
            warnings.warn("noise", UserWarning, stacklevel=1)
        assert caught == [] and warnings.filters == filters
    assert {name: logging.getLogger(name).level for name in levels} == levels
    assert shapes.isEnabledFor(logging.WARNING)


def test_non_tensor_outputs_are_reported_by_op():
    class Nonzero(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nonzero(x)

    with pytest.raises(
        ModelImportError, match=r"tensor .nonzero:0.: shape .* is dynamic or data-dependent"
    ):
        import_module(Nonzero(), (torch.randn(5),))


def test_training_step_of_a_module_without_submodules_and_a_dict_output():
    class DictOutput(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.randn(4, 2))

        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"logits": x @ self.weight, "features": x}

    for module in (nn.Linear(4, 2), DictOutput()):
        graph = import_training_step(module, (torch.randn(3, 4),))
        assert "aten.sub" in graph.op_types  # the SGD update of the parameters
        assert single_device_peak(graph) <= graph.total_tensor_size


def test_training_step_without_parameters_is_refused():
    with pytest.raises(ModelImportError, match="Identity-train: the module has no trainable"):
        import_training_step(nn.Identity(), (torch.randn(3),))


def test_control_flow_is_refused_in_one_line():
    class Branches(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.sum() > 0, lambda y: y * 2, lambda y: y - 1, (x,))

    with pytest.raises(ModelImportError, match="subgraph of a control-flow op") as error:
        import_module(Branches(), (torch.randn(3),))
    assert "\n" not in str(error.value)
