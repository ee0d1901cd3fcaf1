"""Target models: the machine a schedule really runs on, when it differs from the proxy.

Paper 004 (section 5.1, E.3) ranks schedules with a proxy and re-evaluates the best ones on
targets that model its typical errors. Each target here is a transform of the graph or machine,
scored by the same contract rules (section 6), so a target makespan is as exact as a proxy one:

- ``noisy:S``: op runtimes were profiled wrongly; each is multiplied by exp(S z) with z drawn
  from a standard normal, seeded (S = 0.1 gives about 10% errors, median unchanged).
- ``bandwidth:B``: transfers follow the linear model a m + b with the bandwidth term dominating:
  duration m / B seconds for m bytes, in async mode (a transfer delays its reader only).
- ``latency:L``: the startup term dominates: every transfer takes L seconds, whatever its size.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from graphopt.costmodels.machine import Machine
from graphopt.errors import GraphoptError
from graphopt.ir.graph import Graph

TargetKind = Literal["noisy", "bandwidth", "latency"]
TARGET_KINDS: tuple[str, ...] = get_args(TargetKind)


class TargetError(GraphoptError):
    """A target model that cannot be parsed or applied."""


@dataclass(frozen=True)
class TargetModel:
    """One target model (see the module docstring for what each kind does).

    Attributes:
        kind: 'noisy', 'bandwidth' or 'latency'.
        value: the noise scale S (>= 0), the bandwidth B in bytes per second (> 0), or the
            latency L in seconds (>= 0).
    """

    kind: TargetKind
    value: float

    def __post_init__(self) -> None:
        if self.kind not in TARGET_KINDS:
            raise TargetError(
                f"target kind must be one of {', '.join(TARGET_KINDS)}, got {self.kind!r}"
            )
        positive = self.kind == "bandwidth"
        if not math.isfinite(self.value) or self.value < 0 or (positive and self.value == 0):
            wanted = "a finite number > 0" if positive else "a finite number >= 0"
            raise TargetError(f"target {self.kind}: value must be {wanted}, got {self.value}")

    @classmethod
    def parse(cls, text: str) -> TargetModel:
        """A target from its command-line form KIND:VALUE ('noisy:0.1', 'bandwidth:1e9')."""
        kind, sep, value = text.partition(":")
        if not sep:
            raise TargetError(
                f"target must look like KIND:VALUE with KIND one of {', '.join(TARGET_KINDS)}, "
                f"got {text!r}"
            )
        try:
            number = float(value)
        except ValueError:
            raise TargetError(f"target {kind}: value must be a number, got {value!r}") from None
        return cls(kind, number)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.kind}:{self.value:g}"

    def apply(self, graph: Graph, machine: Machine, seed: int) -> tuple[Graph, Machine]:
        """The graph and machine of this target, from the proxy's (`seed` draws the noise)."""
        if self.kind == "noisy":
            rng = np.random.default_rng([seed, graph.n_ops])
            noise = np.exp(self.value * rng.standard_normal(graph.n_ops))
            return graph.with_op_runtimes(graph.op_runtime * noise), machine
        if self.kind == "bandwidth":
            return graph, dataclasses.replace(
                machine, latency=0.0, bandwidth=self.value, mode="async"
            )
        return graph, dataclasses.replace(
            machine, latency=self.value, bandwidth=math.inf, mode="async"
        )
