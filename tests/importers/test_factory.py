"""PyTorch factories `module:function`: found in the working directory, every failure one line."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from graphopt.errors import ModelImportError
from graphopt.importers import import_graph

GOOD = """
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, WIDTH), nn.ReLU()), (torch.randn(3, 4),)


def build_list():
    return nn.Linear(4, 2), [torch.randn(3, 4)]


def build_tensor():
    return nn.Linear(4, 2), torch.randn(3, 4)


class Factories:
    @staticmethod
    def build():
        return nn.Linear(4, 2), (torch.randn(3, 4),)


def broken():
    raise RuntimeError("the weights file is gone")


def exits():
    raise SystemExit(3)


def returns_int():
    return 3


def returns_triple():
    return nn.Linear(4, 2), (torch.randn(3, 4),), {}


def returns_no_module():
    return "model", (torch.randn(3, 4),)


def returns_int_input():
    return nn.Linear(4, 2), (torch.randn(3, 4), 7)


NOT_A_FUNCTION = 42
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A working directory holding factory modules; modules imported from it are forgotten."""
    monkeypatch.chdir(tmp_path)
    path_before = list(sys.path)
    yield tmp_path
    assert sys.path == path_before  # the working directory is never left on sys.path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def write_module(directory: Path, name: str, source: str) -> None:
    (directory / f"{name}.py").write_text(textwrap.dedent(source))


def test_factory_module_is_found_in_the_working_directory_first(workdir: Path, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    write_module(elsewhere, "factory_first", GOOD.replace("WIDTH", "2"))
    write_module(workdir, "factory_first", GOOD.replace("WIDTH", "8"))
    sys.path.insert(0, str(elsewhere))
    try:
        graph = import_graph("factory_first:build", device="cpu")
    finally:
        sys.path.remove(str(elsewhere))
    sizes = dict(zip(graph.tensor_names, graph.tensor_size.tolist(), strict=True))
    assert sizes["relu:0"] == 3 * 8 * 4  # the working directory's Linear(4, 8), not Linear(4, 2)
    assert graph.name == "build"


@pytest.mark.parametrize("function", ["build_list", "build_tensor", "Factories.build"])
def test_inputs_may_be_a_list_or_one_tensor_and_the_function_a_dotted_path(workdir, function):
    write_module(workdir, "factory_forms", GOOD.replace("WIDTH", "8"))
    graph = import_graph(f"factory_forms:{function}")
    assert "addmm" in graph.op_names


@pytest.mark.parametrize(
    ("module_source", "function", "fragment"),
    [
        (GOOD, "broken", "the factory raised RuntimeError: the weights file is gone"),
        (GOOD, "exits", "the factory raised SystemExit: 3"),
        (GOOD, "returns_int", "must return (nn.Module, tuple of example tensors), got int"),
        (GOOD, "returns_triple", "got a tuple of 3"),
        (GOOD, "returns_no_module", "its first item is of type str"),
        (GOOD, "returns_int_input", "example input 1 is of type int, not a tensor"),
        (GOOD, "nope", "'factory_bad' has no attribute 'nope'"),
        (GOOD, "Factories.nope", "'factory_bad.Factories' has no attribute 'nope'"),
        (GOOD, "NOT_A_FUNCTION", "'NOT_A_FUNCTION' is of type int, not a function"),
        (
            "def build(:\n",
            "build",
            "importing module 'factory_bad' raised SyntaxError: invalid syntax",
        ),
        (
            "raise ValueError('no GPU here')\n",
            "build",
            "importing module 'factory_bad' raised ValueError: no GPU here",
        ),
        (
            "import graphopt_no_such_dependency\n",
            "build",
            "raised ModuleNotFoundError: No module named 'graphopt_no_such_dependency'",
        ),
        ("import sys\nsys.exit(1)\n", "build", "raised SystemExit: 1"),
    ],
)
def test_factory_failures_are_one_line_naming_the_factory(
    workdir, module_source, function, fragment
):
    write_module(workdir, "factory_bad", module_source.replace("WIDTH", "8"))
    reference = f"factory_bad:{function}"
    with pytest.raises(ModelImportError) as error:
        import_graph(reference)
    message = str(error.value)
    assert message.startswith(f"{reference}: ") and "\n" not in message
    assert fragment in message


@pytest.mark.parametrize(
    ("reference", "fragment"),
    [
        ("factory_missing:build", "no module named 'factory_missing' in the current directory"),
        ("factory_missing.py:build", "drop '.py'"),
        ("a:b:c", "(2 colons)"),
        (":build", "(no module before ':')"),
        ("factory_missing:", "(no function after ':')"),
        ("my-models:build", "'my-models' is not a Python module name"),
        ("models:1build", "'1build' is not a Python name"),
    ],
)
def test_bad_references_are_one_line(workdir, reference, fragment):
    with pytest.raises(ModelImportError) as error:
        import_graph(reference)
    message = str(error.value)
    assert message.startswith(f"{reference}: ") and "\n" not in message
    assert fragment in message


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"training": True, "method": "fx"}, "--method fx cannot be used with --train"),
        ({"training": True, "strict": True}, "--strict cannot be used with --train"),
        ({"method": "fx", "strict": True}, "--strict is torch.export's strict mode"),
        ({"method": "jit"}, "unknown import method 'jit' (known: export, fx)"),
    ],
)
def test_options_that_would_be_ignored_are_refused_before_loading(workdir, options, fragment):
    # The module does not exist: the options are checked before anything is imported.
    with pytest.raises(ModelImportError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        import_graph("factory_never_loaded:build", **options)


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        ({"training": True}, "--train"),
        ({"method": "fx"}, "--method fx"),
        ({"strict": True}, "--strict"),
    ],
)
def test_pytorch_options_on_other_sources_are_refused(tmp_path: Path, options, flag):
    with pytest.raises(ModelImportError, match=f"{flag} needs a PyTorch source"):
        import_graph(tmp_path / "model.onnx", **options)
