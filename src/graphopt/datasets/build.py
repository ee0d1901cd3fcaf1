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
import inspect
import json
import math
import numbers
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphopt._messages import describe, record_fields
from graphopt.datasets.store import FORMAT, MANIFEST, SPLITS, SplitWriter, split_file
from graphopt.errors import GraphoptError
from graphopt.ir.generators import FAMILIES, SizeDistribution, augment, generate
from graphopt.ir.graph import Graph
from graphopt.ir.io import read_graph
from graphopt.limits import MAX_ITEMS
from graphopt.progress import progress_bar

if TYPE_CHECKING:
    from rich.progress import Progress

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "default.json"
"""The shipped default config: synthetic families at 50..1000 ops plus the model zoo."""
CARD = "README.md"
"""File name of the dataset card inside a dataset directory."""

_CONFIG_FIELDS = ("name", "seed", "copies", "size_noise", "split", "synthetic", "zoo", "files")
_SYNTHETIC_FIELDS = ("family", "sizes", "count", "params")
_ZOO_FIELDS = ("name", "training", "device")
_RESERVED_PARAMS = ("n", "seed", "name")  # set per graph by the builder
_SIZE_PARAMS = ("sizes", "temp_memory")  # family parameters that take a SizeDistribution

# First element of every seed's spawn key: what the seed is for.
_GENERATE, _AUGMENT, _SPLIT = 0, 1, 2
# Second element of a topology's key: which kind of source it came from.
_SYNTHETIC, _ZOO, _FILES = 0, 1, 2


# ------------------------------------------------------------------------------------ config
@dataclass(frozen=True)
class SyntheticSource:
    """Graphs from one synthetic family: `count` graphs of each size in `sizes`.

    Attributes:
        family: a key of `graphopt.ir.generators.FAMILIES`.
        sizes: op counts to generate.
        count: graphs (topologies) per size.
        params: the family's other keyword arguments; `sizes` and `temp_memory` may be JSON
            objects with the fields of `SizeDistribution`.
    """

    family: str
    sizes: tuple[int, ...]
    count: int = 1
    params: Mapping[str, Any] = field(default_factory=dict)

    def family_params(self) -> dict[str, Any]:
        """The params as `generate` takes them (size distributions built from their objects)."""
        params = dict(self.params)
        for key in _SIZE_PARAMS:
            if isinstance(params.get(key), Mapping):
                params[key] = SizeDistribution(**params[key])
        return params


@dataclass(frozen=True)
class ZooSource:
    """One model of the zoo, exported by `graphopt.importers.zoo.export_graph`.

    Attributes:
        name: the zoo's model name, e.g. "resnet18".
        training: export the training graph (forward, backward, optimizer) instead of inference.
        device: the device whose roofline gives op runtimes.
    """

    name: str
    training: bool = False
    device: str = "a100"

    @property
    def label(self) -> str:
        """The topology's name: model and mode, e.g. "resnet18.inference"."""
        return f"{self.name}.{'training' if self.training else 'inference'}"


