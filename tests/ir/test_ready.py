"""The shared ready step against the contract's dependency rule, and its callers against twins."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from graphopt.errors import SolutionError
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.ir.ready import (
    initial_waiting,
    order_window,
    release_capacity,
    release_copy,
    release_op,
)
from graphopt.solvers.events import events_from_op_order
from strategies import random_graph


def plain_ready(graph: Graph, placement: np.ndarray, d: int, run: set[int]) -> set[int]:
    """Events not yet run whose dependencies (contract section 3) have all run, from scratch."""
    n_ops = graph.n_ops
    a = graph.arrays
    ready = set()
    for j in range(n_ops):
        if j in run:
            continue
        inputs = a.op_input_tensor[a.op_input_ptr[j] : a.op_input_ptr[j + 1]]
        if all(
            (n_ops + t * d + placement[j]) in run
            if placement[a.tensor_producer[t]] != placement[j]
            else a.tensor_producer[t] in run
            for t in inputs
        ):
            ready.add(j)
    for t in range(graph.n_tensors):
        producer = a.tensor_producer[t]
        if producer not in run:
            continue
        for c in a.consumer_op[a.consumer_ptr[t] : a.consumer_ptr[t + 1]]:
            code = n_ops + t * d + placement[c]
            if placement[c] != placement[producer] and code not in run:
                ready.add(code)
    return ready


def walk(graph: Graph, placement: np.ndarray, d: int, rng: np.random.Generator) -> None:
    """Runs random ready events with the shared steps, checking the ready set after each."""
    a = graph.arrays
    n_ops = graph.n_ops
    waiting = initial_waiting(a)
    readers_left = np.zeros(graph.n_tensors * d, dtype=np.int32)
    newly = np.full(release_capacity(a), -7, dtype=np.int64)
    ready = {j for j in range(n_ops) if waiting[j] == 0}
    run: set[int] = set()
    while ready:
        assert ready == plain_ready(graph, placement, d, run)
        event = int(rng.choice(sorted(ready)))
        ready.remove(event)
        run.add(event)
        if event < n_ops:
            count = release_op(
                a, event, int(placement[event]), d, placement, waiting, readers_left, newly
            )
            for t in a.op_output_tensor[a.op_output_ptr[event] : a.op_output_ptr[event + 1]]:
                consumers = a.consumer_op[a.consumer_ptr[t] : a.consumer_ptr[t + 1]]
                on = placement[consumers]
                home = placement[event]
                transfers = len(set(on.tolist()) - {home})
                for x in range(d):
                    expected = int(np.sum(on == x)) + (transfers if x == home else 0)
                    assert readers_left[t * d + x] == expected
        else:
            t, device = divmod(event - n_ops, d)
            count = release_copy(a, t, device, placement, waiting, newly)
        made = newly[:count].tolist()
        assert len(set(made)) == count and not set(made) & (ready | run)
        ready.update(made)
    assert len(run) == n_ops + len(
        {
            (t, int(placement[c]))
            for t in range(graph.n_tensors)
            for c in a.consumer_op[a.consumer_ptr[t] : a.consumer_ptr[t + 1]]
            if placement[c] != placement[a.tensor_producer[t]]
        }
    )


@pytest.mark.parametrize("seed", range(40))
def test_release_steps_keep_the_contracts_ready_set(seed: int) -> None:
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, int(rng.integers(1, 25)), float(rng.choice([0.1, 0.3, 0.6])))
    d = int(rng.integers(1, 5))
    walk(graph, rng.integers(0, d, graph.n_ops), d, rng)


@pytest.mark.parametrize("seed", range(10))
def test_one_device_gives_op_readiness_alone(seed: int) -> None:
    """What a GFlowNet stepping (op, device) pairs uses: every input's producer has run."""
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, 20, 0.3)
    walk(graph, np.zeros(graph.n_ops, dtype=np.int32), 1, rng)


