"""Building a dataset: gather topologies, split them, augment them, store them.

REGAL (paper 001, section 4.1 and appendix A.1) trains on real graphs de-duplicated by topology,
split 60-20-20 so that no topology is in two splits (the policy must generalize to new
topologies), then grows every split with noisy copies of its graphs. This module does the same
with the graphs graphopt can produce: the model zoo's exports, the synthetic families of
`graphopt.ir.generators` and the user's own graph files.

A topology is one source graph: one zoo export, one generated graph or one file. The split rule
is the paper's: topologies sorted by op count, each consecutive run of 5 split 3-1-1 (train,
valid, test), which keeps the op-count distributions of the three splits alike. Each topology
then contributes its original plus `copies` copies whose tensor sizes are multiplied by U(0.5, 1.5)
draws, all in its split.

Every random draw derives from the config's seed through `np.random.SeedSequence` spawn keys that
name the item (source entry, size, position), so an item's seed does not depend on how many
other items there are, and the same config and seed give byte-identical files.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphopt._messages import describe
from graphopt.datasets.card import CARD, dataset_card
from graphopt.datasets.config import DatasetConfig, check_split
from graphopt.datasets.store import FORMAT, MANIFEST, SPLITS, SplitWriter, split_file
from graphopt.errors import GraphoptError
from graphopt.ir.generators import augment, generate
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph
from graphopt.progress import progress_bar

if TYPE_CHECKING:
    from rich.progress import Progress


# First element of every seed's spawn key: what the seed is for.
_GENERATE, _AUGMENT, _SPLIT = 0, 1, 2
# Second element of a topology's key: which kind of source it came from.
_SYNTHETIC, _ZOO, _FILES = 0, 1, 2


# ------------------------------------------------------------------------------ splitting
def assign_splits(
    op_counts: Sequence[int] | np.ndarray, split: Sequence[int], seed: int
) -> np.ndarray:
    """Assigns topologies to splits by REGAL's rule (paper 001, appendix A.1).

    Topologies are sorted by op count (ties keep their given order) and cut into consecutive
    runs of sum(split) (5 for 3-1-1); within each run a seeded shuffle picks which split[0] go to
    train, split[1] to valid and split[2] to test, so no split is systematically the smallest or
    largest of a run. A last, shorter run of r topologies (the largest ones) fills train first,
    then valid, then test: with 3-1-1, r <= 3 all go to train and r = 4 gives 3 + 1 valid. This
    reproduces the paper's 372 topologies -> 224, 74, 74.

    Args:
        op_counts: op count of each topology.
        split: (train, valid, test) topologies per run.
        seed: seed of the within-run shuffles.

    Returns:
        [n] int8 split index of each topology: 0 train, 1 valid, 2 test.

    Raises:
        GraphoptError: unless `split` is three integers >= 0 with a positive sum.
    """
    split = check_split(split)
    counts = np.asarray(op_counts, dtype=np.int64)
    order = np.argsort(counts, kind="stable")
    slots = np.repeat(np.arange(len(SPLITS), dtype=np.int8), np.asarray(split, dtype=np.int64))
    run = slots.shape[0]
    rng = np.random.default_rng(seed)
    result = np.empty(counts.shape[0], dtype=np.int8)
    for start in range(0, counts.shape[0], run):
        members = rng.permutation(order[start : start + run])
        result[members] = slots[: members.shape[0]]
    return result


# -------------------------------------------------------------------------------- gathering
@dataclass(frozen=True)
class _Topology:
    """One source graph, with the spawn key that names it and its provenance."""

    graph: Graph
    key: tuple[int, ...]
    source: dict[str, Any]


def derive_seed(seed: int, *key: int) -> int:
    """A 32-bit seed for the item named by `key`, independent of every other item's.

    Args:
        seed: the dataset's seed.
        key: what the seed is for and which item (spawn key of `np.random.SeedSequence`).
    """
    return int(np.random.SeedSequence(seed, spawn_key=key).generate_state(1)[0])


def _file_paths(config: DatasetConfig) -> list[tuple[int, str]]:
    """(pattern index, path as matched) of every file the patterns match, sorted, first wins."""
    seen: set[Path] = set()
    matched = []
    for i, pattern in enumerate(config.files):
        paths = sorted(glob.glob(pattern, root_dir=config.base_dir, recursive=True))
        paths = [p for p in paths if (config.base_dir / p).is_file()]
        if not paths:
            raise GraphoptError(
                f"files[{i}]: {describe(pattern)} matches no file in {config.base_dir}"
            )
        for path in paths:
            resolved = (config.base_dir / path).resolve()
            if resolved not in seen:
                seen.add(resolved)
                matched.append((i, path))
    return matched


def _zoo_exporter() -> Callable[..., Graph]:
    """The zoo's exporter, imported only when a config names zoo models (it needs torch)."""
    try:
        from graphopt.importers.zoo import export_graph
    except ImportError as error:
        raise GraphoptError(
            f"zoo sources need graphopt.importers.zoo.export_graph, which is unavailable ({error})"
        ) from None
    return export_graph