@dataclass(frozen=True)
class DatasetConfig:
    """What a dataset holds and how it is built; validated on construction.

    Attributes:
        name: the dataset's name, used in its card.
        seed: root of every random draw (generation, augmentation, split).
        copies: noisy copies per topology; with the original, a topology gives copies + 1
            graphs. REGAL used 99.
        size_noise: (low, high): each copy multiplies each tensor size by U(low, high).
        split: (train, valid, test) topologies taken from each run of sum(split) topologies
            sorted by op count (paper 001 A.1: 3-1-1).
        synthetic: synthetic graph sources.
        zoo: model zoo sources.
        files: graph files (.json or .npz) or glob patterns, relative to `base_dir`.
        base_dir: where relative `files` patterns resolve (the config file's folder); not part of
            the dataset's identity, so not echoed in the manifest.
    """

    name: str
    seed: int = 0
    copies: int = 9
    size_noise: tuple[float, float] = (0.5, 1.5)
    split: tuple[int, int, int] = (3, 1, 1)
    synthetic: tuple[SyntheticSource, ...] = ()
    zoo: tuple[ZooSource, ...] = ()
    files: tuple[str, ...] = ()
    base_dir: Path = field(default=Path("."), compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise GraphoptError(f"name must be a non-empty string, got {describe(self.name)}")
        _int_field("seed", self.seed, 0)
        _int_field("copies", self.copies, 0)
        noise = _sequence("size_noise", self.size_noise, 2)
        low = _number_field("size_noise[0]", noise[0], 0.0)
        high = _number_field("size_noise[1]", noise[1], 0.0)
        if low > high:
            raise GraphoptError(f"size_noise: low must be <= high, got [{low}, {high}]")
        split = _check_split(self.split)
        synthetic = tuple(_sequence("synthetic", self.synthetic))
        for i, source in enumerate(synthetic):
            _check_synthetic(source, f"synthetic[{i}]")
        zoo = tuple(_sequence("zoo", self.zoo))
        for i, source in enumerate(zoo):
            _check_zoo(source, f"zoo[{i}]")
        files = tuple(_sequence("files", self.files))
        for i, pattern in enumerate(files):
            if not isinstance(pattern, str) or not pattern:
                raise GraphoptError(
                    f"files[{i}]: must be a non-empty path or glob, got {describe(pattern)}"
                )
        if not (synthetic or zoo or files):
            raise GraphoptError("no sources: add synthetic, zoo or files entries")
        object.__setattr__(self, "size_noise", (low, high))
        object.__setattr__(self, "split", split)
        object.__setattr__(self, "synthetic", synthetic)
        object.__setattr__(self, "zoo", zoo)
        object.__setattr__(self, "files", files)
        object.__setattr__(self, "base_dir", Path(self.base_dir))

    @classmethod
    def from_dict(cls, data: Any, base_dir: str | Path = ".") -> DatasetConfig:
        """Builds a config from its JSON object.

        Raises:
            GraphoptError: naming the offending field, e.g. "synthetic[1].sizes[0]: ...".
        """
        data = record_fields(data, "config", ("name",), _CONFIG_FIELDS)
        synthetic = []
        for i, entry in enumerate(_list(data, "synthetic")):
            entry = record_fields(entry, f"synthetic[{i}]", ("family", "sizes"), _SYNTHETIC_FIELDS)
            synthetic.append(
                SyntheticSource(
                    family=entry["family"],
                    sizes=_list(entry, "sizes", f"synthetic[{i}]."),
                    count=entry.get("count", 1),
                    params=entry.get("params", {}),
                )
            )
        zoo = []
        for i, entry in enumerate(_list(data, "zoo")):
            zoo.append(ZooSource(**record_fields(entry, f"zoo[{i}]", ("name",), _ZOO_FIELDS)))
        return cls(
            name=data["name"],
            seed=data.get("seed", 0),
            copies=data.get("copies", 9),
            size_noise=_list(data, "size_noise", default=[0.5, 1.5]),
            split=_list(data, "split", default=[3, 1, 1]),
            synthetic=tuple(synthetic),
            zoo=tuple(zoo),
            files=tuple(_list(data, "files")),
            base_dir=Path(base_dir),
        )

    @classmethod
    def from_json(cls, path: str | Path) -> DatasetConfig:
        """Loads a config file; `name` defaults to the file's stem, `files` resolve next to it.

        Raises:
            GraphoptError: prefixed with the file name, naming the offending field.
        """
        path = Path(path)
        if not path.is_file():
            raise GraphoptError(f"{path}: no such config file")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise GraphoptError(
                f"{path}: not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
            ) from None
        except UnicodeDecodeError:
            raise GraphoptError(f"{path}: not valid JSON (the file is not UTF-8 text)") from None
        if isinstance(data, dict):
            data = {"name": path.stem, **data}
        try:
            return cls.from_dict(data, base_dir=path.parent)
        except GraphoptError as error:
            raise GraphoptError(f"{path}: {error}") from None

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON (what `from_dict` reads back), for the manifest's echo."""
        return {
            "name": self.name,
            "seed": self.seed,
            "copies": self.copies,
            "size_noise": list(self.size_noise),
            "split": list(self.split),
            "synthetic": [
                {"family": s.family, "sizes": list(s.sizes), "count": s.count, "params": s.params}
                for s in self.synthetic
            ],
            "zoo": [dataclasses.asdict(z) for z in self.zoo],
            "files": list(self.files),
        }


def _list(data: Mapping[str, Any], key: str, prefix: str = "", default: Any = ()) -> list[Any]:
    value = data.get(key, default)
    if not isinstance(value, list | tuple):
        raise GraphoptError(f"{prefix}{key}: must be a JSON list, got {describe(value)}")
    return list(value)


def _sequence(name: str, value: Any, length: int | None = None) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise GraphoptError(f"{name}: must be a list, got {describe(value)}")
    if length is not None and len(value) != length:
        raise GraphoptError(f"{name}: must have {length} values, got {len(value)}")
    return value


def _int_field(name: str, value: Any, low: int, high: int | None = None) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise GraphoptError(f"{name}: must be an integer >= {low}, got {describe(value)}")
    if high is not None and value > high:
        raise GraphoptError(f"{name}: must be at most {high}, got {describe(value)}")
    return int(value)


def _number_field(name: str, value: Any, low: float) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < low:
        raise GraphoptError(f"{name}: must be a finite number >= {low}, got {describe(value)}")
    return float(value)


def _check_split(split: Any) -> tuple[int, int, int]:
    values = _sequence("split", split, 3)
    train, valid, test = (_int_field(f"split[{i}]", v, 0) for i, v in enumerate(values))
    if train + valid + test == 0:
        raise GraphoptError("split: at least one of train, valid, test must be > 0")
    return train, valid, test


def _check_synthetic(source: Any, where: str) -> None:
    """Validates one synthetic entry, down to its size distributions and parameter names."""
    if not isinstance(source, SyntheticSource):
        raise GraphoptError(f"{where}: must be a SyntheticSource, got {describe(source)}")
    if not isinstance(source.family, str) or source.family not in FAMILIES:
        raise GraphoptError(
            f"{where}.family: unknown graph family {describe(source.family)}; "
            f"valid families: {', '.join(FAMILIES)}"
        )
    sizes = _sequence(f"{where}.sizes", source.sizes)
    if not sizes:
        raise GraphoptError(f"{where}.sizes: must list at least one op count")
    sizes = tuple(_int_field(f"{where}.sizes[{j}]", n, 1, MAX_ITEMS) for j, n in enumerate(sizes))
    object.__setattr__(source, "sizes", sizes)
    _int_field(f"{where}.count", source.count, 1)
    if not isinstance(source.params, Mapping):
        raise GraphoptError(f"{where}.params: must be a JSON object, got {describe(source.params)}")
    accepted = [
        key
        for key in inspect.signature(FAMILIES[source.family]).parameters
        if key not in _RESERVED_PARAMS
    ]
    for key, value in source.params.items():
        if key in _RESERVED_PARAMS:
            raise GraphoptError(f"{where}.params.{key}: is set by the dataset builder")
        if key not in accepted:
            raise GraphoptError(
                f"{where}.params: unknown parameter {describe(key)} of {source.family}; "
                f"valid parameters: {', '.join(accepted)}"
            )
        if key in _SIZE_PARAMS and isinstance(value, Mapping):
            try:
                SizeDistribution(**value)
            except (GraphoptError, TypeError) as error:
                raise GraphoptError(f"{where}.params.{key}: {error}") from None


def _check_zoo(source: Any, where: str) -> None:
    if not isinstance(source, ZooSource):
        raise GraphoptError(f"{where}: must be a ZooSource, got {describe(source)}")
    if not isinstance(source.name, str) or not source.name:
        raise GraphoptError(
            f"{where}.name: must be a non-empty model name, got {describe(source.name)}"
        )
    if not isinstance(source.training, bool):
        raise GraphoptError(
            f"{where}.training: must be true or false, got {describe(source.training)}"
        )
    if not isinstance(source.device, str) or not source.device:
        raise GraphoptError(
            f"{where}.device: must be a non-empty string, got {describe(source.device)}"
        )


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
    split = _check_split(split)
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


def _write(path: Path, write: Callable[[Path], None]) -> None:
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
            _write(out_dir / split_file(split), writer.write)
            bar.update(writing, advance=1)
        bar.update(writing, item="")
    manifest = _manifest(config, out_dir, topologies, assigned, augment_seeds, writers)
    text = json.dumps(manifest, indent=1) + "\n"
    _write(out_dir / MANIFEST, lambda path: path.write_text(text))
    card = _card(manifest)
    _write(out_dir / CARD, lambda path: path.write_text(card))
    return manifest


# ------------------------------------------------------------------------- manifest and card
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


def _card(manifest: Mapping[str, Any]) -> str:
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
