"""Formats: round trips, one malformed file per contract rule, and a fuzzed loader."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import assert_same_graph, solution, tiny
from graphopt.costmodels.score import score
from graphopt.errors import GraphError, SolutionError
from graphopt.ir.io import (
    graph_from_json,
    graph_to_json,
    read_graph,
    read_solution,
    solution_from_json,
    solution_to_json,
    write_graph,
    write_solution,
)
from strategies import fused_problems, graphs, problems

_DELETE = object()


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_json_and_npz_round_trip(tmp_path_factory, graph) -> None:
    folder = tmp_path_factory.mktemp("round")
    for name in ("g.json", "g.npz"):
        write_graph(graph, folder / name)
        assert_same_graph(graph, read_graph(folder / name))


def test_extra_fields_are_kept(tmp_path) -> None:
    document = graph_to_json(tiny())
    document["ops"][0]["flops"] = 1e9
    document["ops"][0]["shape"] = [4, 4]
    document["tensors"][0]["dtype"] = "float32"
    document["source"] = "hand-made"
    g = graph_from_json(document)
    assert g.op_types == ("MatMul", "Relu", "Add")
    assert g.op_metadata("flops")[0] == 1e9 and math.isnan(g.op_metadata("flops")[1])
    assert g.attrs["source"] == "hand-made"
    for name in ("g.json", "g.npz"):
        write_graph(g, tmp_path / name)
        assert_same_graph(g, read_graph(tmp_path / name))


def test_integral_float_sizes_are_the_same_integer() -> None:
    document = graph_to_json(tiny())
    document["tensors"][0]["size"] = 4e2
    assert graph_from_json(document).tensor_size[0] == 400


@settings(max_examples=60, deadline=None)
@given(problems())
def test_solution_round_trip(tmp_path_factory, problem) -> None:
    graph, _, s = problem
    path = tmp_path_factory.mktemp("sol") / "s.json"
    write_solution(graph, s, path)
    loaded = read_solution(path, graph)
    np.testing.assert_array_equal(loaded.placement, s.placement)
    np.testing.assert_array_equal(loaded.order, s.order)
    assert loaded.n_devices == s.n_devices


@settings(max_examples=60, deadline=None)
@given(fused_problems())
def test_fused_solution_round_trip(tmp_path_factory, problem) -> None:
    graph, _, s = problem
    path = tmp_path_factory.mktemp("sol") / "s.json"
    write_solution(graph, s, path)
    loaded = read_solution(path, graph)
    np.testing.assert_array_equal(loaded.fusion, s.fusion)
    assert score(graph, loaded) == score(graph, s)
    assert len(json.loads(path.read_text())["fusion"]) == s.n_groups


def _edit(path: str, value):
    """An edit of a document at a dotted path ('ops.1.runtime'); value _DELETE removes the key."""

    def apply(document):
        *parents, last = path.split(".")
        target = document
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        key = int(last) if last.isdigit() else last
        if value is _DELETE:
            del target[key]
        else:
            target[key] = value
        return document

    return apply


def _graph_doc() -> dict:
    return json.loads(json.dumps(graph_to_json(tiny())))


GRAPH_RULES = [
    (
        _edit("format", "graphopt.graph/2"),
        "format must be 'graphopt.graph/1', got 'graphopt.graph/2'",
    ),
    (_edit("format", _DELETE), "missing field 'format'"),
    (_edit("ops", _DELETE), "missing required field 'ops'"),
    (_edit("tensors", {}), "tensors: must be a JSON list"),
    (_edit("ops.1", "b"), r"ops\[1\]: must be a JSON object"),
    (_edit("ops.1.name", _DELETE), r"ops\[1\]: missing required field 'name'"),
    (_edit("ops.1.name", ""), r"ops\[1\]: name must be a non-empty string"),
    (_edit("ops.1.name", "a"), "op 'a': name is not unique"),
    (_edit("ops.1.runtime", -1.0), "op 'b': runtime must be a finite number >= 0, got -1.0"),
    (_edit("ops.1.runtime", float("nan")), "op 'b': runtime must be a finite number >= 0, got NaN"),
    (
        _edit("ops.1.runtime", float("inf")),
        "op 'b': runtime must be a finite number >= 0, got Infinity",
    ),
    (_edit("ops.1.runtime", "1"), "op 'b': runtime must be a finite number >= 0, got '1'"),
    (_edit("ops.1.temp_memory", -5), "op 'b': temp_memory must be an integer >= 0, got -5"),
    (_edit("ops.1.temp_memory", 2.5), "op 'b': temp_memory must be an integer >= 0, got 2.5"),
    (_edit("tensors.1.name", "a:0"), "tensor 'a:0': name is not unique"),
    (_edit("tensors.1.name", 7), r"tensors\[1\]: name must be a non-empty string, got 7"),
    (_edit("tensors.1.size", -1), "tensor 'b:0': size must be an integer >= 0, got -1"),
    (_edit("tensors.1.size", float("nan")), "tensor 'b:0': size must be an integer >= 0, got NaN"),
    (
        _edit("tensors.1.size", float("inf")),
        "tensor 'b:0': size must be an integer >= 0, got Infinity",
    ),
    (_edit("tensors.1.size", True), "tensor 'b:0': size must be an integer >= 0, got true"),
    (
        _edit("tensors.1.size", 2**70),
        r"tensor 'b:0': size must be at most 2\*\*53 \(docs/format.md\)",
    ),
    (_edit("tensors.1.size", 2**53 + 1), r"tensor 'b:0': size must be at most 2\*\*53"),
    (_edit("tensors.1.size", _DELETE), "tensor 'b:0': missing required field 'size'"),
    (_edit("tensors.1.producer", _DELETE), "tensor 'b:0': missing required field 'producer'"),
    (_edit("tensors.1.producer", "zz"), "tensor 'b:0': producer 'zz' is not an op of the graph"),
    (
        _edit("tensors.1.consumers", ["c", "zz"]),
        "tensor 'b:0': consumer 'zz' is not an op of the graph",
    ),
    (_edit("tensors.1.consumers", "c"), "tensor 'b:0': consumers: must be a JSON list"),
    (
        _edit("tensors.1.consumers", ["c", "b"]),
        "tensor 'b:0': lists its producer 'b' as a consumer",
    ),
    (_edit("tensors.1.persistent", "yes"), "tensor 'b:0': persistent must be true or false"),
    (_edit("tensors.2.consumers", ["a"]), "op dependencies form a cycle: 'a' -> 'c' -> 'a'"),
    (_edit("name", 3), "name must be a string, got 3"),
    (
        _edit("ops.1.runtme", 2.0),
        r"op 'b': unknown field 'runtme': did you mean 'runtime'\?",
    ),
    (
        _edit("tensors.1.consumer", ["c"]),
        r"tensor 'b:0': unknown field 'consumer': did you mean 'consumers'",
    ),
    (_edit("ops.0.Temp_Memory", 5), r"op 'a': unknown field 'Temp_Memory': did you mean"),
    (_edit("tensor", []), r"graph: unknown field 'tensor': did you mean 'tensors'"),
    (_edit("tensors.0.output", 1), "tensor 'a:0': output must be true or false, got 1"),
    (
        _edit("ops.0.fusion", "fused"),
        "op 'a': fusion must be one of none, elementwise, reduction, contraction, got 'fused'",
    ),
    (_edit("ops.0.compute_time", -1.0), "op 'a': compute_time must be a finite number"),
    (
        _edit("kernel", {"memory_bandwidth": 0, "launch_overhead": 0}),
        "graph: kernel: memory_bandwidth must be a finite number > 0, got 0",
    ),
    (_edit("kernel", {"memory_bandwidth": 1e9}), "graph: kernel must be an object with exactly"),
    (
        lambda document: _edit("tensors.0.output", True)(
            _edit("tensors.0.persistent", True)(document)
        ),
        "tensor 'a:0': is both persistent and an output",
    ),
    (_edit("tensors.0.size", 2**53 + 1), r"tensor 'a:0': size must be at most 2\*\*53"),
    (_edit("tensors.0.size", 2**62), r"tensor 'a:0': size must be at most 2\*\*53"),
    (
        lambda document: _edit("ops.1.runtime", 1e308)(_edit("ops.0.runtime", 1e308)(document)),
        "op runtimes: their sum overflows a float64",
    ),
]


def test_extra_fields_stay_metadata_and_round_trip() -> None:
    document = _graph_doc()
    document["ops"][0].update(flops=1e9, dtype="float32", my_note="kept", kernel_id=[2])
    document["tensors"][0].update(layout="NCHW")
    document["author"] = "me"
    graph = graph_from_json(document)
    assert graph.op_attrs[0] == {
        "type": "MatMul",
        "flops": 1e9,
        "dtype": "float32",
        "my_note": "kept",
        "kernel_id": [2],
    }
    assert graph.tensor_attrs[0] == {"layout": "NCHW"}
    assert graph_to_json(graph)["author"] == "me"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": "graphopt.graph/1", "format": "x"}', "an object names the key 'format' twice"),
        ("[" * 100_000 + "]" * 100_000, "values are nested too deeply"),
        ('{"n": ' + "1" * 5000 + "}", "Exceeds the limit"),
        (b'{"a": "\x80"}', "the text is not UTF-8"),
    ],
)
def test_json_that_python_cannot_read_whole_is_one_error(tmp_path, text, message) -> None:
    path = tmp_path / "g.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(GraphError, match=f"^{path}: not valid JSON \\(.*{message}"):
        read_graph(path)


@pytest.mark.parametrize(("edit", "message"), GRAPH_RULES)
def test_each_graph_rule_has_its_message(tmp_path, edit, message) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(edit(_graph_doc())))
    with pytest.raises(GraphError, match=f"^{path}: {message}"):
        read_graph(path)


def test_cycle_message_names_the_ops_on_one_cycle() -> None:
    document = _graph_doc()
    document["ops"].append({"name": "d"})
    document["tensors"][2]["consumers"] = ["d"]
    document["tensors"].append({"name": "d:0", "size": 1, "producer": "d", "consumers": ["b"]})
    with pytest.raises(GraphError, match=r"cycle: 'b' -> 'c' -> 'd' -> 'b'$"):
        graph_from_json(document)


def test_file_level_errors(tmp_path) -> None:
    with pytest.raises(GraphError, match="no such file"):
        read_graph(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text('{"format": ')
    with pytest.raises(
        GraphError, match=r"broken.json: not valid JSON \(Expecting value at line 1"
    ):
        read_graph(tmp_path / "broken.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(GraphError, match=r"graph: must be a JSON object, got \[\]"):
        read_graph(tmp_path / "list.json")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(GraphError, match="junk.npz: not a readable .npz archive"):
        read_graph(tmp_path / "junk.npz")


def test_npz_is_validated_like_json(tmp_path) -> None:
    path = tmp_path / "g.npz"
    write_graph(tiny(), path)
    with np.load(path) as archive:
        arrays = dict(archive)
    arrays["tensor_size"] = np.array([400, -1, 100])
    np.savez(path, **arrays)
    with pytest.raises(GraphError, match="tensor 'b:0': size must be an integer >= 0, got -1"):
        read_graph(path)
    arrays["tensor_size"] = np.array([400.5, 1, 100])
    np.savez(path, **arrays)
    with pytest.raises(GraphError, match="array 'tensor_size' must be 1-D of kind 'iu'"):
        read_graph(path)
    arrays["consumer_op"] = np.array([1, 2, 0])
    arrays["tensor_size"] = np.array([400, 100, 100])
    np.savez(path, **arrays)
    with pytest.raises(GraphError, match="cycle"):
        read_graph(path)
    del arrays["consumer_op"]
    np.savez(path, **arrays)
    with pytest.raises(GraphError, match="missing array 'consumer_op'"):
        read_graph(path)


def test_fusion_fields_are_read_and_round_trip(tmp_path) -> None:
    document = graph_to_json(tiny())
    document["ops"][0].update(fusion="contraction", compute_time=0.5)
    document["ops"][1]["fusion"] = "elementwise"
    document["kernel"] = {"memory_bandwidth": 1e9, "launch_overhead": 1e-6}
    graph = graph_from_json(document)
    assert graph.op_fusion.tolist() == [3, 1, 0]  # contraction, elementwise, none (unset)
    assert graph.op_compute_time.tolist() == [0.5, 1.0, 1.0]  # else the op's runtime
    assert graph.kernel == (1e9, 1e-6) and tiny().kernel is None
    for name in ("g.json", "g.npz"):
        write_graph(graph, tmp_path / name)
        again = read_graph(tmp_path / name)
        assert again.op_fusion.tolist() == [3, 1, 0] and again.kernel == (1e9, 1e-6)


def test_npz_written_before_graph_outputs_reads_as_no_outputs(tmp_path) -> None:
    path = tmp_path / "g.npz"
    document = graph_to_json(tiny())
    document["tensors"][2]["output"] = True
    write_graph(graph_from_json(document), path)
    with np.load(path) as archive:
        arrays = dict(archive)
    assert arrays["tensor_output"].tolist() == [False, False, True]
    del arrays["tensor_output"]
    np.savez(path, **arrays)
    assert not read_graph(path).tensor_output.any()


def _solution_doc() -> dict:
    g = tiny()
    s = solution(g, {"a": 0, "b": 1, "c": 0}, ["a", "a:0>1", "b", "b:0>0", "c"], 2)
    return solution_to_json(g, s)


SOLUTION_RULES = [
    (_edit("format", "graphopt.graph/1"), "format must be 'graphopt.solution/1'"),
    (_edit("graph", "other"), "solution is for graph 'other', not 'tiny'"),
    (_edit("devices", 0), "devices must be an integer >= 1, got 0"),
    (_edit("schedule", _DELETE), "missing required field 'schedule'"),
    (_edit("placement.zz", 0), "placement: 'zz' is not an op of graph 'tiny'"),
    (_edit("placement.b", 2), r"placement: op 'b': device must be an integer in \[0, 2\), got 2"),
    (_edit("placement.b", _DELETE), "placement: op 'b' has no device"),
    (_edit("schedule.0", {"op": "zz"}), r"schedule\[0\]: 'zz' is not an op of graph 'tiny'"),
    (_edit("schedule.1", {"transfer": "zz", "to": 1}), r"schedule\[1\]: 'zz' is not a tensor"),
    (
        _edit("schedule.1", {"transfer": "a:0", "to": 7}),
        r"schedule\[1\]: 'to' must be a device in \[0, 2\)",
    ),
    (_edit("schedule.1", {"transfer": "a:0"}), r"schedule\[1\]: an event is"),
    (_edit("schedule.1", "a"), r"schedule\[1\]: an event is"),
    (_edit("objective", []), "objective: must be a JSON object"),
    (_edit("devices", 10**30), "devices must be at most 512 .*, got an integer of about 31"),
    (_edit("devices", 10**9), "devices must be at most 512"),
    (_edit("machine", {"devices": 5}), "machine: devices 5 contradicts the solution's devices 2"),
    (_edit("machine", {"mode": "fast"}), "machine: mode must be 'sync' or 'async', got 'fast'"),
    (_edit("machine", {"capasity": 5}), "machine: unknown field 'capasity': did you mean"),
    (_edit("objective", {"peak_mem": 600}), "unknown field 'peak_mem': did you mean 'peak_memory'"),
    (_edit("schedul", []), "unknown field 'schedul': did you mean 'schedule'"),
    (_edit("fusion", {"a": 0}), "fusion: must be a JSON list"),
    (_edit("fusion", ["a"]), r"fusion\[0\] must be a list of op names, got 'a'"),
    (_edit("fusion", [["a"]]), r"fusion\[0\] has 1 op\(s\); a group holds at least two"),
    (_edit("fusion", [["a", "zz"]]), r"fusion\[0\]: 'zz' is not an op of graph 'tiny'"),
    (_edit("fusion", [["a", "a"]]), r"fusion\[0\]: op 'a' is listed twice"),
    (
        _edit("fusion", [["a", "b"], ["c", "b"]]),
        r"fusion\[1\]: op 'b' is already in fusion\[0\]; an op is in at most one group",
    ),
]


@pytest.mark.parametrize(("edit", "message"), SOLUTION_RULES)
def test_each_solution_rule_has_its_message(edit, message) -> None:
    with pytest.raises(SolutionError, match=message):
        solution_from_json(edit(_solution_doc()), tiny())


def _json_values():
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True),
        st.text(max_size=6),
        st.sampled_from(["a", "b", "c", "a:0", "graphopt.graph/1"]),
    )
    keys = st.sampled_from(
        [
            "name",
            "runtime",
            "size",
            "producer",
            "consumers",
            "temp_memory",
            "persistent",
            "ops",
            "tensors",
            "format",
            "op",
            "transfer",
            "to",
            "x",
        ]
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=6)
        ),
        max_leaves=25,
    )


@st.composite
def mangled_graph_documents(draw):
    """The tiny graph with random fields replaced, removed or added."""
    document = _graph_doc()
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["ops", "tensors", "top"]))
        target = document
        if kind != "top":
            items = document.get(kind)
            if not isinstance(items, list) or not items:
                continue
            target = items[draw(st.integers(0, len(items) - 1))]
            if not isinstance(target, dict):
                continue
        key = draw(st.sampled_from(sorted(set(target) | {"name", "size", "consumers", "extra"})))
        if key in target and draw(st.booleans()):
            del target[key]
        else:
            target[key] = draw(_json_values())
    return document


@settings(max_examples=1000, deadline=None)
@given(st.one_of(_json_values(), mangled_graph_documents()))
def test_graph_loader_raises_only_graph_errors(document) -> None:
    try:
        graph_from_json(document)
    except GraphError:
        pass


@settings(max_examples=500, deadline=None)
@given(
    _json_values(),
    st.sampled_from(["placement", "schedule", "devices", "objective", "graph", None]),
)
def test_solution_loader_raises_only_solution_errors(value, key) -> None:
    document = value if key is None else dict(_solution_doc(), **{key: value})
    try:
        solution_from_json(document, tiny())
    except SolutionError:
        pass
