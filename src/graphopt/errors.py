"""The project's exceptions for invalid user input.

Every rule that a graph, solution or machine description can break raises one of these with a
one-line message naming the offending item (op, tensor, event, field) and the rule. The CLI prints
the message and exits with status 2; nothing else is expected to escape for bad input.
"""

from __future__ import annotations


class GraphoptError(ValueError):
    """Base class: invalid input, with a message that names the item and the rule it breaks."""


class GraphError(GraphoptError):
    """A graph file or array set breaks a rule of the `graphopt.graph/1` contract (section 1)."""


class SolutionError(GraphoptError):
    """A solution breaks a rule of the `graphopt.solution/1` contract (section 3)."""


class MachineError(GraphoptError):
    """A machine description is out of range (device count, capacity, latency, bandwidth, mode)."""


class ModelImportError(GraphoptError):
    """A model, ONNX file or cost graph cannot be imported: the exporter's reason and a hint."""
