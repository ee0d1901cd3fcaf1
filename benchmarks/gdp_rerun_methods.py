"""Re-runs some methods of a finished `gdp-table1` or `gdp-fig5` report and rewrites it.

    .venv/bin/python benchmarks/gdp_rerun_methods.py docs/results/gdp/gdp-table1 \\
        --methods gdp-zero-shot
    .venv/bin/python benchmarks/gdp_rerun_methods.py docs/results/gdp/gdp-fig5

For a solver change that can only move some columns (the `gdp` solver offering its partition
hint first moves no GDP row that was already at least as good as the hint row), re-running
those methods alone reproduces the report the whole suite would give, at a fraction of its
time. The rows of the named methods (gdp-fig5: gdp-zero-shot and shipped-zero-shot, with the
pre-training runs kept in the folder) are replaced by fresh runs with the suite's settings;
summary.md, runs.csv, runs.json and the figure are rewritten, the command line kept.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from graphopt.evaluation.fusion_bench import zoo_training_graphs
from graphopt.evaluation.reports import write_csv
from graphopt.papers import gdp, gdp_fig5


def rerun(folder: Path, methods: tuple[str, ...]) -> None:
    """Replaces `methods`' rows of the report in `folder` and rewrites its files."""
    rows = json.loads((folder / "runs.json").read_text())
    fig5 = "family" in rows[0]
    fresh = []
    for key in dict.fromkeys((r.get("family"), r["graph"].split(".")[0]) for r in rows):
        family, model = key
        (graph,) = zoo_training_graphs([model])
        devices = sorted({r["devices"] for r in rows if r["graph"] == graph.name})
        runs = [(None, methods)]
        if fig5:
            policy = folder / "runs" / f"without-{family}" / "best.pt"
            runs = [(str(policy), ("gdp-zero-shot",)), (None, ("gdp-zero-shot",))]
        for index, (policy, names) in enumerate(runs):
            found = gdp.run_table1([graph], devices, names, policy=policy)
            for row in found:
                if fig5:
                    row["family"] = family
                    row["method"] = gdp_fig5.SHIPPED if index else row["method"]
            fresh += found
    replaced = {(r.get("family"), r["graph"], r["devices"], r["method"]) for r in fresh}
    kept = [
        r for r in rows if (r.get("family"), r["graph"], r["devices"], r["method"]) not in replaced
    ]
    order = {(r.get("family"), r["graph"], r["devices"]): i for i, r in enumerate(rows)}
    rows = sorted(kept + fresh, key=lambda r: order[r.get("family"), r["graph"], r["devices"]])
    summary = (folder / "summary.md").read_text().split("\n\n", 2)
    module = gdp_fig5 if fig5 else gdp
    text = module.markdown(rows) if fig5 else module.markdown(rows, gdp.HELD_OUT)
    (folder / "summary.md").write_text(f"{summary[0]}\n\n{summary[1]}\n\n{text}\n")
    (folder / "runs.json").write_text(json.dumps(rows, indent=1, default=float) + "\n")
    write_csv(folder / "runs.csv", rows)
    module.plot(rows, folder / ("fig5.png" if fig5 else "gdp.png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--methods", default="gdp-zero-shot")
    args = parser.parse_args()
    rerun(args.folder, tuple(args.methods.split(",")))


if __name__ == "__main__":
    main()
