"""A zoo of real ML models to import as computation graphs, by name.

Each entry builds a small, hand-sized module (random weights, eval mode, seeded) with example
inputs and knows its training loss, so the PyTorch importer can trace both the inference graph and
the training step of the same model. Sizes range from toy models of about a hundred ops to unrolled
recurrent nets whose training step has tens of thousands: the range the optimizers must handle.
"""

from __future__ import annotations

from graphopt.errors import GraphError
from graphopt.importers.zoo import cnn, hf, sequence
from graphopt.importers.zoo._base import ZooModel
from graphopt.importers.zoo.export import export_graph

__all__ = ["ZOO", "ZooModel", "export_graph", "get_model"]

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