def plain_events(
    graph: Graph, placement: np.ndarray, order: np.ndarray, d: int, lazy: bool
) -> list[int] | int:
    """The event builder written plainly: the event list, or the first op that cannot run."""
    a = graph.arrays
    n_ops = graph.n_ops
    done: set[int] = set()
    sent: set[int] = set()
    out: list[int] = []
    for j in order.tolist():
        if not 0 <= j < n_ops or j in done:
            return max(min(j, n_ops - 1), 0)
        inputs = a.op_input_tensor[a.op_input_ptr[j] : a.op_input_ptr[j + 1]].tolist()
        if any(a.tensor_producer[t] not in done for t in inputs):
            return j
        for t in inputs:
            copy = t * d + int(placement[j])
            if lazy and placement[a.tensor_producer[t]] != placement[j] and copy not in sent:
                sent.add(copy)
                out.append(n_ops + copy)
        done.add(j)
        out.append(j)
        for t in a.op_output_tensor[a.op_output_ptr[j] : a.op_output_ptr[j + 1]].tolist():
            for c in a.consumer_op[a.consumer_ptr[t] : a.consumer_ptr[t + 1]].tolist():
                copy = t * d + int(placement[c])
                if not lazy and placement[c] != placement[j] and copy not in sent:
                    sent.add(copy)
                    out.append(n_ops + copy)
    return out


@pytest.mark.parametrize("seed", range(60))
def test_event_builder_matches_its_plain_twin(seed: int) -> None:
    """Valid orders give the same events, invalid ones (shuffled, repeated) the same culprit."""
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, int(rng.integers(1, 30)), float(rng.choice([0.1, 0.3])))
    d = int(rng.integers(1, 5))
    placement = rng.integers(0, d, graph.n_ops).astype(np.int32)
    order = np.array(graph.topological_order, dtype=np.int64)
    if seed % 3 == 1:
        order = rng.permutation(order)
    elif seed % 3 == 2 and graph.n_ops > 1:
        order[int(rng.integers(1, graph.n_ops))] = order[0]
    for mode in ("lazy", "eager"):
        expected = plain_events(graph, placement, order, d, mode == "lazy")
        if isinstance(expected, int):
            with pytest.raises(SolutionError, match=f"op {graph.op_names[expected]!r}"):
                events_from_op_order(graph, placement, order, d, mode)
        else:
            got = events_from_op_order(graph, placement, order, d, mode)
            assert got.tolist() == expected


@pytest.mark.parametrize("seed", range(30))
def test_order_window_is_between_dependencies_and_dependents(seed: int) -> None:
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, int(rng.integers(1, 30)), 0.3)
    a = graph.arrays
    n_ops = graph.n_ops
    d = int(rng.integers(1, 4))
    placement = rng.integers(0, d, n_ops).astype(np.int32)
    order = events_from_op_order(graph, placement, graph.topological_order, d, "eager")
    position = np.full(n_ops + graph.n_tensors * d, -1, dtype=np.int64)
    position[order] = np.arange(order.shape[0])
    for j in range(n_ops):
        device = int(placement[j])
        before, after = [-1], [order.shape[0]]
        for t in a.op_input_tensor[a.op_input_ptr[j] : a.op_input_ptr[j + 1]].tolist():
            producer = a.tensor_producer[t]
            on_device = placement[producer] == device
            before.append(position[producer if on_device else n_ops + t * d + device])
        for t in a.op_output_tensor[a.op_output_ptr[j] : a.op_output_ptr[j + 1]].tolist():
            for c in a.consumer_op[a.consumer_ptr[t] : a.consumer_ptr[t + 1]].tolist():
                on_device = placement[c] == device
                after.append(position[c if on_device else n_ops + t * d + placement[c]])
        window = order_window(a, j, device, d, placement, position, order.shape[0])
        assert window == (max(before), min(after))
        assert window[0] < position[j] < window[1]


def test_the_initial_state_can_be_built_from_python_after_a_kernel_used_it() -> None:
    """numba cannot box an array returned by a cached kernel first loaded as a callee; the
    environments build their state from Python after the event builder ran (fresh process)."""
    script = (
        "import numpy as np\n"
        "from graphopt.ir.generators import generate\n"
        "from graphopt.ir.ready import initial_waiting\n"
        "from graphopt.solvers.events import events_from_op_order\n"
        "g = generate('layered', 10, seed=0)\n"
        "events_from_op_order(g, np.zeros(10, np.int32), g.topological_order, 2, 'eager')\n"
        "print(initial_waiting(g.arrays).sum())\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(generate("layered", 10, seed=0).op_input_ptr[-1])
