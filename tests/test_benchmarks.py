"""Smoke tests for the scripts in benchmarks/.

The benchmarks are standalone scripts that nothing imports, so a library refactor can break one
unnoticed (regal_reward_noise.py did when GraphBatch replaced torch_geometric's Batch). Each test
runs a script end to end in a fresh interpreter on tiny inputs and checks the structure of what
it writes; none of them checks timings.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests import builders

from graphopt.datasets import Dataset, DatasetConfig, build_dataset
from graphopt.learning.formats import shipped_policy_path
from graphopt.learning.labels import LabelConfig, build_labels
from graphopt.learning.systems.regal.checkpoints import load_policy

ROOT = Path(__file__).parents[1]
BENCHMARKS = ROOT / "benchmarks"
PRESETS = ROOT / "src/graphopt/solvers/presets"


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 40 ops, not 20: on 20-op layered graphs every action vector reaches the same value, which
    # leaves regal_reward_noise.py's branch for graphs where actions matter unexercised.
    out = tmp_path_factory.mktemp("dataset")
    config = DatasetConfig.from_dict(
        {
            "name": "t",
            "seed": 1,
            "copies": 1,
            "synthetic": [{"family": "layered", "sizes": [40], "count": 3}],
        }
    )
    build_dataset(config, out, progress=False)
    return out


def run_script(
    name: str, *args: str | Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs benchmarks/`name` from the repository root and asserts it exits cleanly."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *map(str, args)],
        cwd=ROOT,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{name} exited with {result.returncode}:\n{result.stderr}"
    return result


def assert_positive(row: Mapping[str, Any], keys: Iterable[str]) -> None:
    for key in keys:
        value = row[key]
        assert isinstance(value, int | float) and math.isfinite(value) and value > 0, (key, value)


def test_bench_io(tmp_path: Path) -> None:
    out = tmp_path / "io.json"
    run_script("bench_io.py", "--ops", "50", "--repeats", "1", "--json", out)
    results = json.loads(out.read_text())
    assert results["ops"] == 50 and results["family"] == "layered"
    assert_positive(results, ["generate_seconds", "edges"])
    for suffix in ("json", "npz"):
        assert_positive(
            results, [f"{suffix}_{k}" for k in ("bytes", "write_seconds", "load_seconds")]
        )


@pytest.mark.parametrize("pymoo", [True, False], ids=["with-pymoo", "without-pymoo"])
def test_bench_brkga(tmp_path: Path, pymoo: bool) -> None:
    env = None
    if pymoo and importlib.util.find_spec("pymoo") is None:
        pytest.skip("pymoo (the bench extra) is not installed")
    if not pymoo:  # a package that shadows pymoo and fails to import, as if it were missing
        shadow = tmp_path / "shadow"
        (shadow / "pymoo").mkdir(parents=True)
        (shadow / "pymoo/__init__.py").write_text("raise ImportError('hidden by the test')\n")
        path = [str(shadow), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    out = tmp_path / "brkga.json"
    run_script("bench_brkga.py", "--sizes", "50", "--evaluations", "300", "--json", out, env=env)
    [row] = json.loads(out.read_text())
    assert row["ops"] == 50 and row["devices"] == 2
    assert_positive(
        row,
        [
            "edges",
            "decode_score_single_us",
            "decode_score_batch100_ms",
            "brkga_seconds",
            "brkga_value",
        ],
    )
    columns = ["pymoo_vectorized_seconds", "pymoo_elementwise_seconds"]
    if pymoo:
        assert_positive(row, columns)
    else:
        assert all(math.isnan(row[column]) for column in columns)


def test_bench_regal(tmp_path: Path) -> None:
    out = tmp_path / "regal.json"
    args = ["--sizes", "50", "--evaluations", "300", "--repeats", "1", "--json", out]
    run_script("bench_regal.py", *args)
    [row] = json.loads(out.read_text())
    assert row["ops"] == 50
    assert_positive(
        row,
        ["brkga_s", "regal_s", "ratio", "forward_s", "numpy_beta_s", "table_beta_s", "uniform_s"],
    )
    assert row["ratio"] == pytest.approx(row["regal_s"] / row["brkga_s"])


def test_bench_scorer(tmp_path: Path) -> None:
    # The script itself asserts that the fast and the reference scorer agree.
    out = tmp_path / "scorer.json"
    run_script("bench_scorer.py", "--sizes", "50", "--json", out)
    results = json.loads(out.read_text())
    [row] = results["rows"]
    assert row["ops"] == 50 and row["devices"] == 2
    assert_positive(
        row,
        [
            "edges",
            "events",
            "single_seconds",
            "single_evals_per_second",
            "repeated_seconds",
            "batch_seconds",
            "batch_evals_per_second",
            "reference_seconds",
            "reference_evals_per_second",
            "speedup_single_vs_reference",
        ],
    )
    assert_positive(results, ["compile_seconds", "cached_load_seconds"])


def test_bench_import(tmp_path: Path) -> None:
    out = tmp_path / "import.json"
    run_script("bench_import.py", "--models", "wavenet-tiny", "--json", out)
    rows = json.loads(out.read_text())
    assert [(r["model"], r["training"]) for r in rows] == [
        ("wavenet-tiny", False),
        ("wavenet-tiny", True),
    ]
    for row in rows:
        assert_positive(
            row,
            [
                "ops",
                "tensors",
                "edges",
                "build_seconds",
                "import_seconds",
                "score_seconds",
                "peak_memory",
                "tensor_bytes",
            ],
        )
        assert row["peak_memory"] <= row["tensor_bytes"]


def test_regal_reward_noise(dataset_dir: Path, tmp_path: Path) -> None:
    # Rollouts only search past the policy's feature run: a smaller budget returns its value.
    policy = load_policy(shipped_policy_path("regal", "peak-memory", 2), "peak-memory", 2)
    evaluations = policy.feature_evaluations + 200
    out = tmp_path / "noise.json"
    args = ["--graphs", "2", "--samples", "2", "--evaluations", str(evaluations), "--json", out]
    run_script("regal_reward_noise.py", dataset_dir, *args)
    results = json.loads(out.read_text())
    rows, summary = results["rows"], results["summary"]
    assert len(rows) == 2 and len({r["graph"] for r in rows}) == 2
    for row in rows:
        assert row["ops"] == 40
        assert row["actions_cv"] >= 0 and row["seeds_cv"] >= 0
    assert summary["graphs"] == 2
    assert 0 <= summary["graphs_where_actions_change_the_value"] <= 2
    assert summary["median_actions_cv"] >= 0 and summary["median_seeds_cv"] >= 0
    assert 0 <= summary["signal_share"] <= 1


@pytest.mark.parametrize("source", ["synthetic", "dataset"])
def test_tune_brkga_writes_only_its_output(dataset_dir: Path, tmp_path: Path, source: str) -> None:
    # Without --output the script overwrites a preset shipped in src/; every run here passes it.
    presets = {path.name: path.read_bytes() for path in PRESETS.glob("*.json")}
    out = tmp_path / "preset.json"
    args = ["--evaluations", "200", "--grid", "structure", "--output", out]
    if source == "synthetic":
        args += ["--graphs", "1", "--ops", "20"]
        objective, expected = "peak-memory", ["layered_n20_s10000"]
    else:
        args += ["--dataset", dataset_dir, "--graphs", "1", "--objective", "makespan"]
        objective, expected = "makespan", [Dataset.open(dataset_dir, "train").names[0]]
    result = run_script("tune_brkga.py", *args)
    assert {path.name: path.read_bytes() for path in PRESETS.glob("*.json")} == presets

    printed = json.loads(result.stdout.strip().splitlines()[-1])
    preset = json.loads(out.read_text())
    assert preset["config"] == printed["best"]
    assert preset["mean_ratio_to_default"] == printed["mean_ratio"]
    assert_positive(preset, ["mean_ratio_to_default"])
    provenance = preset["provenance"]
    assert provenance["objective"] == objective
    assert provenance["training_graphs"] == expected
    assert provenance["settings_tried"] == 54
    assert set(provenance["grid"]) == {"elite_bias", "population", "elites", "mutants"}
    assert provenance["command"].startswith("benchmarks/tune_brkga.py ")
    assert "--output" not in provenance["command"]
    assert ("--ops" in provenance["command"]) == (source == "synthetic")


def test_regal_headroom(dataset_dir: Path, tmp_path: Path) -> None:
    policy = load_policy(shipped_policy_path("regal", "peak-memory", 2), "peak-memory", 2)
    evaluations = policy.feature_evaluations + 200
    out = tmp_path / "headroom.json"
    args = ["--split", "train", "--graphs", "2", "--seeds", "2", "--json", out]
    args += ["--evaluations", str(evaluations), "--oracle-evaluations", str(2 * evaluations)]
    run_script("regal_headroom.py", dataset_dir, *args)
    results = json.loads(out.read_text())
    rows, summary = results["rows"], results["summary"]
    assert len(rows) == 2 and summary["graphs"] == 2
    for row in rows:
        assert row["ops"] == 40
        assert set(row["values"]) == {"policy", "oracle", "oracle schedule", "features"}
        assert_positive(row, ["reference"])
        assert_positive(row["values"], row["values"])
    assert summary["policy"]["vs_policy"][0] == 0
    for key in ("features", "runs"):
        assert 0 <= summary[f"{key}_priority_agreement"] <= 1
        assert 0 <= summary[f"{key}_device_agreement"] <= 1


def test_bench_cli(tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    run_script("bench_cli.py", "--repeats", "1", "--ops", "20", "--json", out)
    results = json.loads(out.read_text())
    assert results["ops"] == 20 and results["repeats"] == 1
    assert set(results["warm"]) == {"help", "version", "info", "score", "optimize"}
    for row in results["warm"].values():
        assert row["exit_status"] == 0 and len(row["samples"]) == 1
        assert_positive(row, ["median_seconds", "min_seconds", "median_cpu_seconds"])
    assert "cold" not in results


@pytest.mark.slow
def test_bench_cli_cold(tmp_path: Path) -> None:
    # A fresh numba cache: the warm-up compiles every kernel (minutes on 2 cores).
    out = tmp_path / "cli.json"
    run_script("bench_cli.py", "--repeats", "1", "--ops", "20", "--cold", "--json", out)
    cold = json.loads(out.read_text())["cold"]
    assert cold["warmup_exit_status"] == 0
    assert cold["first_optimize_new_cache_files"] == 0
    assert_positive(
        cold,
        [
            f"{k}_{u}"
            for k in ("warmup", "first_optimize", "second_optimize")
            for u in ("seconds", "cpu_seconds")
        ],
    )


def test_bench_gflownet(tmp_path: Path) -> None:
    out = tmp_path / "gflownet.json"
    result = run_script("bench_gflownet.py", "--quick", "--json", out)
    assert "GFlowNet sampling" in result.stdout
    results = json.loads(out.read_text())
    assert results["quick"] and results["sizes"]["ops"] == 20
    assert results["policies"] == {"per-state": "untrained", "per-graph": "untrained"}
    encodings = ("per-state", "per-graph")
    a, b, c, d = (results[f"row_{row}"] for row in "abcd")
    for encoding in encodings:
        assert len(a[encoding]["seconds"]) == results["sizes"]["repeats"]
        assert_positive(a[encoding], ["median", "batch"])
        assert_positive(b[encoding], ["samples", "seconds", "seconds_per_schedule", "batch"])
        assert d[encoding]["evaluations"] == results["sizes"]["cli_budget"]
        assert_positive(d[encoding], ["wall_seconds", "seconds", "makespan"])
    for family in ("erdos_renyi", "layered"):
        assert_positive(c[family], ["seconds", "peak_rss_bytes", "rss_before_sampling_bytes"])
        assert c[family]["peak_rss_bytes"] >= c[family]["rss_before_sampling_bytes"]
        assert c[family]["pass"] is None  # --quick: not at the bar's sizes
    assert_positive(a, ["ratio"])
    assert_positive(b, ["ratio"])
    assert_positive(d, ["ratio"])
    assert a["pass"] is None and d["pass"] is None


def test_gflownet_target(tmp_path: Path) -> None:
    out = tmp_path / "target.json"
    run_script("gflownet_target.py", "--samples", "30", "--ops", "12", "--json", out)
    rows = json.loads(out.read_text())
    assert len(rows) == 2
    for row in rows:
        assert row["sampler_best"] >= row["sampler_mean"] > 0
        for sigma in ("1", "0.01"):
            assert 1.0 <= row[f"ess_sigma_{sigma}"] <= 30 + 1e-9
            assert 0 < row[f"target_mean_sigma_{sigma}"] <= row["sampler_best"] + 1e-9


def test_bench_fusion_scorer(tmp_path: Path) -> None:
    out = tmp_path / "fusion.json"
    run_script("bench_fusion_scorer.py", "--sizes", "200", "--devices", "1", "--json", out)
    (row,) = json.loads(out.read_text())["rows"]
    assert row["ops"] == 200 and row["groups"] > 0
    assert_positive(row, ["without_seconds", "with_seconds", "ratio"])


def test_bench_gdp_scale() -> None:
    result = run_script("bench_gdp_scale.py", "--model", "wavenet-tiny", "--devices", "4")
    assert "wavenet-tiny.training: 237 ops on 4 devices" in result.stdout
    assert "peak resident memory" in result.stdout


def test_go_learning() -> None:
    args = ("--steps", "1", "--seeds", "1", "--devices", "2", "--models", "lstm-lm-tiny")
    result = run_script("go_learning.py", *args, "--no-paper")
    assert "lstm-lm-tiny.training d=2 seed 0: GO-one" in result.stdout
    assert "GO-one against its untrained start, same search, equal evaluations" in result.stdout


def test_go_modes() -> None:
    args = ("--steps", "1", "--seeds", "1", "--devices", "2", "--models", "lstm-lm-tiny")
    result = run_script("go_modes.py", *args)
    assert "lstm-lm-tiny.training d=2 seed 0: pl+sch+fu" in result.stdout
    assert "pl+sch+fu against pl|sch|fu, per solve" in result.stdout
    refused = subprocess.run(
        [sys.executable, str(BENCHMARKS / "go_modes.py"), "--modes", "pl+sch+fu,pl+xx"],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert refused.returncode == 2 and "--modes" in refused.stderr


def test_go_proposals() -> None:
    args = ("--steps", "2", "--seeds", "1", "--devices", "2", "--models", "lstm-lm-tiny")
    result = run_script("go_proposals.py", *args)
    assert "learned median gap" in result.stdout and "frozen median gap" in result.stdout
    assert "learned minus frozen" in result.stdout


def test_default_stop(tmp_path: Path) -> None:
    # Tiny graphs, each solved the default way and with a full budget; losses from the values.
    run_script(
        "default_stop.py",
        *("--suites", "tiny-20", "--graphs", "1", "--devices", "2,4"),
        *("--objectives", "makespan", "--seconds", "1", "--out", tmp_path),
    )
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    for row in rows:
        assert row["stopped"] in {"stalled", "bound", "budget", "finished"}
        assert 0 < float(row["default_seconds"]) < 12 and 0.9 < float(row["full_seconds"]) < 3
        loss = float(row["default_value"]) / float(row["full_value"]) - 1
        assert float(row["loss"]) == pytest.approx(loss)
    summary = (tmp_path / "summary.txt").read_text()
    assert "tiny-20 (2 problems): median wall" in summary and "noise floor" in summary
    assert len((tmp_path / "traces.jsonl").read_text().splitlines()) == 2


def test_placement_headroom(tmp_path: Path) -> None:
    out = tmp_path / "headroom"
    result = run_script(
        "placement_headroom.py", "--graphs", "layered@30,sbm@30", "--devices", "2",
        "--capacity", "none,0.9", "--bandwidth", "inf,1e9", "--fusion", "none,search",
        "--seconds", "0.2,0.4", "--out", out,
    )  # fmt: skip
    with (out / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 2 * 2 * 2
    for row in rows:
        assert row["hint"] in ("heft", "critical-path", "partition-hint")
        hint = float(row["hint_makespan"])
        for t in ("0.2", "0.4"):
            auto = float(row[f"auto_{t}"])
            assert float(row[f"headroom_{t}"]) == pytest.approx(100 * (hint / auto - 1), abs=1e-3)
    summary = (out / "summary.md").read_text()
    assert summary.count("\n| 2 |") == 2 * 2 * 2 * 2 and "--seconds 0.2,0.4" in summary
    assert "headroom %" in result.stdout


def test_remat_baselines(tmp_path: Path) -> None:
    out = tmp_path / "remat"
    run_script(
        "remat_baselines.py", "--models", "gpt2-tiny", "--evaluations", "50",
        "--budgets", "0.99,0.5", "--out", out,
    )  # fmt: skip
    with (out / "runs.csv").open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["model"] == "gpt2-tiny" and int(row["ops"]) > 100
    assert int(row["persistent"]) < int(row["bound"]) <= int(row["best"])
    assert float(row["sqrt_overhead"]) >= 0 and row["sqrt_order"] in ("program", "auto")
    assert set(row) >= {"sqrt_0.99", "greedy_0.99", "sqrt_0.5", "greedy_0.5"}
    assert float(row["greedy_overhead"]) <= float(row["sqrt_overhead"]) + 1e-6
    assert "--budgets 0.99,0.5" in (out / "summary.md").read_text()


def test_remat_measured(tmp_path: Path) -> None:
    out = tmp_path / "measured"
    run_script(
        "remat_measured.py", "--models", "gpt2-tiny", "--batch", "2", "--budgets", "0.9",
        "--evaluations", "100", "--out", out,
    )  # fmt: skip
    with (out / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["order"] for row in rows] == ["captured", "best", "remat 0.9"]
    for row in rows:
        assert row["model"] == "gpt2-tiny-x2" and row["exact"] == "True"
        assert int(row["predicted"]) == int(row["measured"]) > 0
    assert rows[2]["fits"] in ("True", "False") and float(rows[2]["overhead"]) >= 0
    assert "predicted = measured on 100% of the rows" in (out / "summary.md").read_text()


def test_remat_exact(tmp_path: Path) -> None:
    out = tmp_path / "exact"
    run_script(
        "remat_exact.py", "--quick", "--seconds", "5", "--overheads", "0.5",
        "--evaluations", "200", "--out", out,
    )  # fmt: skip
    with (out / "runs.csv").open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert int(row["ops"]) == 12 and row["optimal"] == "True"
    assert int(row["bound"]) == int(row["cp_sat"]) <= int(row["greedy"]) <= int(row["best"])
    greedy, known = int(row["greedy"]), int(row["cp_sat"])
    assert float(row["greedy_gap"]) == pytest.approx(100 * (greedy / known - 1), abs=0.01)


def test_remat_devices(tmp_path: Path) -> None:
    out = tmp_path / "devices"
    run_script(
        "remat_devices.py", "--models", "gpt2-tiny", "--batch", "4", "--devices", "2",
        "--evaluations", "200", "--out", out,
    )  # fmt: skip
    with (out / "runs.csv").open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["model"], row["devices"]) == ("gpt2-tiny-x4", "2")
    best, remat = int(row["best"]), int(row["remat"])
    assert int(row["bound"]) <= remat <= best and int(row["again"]) >= 0
    assert float(row["lower"]) == pytest.approx(100 * (remat / best - 1), abs=0.01)
    assert float(row["longer"]) <= 20 + 1e-6


def test_learned_vs_auto(tmp_path: Path) -> None:
    out = tmp_path / "lva"
    run_script(
        "learned_vs_auto.py", "--models", "gpt2-tiny", "--devices", "2", "--capacity", "none",
        "--evaluations", "60", "--out", out,
    )  # fmt: skip
    (runs,) = out.glob("runs-*.csv")
    with runs.open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["model"], row["devices"], row["capacity"]) == ("gpt2-tiny", "2", "none")
    for column in ("hint", "forward", "auto", "learned", "untrained", "policy"):
        assert float(row[column]) > 0
    (summary,) = out.glob("summary-*.txt")
    assert "gdp vs auto" in summary.read_text()


def test_label_predictability(dataset_dir: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    build_labels(LabelConfig(str(dataset_dir), devices=2, evaluations=300), labels)
    result = run_script("label_predictability.py", labels)
    lines = result.stdout.splitlines()
    assert len(lines) == len(Dataset.open(dataset_dir, "train")) + 1
    shares = [float(word) for word in lines[-1].split() if word.replace(".", "").isdigit()][:3]
    assert all(0 <= share <= 1 for share in shares)
    # A chain a-b-c-d hinted [0, 0, 1, 1] and labelled [0, 1, 1, 1]: b moved, on the cut, alone.
    spec = importlib.util.spec_from_file_location("probe", BENCHMARKS / "label_predictability.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    chain = builders.graph(
        [builders.op(name) for name in "abcd"],
        [builders.tensor(f"t{a}", 8, a, b) for a, b in ("ab", "bc", "cd")],
    )
    row = probe.describe(chain, np.array([0, 0, 1, 1]), np.array([1, 0, 0, 0]), 2)
    assert (row["moved"], row["cut"], row["moved_on_cut"], row["runs"]) == (1, 2, 1, 1)
    assert row["hops"].tolist() == [1, 0, 0, 0, 0, 0, 0]


def test_bench_gflownet_bf16(tmp_path: Path) -> None:
    out = tmp_path / "bf16.json"
    result = run_script("bench_gflownet_bf16.py", "--quick", "--json", out)
    assert "bfloat16" in result.stdout
    results = json.loads(out.read_text())
    assert results["quick"] and results["steps"] == 10 and results["batch"] == 8
    assert_positive(results["median_seconds"], ["float32", "bfloat16"])
    assert results["bf16_over_fp32"] > 0 and 0 <= results["argmax_differs_share"] <= 1
    assert 0 < results["max_abs_logit_gap"] < 1  # bfloat16 rounds, it does not break the head


def test_gflownet_heldout(tmp_path: Path) -> None:
    """A 2-step per-graph run, then both the held-out and the validation cells (with targets)."""
    from graphopt.learning.systems.gflownet.config import TrainConfig
    from graphopt.learning.training import train

    data = {
        "name": "g",
        "seed": 1,
        "synthetic": [{"family": "layered", "sizes": [16], "count": 10}],
    }
    build_dataset(DatasetConfig.from_dict(data), tmp_path / "dataset", progress=False)
    run = tmp_path / "run"
    config = TrainConfig.from_dict(
        {
            "dataset": str(tmp_path / "dataset"),
            "policy": {
                "hidden": 8,
                "layers": 1,
                "heads": 2,
                "condition": 4,
                "encoding": "per-graph",
            },
            "sampling": {"trajectories": 4, "subgraph_ops": 12, "validation_samples": 2},
            "run": {"steps": 2, "validate_every": 2, "checkpoint_every": 2},
        }
    )
    train("gflownet", config, run)
    out = tmp_path / "heldout.json"
    common = ["--devices", "2", "--samples", "3", "--locality", "1", "--targets", "--json", out]
    run_script("gflownet_heldout.py", run, "--sizes", "12", "--seeds", "1", "--zoo", "", *common)
    results = json.loads(out.read_text())
    assert results["graphs"] == 5 and len(results["cells"]) == 5  # five families, one size
    assert results["locality"] == 1.0 and results["logit_temperature"] == 1.0
    for cell in results["cells"]:
        assert cell["trained_best"] <= cell["trained_mean"] and cell["heft"] > 0
        assert cell["trained_targets"] > 0 and cell["heft_targets"] > 0
    summary = results["summaries"]["trained top-100 on targets vs HEFT"]
    assert summary["cells"] == 5 and summary["low"] <= summary["mean"] <= summary["high"]
    run_script("gflownet_heldout.py", run, "--validation", "2", *common)
    validated = json.loads(out.read_text())
    assert validated["graphs"] == 2 and len(validated["cells"]) == 2
