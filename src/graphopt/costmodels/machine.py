"""The machine a solution runs on (docs/format.md section 3)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, NamedTuple, get_args

import numpy as np

from graphopt.errors import MachineError
from graphopt.limits import MAX_CAPACITY, MAX_DEVICES

TransferMode = Literal["sync", "async"]

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def parse_bytes(text: str) -> int:
    """Parses '16GiB', '512MB', '1e9' or '4096' into a number of bytes, exactly.

    Whole numbers are read as integers (a float would round 9007199254740993 to ...992);
    decimals and exponents must still come to a whole number of bytes.

    Raises:
        MachineError: text that is not a byte count, or not a whole number of bytes.
    """
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS or len(match.group(1)) > 40:
        raise MachineError(
            f"capacity must be a byte count such as 4096, 1e9 or 16GiB, got '{text}'"
        )
    number, unit = match.group(1), _UNITS[match.group(2).lower()]
    if number.isdigit():
        return int(number) * unit
    value = float(number) * unit
    if not math.isfinite(value) or value != int(value):
        raise MachineError(f"capacity must be a whole number of bytes, got '{text}'")
    return int(value)


class MachineArrays(NamedTuple):
    """The machine as numba kernels take it (beside `Graph.arrays`): the scalars its rules read."""

    n_devices: int
    """d, the number of devices (int64 in a kernel)."""
    latency: float
    """Seconds added to every transfer (float64)."""
    bandwidth: float
    """Bytes per second of a transfer (float64, inf for free transfers)."""
    sync: bool
    """Whether a transfer occupies its destination device (mode 'sync')."""


@dataclass(frozen=True)
class Machine:
    """d homogeneous devices, an optional per-device memory capacity and a transfer model.

    Attributes:
        n_devices: number of devices d >= 1.
        capacity: bytes of memory per device, or None for unlimited.
        latency: seconds added to every transfer (>= 0).
        bandwidth: bytes per second of a transfer (> 0; inf makes transfers free of size cost).
        mode: 'sync' (a transfer blocks its destination device, REGAL) or 'async' (transfers
            occupy no device, the GFlowNet target models).
    """

    n_devices: int = 1
    capacity: int | None = None
    latency: float = 0.0
    bandwidth: float = math.inf
    mode: TransferMode = "sync"

    def __post_init__(self) -> None:
        if (
            isinstance(self.n_devices, bool)
            or not isinstance(self.n_devices, int)
            or self.n_devices < 1
        ):
            raise MachineError(f"devices must be an integer >= 1, got {self.n_devices!r}")
        if self.n_devices > MAX_DEVICES:
            raise MachineError(
                f"devices must be at most {MAX_DEVICES} (docs/format.md, limits), "
                f"got {self.n_devices:,}"
            )
        if self.capacity is not None and (
            isinstance(self.capacity, bool)
            or not isinstance(self.capacity, int)
            or self.capacity < 0
        ):
            raise MachineError(
                f"capacity must be an integer number of bytes >= 0, got {self.capacity!r}"
            )
        if self.capacity is not None and self.capacity > MAX_CAPACITY:
            raise MachineError(
                f"capacity must be at most 2**63 - 1 bytes (docs/format.md, limits), "
                f"got {self.capacity:,}"
            )
        if not _is_number(self.latency) or not math.isfinite(self.latency) or self.latency < 0:
            raise MachineError(
                f"latency must be a finite number of seconds >= 0, got {self.latency!r}"
            )
        if not _is_number(self.bandwidth) or math.isnan(self.bandwidth) or self.bandwidth <= 0:
            raise MachineError(
                f"bandwidth must be a number of bytes per second > 0, got {self.bandwidth!r}"
            )
        if self.mode not in get_args(TransferMode):
            raise MachineError(f"mode must be 'sync' or 'async', got {self.mode!r}")

    @classmethod
    def from_options(
        cls,
        devices: int,
        capacity: str | None = None,
        latency: float | None = None,
        bandwidth: float | None = None,
        mode: str | None = None,
        recorded: Mapping[str, Any] | None = None,
    ) -> Machine:
        """The machine that command-line options describe, where users write values as text.

        `capacity` is a byte count such as '16GiB' (`parse_bytes`). An option left None takes
        its value from `recorded` (a solution's `machine` field, as `to_json` writes it), else
        the field's default; a bandwidth that is still None is infinite (JSON's null).

        Raises:
            MachineError: a capacity that is not a byte count, or a setting out of range.
        """
        base = recorded or {}
        if bandwidth is None:
            bandwidth = base.get("bandwidth")
        return cls(
            n_devices=devices,
            capacity=parse_bytes(capacity) if capacity is not None else base.get("capacity"),
            latency=latency if latency is not None else base.get("latency", 0.0),
            bandwidth=math.inf if bandwidth is None else bandwidth,
            mode=mode if mode is not None else base.get("mode", "sync"),  # type: ignore[arg-type]
        )

    @cached_property
    def arrays(self) -> MachineArrays:
        """The scalars numba kernels read, with fixed types so that each kernel compiles once."""
        return MachineArrays(
            n_devices=self.n_devices,
            latency=float(self.latency),
            bandwidth=float(self.bandwidth),
            sync=self.mode == "sync",
        )

    def excess(self, peaks: Any) -> Any:
        """Bytes over capacity summed over devices of peaks [..., n_devices] (0 without one).

        The one rule for "how far over" that solvers' rankings, placement rewards and
        reports share.
        """
        peaks = np.asarray(peaks, dtype=np.int64)
        if self.capacity is None:
            return np.zeros(peaks.shape[:-1], dtype=np.int64)
        return np.maximum(peaks - self.capacity, 0).sum(axis=-1)

    def transfer_duration(self, size: int) -> float:
        """Seconds to move `size` bytes: latency + size / bandwidth."""
        return self.latency + size / self.bandwidth

    def to_json(self) -> dict[str, Any]:
        """JSON form, as written in a solution's `machine` field (inf bandwidth as null)."""
        return {
            "devices": self.n_devices,
            "capacity": self.capacity,
            "latency": self.latency,
            "bandwidth": None if math.isinf(self.bandwidth) else self.bandwidth,
            "mode": self.mode,
        }


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
