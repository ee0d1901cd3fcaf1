"""Labels from search: the strongest search's placement of each training graph (issue 45).

A placement policy trained by PPO on one scalar reward per sample learned next to nothing on a
2-core machine; a search's solution tells it every op's device at once. `build_labels` solves
each graph of a dataset's splits with a solver (`auto` by default) under an evaluation budget
and a seed derived from the graph's place, so a label depends only on the graph, the machine
and the settings; it also solves with `partition-hint` (the best classical placement), so the
labels say how far search is ahead of the hints on these graphs (the headroom a policy can
learn). Graphs are solved in local worker processes or on a Ray cluster (`workers`).

A labels directory is a dataset like the others: `labels.npz` (a deterministic archive,
`datasets.store.write_archive`), `manifest.json` (the settings, counts, the archive's sha256)
and `README.md` (a card). It is built once and extended: a later call with the same settings
labels only what is missing (more splits, or graphs a stopped call did not reach), and every
chunk of labels is written as soon as it is solved, so a stopped call loses at most one chunk.
Each label carries its graph's digest; a trainer refuses a label whose graph has changed.
"""

from __future__ import annotations

import hashlib
import json
import math
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from graphopt.configs import FieldError, read_config
from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Score
from graphopt.datasets import Dataset
from graphopt.datasets.build import write_atomically
from graphopt.datasets.store import write_archive
from graphopt.errors import GraphoptError
from graphopt.ir.graph import Graph
from graphopt.learning.runs import GRAPH_PREFIX, graph_files
from graphopt.learning.workers import make_workers
from graphopt.solvers.base import Budget, Objective, Problem

LABELS_FORMAT = "graphopt.labels/1"
ARCHIVE = "labels.npz"
MANIFEST = "manifest.json"
CARD = "README.md"
SPLITS = ("train", "valid", "test")
HINT_SOLVER = "partition-hint"
CHUNK = 8
"""Graphs solved between two writes of the archive."""


class LabelError(GraphoptError):
    """Labels that cannot be built or read as asked (one line naming the item and the rule)."""