def _gather(
    config: DatasetConfig, advance: Callable[[str], None], total: Callable[[int], None]
) -> list[_Topology]:
    """Every topology of the config: synthetic first, then zoo, then files, in config order."""
    files = _file_paths(config)
    n_synthetic = sum(len(s.sizes) * s.count for s in config.synthetic)
    total(n_synthetic + len(config.zoo) + len(files))
    topologies: list[_Topology] = []
    for i, source in enumerate(config.synthetic):
        params = source.family_params()
        for j, n in enumerate(source.sizes):
            for k in range(source.count):
                key = (_SYNTHETIC, i, j, k)
                seed = derive_seed(config.seed, _GENERATE, *key)
                where = f"synthetic[{i}] ({source.family}, n={n}, seed={seed})"
                advance(where)
                try:
                    graph = generate(source.family, n, seed=seed, **params)
                except GraphoptError as error:
                    raise GraphoptError(f"{where}: {error}") from None
                provenance = {"kind": "synthetic", "entry": i, "family": source.family, "n": n}
                topologies.append(_Topology(graph, key, {**provenance, "seed": seed}))
    if config.zoo:
        export_graph = _zoo_exporter()
        for i, source in enumerate(config.zoo):
            where = f"zoo[{i}] ({source.label})"
            advance(where)
            try:
                graph = export_graph(source.name, training=source.training, device=source.device)
            except GraphoptError as error:
                raise GraphoptError(f"{where}: {error}") from None
            provenance = {"kind": "zoo", "entry": i, **dataclasses.asdict(source)}
            topologies.append(
                _Topology(dataclasses.replace(graph, name=source.label), (_ZOO, i), provenance)
            )
    for position, (i, path) in enumerate(files):
        advance(f"files[{i}] ({path})")
        graph = read_graph(config.base_dir / path)
        if not graph.name:
            graph = dataclasses.replace(graph, name=Path(path).stem)
        provenance = {"kind": "files", "entry": i, "path": Path(path).as_posix()}
        topologies.append(_Topology(graph, (_FILES, position), provenance))
    _check_unique_names(topologies)
    return topologies


def _describe(source: Mapping[str, Any]) -> str:
    return f"{source['kind']}[{source['entry']}]"


def _check_unique_names(topologies: Sequence[_Topology]) -> None:
    """Graph names identify graphs in a dataset, so two topologies may not share one."""
    first: dict[str, _Topology] = {}
    for topology in topologies:
        name = topology.graph.name
        if name in first:
            raise GraphoptError(
                f"graph name '{name}' comes from both {_describe(first[name].source)} and "
                f"{_describe(topology.source)}; topology names must be unique"
            )
        first[name] = topology


# --------------------------------------------------------------------------------- building
def _progress_bar(enabled: bool) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description:<12}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[item]}"),
    )
    return progress_bar(*columns, quiet=not enabled)


