"""The scoring rules on hand-computed cases; every case runs through both scorers."""

from __future__ import annotations

import math

import pytest

from builders import graph, op, solution, tensor, tiny
from graphopt.costmodels._reference import reference_score
from graphopt.costmodels.machine import Machine, MachineArrays, parse_bytes
from graphopt.costmodels.score import Score, Scorer, score
from graphopt.errors import MachineError, SolutionError


def both(g, s, machine=None) -> Score:
    machine = machine or Machine(n_devices=s.n_devices)
    fast, reference = Scorer(g, machine).score(s), reference_score(g, s, machine)
    assert fast == reference
    return fast


def test_contract_example() -> None:
    g = tiny()
    s = solution(g, {"a": 0, "b": 1, "c": 0}, ["a", "a:0>1", "b", "b:0>0", "c"], devices=2)
    result = both(g, s)
    assert result.peak_memory == 600
    assert result.peak_memory_per_device == (600, 500)
    assert result.makespan == 4.0
    assert result.speedup == 1.0


def test_single_device_chain_keeps_inputs_until_last_reader() -> None:
    g = tiny()
    result = both(g, solution(g, {"a": 0, "b": 0, "c": 0}, ["a", "b", "c"]))
    assert result.peak_memory == 600  # a:0 + b:0 + c:0 at c's step
    assert result.makespan == 4.0


def test_graph_output_counts_only_at_its_step() -> None:
    g = graph(
        [op("big"), op("small")], [tensor("big:0", 1000, "big"), tensor("small:0", 10, "small")]
    )
    assert both(g, solution(g, {"big": 0, "small": 0}, ["big", "small"])).peak_memory == 1000


def test_output_tensor_is_held_to_the_last_step() -> None:
    # The output 'big:0' stays resident after its step, unlike the unmarked one above.
    g = graph(
        [op("big"), op("small")],
        [tensor("big:0", 1000, "big", output=True), tensor("small:0", 10, "small")],
    )
    assert both(g, solution(g, {"big": 0, "small": 0}, ["big", "small"])).peak_memory == 1010
    assert both(g, solution(g, {"big": 0, "small": 0}, ["small", "big"])).peak_memory == 1000


def test_output_with_readers_outlives_them_and_its_transfers() -> None:
    # y:0 is read by z on device 1, and returned: its home copy on device 0 stays after the
    # transfer, the transferred copy is freed after z as usual.
    g = graph(
        [op("x"), op("y"), op("z"), op("w")],
        [
            tensor("x:0", 1, "x", "y"),
            tensor("y:0", 100, "y", "z", output=True),
            tensor("z:0", 10, "z"),
            tensor("w:0", 1000, "w"),
        ],
    )
    s = solution(g, {"x": 0, "y": 0, "z": 1, "w": 0}, ["x", "y", "y:0>1", "z", "w"], devices=2)
    assert both(g, s).peak_memory_per_device == (1100, 110)


def test_temp_memory_counts_only_while_its_op_runs() -> None:
    g = graph(
        [op("a", temp_memory=50), op("b", temp_memory=5)],
        [tensor("a:0", 100, "a", "b"), tensor("b:0", 10, "b")],
    )
    assert both(g, solution(g, {"a": 0, "b": 0}, ["a", "b"])).peak_memory == 150


def test_inputs_freed_after_last_reader_so_order_matters() -> None:
    # x feeds y (freeing x); z is independent. Running y before z frees x's 500 bytes first.
    g = graph(
        [op("x"), op("y"), op("z")],
        [tensor("x:0", 500, "x", "y"), tensor("y:0", 1, "y"), tensor("z:0", 300, "z")],
    )
    early = both(g, solution(g, {"x": 0, "y": 0, "z": 0}, ["x", "y", "z"]))
    late = both(g, solution(g, {"x": 0, "y": 0, "z": 0}, ["x", "z", "y"]))
    assert early.peak_memory == 501
    assert late.peak_memory == 800


def test_persistent_tensor_is_resident_from_the_first_step() -> None:
    g = graph(
        [op("x"), op("w"), op("y")],
        [
            tensor("x:0", 10, "x", "y"),
            tensor("w:0", 1000, "w", "y", persistent=True),
            tensor("y:0", 1, "y"),
        ],
    )
    result = both(g, solution(g, {"x": 0, "w": 0, "y": 0}, ["x", "w", "y"]))
    assert result.peak_memory == 1011  # never freed, counted before w runs too


def test_persistent_tensor_transferred_copy_is_freed_after_its_reader() -> None:
    g = graph(
        [op("w"), op("y"), op("z")],
        [
            tensor("w:0", 1000, "w", "y", persistent=True),
            tensor("y:0", 10, "y"),
            tensor("z:0", 20, "z"),
        ],
    )
    s = solution(g, {"w": 0, "y": 1, "z": 1}, ["w", "w:0>1", "y", "z"], devices=2)
    result = both(g, s)
    assert result.peak_memory_per_device == (1000, 1010)


