"""A zoo of real ML models to import as computation graphs, by name.

Each entry builds a small, hand-sized module (random weights, eval mode, seeded) with example
inputs and knows its training loss, so the PyTorch importer can trace both the inference graph and
the training step of the same model. Sizes range from toy models of about a hundred ops to unrolled
recurrent nets whose training step has tens of thousands: the range the optimizers must handle.
"""

from __future__ import annotations

from graphopt.importers.zoo._base import ZooModel
from graphopt.importers.zoo.export import export_graph
from graphopt.importers.zoo.registry import ZOO, get_model

__all__ = ["ZOO", "ZooModel", "export_graph", "get_model"]
