"""What a dataset is built from: its config, read and checked before anything is built.

A config names its sources (synthetic families, zoo models, graph files), the seed, the number
of augmented copies, their size noise and the split rule. `DatasetConfig.from_dict` refuses an
unknown key or a bad value in one line naming the item, as every config reader does.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphopt._messages import describe, record_fields
from graphopt.errors import GraphoptError
from graphopt.ir.generators import FAMILIES, SizeDistribution
from graphopt.limits import MAX_ITEMS

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "default.json"
"""The shipped default config: synthetic families at 50..1000 ops plus the model zoo."""

_CONFIG_FIELDS = ("name", "seed", "copies", "size_noise", "split", "synthetic", "zoo", "files")
_SYNTHETIC_FIELDS = ("family", "sizes", "count", "params")
_ZOO_FIELDS = ("name", "training", "device")
_RESERVED_PARAMS = ("n", "seed", "name")  # set per graph by the builder
_SIZE_PARAMS = ("sizes", "temp_memory")  # family parameters that take a SizeDistribution


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
        split = check_split(self.split)
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


def check_split(split: Any) -> tuple[int, int, int]:
    """The split rule (train, valid, test counts per run of topologies), checked."""
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
