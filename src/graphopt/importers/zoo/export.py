"""Zoo models as graphs: the PyTorch importer applied to a zoo entry, by name."""

from __future__ import annotations

from graphopt.costmodels.roofline import DEFAULT_DEVICE, DeviceSpec
from graphopt.importers.torch_export import import_module, import_training_step
from graphopt.importers.zoo._base import ZooModel
from graphopt.importers.zoo.registry import get_model
from graphopt.ir.graph import Graph


def export_graph(
    model: str | ZooModel, *, training: bool = False, device: str | DeviceSpec = DEFAULT_DEVICE
) -> Graph:
    """The inference graph, or the training step (with the entry's loss), of a zoo model.

    Graphs are named `<model>` and `<model>-train`, and carry the zoo name and family as attrs.
    """
    entry = get_model(model) if isinstance(model, str) else model
    module, inputs = entry.build()
    if training:
        graph = import_training_step(
            module, inputs, loss=entry.loss, name=f"{entry.name}-train", device=device
        )
    else:
        graph = import_module(module, inputs, name=entry.name, device=device)
    return graph.with_attrs(zoo_model=entry.name, family=entry.family)
