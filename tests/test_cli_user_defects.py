"""Issue 43, defects 7 to 11: what a user of the command line meets first.

Output paths checked before any work, `compiler-default`'s fusion, a bench that survives one
failed run, help and labels that point at files that exist, and the small things: signs, plurals,
integers, rounding, an 80-column listing, warnings, notes and import times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import graphopt.optimize  # noqa: F401 (the module whose search the first tests replace)
from graphopt.cli import app
from graphopt.ir.generators import generate
from graphopt.ir.io import write_graph

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def one_error_line(result) -> str:
    """The single `error:` line of a refused command (exit 2)."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a graph, a solution of it, a sub-folder and a plain file; the cwd."""
    monkeypatch.chdir(tmp_path)
    write_graph(generate("layered", 20, seed=0), tmp_path / "g.json")
    result = invoke("optimize", "g.json", "--budget", "50", "-o", "s.json", "--json")
    assert result.exit_code == 0, result.output
    (tmp_path / "folder").mkdir()
    (tmp_path / "picture.png").mkdir()
    (tmp_path / "file.txt").write_text("")
    return tmp_path


# 7. Output paths are checked before any work, each named as the user gave it.

OUTPUTS = [
    (["optimize", "g.json", "-o", "folder", "--time", "60"], "folder: is a directory"),
    (["optimize", "g.json", "-o", "missing/s.json"], "missing/s.json: its folder 'missing'"),
    (["optimize", "g.json", "-o", "file.txt/s.json"], "file.txt/s.json: its folder 'file.txt'"),
    (["optimize", "g.json", "-o", "s2.json", "--candidates", "file.txt"], "file.txt: is a file"),
    (["generate", "layered", "-o", "folder"], "folder: is a directory"),
    (["import", "g.json", "-o", "missing/g.json"], "missing/g.json: its folder 'missing'"),
    (["zoo", "export", "no-such-model", "-o", "folder"], "folder: is a directory"),
    (["plot", "g.json", "s.json", "-o", "picture.png"], "picture.png: is a directory"),
    (["compare", "g.json", "s.json", "-o", "missing/c.svg"], "missing/c.svg: its folder"),
    (["bench", "tiny-20", "-o", "file.txt"], "file.txt: is a file"),
    (["bench", "tiny-20", "-o", "file.txt/out"], "file.txt/out: the folder 'file.txt' is a file"),
    (["apply", "no-such-model", "s.json", "--code", "folder"], "folder: is a directory"),
    (["dataset", "build", "default", "-o", "file.txt"], "file.txt: is a file"),
    (["train", "regal", "regal-peak-memory", "-o", "file.txt", "--smoke"], "file.txt: is a file"),
    (["train", "gdp", "gdp", "-o", "file.txt/run"], "file.txt/run: the folder 'file.txt'"),
]


@pytest.mark.parametrize(("args", "message"), OUTPUTS, ids=[message for _, message in OUTPUTS])
def test_every_output_path_is_checked_first_and_named_as_given(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    def no_search(*args: object, **kwargs: object) -> None:
        raise AssertionError("the search ran before the output path was checked")

    monkeypatch.setattr(sys.modules["graphopt.optimize"], "optimize", no_search)
    line = one_error_line(invoke(*args))
    assert line.startswith(f"error: {message}"), line
    assert str(workdir) not in line  # the path as given, not an absolute temporary name


def test_an_unwritable_output_is_refused(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workdir / "locked").mkdir()
    access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: Path(path).name != "locked" and access(path, mode)
    )
    line = one_error_line(invoke("optimize", "g.json", "-o", "locked/s.json"))
    assert line == "error: locked/s.json: its folder 'locked' is not writable"
    line = one_error_line(invoke("bench", "tiny-20", "-o", "locked/deeper/out"))
    assert line == "error: locked/deeper/out: the folder 'locked' is not writable"


# 8. compiler-default is what `graphopt solvers` says: it fuses as XLA does by default.