@dataclass(frozen=True)
class LabelConfig:
    """What a labels directory holds: whose graphs, on which machine, by which search.

    Attributes:
        dataset: a built dataset's directory, or `graph:PATH[,PATH...]` (split 'train').
        splits: the dataset's splits labelled.
        devices: d, the machine's devices.
        latency: seconds per transfer.
        bandwidth: bytes/s of a link (None: unlimited).
        capacity: bytes per device (None: unlimited).
        mode: 'sync' or 'async' transfers (`Machine`).
        solver: the search whose placements are the labels (a registered solver name).
        policy: a checkpoint steering a learned `solver` (None: its shipped policy): labelling
            with `gdp` and the last round's best.pt is expert iteration's next round.
        evaluations: its budget per graph (an evaluation budget keeps labels deterministic).
        seed: the solves' seed; each graph's is derived from it and the graph's place.
    """

    dataset: str
    splits: tuple[str, ...] = ("train",)
    devices: int = 4
    latency: float = 1e-5
    bandwidth: float | None = 1e10
    capacity: int | None = None
    mode: str = "sync"
    solver: str = "auto"
    policy: str | None = None
    evaluations: int = 20_000
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.dataset:
            raise FieldError("dataset", "must name a built dataset or graph:PATH[,PATH...]")
        unknown = [split for split in self.splits if split not in SPLITS]
        if not self.splits or unknown:
            raise FieldError("splits", f"must be some of {', '.join(SPLITS)}, got {self.splits}")
        if self.dataset.startswith(GRAPH_PREFIX) and self.splits != ("train",):
            raise FieldError(
                "splits", "must be train alone for a graph: dataset (it has one split)"
            )
        if not 2 <= self.devices <= 64:
            raise FieldError("devices", f"must be in [2, 64], got {self.devices}")
        if not self.latency >= 0:
            raise FieldError("latency", f"must be >= 0, got {self.latency}")
        for name in ("bandwidth", "capacity"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise FieldError(name, f"must be > 0 (or null: unlimited), got {value}")
        if not 1 <= self.evaluations <= 10_000_000:
            raise FieldError("evaluations", f"must be in [1, 10000000], got {self.evaluations}")
        if self.seed < 0:
            raise FieldError("seed", f"must be >= 0, got {self.seed}")

    def machine(self) -> Machine:
        """The machine every graph is placed on."""
        bandwidth = math.inf if self.bandwidth is None else self.bandwidth
        return Machine(
            self.devices, self.capacity, latency=self.latency, bandwidth=bandwidth, mode=self.mode
        )

    def graphs(self, split: str) -> Sequence[Graph]:
        """The graphs of one labelled split."""
        if self.dataset.startswith(GRAPH_PREFIX):
            return graph_files(self.dataset)
        return Dataset.open(self.dataset, split)


class Label(NamedTuple):
    """One graph's label: the search's placement and how good it and the best hint are."""

    split: str
    index: int
    name: str
    digest: str
    placement: np.ndarray
    makespan: float
    excess: int
    hint_makespan: float
    hint_excess: int


def graph_digest(graph: Graph) -> str:
    """sha256 of the arrays that define a graph's placements' scores (not its names)."""
    digest = hashlib.sha256()
    for array in graph.arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def graph_seed(seed: int, split: str, index: int) -> int:
    """The seed of one graph's solves: the same graph place, the same seed, in any session."""
    rng = np.random.default_rng([seed, SPLITS.index(split), index])
    return int(rng.integers(2**31))


class LabelEnv:
    """A worker's copy of the dataset and machine: solves one graph into its label."""

    def __init__(self, config: LabelConfig) -> None:
        self.config = config
        self.machine = config.machine()
        self.splits = {split: config.graphs(split) for split in config.splits}

    def label(self, item: tuple[str, int]) -> Label:
        """(split, index) -> that graph's label."""
        from graphopt.solvers.registry import make_solver

        split, index = item
        graph = self.splits[split][index]
        problem = Problem(graph, self.machine, Objective.MAKESPAN)
        seed = graph_seed(self.config.seed, split, index)
        budget = Budget(evaluations=self.config.evaluations)
        search = make_solver(self.config.solver, self.config.policy)
        best = search.solve(problem, budget, seed=seed)
        hint = make_solver(HINT_SOLVER).solve(problem, budget, seed=seed)
        return Label(
            split, index, graph.name, graph_digest(graph),
            np.asarray(best.solution.placement, dtype=np.int8), best.score.makespan,
            _excess(best.score), hint.score.makespan, _excess(hint.score),
        )  # fmt: skip


def _excess(score: Score) -> int:
    """Bytes by which the fullest device exceeds the capacity (0: it fits)."""
    return 0 if score.capacity is None else max(0, score.peak_memory - score.capacity)


class Labels:
    """A labels directory, read: each labelled graph's placement by (split, index).

    Args:
        config: the settings they were made with.
        labels: every label, ordered by (split, index).
    """

    def __init__(self, config: LabelConfig, labels: Sequence[Label]) -> None:
        self.config = config
        self.labels = sorted(labels, key=lambda label: (SPLITS.index(label.split), label.index))
        self._by_place = {(label.split, label.index): label for label in self.labels}

    @classmethod
    def open(cls, directory: str | Path) -> Labels:
        """Reads a labels directory's archive, refusing a missing, foreign or damaged one.

        The archive holds the settings and every label; the manifest and card are written
        from it, so a call stopped between the two writes loses nothing.
        """
        archive = Path(directory) / ARCHIVE
        try:
            with np.load(archive) as data:
                arrays = {key: data[key] for key in data.files}
            head = json.loads(arrays.pop("head").tobytes().decode())
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            raise LabelError(f"{archive}: not a readable labels archive ({error})") from None
        if not isinstance(head, dict) or head.get("format") != LABELS_FORMAT:
            raise LabelError(f"{archive}: format must be {LABELS_FORMAT!r}")
        config = read_config(LabelConfig, head.get("config"), "labels config", LabelError)
        try:
            return cls(config, _unpack(head.get("labels"), arrays))
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise LabelError(f"{archive}: damaged labels ({error!r})") from None

    def __len__(self) -> int:
        return len(self.labels)

    def places(self, split: str) -> set[int]:
        """Indices of the labelled graphs of a split."""
        return {label.index for label in self.labels if label.split == split}

    def placement(self, split: str, index: int, graph: Graph) -> np.ndarray | None:
        """The label of graph `index` of `split` (None: unlabelled).

        Raises:
            LabelError: the graph is not the one that was labelled there.
        """
        label = self._by_place.get((split, index))
        if label is None:
            return None
        if label.digest != graph_digest(graph) or label.placement.shape[0] != graph.n_ops:
            raise LabelError(
                f"label {split}/{index} ({label.name}) was made for another graph than "
                f"{graph.name!r}: relabel with `graphopt dataset label`"
            )
        return label.placement.astype(np.int64)

    def write(self, directory: Path) -> None:
        """Writes the archive, then the manifest and card that describe it, each atomically."""
        directory.mkdir(parents=True, exist_ok=True)
        head = {"format": LABELS_FORMAT, "config": asdict(self.config)}
        arrays = _pack(head, self.labels)
        write_atomically(directory / ARCHIVE, partial(write_archive, arrays=arrays))
        manifest = {
            **head,
            "labels": {split: len(self.places(split)) for split in self.config.splits},
            "headroom": self.headroom(),
            "sha256": hashlib.sha256((directory / ARCHIVE).read_bytes()).hexdigest(),
        }
        text = json.dumps(manifest, indent=2) + "\n"
        write_atomically(directory / MANIFEST, lambda path: path.write_text(text))
        write_atomically(directory / CARD, lambda path: path.write_text(card(manifest)))

    def headroom(self) -> dict[str, float | int]:
        """How far the search is ahead of the best hint on the labelled graphs that both fit.

        Gain = hint makespan / search makespan - 1, in %: the most a policy that imitates the
        labels can win over the hints it starts from.
        """
        fitting = [lab for lab in self.labels if lab.excess == 0 and lab.hint_excess == 0]
        gains = np.array([100 * (lab.hint_makespan / lab.makespan - 1) for lab in fitting])
        return {
            "graphs": len(fitting),
            "mean_gain_percent": round(float(gains.mean()), 4) if gains.size else 0.0,
            "median_gain_percent": round(float(np.median(gains)), 4) if gains.size else 0.0,
            "ahead": int((gains > 1e-9).sum()),
        }


def build_labels(
    config: LabelConfig,
    directory: str | Path,
    workers: int = 0,
    ray_address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Labels:
    """Labels every graph of the config's splits into `directory`, extending what is there.

    The splits labelled before stay, and their missing graphs are labelled too.

    Args:
        config: the dataset, machine and search.
        directory: the labels directory; existing labels must have been made with `config`.
        workers: local worker processes (0: this process).
        ray_address: a Ray cluster's address instead of local processes ('local': in-process).
        progress: called with (labelled, total) after each chunk.

    Raises:
        LabelError: the directory holds labels made with other settings.
    """
    directory = Path(directory)
    labels = Labels(config, [])
    if (directory / ARCHIVE).exists():
        stored = Labels.open(directory)
        _check_same(directory, stored.config, config)
        both = [split for split in SPLITS if split in (*stored.config.splits, *config.splits)]
        config = replace(config, splits=tuple(both))
        labels = Labels(config, stored.labels)
    env = LabelEnv(config)
    todo = [
        (split, index)
        for split in config.splits
        for index in range(len(env.splits[split]))
        if index not in labels.places(split)
    ]
    total = len(todo) + len(labels)
    pool = None if not workers and ray_address is None else make_workers(
        partial(LabelEnv, config), workers, ray_address
    )  # fmt: skip
    try:
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start : start + CHUNK]
            new = [env.label(item) for item in chunk] if pool is None else pool.map(
                LabelEnv.label, chunk
            )  # fmt: skip
            labels = Labels(config, [*labels.labels, *new])
            labels.write(directory)
            if progress is not None:
                progress(len(labels), total)
    finally:
        if pool is not None:
            pool.close()
    if not todo:
        labels.write(directory)
    return labels


def _check_same(directory: Path, stored: LabelConfig, config: LabelConfig) -> None:
    """Refuses to extend labels made with other settings, naming the fields that differ."""
    before, now = asdict(stored), asdict(config)
    differs = [name for name in now if name != "splits" and before[name] != now[name]]
    if differs:
        raise LabelError(
            f"{directory} holds labels made with other settings ({', '.join(differs)} differ): "
            "label into another directory"
        )


def _pack(head: dict[str, Any], labels: Sequence[Label]) -> dict[str, np.ndarray]:
    """The archive's arrays: settings, splits, names and digests as JSON, the rest flat."""
    head = {**head, "labels": [[label.split, label.name, label.digest] for label in labels]}
    sizes = [label.placement.shape[0] for label in labels]
    return {
        "head": np.frombuffer(json.dumps(head).encode(), dtype=np.uint8),
        "index": np.array([label.index for label in labels], dtype=np.int64),
        "placement_ptr": np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]),
        "placement": np.concatenate(
            [label.placement for label in labels] or [np.zeros(0, np.int8)]
        ).astype(np.int8),
        "makespan": np.array([label.makespan for label in labels], dtype=np.float64),
        "excess": np.array([label.excess for label in labels], dtype=np.int64),
        "hint_makespan": np.array([label.hint_makespan for label in labels], dtype=np.float64),
        "hint_excess": np.array([label.hint_excess for label in labels], dtype=np.int64),
    }


