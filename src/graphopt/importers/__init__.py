"""Importers: real computation graphs from PyTorch, ONNX and TensorFlow cost graphs (issue 4).

`import_graph` picks the importer from the source: an ONNX file, a TensorFlow `CostGraphDef` text
proto, a graphopt graph file, or a Python factory `package.module:function` that returns a
PyTorch module and its example inputs.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from graphopt._messages import raised
from graphopt.costmodels.roofline import DEFAULT_DEVICE
from graphopt.errors import ModelImportError
from graphopt.ir.graph import Graph

if TYPE_CHECKING:
    from graphopt.importers.torch_export import Capture

COSTGRAPH_SUFFIXES = (".pbtxt", ".costgraph", ".txt")
METHODS = ("export", "fx")
"""PyTorch import methods: torch.export (the default) and the torch.fx fallback."""


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

    Options that only some sources use are refused elsewhere rather than ignored, so that a
    graph never silently differs from the one that was asked for.

    Args:
        source: `model.onnx`, `graph.pbtxt` (CostGraphDef), `graph.json`/`.npz`, or
            `package.module:function` returning `(nn.Module, tuple of example tensors)`; the
            module is looked up in the current working directory first, as `python -m` does
            (see `_load_factory`).
        device: roofline device spec for op runtimes (ONNX and PyTorch sources).
        training: PyTorch only: the training step (forward, backward, SGD update), always traced
            with make_fx, so not with `method="fx"` or `strict`.
        method: PyTorch only: "export" (torch.export) or "fx" (symbolic_trace fallback,
            inference only).
        strict: PyTorch only: torch.export's strict mode (method "export", inference only).
        name: graph name (default from the source).

    Raises:
        ModelImportError: unreadable source, a broken factory, or an option the source or the
            other options do not allow, in one line naming the source and the reason.
    """
    text = str(source)
    path = Path(text)
    suffix = path.suffix.lower()
    if method not in METHODS:
        raise ModelImportError(f"unknown import method '{method}' (known: {', '.join(METHODS)})")
    if not path.exists() and ":" in text and suffix not in (".onnx", ".json", ".npz"):
        return _import_factory(text, device, training, method, strict, name)
    pytorch_only = {"--train": training, "--method fx": method == "fx", "--strict": strict}
    given = [flag for flag, used in pytorch_only.items() if used]
    if given:
        raise ModelImportError(
            f"{text}: {given[0]} needs a PyTorch source (package.module:function)"
        )
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


def capture_model(source: str, *, training: bool = False, device: str = DEFAULT_DEVICE) -> Capture:
    """A PyTorch model's graph with its program (`Capture`), to run solutions on the model.

    The graph is the one `graphopt import` (for a factory) or `graphopt zoo export` (for a zoo
    name) writes for the same source and `training`, with the same graph and op names, so a
    solution of that graph applies to the capture.

    Args:
        source: a zoo model name (`graphopt zoo list`) or `package.module:function` returning
            `(nn.Module, tuple of example tensors)`.
        training: capture the training step (forward, backward, SGD update) instead.
        device: roofline device spec for op runtimes.

    Raises:
        ModelImportError: an unknown source, a broken factory or a model that fails to export,
            in one line.
    """
    from graphopt.importers.torch_export import capture_module, capture_training_step
    from graphopt.importers.zoo import ZOO

    entry = ZOO.get(source)
    if entry is not None:
        module, inputs = entry.build()
        if training:
            return capture_training_step(
                module, inputs, loss=entry.loss, name=f"{entry.name}-train", device=device
            )
        return capture_module(module, inputs, name=entry.name, device=device)
    if ":" not in source:
        raise ModelImportError(
            f"{source}: not a zoo model (see `graphopt zoo list`) nor a factory reference "
            "package.module:function"
        )
    module, inputs = _build_factory(source)
    name = source.partition(":")[2]
    if training:
        return capture_training_step(module, inputs, name=name, device=device)
    return capture_module(module, inputs, name=name, device=device)


def _build_factory(reference: str) -> tuple[Any, tuple[Any, ...]]:
    """Loads and calls a factory; (module, example inputs), checked."""
    factory = _load_factory(reference)
    with _current_directory_first():
        try:
            built = factory()
        except (Exception, SystemExit) as error:  # a user's factory can raise anything
            raise ModelImportError(f"{reference}: the factory raised {raised(error)}") from None
    return _check_factory_result(reference, built)