def test_compiler_default_fuses_unless_told_not_to(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    write_graph(generate("layered", 30, seed=1, fusion=True), path)
    common = ["optimize", str(path), "--solver", "compiler-default", "--objective", "makespan"]
    common += ["--devices", "1"]
    fused = json.loads(invoke(*common, "-o", str(tmp_path / "f.json"), "--json").stdout)
    plain = invoke(*common, "--fusion", "none", "-o", str(tmp_path / "p.json"), "--json")
    assert fused["fusion_groups"] > 0
    assert json.loads(plain.stdout)["fusion_groups"] == 0
    assert fused["value"] < json.loads(plain.stdout)["value"]


# 9. One failed run is recorded; the suite finishes and the command exits 1 at the end.


def test_bench_records_a_failed_run_and_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphopt.solvers.base import SolverError
    from graphopt.solvers.list_scheduling import HeftScheduler

    suite = tmp_path / "suite"
    suite.mkdir()
    for seed in (0, 1):
        write_graph(generate("layered", 15, seed=seed), suite / f"g{seed}.json")
    run = HeftScheduler.run

    def flaky(self, problem, tracker, rng, initial):
        if problem.graph.name == "layered_n15_s1":
            raise SolverError("heft refuses this graph\non two lines")
        return run(self, problem, tracker, rng, initial)

    monkeypatch.setattr(HeftScheduler, "run", flaky)
    out = tmp_path / "out"
    result = invoke(
        "bench", str(suite), "--solvers", "heft", "--objective", "makespan", "--budget", "30",
        "-o", str(out),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "error: 1 of 4 runs failed" in result.stderr
    assert "heft on layered_n15_s1 (seed 0): heft refuses this graph\\non two lines" in (
        result.stderr
    )
    folder = next(out.iterdir())
    summary = (folder / "summary.md").read_text()
    assert "heft on layered_n15_s1 (seed 0): heft refuses this graph\\non two lines" in summary
    rows = (folder / "runs.csv").read_text().splitlines()
    assert rows[0].endswith(",error")
    failed = [row for row in rows if "refuses" in row]
    assert len(failed) == 1 and failed[0].startswith("layered_n15_s1,heft,0,")
    assert len(rows) == 1 + 4  # two solvers on two graphs, the failed run included
    csv_summary = (folder / "summary.csv").read_text().splitlines()
    heft = next(row for row in csv_summary if row.startswith("heft,"))
    assert heft.endswith(",1")  # its failed runs, in the last column


def test_bench_where_every_run_fails_prints_strict_json_and_no_warning(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    write_graph(generate("layered", 15, seed=0), suite / "g.json")
    result = invoke(
        "bench", str(suite), "--solvers", "heft", "--budget", "30", "--capacity", "1KiB",
        "-o", str(tmp_path / "out"), "--json",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith(("failed: ", "error: ")) for line in lines), result.stderr
    assert lines[-1].startswith("error: 2 of 2 runs failed; ")
    assert "the others finished" not in lines[-1]


def test_bench_budget_curve_where_every_run_fails(tmp_path: Path) -> None:
    """Found by the CLI fuzz tier at 10,000: the curve's log axis had no point (exit 70)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for seed in range(4):
        write_graph(generate("layered", 10, seed=seed), suite / f"g{seed}.json")
    out = tmp_path / "out"
    result = invoke(
        "bench", str(suite), "--solvers", "gp-metis,local-search", "--budget", "22",
        "--budgets", "10,20", "--capacity", "1KiB", "-o", str(out),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert (next(out.iterdir()) / "budget_curve.png").stat().st_size > 0
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 6 and failed[-1] == "failed: ... and 7 more"  # 12 distinct of 36
    assert result.stderr.splitlines()[-1].startswith("error: 36 of 36 runs failed; ")


# 10. Help and pictures cite files that exist; the solver lists come from the registry.


def test_help_and_pictures_cite_docs_format(workdir: Path) -> None:
    import matplotlib

    top = invoke("--help").stdout + invoke("score", "--help").stdout
    assert "COST_MODEL" not in top and "docs/format.md" in top
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        assert invoke("plot", "g.json", "s.json", "-o", "p.svg").exit_code == 0
        assert invoke("compare", "g.json", "s.json", "s.json", "-o", "c.svg").exit_code == 0
    for picture in ("p.svg", "c.svg"):
        text = (workdir / picture).read_text()
        assert "COST_MODEL" not in text and "docs/format.md sections 5 and 13" in text


def option_help(command: str, name: str) -> str:
    group = typer.main.get_command(app)
    params = {p.name: p for p in group.commands[command].params}  # type: ignore[attr-defined]
    return " ".join(params[name].help.split())


def test_optimize_help_lists_what_the_registry_and_the_code_accept() -> None:
    from graphopt.solvers.base import SolverError
    from graphopt.solvers.registry import (
        FINETUNERS,
        FUSION_SEARCHERS,
        LEARNED,
        SOLVERS,
        make_solver,
    )

    assert set(LEARNED) == {n for n, e in SOLVERS.items() if e.learned} >= {"go", "gdp"}
    assert set(FINETUNERS) == {"gdp", "gdp-policy", "go", "go-policy"}
    assert {"brkga", "local-search", "auto", "go", "go-anneal"} <= set(FUSION_SEARCHERS)
    assert f"({', '.join(LEARNED)})" in option_help("optimize", "policy")
    assert f"({', '.join(FINETUNERS)})" in option_help("optimize", "finetune")
    assert f"order: {', '.join(FUSION_SEARCHERS)})" in option_help("optimize", "fusion")
    with pytest.raises(SolverError, match=f"--finetune applies to {', '.join(FINETUNERS)},"):
        make_solver("heft", finetune=3)
    with pytest.raises(SolverError, match=f"learned solvers {', '.join(LEARNED)}, not"):
        make_solver("heft", policy="p.pt")


@pytest.mark.parametrize(
    ("command", "default"),
    [
        ("optimize", "[default: default for compiler-default on a graph with fusion classes"),
        ("bench", "[default: peak-memory; zoo-real: both]"),
        ("score", "[default: infinite]"),
    ],
)
def test_help_shows_its_bracketed_defaults(command: str, default: str) -> None:
    # typer renders help as rich markup, in which an unescaped "[default: x]" is a tag.
    shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "1000"}).stdout
    assert default in shown


# 11. Small things a user notices.


def test_a_gap_of_float_noise_is_shown_as_zero_and_a_speedup_rounded(tmp_path: Path) -> None:
    path, out = tmp_path / "g.json", tmp_path / "s.json"
    write_graph(generate("layered", 30, seed=3), path)  # HEFT's makespan is 1e-16 under the bound
    args = ["optimize", str(path), "--objective", "makespan", "--devices", "1", "--solver", "heft"]
    table = invoke(*args, "-o", str(out)).stdout
    assert "(best is 0.00% above it)" in table and "-0.00%" not in table
    summary = json.loads(invoke(*args, "-o", str(out), "--json").stdout)
    assert summary["gap"] == 0.0 and summary["speedup"] == 1.0
    scored = json.loads(invoke("score", str(path), str(out), "--json").stdout)
    assert scored["speedup"] == 1.0
    written = json.loads(out.read_text())["objective"]["makespan"]
    assert written == summary["makespan"] and written != round(written, 6)  # files keep it exact


def test_byte_counts_are_integers_in_json(workdir: Path) -> None:
    result = invoke("optimize", "g.json", "--budget", "50", "-o", "t.json", "--json")
    summary = json.loads(result.stdout)
    assert isinstance(summary["value"], int) and isinstance(summary["lower_bound"], int)


def test_one_device_is_singular(workdir: Path) -> None:
    import matplotlib

    invoke("optimize", "g.json", "--budget", "50", "--devices", "1", "-o", "one.json")
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        assert invoke("plot", "g.json", "one.json", "-o", "one.svg").exit_code == 0
    text = (workdir / "one.svg").read_text()
    assert "on 1 device;" in text and "1 devices" not in text


def test_zoo_list_fits_80_columns_without_torch() -> None:
    code = (
        "import sys; from graphopt.cli import run; code = run(['zoo', 'list']); "
        "print([m for m in ('torch', 'transformers') if m in sys.modules], file=sys.stderr); "
        "sys.exit(code)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr.strip().splitlines()[-1] == "[]"
    lines = completed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in completed.stdout  # nothing cut short
    listed = json.loads(invoke("zoo", "list", "--json").stdout)["models"]
    text = " ".join(" ".join(line.strip("│ ").split()) for line in lines)
    for model in listed:
        assert f" {model['name']} " in f" {text} "
        assert " ".join(model["description"].split()[:3]) in text


def test_the_recorded_zoo_labels_are_the_zoos() -> None:
    from graphopt.importers.zoo import ZOO
    from graphopt.importers.zoo_sizes import REGENERATE, zoo_catalogue

    recorded = [(m["name"], m["family"], m["description"]) for m in zoo_catalogue()]
    assert recorded == [(m.name, m.family, m.description) for m in ZOO.values()], REGENERATE


def test_info_and_import_of_a_graph_file_import_no_numba(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    write_graph(generate("layered", 30, seed=0), path)
    code = (
        "import sys; from graphopt.cli import run; "
        f"code = run(['info', {str(path)!r}]) or run(['import', {str(path)!r}, '-o', "
        f"{str(tmp_path / 'copy.npz')!r}]); "
        "print('numba' in sys.modules, file=sys.stderr); sys.exit(code)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr.strip().splitlines()[-1] == "False"


FACTORY = """
import torch


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return model, (torch.randn(2, 8),)
"""


def test_only_torch_s_leafspec_warning_is_silenced() -> None:
    from graphopt.cli.execution import _without_leafspec_warning

    @_without_leafspec_warning
    def command() -> None:
        warnings.warn(
            "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, "
            "TreeSpec) and treespec.is_leaf()` instead.",
            FutureWarning,
            stacklevel=1,
        )
        warnings.warn("another deprecation", FutureWarning, stacklevel=1)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        command()
    assert [str(w.message) for w in caught] == ["another deprecation"]


@pytest.mark.slow
def test_apply_and_measure_print_no_torch_warning_and_apply_notes_unapplied_fusion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny_factory.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = "tiny_factory:build"
    assert invoke("import", model, "--train", "-o", "g.json").exit_code == 0
    fused = invoke(
        "optimize", "g.json", "--devices", "1", "--objective", "makespan", "--budget", "50",
        "--fusion", "default", "-o", "s.json", "--json",
    )  # fmt: skip
    groups = json.loads(fused.stdout)["fusion_groups"]
    assert groups > 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        applied = invoke("apply", model, "--train", "s.json")
        measured = invoke("measure", model, "--train", "s.json", "--repeats", "1")
    assert applied.exit_code == 0 and measured.exit_code == 0, applied.output + measured.output
    assert not [w for w in caught if "LeafSpec" in str(w.message)]
    assert (
        f"note: s.json: its {groups} fusion groups are not applied: the order is, and fusing is "
        "left to the compiler" in applied.stderr
    )


def test_graph_kernels_agree_compiled_and_plain() -> None:
    # Small graphs run the kernels' code uncompiled (no numba to import); large ones compiled.
    from graphopt.ir._algorithms import longest_path, topological_order

    for family, seed in (("erdos_renyi", 0), ("layered", 1), ("barabasi_albert", 2)):
        graph = generate(family, 200, seed=seed)
        ptr, successors = graph._successor_edges
        pred_ptr, predecessors = graph._predecessor_edges
        plain = topological_order.py_func(graph.n_ops, ptr, successors)
        assert (plain == topological_order.compiled(graph.n_ops, ptr, successors)).all()
        paths = [
            run(plain, pred_ptr, predecessors, graph.op_runtime)
            for run in (longest_path.py_func, longest_path.compiled)
        ]
        assert all((a == b).all() for a, b in zip(*paths, strict=True))
