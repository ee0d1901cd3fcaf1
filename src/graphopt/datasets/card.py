"""The dataset card: a README written beside a built dataset, from its manifest."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

CARD = "README.md"
"""File name of the dataset card inside a dataset directory."""


def dataset_card(manifest: Mapping[str, Any]) -> str:
    """The dataset card: what the dataset is, how it was built, how to load it."""
    config = manifest["config"]
    low, high = config["size_noise"]
    train, valid, test = config["split"]
    rows = []
    for split, info in manifest["splits"].items():
        rows.append(
            f"| {split} | {info['graphs']:,} | {info['topologies']:,} | {info['ops']:,} | "
            f"`{info['file']}` ({info['bytes']:,} bytes) |"
        )
    sources = []
    for s in config["synthetic"]:
        params = f", params {json.dumps(s['params'])}" if s["params"] else ""
        sizes = ", ".join(str(n) for n in s["sizes"])
        sources.append(
            f"- synthetic `{s['family']}`: {s['count']} graph(s) of each size ({sizes} ops){params}"
        )
    for z in config["zoo"]:
        mode = "training" if z["training"] else "inference"
        sources.append(f"- zoo `{z['name']}` ({mode} graph, runtimes for {z['device']})")
    for pattern in config["files"]:
        sources.append(f"- files `{pattern}`")
    lines = [
        f"# Dataset card: {manifest['name']}",
        "",
        f"{manifest['graphs']:,} computation graphs ({manifest['topologies']:,} topologies) for "
        "training and evaluating learned placement and scheduling optimizers such as REGAL "
        f"(paper 001). Built by graphopt {manifest['graphopt_version']} with seed "
        f"{manifest['seed']}.",
        "",
        "| split | graphs | topologies | ops in all | file |",
        "| --- | ---: | ---: | ---: | --- |",
        *rows,
        "",
        "## Sources",
        "",
        "A topology is one source graph: one generated graph, one zoo export or one file.",
        "",
        *sources,
        "",
        "## How it was built",
        "",
        f"- Split by topology (paper 001, appendix A.1): topologies sorted by op count, each run "
        f"of {train + valid + test} split {train}-{valid}-{test} (train-valid-test) by a seeded "
        "shuffle within the run; a shorter last run fills train first. No topology is in two "
        "splits, so valid and test measure generalization to new topologies.",
        f"- Augmented: each topology gives its original plus {config['copies']} copies whose "
        f"tensor sizes are each multiplied by their own U({low}, {high}) draw; copies stay in "
        "their topology's split.",
        "- Seeded: every generation, augmentation and split draw derives from the seed "
        "(`manifest.json` lists each topology's seeds); the same config and seed rebuild "
        "byte-identical files (`sha256` in the manifest).",
        "",
        "Rebuild with `graphopt dataset build CONFIG -o DIR`, where CONFIG is a file holding the "
        "`config` object of `manifest.json` (file sources need the same files).",
        "",
        "## Loading",
        "",
        "```python",
        "from graphopt.datasets import Dataset",
        "",
        'train = Dataset.open("DIR", "train")  # memory-mapped; graphs are built when indexed',
        "graph = train[0]  # a graphopt Graph",
        "```",
        "",
        "Each split is one uncompressed `.npz` archive (`graphopt.dataset/1`): per-topology "
        "arrays concatenated with offsets, per-graph tensor sizes, names and extra fields as "
        "JSON. `manifest.json` holds counts, op-count and tensor-size histograms, sources, "
        "seeds and the config.",
        "",
        "## License",
        "",
        "Synthetic graphs plus graphs generated from model definitions with random weights: no "
        "trained weights and no user data. Distributed under graphopt's license (Apache-2.0)."
        + (" Graphs from `files` sources keep their own terms." if config["files"] else ""),
        "",
    ]
    return "\n".join(lines)
