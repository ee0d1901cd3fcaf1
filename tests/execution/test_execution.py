"""Solutions run on the real program: applied orders, measured memory, replays, the backend.

Every check compares a measurement with the cost model's prediction exactly, and the outputs
with the captured program's bit for bit, over several valid orders of each graph.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx
from typer.testing import CliRunner

from graphopt.cli import app
from graphopt.costmodels.machine import Machine
from graphopt.errors import ModelImportError, SolutionError
from graphopt.execution.apply import apply, outputs_identical, predict, read_solution_for
from graphopt.execution.backend import backend
from graphopt.execution.measure import LiveBytes, fresh_args, measure, measure_orders
from graphopt.execution.replay import replay
from graphopt.importers import capture_model
from graphopt.importers.torch_export import (
    capture_graph_module,
    capture_module,
    capture_training_step,
)
from graphopt.ir.io import solution_to_json, write_graph, write_solution
from graphopt.ir.solution import Solution, random_schedule
from graphopt.optimize import optimize
from graphopt.solvers.remat import checkpoint_segments, greedy_recompute, sqrt_length

runner = CliRunner()


class Branchy(nn.Module):
    """Two branches of different widths joined late, a normalization and a tuple-output op."""

    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.Linear(16, 64)
        self.narrow = nn.Linear(16, 8)
        self.big = nn.Linear(16, 512)
        self.out = nn.Linear(72, 4)
        self.norm = nn.LayerNorm(72)
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.3)
        self.drop_narrow = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn(x)
        a = torch.relu(self.wide(x)).view(x.shape[0], 8, 8).transpose(1, 2).reshape(-1, 64)
        b = self.drop_narrow(torch.sigmoid(self.narrow(x)))
        c = torch.tanh(self.big(x)).mean(dim=1, keepdim=True)  # a large intermediate, reduced
        joined = self.drop(self.norm(torch.cat([a, b * c], dim=1)))
        top, _ = joined.max(dim=1, keepdim=True)
        return self.out(joined) + top


def _build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return Branchy(), (torch.randn(32, 16),)


def _orders(graph, count: int, seed: int = 0) -> list[Solution]:
    """`count` random valid 1-device orders."""
    rng = np.random.default_rng(seed)
    zeros = np.zeros(graph.n_ops, np.int32)
    return [random_schedule(graph, zeros, 1, rng) for _ in range(count)]


def _persistent(graph) -> int:
    return int(graph.tensor_size[graph.tensor_persistent].sum())


@pytest.mark.parametrize("training", [False, True])
def test_applied_orders_measure_exactly_the_prediction(training: bool) -> None:
    module, inputs = _build()
    capture = capture_training_step(module, inputs) if training else capture_module(module, inputs)
    graph = capture.graph
    assert graph.tensor_output.sum() == (1 + len(list(module.parameters())) if training else 1)
    reference = measure(capture.program, capture.args, repeats=1, profile=False)
    peaks = set()
    for solution in _orders(graph, 6):
        run = measure(apply(capture, solution), capture.args, repeats=1, profile=False)
        assert outputs_identical(reference.outputs, run.outputs)
        assert run.live_peak == predict(capture, solution).peak_memory - _persistent(graph)
        peaks.add(run.live_peak)
    assert len(peaks) > 1  # the orders differ in memory, and each is measured as predicted


def test_training_step_keeps_random_ops_in_their_traced_order() -> None:
    module, inputs = _build()
    graph = capture_training_step(module, inputs).graph
    random = [j for j, attrs in enumerate(graph.op_attrs) if "bernoulli" in str(attrs.get("type"))]
    assert len(random) == 2  # one per dropout
    first, second = random
    assert first in graph.predecessors(second).tolist()
    assert f"{graph.op_names[first]}:rng" in graph.tensor_ids


def test_every_reader_stays_before_an_in_place_write() -> None:
    def program(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x * 2
        total = y.sum()  # reads y before the write
        view = y[0]  # a view taken before the write ...
        y.add_(1)
        return total + view.sum(), y * 3  # ... and read after it

    traced = make_fx(program, tracing_mode="fake")(torch.randn(4, 4))
    capture = capture_graph_module(traced, name="inplace")
    graph = capture.graph
    assert capture.writes == {"add_": "mul"}
    write = graph.op_ids["add_"]
    assert graph.op_ids["sum_1"] in graph.predecessors(write).tolist()
    assert write in graph.predecessors(graph.op_ids["sum_2"]).tolist()
    x = torch.randn(4, 4)
    expected = traced(x)
    for solution in _orders(graph, 20):
        assert outputs_identical(expected, apply(capture, solution)(x))


def test_a_dead_chain_of_views_frees_its_base_where_the_model_does() -> None:
    def program(x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(64)
        positions.unsqueeze(0).unsqueeze(0)  # a view chain nobody reads
        y = x * 2
        return (y + 1) * y

    traced = make_fx(program, tracing_mode="fake")(torch.randn(16))
    capture = capture_graph_module(traced, name="dead-views")
    x = torch.randn(16)
    for solution in _orders(capture.graph, 10):
        run = measure(apply(capture, solution), (x,), repeats=1, profile=False)
        assert run.live_peak == predict(capture, solution).peak_memory - 64  # x is persistent


def test_live_bytes_counts_new_storages_once_and_frees_them() -> None:
    x = torch.randn(100)
    with LiveBytes() as live:
        y = x * 2  # 400 bytes
        view = y.view(10, 10)  # aliases y: nothing new
        x.add_(1)  # in place on an input: nothing new
        del y
        z = view + 1  # y's storage still held by the view
        assert live.current == [800]
        del view
        assert live.current == [400]
        del z
    assert live.peak == [800] and live.current == [0]


def test_measure_orders_on_fresh_inputs() -> None:
    module, inputs = _build()
    capture = capture_module(module, inputs)
    args = fresh_args(capture, seed=3)
    assert not torch.equal(args[capture.inputs[0]], inputs[0])
    assert torch.equal(fresh_args(capture, seed=3)[capture.inputs[0]], args[capture.inputs[0]])
    solutions = dict(zip("abc", _orders(capture.graph, 3), strict=True))
    rows = measure_orders(capture, solutions, seed=3, repeats=1)
    assert [row.label for row in rows] == ["captured", "a", "b", "c"]
    for row in rows:
        assert row.identical and row.measurement.live_peak == row.predicted_live
        assert row.measurement.allocator_peak is None or row.measurement.allocator_peak >= 0


def test_replay_measures_each_device_as_predicted() -> None:
    module, inputs = _build()
    for capture in (capture_module(module, inputs), capture_training_step(module, inputs)):
        graph = capture.graph
        reference = measure(capture.program, capture.args, repeats=1, profile=False)
        rng = np.random.default_rng(1)
        for _ in range(3):
            placement = rng.integers(0, 2, graph.n_ops).astype(np.int32)
            result = replay(capture, random_schedule(graph, placement, 2, rng))
            expected = tuple(
                p - q for p, q in zip(result.predicted, result.persistent, strict=True)
            )
            assert result.measured == expected
            assert outputs_identical(reference.outputs, result.outputs)


def test_solution_of_another_graph_is_refused_naming_the_op(tmp_path) -> None:
    module, inputs = _build()
    capture = capture_module(module, inputs)
    training = capture_training_step(module, inputs)
    path = tmp_path / "train.json"
    write_solution(training.graph, _orders(training.graph, 1)[0], path)
    first_missing = next(op for op in capture.graph.op_names if op not in training.graph.op_ids)
    with pytest.raises(SolutionError, match=f"op '{first_missing}' of the captured model"):
        read_solution_for(path, capture)


def test_recomputing_solutions_run_on_the_program_as_predicted() -> None:
    """Section 15 on the real program: every op run again is a copied fx node reading the
    latest values, the live peak is the predicted one to the byte, and the outputs are the
    captured program's bit for bit (and eager PyTorch's up to reassociation)."""
    module, inputs = _build()
    capture = capture_training_step(module, inputs)
    graph = capture.graph
    greedy, _ = greedy_recompute(graph, graph.topological_order, max_overhead=0.5)
    solutions = {
        "sqrt": checkpoint_segments(graph, graph.topological_order, sqrt_length(graph)),
        "greedy": greedy,
    }
    assert all(solution.remat for solution in solutions.values())
    rows = measure_orders(capture, solutions, repeats=1, profile=False)
    for row, solution in zip(rows[1:], solutions.values(), strict=True):
        assert row.measurement.live_peak == row.predicted_live
        assert row.identical and row.eager is not None and row.eager.close
        calls = [n for n in apply(capture, solution).graph.nodes if n.op == "call_function"]
        plain = [n for n in capture.program.graph.nodes if n.op == "call_function"]
        assert len(calls) >= len(plain) + len(solution.order) - graph.n_ops
    assert rows[2].predicted_live < rows[0].predicted_live


def test_replay_refuses_a_recomputing_solution() -> None:
    module, inputs = _build()
    capture = capture_training_step(module, inputs)
    solution = checkpoint_segments(capture.graph, capture.graph.topological_order, 4)
    with pytest.raises(SolutionError, match="replay does not run yet"):
        replay(capture, solution)


def test_multi_device_solution_is_refused_by_apply() -> None:
    module, inputs = _build()
    capture = capture_module(module, inputs)
    graph = capture.graph
    rng = np.random.default_rng(0)
    two = random_schedule(graph, rng.integers(0, 2, graph.n_ops).astype(np.int32), 2, rng)
    with pytest.raises(SolutionError, match="graphopt replay"):
        apply(capture, two)


def test_capture_model_names_match_the_zoo_export() -> None:
    from graphopt.importers.zoo import export_graph

    capture = capture_model("wavenet-tiny")
    exported = export_graph("wavenet-tiny")
    assert capture.graph.name == exported.name
    assert capture.graph.op_names == exported.op_names
    with pytest.raises(ModelImportError, match="not a zoo model"):
        capture_model("no-such-model")


def test_cli_apply_measure_replay(tmp_path) -> None:
    capture = capture_model("wavenet-tiny")
    graph = capture.graph
    graph_path, one, two = tmp_path / "g.json", tmp_path / "one.json", tmp_path / "two.json"
    write_graph(graph, graph_path)
    write_solution(graph, _orders(graph, 1)[0], one)
    rng = np.random.default_rng(0)
    placement = rng.integers(0, 2, graph.n_ops).astype(np.int32)
    write_solution(graph, random_schedule(graph, placement, 2, rng), two)

    code = tmp_path / "program.py"
    result = runner.invoke(app, ["apply", "wavenet-tiny", str(one), "--code", str(code), "--json"])
    assert result.exit_code == 0, result.output
    applied = json.loads(result.stdout)
    assert applied["outputs_identical"] and "def forward" in code.read_text()
    assert applied["eager_close"] and applied["eager_difference"] < 1e-5
    assert applied["measured_live_peak"] == applied["predicted_peak"] - applied["persistent"]

    result = runner.invoke(app, ["measure", "wavenet-tiny", str(one), "--repeats", "1", "--json"])
    assert result.exit_code == 0, result.output
    orders = json.loads(result.stdout)["orders"]
    assert [o["order"] for o in orders] == ["captured", "one.json"]
    assert all(o["measured_live_peak"] == o["predicted_live_peak"] for o in orders)
    assert all(o["eager_close"] for o in orders)

    result = runner.invoke(app, ["replay", "wavenet-tiny", str(two), "--json"])
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.stdout)
    assert replayed["outputs_identical"] and replayed["eager_close"]
    assert all(d["measured_live_peak"] == d["predicted_live_peak"] for d in replayed["devices"])
    result = runner.invoke(app, ["replay", "wavenet-tiny", str(two)])
    assert result.exit_code == 0, result.output
    assert "identical to the captured program's, close to eager PyTorch's" in result.output

    result = runner.invoke(app, ["apply", "wavenet-tiny", str(two)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "graphopt replay wavenet-tiny" in result.output

    result = runner.invoke(app, ["apply", "wavenet-tiny", "--train", str(one)])
    assert result.exit_code == 2 and "of the captured model is not in the solution" in result.output


def test_backend_runs_the_optimized_order() -> None:
    torch._dynamo.reset()
    module, inputs = _build()
    module.eval()
    compiler = backend(seconds=1.0)
    with torch.no_grad():
        expected = module(*inputs)
        compiled = torch.compile(module, backend=compiler)
        assert torch.equal(compiled(*inputs), expected)
    (name, graph, solution) = compiler.solutions[0]
    assert solution.n_devices == 1 and graph.n_ops > 10
    best = optimize(graph, Machine(n_devices=1), solver="compiler-best").solution
    assert solution.objective["peak_memory"] <= predict_peak(graph, best)
    torch._dynamo.reset()


def test_backend_trains_with_forward_and_backward_graphs() -> None:
    torch._dynamo.reset()
    module, inputs = _build()
    module.eval()  # no dropout: eager and compiled gradients are comparable
    compiler = backend(seconds=0.5)
    compiled = torch.compile(module, backend=compiler)
    compiled(*inputs).sum().backward()
    grads = [p.grad.clone() for p in module.parameters()]
    module.zero_grad()
    module(*inputs).sum().backward()
    for got, expected in zip(grads, (p.grad for p in module.parameters()), strict=True):
        torch.testing.assert_close(got, expected)
    assert len(compiler.solutions) == 2  # the forward and the backward graph
    torch._dynamo.reset()


def predict_peak(graph, solution: Solution) -> int:
    from graphopt.costmodels.score import score

    return score(graph, solution, Machine(n_devices=1)).peak_memory


def test_solution_json_round_trip_applies(tmp_path) -> None:
    module, inputs = _build()
    capture = capture_module(module, inputs)
    solution = _orders(capture.graph, 1)[0]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(solution_to_json(capture.graph, solution)))
    loaded = read_solution_for(path, capture)
    assert np.array_equal(loaded.order, solution.order)


def test_measuring_a_training_step_leaves_the_model_as_it_was() -> None:
    module, inputs = _build()
    capture = capture_training_step(module, inputs)
    before = {key: value.clone() for key, value in module.state_dict().items()}
    measure_orders(capture, {"a": _orders(capture.graph, 1)[0]}, repeats=1)
    after = module.state_dict()
    assert all(torch.equal(before[key], after[key]) for key in before)


def test_cli_runs_fused_solutions_without_their_groups(tmp_path) -> None:
    """A fused solution runs op by op (its groups are the compiler's to apply): replay keeps
    each copy until its last reader of the order, measures what the unfused order predicts,
    and a refused command prints its one error line and no note (issue 43's CLI fuzz tier)."""
    graph = capture_model("wavenet-tiny").graph
    graph_path, one, two = tmp_path / "g.json", tmp_path / "one.json", tmp_path / "two.json"
    write_graph(graph, graph_path)
    for devices, path in ((1, one), (2, two)):
        result = runner.invoke(
            app,
            ["optimize", str(graph_path), "--devices", str(devices), "--solver", "brkga"]
            + ["--fusion", "search", "--budget", "60", "-o", str(path), "--json"],
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["fusion_groups"] > 0

    result = runner.invoke(app, ["replay", "wavenet-tiny", str(two), "--json"])
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.stdout)
    assert replayed["outputs_identical"] and replayed["eager_close"]
    assert all(d["measured_live_peak"] == d["predicted_live_peak"] for d in replayed["devices"])
    assert "fusion groups are not applied" in result.stderr

    result = runner.invoke(app, ["apply", "wavenet-tiny", str(one), "--json"])
    assert result.exit_code == 0, result.output
    applied = json.loads(result.stdout)
    assert applied["measured_live_peak"] == applied["predicted_peak"] - applied["persistent"]

    result = runner.invoke(app, ["apply", "wavenet-tiny", str(two)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: ")
