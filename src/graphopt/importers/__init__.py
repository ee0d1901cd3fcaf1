"""Importers: real computation graphs from PyTorch, ONNX and TensorFlow cost graphs (issue 4).

`import_graph` picks the importer from the source: an ONNX file, a TensorFlow `CostGraphDef` text
proto, a graphopt graph file, or a Python factory `package.module:function` that returns a
PyTorch module and its example inputs.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Literal

from graphopt.costmodels.roofline import DEFAULT_DEVICE
from graphopt.errors import ModelImportError
from graphopt.ir.graph import Graph

COSTGRAPH_SUFFIXES = (".pbtxt", ".costgraph", ".txt")


def import_graph(
    source: str | Path,
    *,
    device: str = DEFAULT_DEVICE,
    training: bool = False,
    method: Literal["export", "fx"] = "export",
    strict: bool = False,
    name: str | None = None,
) -> Graph:
    """Imports a graph from a file or a PyTorch factory, costed for `device`.

    Args:
        source: `model.onnx`, `graph.pbtxt` (CostGraphDef), `graph.json`/`.npz`, or
            `package.module:function` returning `(nn.Module, tuple of example tensors)`.
        device: roofline device spec for op runtimes (ONNX and PyTorch sources).
        training: PyTorch only: the training step (forward, backward, SGD update).
        method: PyTorch only: "export" (torch.export) or "fx" (symbolic_trace fallback).
        strict: PyTorch only: torch.export's strict mode.
        name: graph name (default from the source).

    Raises:
        ModelImportError: unreadable source, with the importer's reason and a hint.
    """
    text = str(source)
    path = Path(text)
    suffix = path.suffix.lower()
    if not path.exists() and ":" in text and suffix not in (".onnx", ".json", ".npz"):
        return _import_factory(text, device, training, method, strict, name)
    if training:
        raise ModelImportError(f"{text}: --train needs a PyTorch source (package.module:function)")
    if suffix == ".onnx":
        from graphopt.importers.onnx import import_onnx

        return import_onnx(path, name=name, device=device)
    if suffix in COSTGRAPH_SUFFIXES:
        from graphopt.importers.costgraph import import_costgraph

        return import_costgraph(path, name=name)
    if suffix in (".json", ".npz"):
        from graphopt.ir.io import read_graph

        return read_graph(path)
    raise ModelImportError(
        f"{text}: cannot tell the format (expected .onnx, {', '.join(COSTGRAPH_SUFFIXES)}, "
        ".json, .npz, or package.module:function)"
    )


def _import_factory(
    reference: str,
    device: str,
    training: bool,
    method: Literal["export", "fx"],
    strict: bool,
    name: str | None,
) -> Graph:
    from graphopt.importers.torch_export import import_module, import_training_step

    module_name, _, function_name = reference.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as error:
        raise ModelImportError(f"{reference}: cannot load the factory ({error})") from None
    built = factory()
    if not (isinstance(built, tuple) and len(built) == 2):
        raise ModelImportError(f"{reference}: must return (nn.Module, tuple of example inputs)")
    module, inputs = built
    inputs = tuple(inputs) if isinstance(inputs, list | tuple) else (inputs,)
    name = name or function_name
    if training:
        return import_training_step(module, inputs, name=name, device=device)
    return import_module(module, inputs, name=name, device=device, method=method, strict=strict)
