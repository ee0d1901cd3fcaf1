"""Pictures of solutions: when each event runs on which device, and what each device holds.

`plot_solution` draws one solution: a Gantt chart (one lane per device) over every device's
memory at every step. `compare_solutions` overlays several solutions' memory, one panel per
device, over the fraction of the schedule, so that schedules of different lengths line up. Both
draw a `costmodels.profile.MemoryProfile`, whose numbers are the scorer's.

Memory is drawn over schedule steps, not seconds: docs/format.md section 5 measures it once per
step, in the order of the schedule, and several devices' steps overlap in time. A step is one event,
or the ops of one fusion group, which run as one kernel (section 13): one bar, one memory step.
matplotlib is imported on first use with the Agg backend, so no display is needed and nothing else
pays for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphopt.costmodels.profile import MemoryProfile
from graphopt.errors import GraphoptError
from graphopt.ir.graph import Graph

FORMATS = ("png", "svg", "pdf")
"""Picture formats, named by the output file's suffix."""
DPI = 100
WIDTH = 12.0
"""Figure width in inches; heights grow with the lanes and panels, in steps of 0.5 inch so that
a PNG's pixel size is exactly the figure size times DPI."""
TRANSFER_COLOR = "0.55"
GROUP_EDGE = "black"
"""Outline of a fusion group's bar, which stands for several ops."""
LABEL_POINTS = 7.0
"""Font size of the names on Gantt bars; a name is drawn only where the bar is wide enough."""
_METADATA = {"png": {}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}
"""No dates in the files, so the same solution always gives the same picture."""


def picture_format(path: Path) -> str:
    """The format the output's suffix names.

    Raises:
        GraphoptError: the suffix is not .png, .svg or .pdf.
    """
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise GraphoptError(
            f"{path}: the picture's format comes from its suffix, which must be .png, .svg or "
            f".pdf, not '{path.suffix or '(none)'}'"
        )
    return suffix


def solution_figure_size(lanes: int) -> tuple[float, float]:
    """Inches of `plot_solution`'s figure: the Gantt chart's lanes over a fixed memory panel."""
    return WIDTH, 4.5 + 0.5 * lanes


def compare_figure_size(panels: int) -> tuple[float, float]:
    """Inches of `compare_solutions`' figure: one memory panel per device."""
    return WIDTH, 1.5 + 2.0 * panels


def gantt_lanes(profile: MemoryProfile) -> list[int]:
    """Devices with a lane of their own for async copies, which occupy no device's time."""
    return sorted({int(k) for k in profile.device[~profile.occupies]})


