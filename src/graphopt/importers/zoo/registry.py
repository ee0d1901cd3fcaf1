"""The zoo's entries by name, apart from the package's `__init__` so that `export` can import it."""

from __future__ import annotations

from graphopt.errors import GraphError
from graphopt.importers.zoo import cnn, hf, sequence
from graphopt.importers.zoo._base import ZooModel

ZOO: dict[str, ZooModel] = {m.name: m for m in (*cnn.MODELS, *sequence.MODELS, *hf.MODELS)}
"""Every zoo model by name: CNNs, then sequence models, then `transformers` models."""


def get_model(name: str) -> ZooModel:
    """The zoo entry called `name`.

    Raises:
        GraphError: No such entry; the message lists the known names.
    """
    try:
        return ZOO[name]
    except KeyError:
        raise GraphError(f"unknown zoo model {name!r} (known: {', '.join(ZOO)})") from None
