"""`graphopt plot` and `graphopt compare` end to end: the files they write and their errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree

import pytest
from matplotlib.image import imread
from typer.testing import CliRunner

from builders import solution, tiny
from graphopt.cli import app
from graphopt.ir.io import solution_to_json, write_graph
from graphopt.pictures import DPI, compare_figure_size, solution_figure_size

runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    g = tiny()
    graph_path = tmp_path / "tiny.json"
    write_graph(g, graph_path)
    paths = []
    for name, placement, schedule in (
        ("two.json", {"a": 0, "b": 1, "c": 0}, ["a", "a:0>1", "b", "b:0>0", "c"]),
        ("one.json", {"a": 0, "b": 0, "c": 0}, ["a", "b", "c"]),
    ):
        path = tmp_path / name
        path.write_text(json.dumps(solution_to_json(g, solution(g, placement, schedule, 2))))
        paths.append(path)
    return graph_path, paths


def invoke(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def pixels(width: float, height: float) -> tuple[int, int]:
    return round(height * DPI), round(width * DPI)


def test_plot_png_has_the_size_set_and_reports_the_scorers_numbers(files, tmp_path) -> None:
    graph_path, (two, _) = files
    out = tmp_path / "fig.png"
    code, stdout, _ = invoke("plot", graph_path, two, "-o", out, "--json")
    assert code == 0
    assert json.loads(stdout) == {
        "written": str(out),
        "graph": "tiny",
        "devices": 2,
        "peak_memory": 600,
        "peak_memory_per_device": [600, 500],
        "persistent_per_device": [0, 0],
        "makespan": 4.0,
    }
    assert imread(out).shape[:2] == pixels(*solution_figure_size(2))
    # Async copies occupy no device: they get a lane per destination, so the figure is taller.
    code, stdout, _ = invoke("plot", graph_path, two, "-o", out, "--mode", "async")
    assert code == 0 and stdout == f"wrote {out}: peak memory 600 bytes, makespan 4 s\n"
    assert imread(out).shape[:2] == pixels(*solution_figure_size(4))


def test_plot_svg_and_pdf(files, tmp_path) -> None:
    graph_path, (two, _) = files
    svg, pdf = tmp_path / "fig.svg", tmp_path / "fig.pdf"
    assert invoke("plot", graph_path, two, "-o", svg, "--latency", "0.5")[0] == 0
    assert ElementTree.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert invoke("plot", graph_path, two, "-o", pdf)[0] == 0
    assert pdf.read_bytes().startswith(b"%PDF")


def test_compare_writes_one_picture_of_both(files, tmp_path) -> None:
    graph_path, (two, one) = files
    out = tmp_path / "compare.png"
    code, stdout, _ = invoke("compare", graph_path, two, one, "-o", out, "--json")
    assert code == 0
    document = json.loads(stdout)
    assert document["written"] == str(out)
    assert [s["peak_memory"] for s in document["solutions"]] == [600, 600]
    assert [s["file"] for s in document["solutions"]] == [str(two), str(one)]
    assert imread(out).shape[:2] == pixels(*compare_figure_size(2))
    code, stdout, _ = invoke("compare", graph_path, two, one, "-o", out)
    assert code == 0 and stdout == f"wrote {out}: peak memory (bytes) two.json 600, one.json 600\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plot", "GRAPH", "TWO", "-o", "fig.jpg"], "must be .png, .svg or .pdf, not '.jpg'"),
        (["compare", "GRAPH", "TWO", "ONE", "-o", "fig"], "not '(none)'"),
        (["plot", "GRAPH", "OTHER", "-o", "fig.png"], "solution is for graph 'other', not 'tiny'"),
        (["compare", "GRAPH", "TWO", "BROKEN", "-o", "fig.png"], "broken.json: schedule[1]"),
        (["plot", "GRAPH", "TWO", "-o", "fig.png", "--mode", "eager"], "mode must be 'sync'"),
    ],
)
def test_bad_requests_are_one_line_and_exit_2(files, tmp_path, args, message) -> None:
    graph_path, (two, one) = files
    document = json.loads(two.read_text())
    (tmp_path / "other.json").write_text(json.dumps(document | {"graph": "other"}))
    schedule = document["schedule"]
    broken = document | {"schedule": [schedule[i] for i in (0, 2, 1, 3, 4)]}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    names = {"GRAPH": graph_path, "TWO": two, "ONE": one}
    names |= {"OTHER": tmp_path / "other.json", "BROKEN": tmp_path / "broken.json"}
    out = {"fig.jpg", "fig", "fig.png"}
    args = [names.get(a, tmp_path / a if a in out else a) for a in args]
    code, stdout, stderr = invoke(*args)
    assert code == 2 and stdout == ""
    assert stderr.startswith("error: ") and message in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "fig.png").exists()


def test_a_recomputed_op_is_drawn_cross_hatched(tmp_path) -> None:
    """A one-device schedule has no hatched bar; the same graph's schedule that recomputes has
    (one SVG pattern serves every cross-hatched bar); `plot` reads a recomputing solution."""
    from graphopt.solvers.remat import checkpoint_segments
    from solvers.test_remat_baselines import training_chain

    graph = training_chain(8)
    graph_path = tmp_path / "chain.json"
    write_graph(graph, graph_path)
    svgs = {}
    for length in (graph.n_ops, 3):
        solution = checkpoint_segments(graph, graph.topological_order, length)
        path = tmp_path / f"s{length}.json"
        path.write_text(json.dumps(solution_to_json(graph, solution)))
        picture = tmp_path / f"s{length}.svg"
        code, out, _ = invoke("plot", graph_path, path, "-o", picture)
        assert code == 0 and "peak memory" in out
        svgs[length] = picture.read_text()
    runs = len(checkpoint_segments(graph, graph.topological_order, 3).order) - graph.n_ops
    assert f"({runs} run again) and 0 transfers" in svgs[3]
    assert svgs[graph.n_ops].count("<pattern") == 0 < svgs[3].count("<pattern")
