"""Fuzzing the command line with seeded combinations of options (issue 43).

`combinations.draw_case` draws command lines of every command with random combinations of
valid-looking options (`test_fuzz_cli` mutates option values instead); each runs in this process
through `graphopt.cli.run`, the entry point's own error handling, within `TIME_LIMIT`, and must:

- end with a status right for the request: the command's documented ones for a valid request
  (docs/format.md section 12), those of its faults for an invalid one (never 0, never 70, never
  130), without a traceback or a warning;
- print exactly one `error: ` line on stderr, the last, when the status is not 0, and no other
  line than notes and (bench) failed runs; with `--json`, exactly one JSON object on stdout (no
  NaN, which is no JSON);
- write only the files it names, and those only when it succeeds (or, status 3, writes the best
  over-capacity solution): nothing left behind on failure, no file of its inputs changed;
- give numbers that re-score: a written solution records the machine asked for, re-scores to
  the objective it claims and to what `--json` printed, keeps its pins, lies above the printed
  lower bound; candidates re-score to their own claims; `score`, `plot` and `compare` print what
  the scorer computes on the same machine.

The fast tier draws `FAST_CASES` cases without torch, matplotlib or benchmarks; the slow tier
`SLOW_CASES` of every command (`GRAPHOPT_FUZZ_CLI_N=10000` for a long run). Both collect every
defect and fail once, with one shrunk repro per kind; `GRAPHOPT_FUZZ_CLI_LOG=FILE` also writes
one JSON line per invocation (command line, status, seconds, problem), and
`GRAPHOPT_FUZZ_CLI_CASES=5826,7760` replays those cases of a long run.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import graphopt.policies
from fuzz.combinations import (
    TORCH_SOLVERS,
    Case,
    GraphInput,
    Inputs,
    MachineOptions,
    SolutionInput,
    draw_case,
)
from fuzz.harness import Defect, check_cli, check_message, run_in_process
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Score, Scorer
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph, read_solution
from graphopt.ir.solution import Solution
from graphopt.solvers.bounds import fused_peak_memory_lower_bound, peak_memory_lower_bound
from graphopt.solvers.registry import SOLVERS

SEED = 43
FAST_CASES = 30
"""Invocations of the fast tier (in `make test`)."""
SLOW_CASES = int(os.environ.get("GRAPHOPT_FUZZ_CLI_N", "2000"))
"""Invocations of the slow tier (`pytest -m slow`)."""
CASES = os.environ.get("GRAPHOPT_FUZZ_CLI_CASES")
"""Comma-separated case indices the slow tier replays instead (a long run's defects), when set."""
LOG = os.environ.get("GRAPHOPT_FUZZ_CLI_LOG")
"""A file to write one JSON line per invocation to, when set."""
SHRINK_RUNS = 40
"""Re-runs spent shrinking one repro of each kind of defect."""

NOTE_PREFIXES = ("note: ", "failed: ")
"""Lines a command may print on stderr besides its one `error: ` line: notes about the result,
and bench's failed runs."""
FLAGS = frozenset({"--json", "--reference", "--train"})
"""Options without a value (for shrinking)."""
KEPT = frozenset({"-o", "--json", "--candidates"})
"""Options a shrunk repro keeps: the checks read what they ask for."""

GRAPHS = (
    ("layered", 16, True, ".json"),
    ("erdos_renyi", 24, False, ".npz"),
    ("sbm", 30, True, ".json"),
    ("watts_strogatz", 12, False, ".json"),
    ("barabasi_albert", 36, True, ".npz"),
)
"""The session's graphs: (family, ops, with fusion classes, file suffix)."""
ZOO_MODEL = "wavenet-tiny"
"""The zoo model the slow tier exports once (69 ops, fusion classes, module paths) and runs
apply, measure and replay on."""


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """A temporary working folder: the inputs and every case's outputs (and anything a command
    leaves behind) go there, never into the repository."""
    with tempfile.TemporaryDirectory() as name, contextlib.chdir(name):
        yield Path(name)


@pytest.fixture(scope="module")
def inputs(workdir: Path) -> Inputs:
    return make_inputs()


@pytest.fixture(scope="module")
def heavy_inputs(inputs: Inputs) -> Inputs:
    return with_zoo(inputs)


def make_inputs() -> Inputs:
    """Small generated graphs, a folder suite, solutions on 1, 2 and 4 devices, policies, made
    in the working folder."""
    commands: list[tuple[str, ...]] = []
    for k, (family, n, fusion, suffix) in enumerate(GRAPHS):
        extra = ("-p", "fusion=true") if fusion else ()
        _make(commands, "generate", family, "-n", n, "--seed", k, *extra, "-o", f"g{k}{suffix}")
    for k in range(2):
        _make(commands, "generate", "layered", "-n", 10 + k, "--seed", k, "-o", f"suite/{k}.json")
    graphs = [_graph_input(f"g{k}{suffix}") for k, (*_, suffix) in enumerate(GRAPHS)]
    solutions = [s for graph in graphs for s in _solve(commands, graph)]
    objectives = {
        name: frozenset(o.value for o in factory.objectives)
        for name, entry in SOLVERS.items()
        if name not in TORCH_SOLVERS
        and hasattr(
            factory := getattr(importlib.import_module(entry.module), entry.factory), "objectives"
        )
    }
    policies = tuple(sorted(str(p) for p in Path(graphopt.policies.__file__).parent.glob("*.pt")))
    return Inputs(tuple(graphs), tuple(solutions), "suite", policies, objectives, tuple(commands))


def with_zoo(inputs: Inputs) -> Inputs:
    """`inputs` and a zoo model's graph, with its solutions on 1 and 2 devices."""
    commands = list(inputs.commands)
    _make(commands, "zoo", "export", ZOO_MODEL, "-o", "zoo.json")
    graph = replace(_graph_input("zoo.json"), model=ZOO_MODEL)
    return replace(
        inputs,
        graphs=(*inputs.graphs, graph),
        solutions=(*inputs.solutions, *_solve(commands, graph)),
        commands=tuple(commands),
    )


def _make(commands: list[tuple[str, ...]], *args: object) -> None:
    """Runs one command that makes an input; it must succeed."""
    argv = tuple(str(a) for a in args)
    Path(argv[-1]).parent.mkdir(parents=True, exist_ok=True)
    check_cli(run_in_process(argv), (0,), " ".join(argv))
    commands.append(argv)


def _graph_input(path: str) -> GraphInput:
    graph = read_graph(path)
    fusable = bool(graph.op_fusion.any())
    bounds = []
    for d in range(1, 9):
        both = {peak_memory_lower_bound(graph, d)}
        if fusable:
            both.add(fused_peak_memory_lower_bound(graph, d))
        bounds.append((min(both), max(both)))
    total = int(graph.tensor_size.sum() + graph.op_temp_memory.sum())
    return GraphInput(path, tuple(graph.op_names), fusable, tuple(bounds), total)


def _solve(commands: list[tuple[str, ...]], graph: GraphInput) -> list[SolutionInput]:
    """Solutions of `graph`: on 1 device; on 2 by BRKGA, searching fusion where the graph can
    fuse; on 4 for makespan."""
    stem = Path(graph.path).stem
    fusion = ("--fusion", "search") if graph.fusable else ()
    made = []
    for devices, options in (
        (1, ("--budget", 20)),
        (2, ("--solver", "brkga", *fusion, "--budget", 50)),
        (4, ("--objective", "makespan", "--budget", 20)),
    ):
        path = f"{stem}-d{devices}.json"
        _make(commands, "optimize", graph.path, "--devices", devices, *options, "-o", path)
        made.append(SolutionInput(path, graph.path, devices))
    return made


def _snapshot() -> dict[str, tuple[bool, int, int]]:
    """Every path under the working folder: (is a folder, size, modification time)."""
    found = {}
    for folder, names, files in os.walk("."):
        for name in [*names, *files]:
            path = os.path.join(folder, name)[2:]
            stat = os.stat(path, follow_symlinks=False)
            found[path] = (os.path.isdir(path), stat.st_size, stat.st_mtime_ns)
    return found


class Ran(NamedTuple):
    """How a case ended: its status (None when it never returned), its last stderr line, and
    the first defect found (None when there is none)."""

    status: int | None
    last_line: str
    problem: str | None


def run_case(case: Case) -> Ran:
    """Runs `case` and checks it; its outputs are removed afterwards."""
    Path(case.folder).mkdir()
    for folder in case.folders:
        Path(folder).mkdir(parents=True, exist_ok=True)
    for file in case.files:
        Path(file).write_text("an earlier file\n")
    before = _snapshot()
    code, last = None, ""
    try:
        result = run_in_process(case.argv)
        code, last = result.returncode, (result.stderr.splitlines() or [""])[-1]
        check_cli(result, sorted(case.allowed), _shown(case.argv))
        _check_streams(case, result.stdout, result.stderr, code)
        _check_files(case, code, before, _snapshot())
        if code in (0, 1, 3) and not case.faults:
            _CHECKS.get(case.command, lambda *_: None)(case, result.stdout, code)
    except Defect as defect:
        return Ran(code, last, str(defect))
    finally:
        shutil.rmtree(case.folder, ignore_errors=True)
    return Ran(code, last, None)


def _shown(argv: Sequence[str]) -> str:
    return "graphopt " + " ".join(argv)


def _check_streams(case: Case, stdout: str, stderr: str, code: int) -> None:
    """One `error: ` line, the last, exactly when the status is not 0; notes besides; with
    `--json` and a result, one JSON object on stdout."""
    lines = stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    if code and (len(errors) != 1 or lines[-1] != errors[0]):
        raise Defect(f"`{_shown(case.argv)}` exit {code}, not one last 'error: ' line: {stderr!r}")
    if not code and errors:
        raise Defect(f"`{_shown(case.argv)}` exit 0 with an error line: {stderr!r}")
    for line in lines:
        if not line.startswith(("error: ", *NOTE_PREFIXES)):
            raise Defect(f"`{_shown(case.argv)}` printed an unexpected stderr line: {line!r}")
        check_message(line.partition(": ")[2], f"`{_shown(case.argv)}`")
    if case.as_json and code in (0, 1, 3) and not case.faults:
        document(case, stdout)


def document(case: Case, stdout: str) -> dict[str, Any]:
    """The one JSON object `--json` prints, read strictly (NaN and Infinity are no JSON)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    lines = stdout.splitlines()
    try:
        if len(lines) != 1:
            raise ValueError(f"{len(lines)} lines")
        found = json.loads(lines[0], parse_constant=refuse)
        if not isinstance(found, dict):
            raise ValueError("not an object")
    except ValueError as error:
        raise Defect(
            f"`{_shown(case.argv)}` --json: stdout is not one JSON object ({error}): "
            f"{stdout[:300]!r}"
        ) from None
    return found


def _check_files(
    case: Case, code: int, before: dict[str, tuple[bool, int, int]], after: dict[str, Any]
) -> None:
    """Only the case's outputs change (with the folders made for them), and only when it
    succeeded (status 1: bench's reports; status 3: the best solution)."""
    written = case.writes if code in (0, 1, 3) else ()
    for path in sorted(set(before) | set(after)):
        if before.get(path) == after.get(path) or (
            path in before and path in after and before[path][0]
        ):
            continue  # unchanged, or a folder whose contents changed (checked by their paths)
        if any(path == w or w.startswith(f"{path}/") or path.startswith(f"{w}/") for w in written):
            continue  # an output, a folder made for one, or what an output folder holds
        what = "removed" if path not in after else "left" if path not in before else "changed"
        raise Defect(f"`{_shown(case.argv)}` exit {code} {what} {path}")


def _rescore(graph: Graph, path: str, machine: Machine, what: str) -> tuple[Solution, Score]:
    """A written solution re-scored on `machine`, which it must record, to its own claims."""
    solution = read_solution(path, graph)
    if dict(solution.machine) != machine.to_json() or solution.n_devices != machine.n_devices:
        raise Defect(
            f"{what}: {path} records machine {dict(solution.machine)} on {solution.n_devices} "
            f"devices, asked {machine.to_json()}"
        )
    score = Scorer(graph, machine).score(solution)
    wrong = score.disagreements(dict(solution.objective))
    if wrong:
        raise Defect(f"{what}: {path} claims disagree with its re-score: {'; '.join(wrong)}")
    return solution, score


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _same(what: str, printed: dict[str, Any], score: Score, keys: Sequence[str]) -> None:
    """Printed numbers equal to the re-score's (relative 1e-9)."""
    computed = {**score.to_json(), "peak_memory": score.peak_memory}
    for key in keys:
        if not _close(printed.get(key), computed[key]):
            raise Defect(f"{what}: printed {key} {printed.get(key)!r}, re-scored {computed[key]!r}")


def _check_optimize(case: Case, stdout: str, code: int) -> None:
    assert case.graph is not None and case.output is not None and case.machine is not None
    what = _shown(case.argv)
    graph = read_graph(case.graph)
    machine = Machine.from_options(*case.machine)
    solution, score = _rescore(graph, case.output, machine, what)
    if score.feasible != (code == 0):
        fits = "fits" if score.feasible else "does not fit"
        raise Defect(f"{what}: exit {code}, but the solution written {fits} the capacity")
    for op, device in case.pins.items():
        if solution.placement[graph.op_ids[op]] != device:
            raise Defect(f"{what}: op {op!r} pinned to {device} runs on another device")
    candidates = _check_candidates(case, graph, machine)
    if not case.as_json:
        return
    summary = document(case, stdout)
    keys = ("peak_memory", "makespan", "peak_memory_per_device", "feasible", "speedup")
    _same(what, summary, score, keys)
    value = score.peak_memory if case.objective == "peak-memory" else score.makespan
    if not _close(summary["value"], value) or summary["objective"] != case.objective:
        raise Defect(f"{what}: printed value {summary['value']}, re-scored {value}")
    if summary["lower_bound"] > value * (1 + 1e-9):
        raise Defect(f"{what}: lower bound {summary['lower_bound']} above a solution's {value}")
    if summary["fusion_groups"] != solution.n_groups or summary["output"] != case.output:
        raise Defect(
            f"{what}: printed {summary['fusion_groups']} groups, written {solution.n_groups}"
        )
    if case.candidates is not None and summary["candidates"]["k"] != candidates:
        raise Defect(f"{what}: printed k {summary['candidates']['k']}, wrote {candidates}")


def _check_candidates(case: Case, graph: Graph, machine: Machine) -> int:
    """Every written candidate re-scores to its claims; report.json counts them."""
    if case.candidates is None:
        return 0
    what = _shown(case.argv)
    files = sorted(Path(case.candidates).glob("candidate-*.json"))
    for path in files:
        _rescore(graph, str(path), machine, what)
    report = json.loads((Path(case.candidates) / "report.json").read_text())
    asked = report["asked"]
    if not 1 <= report["k"] == len(files) <= asked:
        raise Defect(f"{what}: report k {report['k']}, {len(files)} files, {asked} asked")
    return len(files)


def _scored_as_asked(case: Case, path: str, capacity: bool = True) -> Score:
    """The scorer's score of an input solution on the machine `score` and `plot` use."""
    assert case.graph is not None and case.machine is not None
    graph = read_graph(case.graph)
    devices, limit, latency, bandwidth, mode = case.machine
    solution = read_solution(path, graph, n_devices=devices)
    machine = Machine.from_options(
        solution.n_devices,
        limit if capacity else None,
        latency,
        bandwidth,
        mode,
        recorded=solution.machine,
    )
    return Scorer(graph, machine).score(solution)


def _check_score(case: Case, stdout: str, code: int) -> None:
    if not case.as_json:
        return
    printed = document(case, stdout)
    score = _scored_as_asked(case, case.solutions[0])
    keys = ("peak_memory", "makespan", "peak_memory_per_device", "feasible", "speedup")
    _same(_shown(case.argv), printed, score, keys)
    overridden = any(value is not None for value in case.machine or MachineOptions())
    if printed["claims_agree"] != (None if overridden else True):
        raise Defect(f"{_shown(case.argv)}: claims_agree {printed['claims_agree']}")


def _check_pictures(case: Case, stdout: str, code: int) -> None:
    assert case.output is not None
    if not Path(case.output).stat().st_size:
        raise Defect(f"{_shown(case.argv)}: wrote an empty {case.output}")
    if not case.as_json:
        return
    printed = document(case, stdout)
    rows = printed.get("solutions", [printed])
    for path, row in zip(case.solutions, rows, strict=True):
        score = _scored_as_asked(case, path, capacity=case.command == "plot")
        _same(_shown(case.argv), row, score, ("peak_memory", "makespan", "peak_memory_per_device"))


def _check_graph_output(case: Case, stdout: str, code: int) -> None:
    """A written graph reads back, with the counts printed."""
    assert case.output is not None
    _check_counts(case, stdout, read_graph(case.output))


def _check_info(case: Case, stdout: str, code: int) -> None:
    assert case.graph is not None
    _check_counts(case, stdout, read_graph(case.graph))


def _check_counts(case: Case, stdout: str, graph: Graph) -> None:
    if not case.as_json:
        return
    printed = document(case, stdout)
    counts = {"ops": graph.n_ops, "tensors": graph.n_tensors, "edges": graph.n_edges}
    if {key: printed[key] for key in counts} != counts:
        raise Defect(f"{_shown(case.argv)}: printed {printed}, the graph has {counts}")


def _check_bench(case: Case, stdout: str, code: int) -> None:
    if case.as_json:
        missing = [f for f in document(case, stdout)["files"] if not Path(f).is_file()]
        if missing:
            raise Defect(f"{_shown(case.argv)}: printed files that are not there: {missing}")


_CHECKS = {
    "optimize": _check_optimize,
    "score": _check_score,
    "plot": _check_pictures,
    "compare": _check_pictures,
    "generate": _check_graph_output,
    "import": _check_graph_output,
    "zoo export": _check_graph_output,
    "info": _check_info,
    "bench": _check_bench,
}


def _signature(problem: str) -> str:
    """A defect's kind: its first line and last stderr line, without command lines, paths and
    numbers, so that one kind groups its cases."""
    lines = problem.splitlines()
    text = f"{lines[0]} | {lines[-1]}" if len(lines) > 1 else lines[0]
    text = re.sub(r"`[^`]*`", "CMD", text)
    text = re.sub(r"\(expected \[[^]]*\]\)", "", text)
    text = re.sub(r"[\w./-]*c\d+/[\w./-]*", "PATH", text)
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", text)[:200]


def _units(argv: Sequence[str], skip: int) -> list[tuple[int, int]]:
    """(start, end) of each option with its value in `argv`, after `skip` command words and
    positional arguments."""
    units, i = [], skip
    while i < len(argv):
        end = i + 1 if argv[i] in FLAGS or not argv[i].startswith("-") else i + 2
        if argv[i].startswith("-") and argv[i] not in KEPT:
            units.append((i, end))
        i = end
    return units


def shrink(case: Case, problem: str) -> Case:
    """`case` without the options its defect does not need (same signature), at most
    `SHRINK_RUNS` re-runs; not for a faulty request that succeeded, whose signature would
    survive dropping the fault."""
    if case.faults and "exited with 0" in problem:
        return case
    kind, runs = _signature(problem), 0
    changed = True
    while changed and runs < SHRINK_RUNS:
        changed = False
        for start, end in reversed(_units(case.argv, len(case.command.split()))):
            smaller = replace(case, argv=case.argv[:start] + case.argv[end:])
            runs += 1
            found = run_case(smaller).problem
            if found is not None and _signature(found) == kind:
                case, changed = smaller, True
                break
            if runs >= SHRINK_RUNS:
                break
    return case


def fuzz(inputs: Inputs, cases: Sequence[int], light: bool) -> None:
    """Runs the cases; fails once with every kind of defect found, each with a shrunk repro."""
    found: dict[str, list[tuple[Case, str]]] = defaultdict(list)
    statuses: Counter[tuple[str, int | None]] = Counter()
    started = time.perf_counter()
    log = open(LOG, "a") if LOG else contextlib.nullcontext()  # noqa: SIM115
    with log as lines:
        for index in cases:
            case = draw_case(SEED, index, inputs, light)
            begun = time.perf_counter()
            ran = run_case(case)
            statuses[case.command, ran.status] += 1
            if ran.problem is not None:
                found[_signature(ran.problem)].append((case, ran.problem))
            if lines is not None:
                record = {"index": index, "argv": case.argv, "faults": case.faults}
                record |= ran._asdict()
                record["seconds"] = round(time.perf_counter() - begun, 3)
                lines.write(json.dumps(record) + "\n")
                lines.flush()
    seconds = time.perf_counter() - started
    print(
        f"{len(cases)} invocations in {seconds:.0f} s ({len(cases) / seconds:.2f}/s); "
        f"statuses: {dict(sorted(statuses.items(), key=str))}"
    )
    if found:
        pytest.fail(_report(inputs, found), pytrace=False)


def _report(inputs: Inputs, found: dict[str, list[tuple[Case, str]]]) -> str:
    """Each kind of defect: how many cases, a shrunk repro and what went wrong."""
    lines = [f"{sum(map(len, found.values()))} defective invocations, {len(found)} kinds"]
    lines.append("inputs: " + "; ".join(_shown(argv) for argv in inputs.commands))
    for kind, cases in sorted(found.items(), key=lambda item: -len(item[1])):
        case, problem = cases[0]
        small = shrink(case, problem)
        lines += [
            f"- {len(cases)} x {kind}",
            f"    repro (case {case.index}): {_shown(small.argv)}",
            f"    {problem[:600]}",
        ]
    return "\n".join(lines)


def test_cli_combinations(inputs: Inputs) -> None:
    fuzz(inputs, range(FAST_CASES), light=True)


@pytest.mark.slow
def test_cli_combinations_long(heavy_inputs: Inputs) -> None:
    if CASES:
        fuzz(heavy_inputs, [int(index) for index in CASES.split(",")], light=False)
    else:
        fuzz(heavy_inputs, range(FAST_CASES, FAST_CASES + SLOW_CASES), light=False)
