"""TensorFlow CostGraphDef text protos: the handwritten fixture, its memory, every bad input."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from graphopt.costmodels.score import score
from graphopt.errors import GraphError, ModelImportError
from graphopt.importers.costgraph import import_costgraph, parse_costgraph
from graphopt.ir.graph import Graph
from graphopt.ir.solution import topological_schedule

FIXTURE = Path(__file__).parent / "fixtures" / "tiny.costgraph.pbtxt"


@pytest.fixture(scope="module")
def tiny() -> Graph:
    return import_costgraph(FIXTURE)


def consumers(graph: Graph, tensor: str) -> list[str]:
    return [graph.op_names[j] for j in graph.consumers(graph.tensor_ids[tensor])]


def test_ops_runtimes_and_attributes(tiny: Graph) -> None:
    assert tiny.name == "tiny"
    assert tiny.attrs == {"source": "costgraph", "aggregated_cost": {"flops": 1.5}}
    assert tiny.op_names == ("input", "weights", "matmul", "split", "reshape", "add", "_SINK")
    # compute_cost in microseconds; weights has none, so its compute_time counts.
    assert np.allclose(tiny.op_runtime, [10e-6, 5e-6, 30e-6, 20e-6, 1e-6, 4e-6, 0.0], rtol=1e-12)
    assert tiny.op_temp_memory.tolist() == [0, 0, 64, 0, 0, 0, 0]
    assert tiny.op_attrs[0] == {
        "id": 0,
        "device": "/job:localhost/replica:0/task:0/device:CPU:0",
        "compute_time": 0,
        "memory_time": 0,
    }
    assert tiny.op_attrs[1] == {"id": 7, "compute_time": 5, "memory_time": 0, "inaccurate": True}
    assert tiny.op_attrs[2] == {"id": 3, "compute_time": 25, "memory_time": 7}
    assert "type" not in tiny.op_attrs[2]


def test_tensors_sizes_consumers_and_flags(tiny: Graph) -> None:
    expected = {
        "input:0": (400, "input", ["matmul"]),
        "weights:0": (200, "weights", ["matmul"]),
        "weights:persistent": (1000, "weights", []),
        "matmul:0": (400, "matmul", ["split"]),
        "split:0": (500, "split", ["add"]),
        "split:1": (700, "split", ["reshape", "add"]),
        "reshape:0": (0, "reshape", ["add"]),
        "add:0": (600, "add", []),
        "^weights->add": (0, "weights", ["add"]),
        "^add->_SINK": (0, "add", ["_SINK"]),
    }
    assert tiny.tensor_names == tuple(expected)
    for name, (size, producer, readers) in expected.items():
        t = tiny.tensor_ids[name]
        assert tiny.tensor_size[t] == size, name
        assert tiny.op_names[tiny.tensor_producer[t]] == producer, name
        assert consumers(tiny, name) == readers, name
    assert [tiny.tensor_names[t] for t in np.flatnonzero(tiny.tensor_persistent)] == [
        "weights:persistent"
    ]
    attrs = dict(zip(tiny.tensor_names, tiny.tensor_attrs, strict=True))
    assert attrs["input:0"] == {"shape": [10, 10], "dtype": "DT_FLOAT"}
    assert attrs["weights:0"] == {"dtype": "DT_FLOAT_REF"}
    assert attrs["reshape:0"] == {"alias_of": "split:1"}  # unknown rank: no shape
    assert attrs["split:0"] == {}


def test_peak_memory_of_the_topological_schedule(tiny: Graph) -> None:
    solution = topological_schedule(tiny, np.zeros(tiny.n_ops, np.int32), 1)
    assert [tiny.op_names[j] for j in solution.order] == list(tiny.op_names)
    result = score(tiny, solution)  # raises SolutionError for an invalid schedule
    # Resident bytes at each step, with weights' 1000 persistent bytes always there:
    # input 1400, weights 1600, matmul 2064 (+64 scratch), split 2600 (matmul:0 + both outputs),
    # reshape 2200 (its alias allocates nothing), add 2800 (split:0, split:1 and add:0), _SINK 1000.
    assert result.peak_memory == 2800
    assert math.isclose(result.makespan, 70e-6, rel_tol=1e-12)


def test_regal_example_with_absent_ids_and_ports() -> None:
    graph = parse_costgraph(
        """
        node { name: "_SOURCE" }
        node { name: "node_0" id: 1 control_input: 0 }
        node {
          name: "node_1" id: 2 control_input: 0 compute_cost: 58
          output_info { size: 70 alias_input_port: -1 }
        }
        node {
          name: "node_2" id: 3 control_input: 0 compute_cost: 58
          input_info { preceding_node: 2 }
          output_info { size: 55 alias_input_port: -1 }
        }
        """,
        name="regal",
    )
    assert graph.name == "regal"
    assert consumers(graph, "node_1:0") == ["node_2"]
    assert consumers(graph, "^_SOURCE->node_0") == ["node_0"]
    assert graph.tensor_size.tolist() == [70, 55, 0, 0, 0]


def test_alias_chains_end_at_the_allocating_output() -> None:
    graph = parse_costgraph(
        """
        node { name: "a" id: 1 output_info { size: 8 } }
        node {
          name: "b" id: 2 input_info { preceding_node: 1 }
          output_info { size: 8 alias_input_port: 0 }
        }
        node {
          name: "c" id: 3 input_info { preceding_node: 2 }
          output_info { size: 8 alias_input_port: 0 }
        }
        node { name: "d" id: 4 input_info { preceding_node: 3 } }
        """
    )
    assert graph.tensor_size.tolist() == [8, 0, 0]
    assert consumers(graph, "a:0") == ["b", "c", "d"]
    assert [a.get("alias_of") for a in graph.tensor_attrs] == [None, "a:0", "a:0"]


def test_absent_alias_port_means_port_0_as_proto3_writes_it() -> None:
    graph = parse_costgraph(
        """
        node { name: "a" id: 1 output_info { size: 8 } }
        node { name: "b" id: 2 input_info { preceding_node: 1 } output_info { size: 8 } }
        node { name: "c" id: 3 input_info { preceding_node: 2 } }
        """
    )
    assert graph.tensor_size.tolist() == [8, 0]
    assert consumers(graph, "a:0") == ["b", "c"]


BAD_INPUTS = {
    "garbage": ('node {\n  name: "a"\n  bogus: 1\n}\n', ModelImportError, "<bad>:3:3:", "bogus"),
    "unclosed": ('node {\n  name: "a"\n', ModelImportError, "<bad>:2:", 'Expected "}"'),
    "unknown input id": (
        'node { name: "a" id: 1 input_info { preceding_node: 9 } }',
        ModelImportError,
        "node 'a'",
        "unknown node id 9",
    ),
    "unknown control id": (
        'node { name: "a" id: 1 control_input: 4 }',
        ModelImportError,
        "node 'a'",
        "unknown node id 4",
    ),
    "duplicate name": (
        'node { name: "a" id: 1 } node { name: "a" id: 2 }',
        ModelImportError,
        "node 'a'",
        "ids 1 and 2",
    ),
    "duplicate id": (
        'node { name: "a" id: 1 } node { name: "b" id: 1 }',
        ModelImportError,
        "node 'b'",
        "node 'a'",
    ),
    "missing name": ("node { id: 3 }", ModelImportError, "id 3", "no name"),
    "bad port": (
        'node { name: "a" id: 1 output_info { size: 4 } }'
        'node { name: "b" id: 2 input_info { preceding_node: 1 preceding_port: 2 } }',
        ModelImportError,
        "node 'b'",
        "output 2 of node 'a'",
    ),
    "negative size": (
        'node { name: "a" id: 1 output_info { size: -4 } }',
        ModelImportError,
        "tensor 'a:0'",
        "got -4",
    ),
    "bad alias port": (
        'node { name: "a" id: 1 output_info { size: 4 alias_input_port: 1 } }',
        ModelImportError,
        "tensor 'a:0'",
        "aliases input 1",
    ),
    "negative persistent memory": (
        'node { name: "a" persistent_memory_size: -1 }',
        ModelImportError,
        "node 'a'",
        "persistent_memory_size",
    ),
    "cycle": (
        'node { name: "a" id: 1 input_info { preceding_node: 2 } output_info { size: 4 } }'
        'node { name: "b" id: 2 input_info { preceding_node: 1 } output_info { size: 4 } }',
        GraphError,
        "cycle",
        "'a' -> 'b' -> 'a'",
    ),
    "alias cycle": (
        'node { name: "a" id: 1 input_info { preceding_node: 2 }'
        "  output_info { size: 4 alias_input_port: 0 } }"
        'node { name: "b" id: 2 input_info { preceding_node: 1 }'
        "  output_info { size: 4 alias_input_port: 0 } }",
        GraphError,
        "cycle",
        "'a' -> 'b' -> 'a'",
    ),
    "reads an alias of its own output": (
        'node { name: "a" id: 1 input_info { preceding_node: 2 } output_info { size: 4 } }'
        'node { name: "b" id: 2 input_info { preceding_node: 1 }'
        "  output_info { size: 4 alias_input_port: 0 } }",
        GraphError,
        "cycle",
        "'a' -> 'b' -> 'a'",
    ),
    "negative runtime": (
        'node { name: "a" compute_cost: -3 }',
        GraphError,
        "op 'a'",
        "runtime",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_gives_one_line_naming_the_item(case: str) -> None:
    text, error, *fragments = BAD_INPUTS[case]
    with pytest.raises(error) as caught:
        parse_costgraph(text, name="bad")
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.pbtxt"
    broken.write_text('node {\n  name: "a"\n  id: "x"\n}\n')
    with pytest.raises(ModelImportError, match=rf"^{broken}:3:.*id"):
        import_costgraph(broken)
    with pytest.raises(ModelImportError, match="missing.pbtxt"):
        import_costgraph(tmp_path / "missing.pbtxt")


def test_name_argument_overrides_the_file_name() -> None:
    assert import_costgraph(FIXTURE, name="other").name == "other"
