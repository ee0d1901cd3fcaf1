"""The per-step profile against the scorer, and by hand on persistent and output tensors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from builders import graph, op, solution, tensor
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.profile import memory_profile
from graphopt.costmodels.score import Scorer
from graphopt.errors import SolutionError
from strategies import problems


@settings(max_examples=300, deadline=None)
@given(problems())
def test_profile_maxima_are_the_scorers_peaks_and_its_last_finish_the_makespan(problem) -> None:
    g, machine, s = problem
    profile = memory_profile(g, s, machine)
    scored = Scorer(g, machine).score(s)
    assert profile.peak_memory_per_device == scored.peak_memory_per_device
    assert profile.makespan == scored.makespan
    assert profile.memory.shape == (s.order.shape[0], machine.n_devices)
    assert (profile.memory >= profile.persistent).all()
    assert (profile.start >= 0).all() and (profile.finish >= profile.start).all()
    # Events that occupy a device run one after another on it, in schedule order.
    for device in range(machine.n_devices):
        mine = np.flatnonzero(profile.occupies & (profile.device == device))
        assert (profile.start[mine[1:]] >= profile.finish[mine[:-1]]).all()
    assert profile.occupies[profile.is_op].all()
    assert profile.occupies.all() == (machine.mode == "sync" or bool(profile.is_op.all()))


def _weights_and_output():
    """w makes persistent weights W, x an activation; y on device 1 reads both and makes the
    graph output Y; z, on device 0, makes a dead value."""
    g = graph(
        [op("x", 1.0), op("w", 1.0), op("y", 2.0, temp_memory=50), op("z", 1.0)],
        [
            tensor("W", 1000, "w", "y", persistent=True),
            tensor("X", 100, "x", "y"),
            tensor("Y", 10, "y", output=True),
            tensor("Z", 5, "z"),
        ],
    )
    s = solution(g, {"x": 0, "w": 0, "y": 1, "z": 0}, ["x", "w", "W>1", "X>1", "y", "z"], devices=2)
    return g, s


def test_persistent_floor_and_an_output_held_to_the_end() -> None:
    g, s = _weights_and_output()
    machine = Machine(n_devices=2, latency=0.5, bandwidth=1000.0)
    profile = memory_profile(g, s, machine)
    # W's home copy counts on device 0 from the first step; its copy on device 1 is freed after
    # y, its last reader, and so is X's; X's home copy after its transfer; Y stays to the end.
    assert profile.memory.tolist() == [
        [1100, 0],
        [1100, 0],
        [1100, 1000],
        [1100, 1100],
        [1000, 1160],
        [1005, 10],
    ]
    assert profile.persistent.tolist() == [1000, 0]
    assert profile.peak_memory_per_device == (1100, 1160)
    assert profile.peak_step.tolist() == [0, 4]
    # Sync transfers block their destination: W arrives at 2 + 1.5, X at 3.5 + 0.6.
    assert profile.start.tolist() == pytest.approx([0, 1, 2, 3.5, 4.1, 2])
    assert profile.finish.tolist() == pytest.approx([1, 2, 3.5, 4.1, 6.1, 3])
    assert profile.device.tolist() == [0, 0, 1, 1, 1, 0]
    assert profile.source.tolist() == [0, 0, 0, 0, 1, 0]
    assert profile.occupies.all()
    assert profile.makespan == Scorer(g, machine).score(s).makespan


def test_async_transfers_occupy_no_device() -> None:
    g, s = _weights_and_output()
    profile = memory_profile(
        g, s, Machine(n_devices=2, latency=0.5, bandwidth=1000.0, mode="async")
    )
    assert profile.occupies.tolist() == [True, True, False, False, True, True]
    assert profile.start[2:4].tolist() == [2.0, 1.0]  # each copy leaves when its tensor exists
    assert profile.memory[-1].tolist() == [1005, 10]


def test_an_invalid_schedule_is_refused_naming_the_event() -> None:
    g, s = _weights_and_output()
    broken = solution(
        g, {"x": 0, "w": 0, "y": 1, "z": 0}, ["x", "w", "y", "W>1", "X>1", "z"], devices=2
    )
    with pytest.raises(SolutionError, match=r"schedule\[2\] \(op 'y' on device 1\)"):
        memory_profile(g, broken)
    assert memory_profile(g, s).peak_memory == 1160
