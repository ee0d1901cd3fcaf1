"""The project's exceptions for invalid user input.

Every rule that a graph, solution or machine description can break raises one of these with a
one-line message naming the offending item (op, tensor, event, field) and the rule. The CLI prints
the message and exits with status 2; nothing else is expected to escape for bad input.
"""

from __future__ import annotations

import unicodedata

_BREAKING = frozenset({"Cc", "Cs", "Zl", "Zp"})
"""Unicode categories that end a line or reach a terminal as control codes."""


def one_line(text: str) -> str:
    """`text` with line breaks and control characters escaped (a newline becomes backslash n).

    Messages quote names and values from user files, which may hold any character; escaping them
    keeps every error one line, as the command line promises.
    """
    if text.isprintable():
        return text
    return "".join(
        char.encode("unicode_escape", "backslashreplace").decode("ascii")
        if unicodedata.category(char) in _BREAKING
        else char
        for char in text
    )


class GraphoptError(ValueError):
    """Base class: invalid input, with a message that names the item and the rule it breaks.

    Its text is always one line: characters that would break it are escaped.
    """

    def __str__(self) -> str:
        return one_line(super().__str__())


class GraphError(GraphoptError):
    """A graph file or array set breaks a rule of the `graphopt.graph/1` contract (section 1)."""


class SolutionError(GraphoptError):
    """A solution breaks a rule of the `graphopt.solution/1` contract (section 4)."""


class MachineError(GraphoptError):
    """A machine description is out of range (device count, capacity, latency, bandwidth, mode)."""


class ModelImportError(GraphoptError):
    """A model, ONNX file or cost graph cannot be imported: the exporter's reason and a hint."""