def _check_out_dir(out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise GraphoptError(f"{out_dir}: exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise GraphoptError(
            f"{out_dir}: directory is not empty; choose an empty one or allow overwriting "
            "(overwrite=True, --overwrite) to replace its dataset files"
        )


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Writes through a temporary name, so an interrupted build leaves no half file."""
    partial = path.with_name(path.name + ".partial")
    write(partial)
    os.replace(partial, path)


def build_dataset(
    config: DatasetConfig,
    out_dir: str | Path,
    *,
    progress: bool = True,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Builds the dataset a config describes into `out_dir`.

    Writes `train.npz`, `valid.npz`, `test.npz` (see `graphopt.datasets.store`), `manifest.json`
    and a `README.md` card. Every source is read or generated before anything is written, so a
    bad source fails without touching `out_dir`. Files other than those five are left alone.

    Args:
        config: what to build.
        out_dir: the dataset's directory, created if needed.
        progress: show a progress bar on stderr.
        overwrite: replace the dataset files of a non-empty `out_dir`.

    Returns:
        The manifest (also written to `manifest.json`).

    Raises:
        GraphoptError: for a non-empty `out_dir` without `overwrite`, or a source that fails,
            naming the source.
    """
    out_dir = Path(out_dir)
    _check_out_dir(out_dir, overwrite)
    writers = {split: SplitWriter(split) for split in SPLITS}
    with _progress_bar(progress) as bar:
        gathering = bar.add_task("gathering", item="")
        topologies = _gather(
            config,
            advance=lambda item: bar.update(gathering, advance=1, item=item),
            total=lambda n: bar.update(gathering, total=n),
        )
        bar.update(gathering, item="")
        assigned = assign_splits(
            [t.graph.n_ops for t in topologies], config.split, derive_seed(config.seed, _SPLIT)
        )
        low, high = config.size_noise
        augmenting = bar.add_task("augmenting", total=len(topologies), item="")
        augment_seeds = []
        for topology, index in zip(topologies, assigned, strict=True):
            seed = derive_seed(config.seed, _AUGMENT, *topology.key)
            augment_seeds.append(seed)
            copies = augment(topology.graph, config.copies, seed=seed, low=low, high=high)
            writers[SPLITS[index]].add([topology.graph, *copies])
            bar.update(augmenting, advance=1, item=topology.graph.name)
        bar.update(augmenting, item="")
        names = [name for w in writers.values() for name in w.graph_names]
        if len(set(names)) != len(names):
            duplicate = next(name for name, n in Counter(names).items() if n > 1)
            raise GraphoptError(f"graph name '{duplicate}' occurs twice in the dataset")
        writing = bar.add_task("writing", total=len(SPLITS), item="")
        out_dir.mkdir(parents=True, exist_ok=True)
        for split, writer in writers.items():
            bar.update(writing, item=split_file(split))
            write_atomically(out_dir / split_file(split), writer.write)
            bar.update(writing, advance=1)
        bar.update(writing, item="")
    manifest = _manifest(config, out_dir, topologies, assigned, augment_seeds, writers)
    text = json.dumps(manifest, indent=1) + "\n"
    write_atomically(out_dir / MANIFEST, lambda path: path.write_text(text))
    card = dataset_card(manifest)
    write_atomically(out_dir / CARD, lambda path: path.write_text(card))
    return manifest


# ------------------------------------------------------------------------------ manifest
def _histogram(values: np.ndarray, edges: np.ndarray) -> dict[str, list[Any]]:
    counts, _ = np.histogram(values, bins=edges)
    return {"bins": edges.tolist(), "counts": counts.tolist()}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest(
    config: DatasetConfig,
    out_dir: Path,
    topologies: Sequence[_Topology],
    assigned: np.ndarray,
    augment_seeds: Sequence[int],
    writers: Mapping[str, SplitWriter],
) -> dict[str, Any]:
    """Counts, histograms (shared bins, so splits compare), sources and seeds of a build."""
    import graphopt

    all_ops = np.concatenate([w.op_counts for w in writers.values()])
    op_edges = np.histogram_bin_edges(all_ops, bins=10)
    largest = max(int(w.tensor_sizes.max(initial=0)) for w in writers.values())
    decades = max(1, math.ceil(math.log10(largest + 1)))
    size_edges = np.array([0] + [10**e for e in range(decades + 1)], dtype=np.int64)
    splits: dict[str, Any] = {}
    for index, (split, writer) in enumerate(writers.items()):
        members = [t for t, s in zip(topologies, assigned, strict=True) if s == index]
        sources = Counter(
            f"synthetic/{t.source['family']}"
            if t.source["kind"] == "synthetic"
            else t.source["kind"]
            for t in members
        )
        path = out_dir / split_file(split)
        splits[split] = {
            "file": path.name,
            "bytes": path.stat().st_size,
            "sha256": _sha256(path),
            "graphs": writer.n_graphs,
            "topologies": writer.n_topologies,
            "ops": int(writer.op_counts.sum()),
            "op_count_histogram": _histogram(writer.op_counts, op_edges),
            "tensor_size_histogram": _histogram(writer.tensor_sizes, size_edges),
            "sources": dict(sorted(sources.items())),
        }
    return {
        "format": FORMAT,
        "name": config.name,
        "graphopt_version": graphopt.__version__,
        "seed": config.seed,
        "config": config.to_dict(),
        "graphs": sum(w.n_graphs for w in writers.values()),
        "topologies": len(topologies),
        "splits": splits,
        "topology_table": [
            {
                "name": t.graph.name,
                "split": SPLITS[s],
                "ops": t.graph.n_ops,
                "tensors": t.graph.n_tensors,
                "edges": t.graph.n_edges,
                "source": t.source,
                "augment_seed": seed,
            }
            for t, s, seed in zip(topologies, assigned, augment_seeds, strict=True)
        ],
    }