def test_transfer_measures_both_devices_and_frees_the_source_copy() -> None:
    g = graph([op("a"), op("b")], [tensor("a:0", 70, "a", "b"), tensor("b:0", 5, "b")])
    s = solution(g, {"a": 0, "b": 1}, ["a", "a:0>1", "b"], devices=2)
    assert both(g, s).peak_memory_per_device == (70, 75)


def test_consumer_listed_twice_counts_once() -> None:
    g = graph(
        [op("a"), op("b"), op("c")],
        [tensor("a:0", 100, "a", "b", "b"), tensor("b:0", 1, "b"), tensor("c:0", 7, "c")],
    )
    assert g.n_edges == 1
    # a:0 is freed after b, so c's step holds only c:0.
    assert both(g, solution(g, {"a": 0, "b": 0, "c": 0}, ["a", "b", "c"])).peak_memory == 101


def test_zero_size_control_dependency_costs_latency_only() -> None:
    g = graph([op("a", 1.0), op("b", 1.0)], [tensor("ctrl", 0, "a", "b")])
    s = solution(g, {"a": 0, "b": 1}, ["a", "ctrl>1", "b"], devices=2)
    result = both(g, s, Machine(n_devices=2, latency=0.25, bandwidth=10.0))
    assert result.peak_memory == 0
    assert result.makespan == 2.25


def _transfer_case():
    g = graph(
        [op("a", 1.0), op("c", 5.0), op("b", 1.0)],
        [tensor("t", 100, "a", "b"), tensor("c:0", 1, "c"), tensor("b:0", 1, "b")],
    )
    return g, solution(g, {"a": 0, "c": 1, "b": 1}, ["a", "c", "t>1", "b"], devices=2)


def test_sync_transfer_blocks_its_destination_device() -> None:
    g, s = _transfer_case()
    result = both(g, s, Machine(n_devices=2, latency=1.0, bandwidth=100.0, mode="sync"))
    assert result.makespan == 8.0  # c 0-5, transfer 5-7 (1 + 100/100), b 7-8
    assert result.speedup == 7.0 / 8.0


def test_async_transfer_occupies_no_device() -> None:
    g, s = _transfer_case()
    result = both(g, s, Machine(n_devices=2, latency=1.0, bandwidth=100.0, mode="async"))
    assert result.makespan == 6.0  # t ready at 1 + 2 = 3, b waits for c until 5


def test_free_transfers_reproduce_the_gflownet_proxy() -> None:
    g, s = _transfer_case()
    assert both(g, s).makespan == 6.0


def test_capacity_decides_feasibility() -> None:
    g = tiny()
    s = solution(g, {"a": 0, "b": 0, "c": 0}, ["a", "b", "c"])
    assert both(g, s, Machine(capacity=600)).feasible
    assert not both(g, s, Machine(capacity=599)).feasible
    assert both(g, s).feasible


def test_empty_graph_scores_zero() -> None:
    g = graph([], [])
    result = both(g, solution(g, {}, []))
    assert (result.peak_memory, result.makespan, result.speedup) == (0, 0.0, 1.0)


def test_unused_device_has_zero_peak() -> None:
    g = tiny()
    s = solution(g, {"a": 0, "b": 0, "c": 0}, ["a", "b", "c"], devices=3)
    assert both(g, s).peak_memory_per_device == (600, 0, 0)


@pytest.mark.parametrize(
    ("placement", "schedule", "message"),
    [
        (
            {"a": 0, "b": 1, "c": 0},
            ["a", "b", "a:0>1", "b:0>0", "c"],
            r"schedule\[1\] \(op 'b' on device 1\): input 'a:0' is not available on the device: "
            r"its transfer from device 0",
        ),
        (
            {"a": 0, "b": 0, "c": 0},
            ["b", "a", "c"],
            r"schedule\[0\] \(op 'b' on device 0\): input 'a:0' is not available on the device: "
            r"its producer 'a' has not run yet",
        ),
        (
            {"a": 0, "b": 0, "c": 0},
            ["a", "b", "c", "a"],
            r"schedule\[3\] \(op 'a' on device 0\): the op was already scheduled",
        ),
        ({"a": 0, "b": 0, "c": 0}, ["a", "b"], r"schedule: op 'c' is missing"),
        (
            {"a": 0, "b": 0, "c": 0},
            ["a", "a:0>1", "b", "c"],
            r"schedule\[1\] \(transfer of 'a:0' to device 1\): not implied by the placement",
        ),
        (
            {"a": 0, "b": 1, "c": 0},
            ["a", "a:0>1", "a:0>1", "b", "b:0>0", "c"],
            r"schedule\[2\] \(transfer of 'a:0' to device 1\): the transfer was already scheduled",
        ),
        (
            {"a": 0, "b": 1, "c": 1},
            ["a:0>1", "a", "b", "c"],
            r"schedule\[0\] \(transfer of 'a:0' to device 1\): comes before its producer op runs",
        ),
    ],
)
def test_each_ordering_rule_names_the_breaking_event(placement, schedule, message) -> None:
    g = tiny()
    s = solution(g, placement, schedule, devices=2)
    with pytest.raises(SolutionError, match=message):
        score(g, s)
    with pytest.raises(SolutionError, match=message):
        reference_score(g, s, Machine(n_devices=2))