def byte_unit(largest: float) -> tuple[str, float]:
    """The binary unit that reads best for values up to `largest` bytes, and its size."""
    for unit, scale in (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if largest >= scale:
            return unit, scale
    return "bytes", 1.0


def time_unit(largest: float) -> tuple[str, float]:
    """The unit that reads best for times up to `largest` seconds, and its size."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if largest >= scale:
            return unit, scale
    return ("ns", 1e-9) if largest > 0 else ("s", 1.0)


def bytes_text(n: float) -> str:
    """`n` bytes in the unit that reads best, to 4 significant digits."""
    unit, scale = byte_unit(n)
    return f"{n / scale:.4g} {unit}"


def seconds_text(t: float) -> str:
    """`t` seconds in the unit that reads best, to 4 significant digits."""
    unit, scale = time_unit(t)
    return f"{t / scale:.4g} {unit}"


def _color(index: int) -> Any:
    """The index-th colour of matplotlib's tab10 cycle (a device's, or a compared solution's)."""
    import matplotlib

    return matplotlib.colormaps["tab10"](index % 10)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(figure: Any, path: Path) -> None:
    """Writes the figure in the suffix's format, with no date, and frees it."""
    plt = _pyplot()
    kind = picture_format(path)
    try:
        figure.savefig(path, format=kind, dpi=DPI, metadata=_METADATA[kind])
    finally:
        plt.close(figure)


def _short(name: str) -> str:
    """The last part of a dotted or slashed name (a module path's leaf)."""
    return name.replace("/", ".").rstrip(".").rsplit(".", 1)[-1] or name


def _step_labels(graph: Graph, profile: MemoryProfile) -> list[tuple[str, ...]]:
    """What each step's bar may say, longest first.

    An op or a transfer: its name and that name's last part; a fusion group: its op count, as its
    ops' names would not fit one bar.
    """
    labels = []
    for code, ops in zip(profile.order.tolist(), profile.ops.tolist(), strict=True):
        if ops > 1:
            labels.append((f"{ops} fused ops", f"{ops} ops"))
            continue
        if code < graph.n_ops:
            name = graph.op_names[code]
        else:
            name = graph.tensor_names[(code - graph.n_ops) // profile.n_devices]
        labels.append((name, _short(name)))
    return labels


def _label(axes: Any, x: float, row: int, texts: tuple[str, ...], room: float, color: str) -> None:
    """Writes the first of `texts` that `room` points hold on the step's bar, if any."""
    for text in dict.fromkeys(texts):
        if room >= 0.6 * LABEL_POINTS * len(text) + 4:
            axes.text(
                x,
                row,
                text,
                ha="center",
                va="center",
                fontsize=LABEL_POINTS,
                color=color,
                clip_on=True,
            )
            return


def _repeated(codes: np.ndarray) -> np.ndarray:
    """[n] bool: whether each code appeared earlier in `codes` (an op run again)."""
    _, first = np.unique(codes, return_index=True)
    seen = np.ones(codes.shape[0], dtype=bool)
    seen[first] = False
    return seen


def _draw_gantt(axes: Any, graph: Graph, profile: MemoryProfile, lane_points: float) -> None:
    """Draws when each step runs: a lane per device, then one per destination of async copies.

    Ops are bars in their device's colour and sync transfers hatched grey on their destination's
    lane; async copies, which occupy no device, are thin pale bars on their own lanes. A fusion
    group runs as one kernel, so it is one bar, outlined and labelled with its op count. An op
    that runs again (section 15) is cross-hatched.
    """
    from matplotlib.patches import Patch

    d = profile.n_devices
    copy_lanes = {device: d + i for i, device in enumerate(gantt_lanes(profile))}
    span = profile.makespan
    unit, scale = time_unit(span)
    start, finish = profile.start / scale, profile.finish / scale
    lane = np.array(
        [
            int(device) if occupies else copy_lanes[int(device)]
            for device, occupies in zip(profile.device, profile.occupies, strict=True)
        ],
        dtype=np.int64,
    )
    # Points of axes width per unit of time, for whether a name fits on its bar.
    points = WIDTH * 72 * 0.88 / (span / scale if span > 0 else 1.0)
    labels = _step_labels(graph, profile)
    edge = "white" if profile.n_steps <= 400 else "none"
    fused = profile.ops > 1
    first = profile.events[profile.step_ptr[:-1]]
    again = profile.is_op & ~fused & _repeated(first)
    kinds = {
        "op": profile.is_op & ~fused & ~again,
        "recomputed": again,
        "group": fused,
        "transfer": ~profile.is_op,
    }
    for row in range(d + len(copy_lanes)):
        copies = row >= d
        height = 0.45 if copies else 0.8
        for kind, members in kinds.items():
            chosen = np.flatnonzero((lane == row) & members)
            if not chosen.size:
                continue
            transfers = kind == "transfer"
            color = TRANSFER_COLOR if transfers else _color(row)
            lasting = chosen[finish[chosen] > start[chosen]]
            axes.broken_barh(
                list(zip(start[lasting], finish[lasting] - start[lasting], strict=True)),
                (row - height / 2, height),
                facecolors=color,
                edgecolors={
                    "op": edge,
                    "recomputed": "0.15",
                    "group": GROUP_EDGE,
                    "transfer": "0.3",
                }[kind],
                linewidth=1.2 if kind == "group" else 0.4,
                hatch={"transfer": "////", "recomputed": "xx"}.get(kind),
                alpha=0.6 if copies else 1.0,
            )
            instant = chosen[finish[chosen] <= start[chosen]]
            if instant.size:
                axes.plot(
                    start[instant],
                    np.full(instant.size, row),
                    linestyle="none",
                    marker="|",
                    markersize=lane_points * height,
                    color="0.3" if transfers else color,
                )
            for i in lasting:
                room = (finish[i] - start[i]) * points
                text_color = "black" if transfers else "white"
                _label(axes, (start[i] + finish[i]) / 2, row, labels[i], room, text_color)
    labels = [f"dev {k}" for k in range(d)] + [f"copies to dev {k}" for k in copy_lanes]
    axes.set_yticks(range(len(labels)), labels)
    axes.set_ylim(len(labels) - 0.5, -0.5)
    axes.set_xlim(0, span / scale if span > 0 else 1.0)
    axes.set_xlabel(f"time ({unit})")
    axes.grid(axis="x", alpha=0.3)
    handles = [Patch(facecolor=_color(0), label="op (in its device's colour)")]
    if fused.any():
        handles.append(
            Patch(
                facecolor=_color(0),
                edgecolor=GROUP_EDGE,
                linewidth=1.2,
                label="fusion group (one kernel; its op count on it)",
            )
        )
    if again.any():
        handles.append(
            Patch(
                facecolor=_color(0),
                hatch="xx",
                edgecolor="0.15",
                label="recomputed op (it ran before; section 15)",
            )
        )
    if not profile.is_op.all():
        what = (
            "copy (async: occupies no device)"
            if copy_lanes
            else "transfer (sync: blocks its destination)"
        )
        handles.append(Patch(facecolor=TRANSFER_COLOR, hatch="////", edgecolor="0.3", label=what))
    axes.legend(
        handles=handles,
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncol=2,
        fontsize=8,
        frameon=False,
    )


def _mark_peak(axes: Any, x: float, y: float, color: Any, size: float, label: str | None) -> None:
    """A device's peak: a black-edged triangle of its colour, drawn even over the axes' edge."""
    axes.plot(
        x,
        y,
        marker="v",
        markersize=size,
        color=color,
        markeredgecolor="black",
        linestyle="none",
        clip_on=False,
        label=label,
    )


def _draw_memory(axes: Any, profile: MemoryProfile) -> None:
    """Each device's memory per step, its persistent floor shaded, its peak marked."""
    n = profile.n_steps
    top = max(profile.peak_memory, 1)
    capacity = profile.capacity
    shown = capacity is not None and capacity <= 2 * top
    unit, scale = byte_unit(max(top, capacity) if shown else top)
    edges = np.arange(n + 1)
    for k in range(profile.n_devices):
        color = _color(k)
        peak = profile.peak_memory_per_device[k]
        step = int(profile.peak_step[k])
        if profile.persistent[k]:
            axes.fill_between(
                [0, n],
                0,
                profile.persistent[k] / scale,
                color=color,
                alpha=0.12,
                linewidth=0,
            )
            axes.axhline(
                profile.persistent[k] / scale,
                color=color,
                linestyle=":",
                linewidth=1.0,
                label=f"dev {k} persistent {bytes_text(profile.persistent[k])} (shaded)",
            )
        if n:
            axes.stairs(
                profile.memory[:, k] / scale, edges, baseline=None, color=color, linewidth=1.2
            )
            label = f"dev {k} peak {bytes_text(peak)} at step {step + 1}"
            _mark_peak(axes, step + 0.5, peak / scale, color, 8, label)
    if shown:
        axes.axhline(
            capacity / scale,
            color="red",
            linestyle="--",
            linewidth=1.0,
            label=f"capacity {bytes_text(capacity)}",
        )
    elif capacity is not None:
        axes.text(
            0.99,
            0.97,
            f"capacity {bytes_text(capacity)} per device (far above)",
            transform=axes.transAxes,
            ha="right",
            va="top",
            fontsize=8,
        )
    axes.set_xlim(0, max(n, 1))
    axes.set_ylim(0, max(top, capacity if shown else 0) * 1.15 / scale)
    axes.set_xlabel(
        "schedule step (an event, or a fusion group's ops: memory is measured once per step, "
        "docs/format.md sections 5 and 13)"
    )
    axes.set_ylabel(f"memory ({unit})")
    axes.grid(alpha=0.3)
    axes.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=4, fontsize=8, frameon=False)


def plot_solution(graph: Graph, profile: MemoryProfile, path: Path, title: str) -> None:
    """Draws one solution's Gantt chart over its memory per step and writes it to `path`."""
    plt = _pyplot()
    lanes = profile.n_devices + len(gantt_lanes(profile))
    width, height = solution_figure_size(lanes)
    with plt.rc_context({"svg.hashsalt": "graphopt"}):
        figure, (gantt, memory) = plt.subplots(
            2,
            1,
            figsize=(width, height),
            height_ratios=[1.0 + 0.5 * lanes, 3.5],
            layout="constrained",
        )
        figure.suptitle(title, fontsize=11)
        _draw_gantt(gantt, graph, profile, lane_points=0.5 * 72)
        _draw_memory(memory, profile)
        _save(figure, path)


def compare_solutions(
    profiles: Sequence[tuple[str, MemoryProfile]], path: Path, title: str
) -> None:
    """Overlays the labelled solutions' memory per device over the fraction of the schedule."""
    plt = _pyplot()
    panels = max(profile.n_devices for _, profile in profiles)
    top = max(max(profile.peak_memory for _, profile in profiles), 1)
    unit, scale = byte_unit(top)
    styles = ("-", "--", "-.", ":")
    with plt.rc_context({"svg.hashsalt": "graphopt"}):
        figure, axes = plt.subplots(
            panels, 1, figsize=compare_figure_size(panels), sharex=True, layout="constrained"
        )
        axes = np.atleast_1d(axes)
        figure.suptitle(title, fontsize=11)
        for i, (label, profile) in enumerate(profiles):
            color = _color(i)
            style = styles[(i // 10) % len(styles)]
            n = profile.n_steps
            edges = np.arange(n + 1) / max(n, 1)
            fullest = int(np.argmax(profile.peak_memory_per_device))
            for k in range(profile.n_devices):
                ax = axes[k]
                if n:
                    ax.stairs(
                        profile.memory[:, k] / scale,
                        edges,
                        color=color,
                        baseline=None,
                        linestyle=style,
                        linewidth=1.2,
                        label=None
                        if k
                        else f"{label}: peak {bytes_text(profile.peak_memory)} (dev {fullest}), "
                        f"makespan {seconds_text(profile.makespan)}",
                    )
                    step = int(profile.peak_step[k])
                    peak = profile.peak_memory_per_device[k] / scale
                    _mark_peak(ax, (step + 0.5) / n, peak, color, 7, None)
        for k, ax in enumerate(axes):
            ax.set_xlim(0, 1)
            ax.set_ylim(0, top * 1.15 / scale)
            ax.set_ylabel(f"dev {k} memory ({unit})")
            ax.grid(alpha=0.3)
        axes[0].legend(loc="upper left", fontsize=8, framealpha=0.85)
        axes[-1].set_xlabel(
            "fraction of the schedule (step / steps; memory is measured once per step: an "
            "event, or a fusion group's ops, docs/format.md sections 5 and 13); ▼ each "
            "device's peak"
        )
        _save(figure, path)