def _unpack(places: Any, arrays: dict[str, np.ndarray]) -> list[Label]:
    """The labels of an archive (`_pack`'s inverse)."""
    ptr = arrays["placement_ptr"]
    return [
        Label(
            str(split),
            int(arrays["index"][k]),
            str(name),
            str(digest),
            arrays["placement"][ptr[k] : ptr[k + 1]].copy(),
            float(arrays["makespan"][k]),
            int(arrays["excess"][k]),
            float(arrays["hint_makespan"][k]),
            int(arrays["hint_excess"][k]),
        )  # fmt: skip
        for k, (split, name, digest) in enumerate(places)
    ]


def card(manifest: dict[str, Any]) -> str:
    """The labels' card: what they are, how they were made, and the headroom they show."""
    config, headroom = manifest["config"], manifest["headroom"]
    counts = ", ".join(f"{count} {split}" for split, count in manifest["labels"].items())
    bandwidth = "unlimited" if config["bandwidth"] is None else f"{config['bandwidth']:g} B/s"
    capacity = "none" if config["capacity"] is None else f"{config['capacity']:,} bytes"
    steered = "" if config["policy"] is None else f" (policy `{config['policy']}`)"
    return (
        "# Placement labels from search\n\n"
        f"Labels of `{config['dataset']}` ({counts}): each graph's placement as found by "
        f"`{config['solver']}`{steered} with {config['evaluations']:,} evaluations, makespan "
        "objective, "
        f"on {config['devices']} devices ({config['mode']} transfers, latency "
        f"{config['latency']:g} s, bandwidth {bandwidth}, capacity {capacity}); seed "
        f"{config['seed']}, each graph's seed derived from it and the graph's place, so a "
        "rebuild gives a byte-identical `labels.npz` (sha256 in `manifest.json`).\n\n"
        "Made by `graphopt dataset label`; a later call with the same settings adds what is "
        "missing. Each label keeps its graph's digest, and a trainer refuses a label whose "
        "graph has changed.\n\n"
        "## Headroom over the best classical hint (`partition-hint`)\n\n"
        f"On {headroom['graphs']} labelled graphs where both fit: the search is ahead on "
        f"{headroom['ahead']}, by {headroom['mean_gain_percent']:+.2f}% on average (median "
        f"{headroom['median_gain_percent']:+.2f}%; hint makespan / search makespan - 1).\n"
    )