def test_placement_out_of_range_in_arrays_is_reported() -> None:
    from graphopt.ir.solution import Solution

    g = tiny()
    s = Solution(placement=[0, 5, 0], order=[0, 1, 2], n_devices=2)
    with pytest.raises(SolutionError, match=r"placement: op 'b' is on device 5, not in \[0, 2\)"):
        score(g, s)


def test_unknown_event_code_is_reported() -> None:
    from graphopt.ir.solution import Solution

    g = tiny()
    s = Solution(placement=[0, 0, 0], order=[0, 1, 99], n_devices=1)
    with pytest.raises(
        SolutionError, match=r"schedule\[2\]: event code 99 is neither an op nor a transfer"
    ):
        score(g, s)


def test_machine_and_solution_must_agree_on_devices() -> None:
    g = tiny()
    s = solution(g, {"a": 0, "b": 0, "c": 0}, ["a", "b", "c"])
    with pytest.raises(
        SolutionError, match="solution places ops on 1 devices but the machine has 2"
    ):
        score(g, s, Machine(n_devices=2))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_devices": 0}, "devices must be an integer >= 1"),
        ({"capacity": -1}, "capacity must be an integer number of bytes >= 0"),
        ({"latency": -0.5}, "latency must be a finite number of seconds >= 0"),
        ({"bandwidth": 0.0}, "bandwidth must be a number of bytes per second > 0"),
        ({"mode": "eager"}, "mode must be 'sync' or 'async'"),
    ],
)
def test_machine_rejects_out_of_range_settings(kwargs, message) -> None:
    with pytest.raises(MachineError, match=message):
        Machine(**kwargs)


def test_machine_arrays_have_one_type_whatever_the_settings() -> None:
    """Integer latency or bandwidth reach kernels as floats, so each kernel compiles once."""
    machine = Machine(n_devices=3, latency=1, bandwidth=10**9, mode="async")
    assert machine.arrays == MachineArrays(n_devices=3, latency=1.0, bandwidth=1e9, sync=False)
    assert [type(value) for value in machine.arrays] == [int, float, float, bool]
    assert Machine().arrays == MachineArrays(1, 0.0, math.inf, True)
    assert machine.arrays is machine.arrays


def test_parse_bytes() -> None:
    assert parse_bytes("16GiB") == 16 * 2**30
    assert parse_bytes("1e9") == 10**9
    assert parse_bytes("512 MB") == 512 * 10**6
    with pytest.raises(MachineError):
        parse_bytes("1.5B")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5GiB", 3 * 2**29),
        ("16GB", 16 * 10**9),
        (" 4096 ", 4096),
        ("9007199254740993", 9007199254740993),  # exact: a float would round it
        ("2tib", 2 * 2**40),
    ],
)
def test_parse_bytes_reads_units_exactly(text, expected) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("16XB", "capacity must be a byte count such as 4096, 1e9 or 16GiB, got '16XB'"),
        ("", "capacity must be a byte count"),
        ("-1GB", "capacity must be a byte count"),
        ("1\nXB", "capacity must be a byte count"),
        ("1.5B", "capacity must be a whole number of bytes, got '1.5B'"),
        ("1e400", "capacity must be a whole number of bytes"),
    ],
)
def test_parse_bytes_refuses_with_one_line(text, message) -> None:
    with pytest.raises(MachineError) as caught:
        parse_bytes(text)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_machine_from_options_reads_cli_values() -> None:
    machine = Machine.from_options(4, "16GiB", 1e-5, 1e10, "async")
    assert machine == Machine(4, 16 * 2**30, 1e-5, 1e10, "async")
    assert Machine.from_options(2) == Machine(n_devices=2)  # no bandwidth: infinite


def test_machine_from_options_falls_back_to_the_recorded_machine() -> None:
    recorded = Machine(2, 1000, 0.5, 100.0, "async").to_json()
    assert Machine.from_options(2, recorded=recorded) == Machine(2, 1000, 0.5, 100.0, "async")
    overridden = Machine.from_options(3, "2KB", bandwidth=50.0, recorded=recorded)
    assert overridden == Machine(3, 2000, 0.5, 50.0, "async")
    infinite = Machine(2).to_json()  # bandwidth null
    assert Machine.from_options(2, recorded=infinite).bandwidth == float("inf")


def test_machine_from_options_refuses_bad_values() -> None:
    with pytest.raises(MachineError, match="capacity must be a byte count"):
        Machine.from_options(2, "lots")
    with pytest.raises(MachineError, match="mode must be 'sync' or 'async'"):
        Machine.from_options(2, mode="eager")


def test_claimed_objective_is_checked_to_1e9() -> None:
    g = tiny()
    result = both(g, solution(g, {"a": 0, "b": 0, "c": 0}, ["a", "b", "c"]))
    assert result.disagreements({"peak_memory": 600, "makespan": 4.0 * (1 + 1e-12)}) == []
    assert result.disagreements({"peak_memory": 601}) == ["peak_memory: claimed 601, computed 600"]
