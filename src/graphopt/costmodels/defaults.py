"""Defaults the command line shows in `--help`, in a module that imports nothing.

Typer evaluates option defaults when `graphopt.cli` is imported, so a default that lived in
`roofline` would import numpy and numba for `graphopt --help`; `roofline` imports it from here.
"""

from __future__ import annotations

DEFAULT_DEVICE = "a100"
"""Roofline device whose datasheet figures give imported ops their runtimes."""