def _load_factory(reference: str) -> Callable[[], Any]:
    """The function that `reference` ("package.module:function") names, ready to call.

    The module is looked up in the current working directory first, then on `sys.path`, as
    `python -m` does, so `graphopt import mymodule:build` finds `./mymodule.py`; `sys.path` is
    restored afterwards. `function` may be a dotted path (`module:Class.build`), as in entry
    points.

    Raises:
        ModelImportError: a malformed reference, a module that cannot be imported (not found,
            a syntax error, an exception at import time, a missing dependency), a missing
            attribute or one that is not callable; one line naming the reference and the reason.
    """
    module_name, function_name = _split_reference(reference)
    with _current_directory_first():
        try:
            target: Any = importlib.import_module(module_name)
        except (Exception, SystemExit) as error:  # a user's module can raise anything
            raise ModelImportError(f"{reference}: {_import_failure(module_name, error)}") from None
    owner = module_name
    for part in function_name.split("."):
        if not hasattr(target, part):
            raise ModelImportError(f"{reference}: '{owner}' has no attribute '{part}'")
        target, owner = getattr(target, part), f"{owner}.{part}"
    if not callable(target):
        raise ModelImportError(
            f"{reference}: '{function_name}' is of type {type(target).__name__}, not a function"
        )
    return target


@contextlib.contextmanager
def _current_directory_first() -> Iterator[None]:
    """Puts the working directory first on `sys.path` (as `python -m` does), then removes it.

    A factory module that imports its neighbours at call time (`from layers import Block` in
    `build()`) finds them as long as the factory runs inside this context.
    """
    entry = os.getcwd()
    sys.path.insert(0, entry)
    importlib.invalidate_caches()  # the directory may have gained modules since it was listed
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _split_reference(reference: str) -> tuple[str, str]:
    """(module, function) of "package.module:function", or a one-line error saying what is wrong."""
    module_name, _, function_name = reference.partition(":")
    if reference.count(":") != 1:
        reason = f"{reference.count(':')} colons"
    elif not module_name:
        reason = "no module before ':'"
    elif not function_name:
        reason = "no function after ':'"
    elif not _is_dotted_name(module_name):
        reason = f"'{module_name}' is not a Python module name"
    elif not _is_dotted_name(function_name):
        reason = f"'{function_name}' is not a Python name"
    else:
        return module_name, function_name
    raise ModelImportError(
        f"{reference}: a factory reference is package.module:function ({reason})"
    )


def _is_dotted_name(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def _import_failure(module_name: str, error: BaseException) -> str:
    """Why importing `module_name` failed: not found, or what its code (or a dependency) raised."""
    missing = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    if missing is not None and (module_name + ".").startswith(missing + "."):
        hint = " (name the module, not its file: drop '.py')" if module_name.endswith(".py") else ""
        return f"no module named '{missing}' in the current directory or on sys.path{hint}"
    return f"importing module '{module_name}' raised {raised(error)}"


def _import_factory(
    reference: str,
    device: str,
    training: bool,
    method: Literal["export", "fx"],
    strict: bool,
    name: str | None,
) -> Graph:
    """Refuses option combinations that would be ignored, then loads, calls and imports."""
    if training and (method == "fx" or strict):
        flag = "--method fx" if method == "fx" else "--strict"
        raise ModelImportError(
            f"{reference}: {flag} cannot be used with --train (a training step is always traced "
            "with make_fx; --method and --strict choose how an inference graph is traced)"
        )
    if method == "fx" and strict:
        raise ModelImportError(
            f"{reference}: --strict is torch.export's strict mode and cannot be used with "
            "--method fx"
        )
    module, inputs = _build_factory(reference)

    from graphopt.importers.torch_export import import_module, import_training_step

    name = name or reference.partition(":")[2]
    if training:
        return import_training_step(module, inputs, name=name, device=device)
    return import_module(module, inputs, name=name, device=device, method=method, strict=strict)


def _check_factory_result(reference: str, built: Any) -> tuple[Any, tuple[Any, ...]]:
    """(module, example inputs) from what a factory returned, or a one-line error naming the item.

    Accepts `(nn.Module, tensor)` and `(nn.Module, tuple or list of tensors)`.
    """
    import torch

    expected = "(nn.Module, tuple of example tensors)"
    if not (isinstance(built, tuple) and len(built) == 2):
        got = f"a tuple of {len(built)}" if isinstance(built, tuple) else type(built).__name__
        raise ModelImportError(f"{reference}: the factory must return {expected}, got {got}")
    module, inputs = built
    if not isinstance(module, torch.nn.Module):
        raise ModelImportError(
            f"{reference}: the factory must return {expected}, but its first item is of type "
            f"{type(module).__name__}"
        )
    inputs = tuple(inputs) if isinstance(inputs, list | tuple) else (inputs,)
    for index, value in enumerate(inputs):
        if not isinstance(value, torch.Tensor):
            raise ModelImportError(
                f"{reference}: example input {index} is of type {type(value).__name__}, not a "
                f"tensor (the factory must return {expected})"
            )
    return module, inputs
