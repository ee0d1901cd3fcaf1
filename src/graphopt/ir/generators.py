"""Seeded synthetic computation graphs: the random DAG families of the papers' benchmarks.

The GFlowNet scheduler (Zhang et al., paper 004, appendix E.5) trains on Erdős–Rényi and layered
graphs (Gagrani et al. 2022) and tests on those plus stochastic block model, Watts–Strogatz and
Barabási–Albert graphs. Undirected families become DAGs "by randomly choosing a direction for every
edge in a way that produces no cycles": every edge points from the lower to the higher position of
one uniformly random permutation of the nodes. Op runtimes are U(0, 1) by default, as in paper 004.
REGAL (paper 001, appendix A.1) grows datasets by multiplying each tensor size by a U(0.5, 1.5)
draw, per tensor and per copy; `augment` does that.

Every graph has ops `op{i}`, each producing one tensor `op{i}:0` consumed by all of the op's DAG
successors (a sink's tensor has no consumers: it is a graph output). All randomness comes from one
`np.random.default_rng(seed)`, so a call's arguments fix its result. Defaults give a mean undirected
degree of about 6 (about 3 edges per op) in every family; `graph.attrs` records the family, the
seed and the resolved parameters (JSON values only).
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypedDict, Unpack, get_args

import numba
import numpy as np

from graphopt.errors import GraphoptError
from graphopt.ir.graph import Graph
from graphopt.limits import MAX_TOTAL_BYTES

MAX_SIZE = MAX_TOTAL_BYTES
"""Largest tensor or scratch size a `SizeDistribution` yields: every size is exact as a float64
(a graph's sizes together must stay within the same limit)."""

MAX_GENERATED_OPS = 10_000_000
"""Most ops a generator makes: ten million ops already take gigabytes of edges and seconds."""

SizeKind = Literal["loguniform", "uniform", "constant", "lognormal"]
"""The kinds of `SizeDistribution`."""


def _integer(context: str, name: str, value: Any, low: int, high: int | None = None) -> int:
    """Returns `value` as an int, or raises naming the parameter and its range."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise GraphoptError(f"{context}: {name} must be an integer {bound}, got {name}={value!r}")
    return int(value)


def _number(
    context: str, name: str, value: Any, low: float | None = None, high: float | None = None
) -> float:
    """Returns `value` as a finite float, or raises naming the parameter and its range."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (low is not None and value < low) or (high is not None and value > high):
        if low is None:
            bound = ""
        elif high is None:
            bound = f" >= {low}"
        else:
            bound = f" in [{low}, {high}]"
        raise GraphoptError(
            f"{context}: {name} must be a finite number{bound}, got {name}={value!r}"
        )
    return float(value)


@dataclass(frozen=True)
class SizeDistribution:
    """How tensor sizes (or per-op scratch memory) in bytes are drawn.

    Attributes:
        kind: "loguniform" (log-size uniform between log(low) and log(high), so every order of
            magnitude is equally likely: small and large tensors are both common),
            "uniform" (integers uniform in [low, high]), "constant" (always `value`) or
            "lognormal" (exp(N(mean, sigma)) bytes, capped at `MAX_SIZE`).
        low: smallest size for loguniform (>= 1) and uniform (>= 0).
        high: largest size for loguniform and uniform; at most `MAX_SIZE`.
        value: the size for constant.
        mean: mean of the log of the size (natural log of bytes) for lognormal.
        sigma: standard deviation of the log of the size for lognormal.

    Every field is validated whatever the kind, so a distribution is always safe to record.
    """

    kind: SizeKind = "loguniform"
    low: int = 1024
    high: int = 1048576
    value: int = 65536
    mean: float = 10.0
    sigma: float = 2.0

    def __post_init__(self) -> None:
        context = "SizeDistribution"
        if self.kind not in get_args(SizeKind):
            valid = ", ".join(repr(kind) for kind in get_args(SizeKind))
            raise GraphoptError(f"{context}: kind must be one of {valid}, got kind={self.kind!r}")
        low_floor = 1 if self.kind == "loguniform" else 0
        normalized = {
            "low": _integer(context, "low", self.low, low_floor, MAX_SIZE),
            "high": _integer(context, "high", self.high, 0, MAX_SIZE),
            "value": _integer(context, "value", self.value, 0, MAX_SIZE),
            "mean": _number(context, "mean", self.mean),
            "sigma": _number(context, "sigma", self.sigma, 0.0),
        }
        if normalized["low"] > normalized["high"]:
            raise GraphoptError(
                f"{context}: low must be <= high, got low={self.low!r}, high={self.high!r}"
            )
        # Plain ints and floats, so `asdict` output is JSON-serializable provenance.
        for key, value in normalized.items():
            object.__setattr__(self, key, value)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draws `n` sizes.

        Args:
            rng: the generator all draws come from (none for "constant").
            n: number of sizes.

        Returns:
            [n] int64 non-negative byte sizes.
        """
        if self.kind == "constant":
            return np.full(n, self.value, dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(self.low, self.high, size=n, dtype=np.int64, endpoint=True)
        if self.kind == "loguniform":
            draws = np.exp(rng.uniform(math.log(self.low), math.log(self.high), size=n))
            return np.clip(np.rint(draws), self.low, self.high).astype(np.int64)
        draws = rng.lognormal(self.mean, self.sigma, size=n)
        return np.minimum(np.rint(draws), MAX_SIZE).astype(np.int64)


DEFAULT_SIZES = SizeDistribution()
"""Default tensor sizes: log-uniform between 1 KiB and 1 MiB."""


class CommonOptions(TypedDict, total=False):
    """The keyword arguments every family takes besides its own (defaults in brackets).

    Attributes:
        seed: seed of the one generator every draw comes from [0].
        runtime_low: op runtimes are U(runtime_low, runtime_high) seconds [0].
        runtime_high: see `runtime_low` [1].
        sizes: distribution of tensor sizes [`DEFAULT_SIZES`].
        temp_memory: distribution of per-op scratch bytes; None means all 0 [None].
        persistent_sources: mark the outputs of source ops persistent (weights, inputs) [False].
        fusion: draw fusion fields and time ops by the roofline (`_fusion_fields`) [False].
        name: graph name [None: "{family}_n{n}_s{seed}", family as `FAMILIES` names it].
    """

    seed: int
    runtime_low: float
    runtime_high: float
    sizes: SizeDistribution
    temp_memory: SizeDistribution | None
    persistent_sources: bool
    fusion: bool
    name: str | None


Family = Callable[..., Graph]
"""A family's generator: (n, *, its own keywords, **`CommonOptions`) -> a graph."""


def _family(make: Family) -> Family:
    """Lists `CommonOptions` in the family's signature, with their defaults, after its own.

    `generate` and dataset configs check keywords against a family's signature, which would
    otherwise show only `**options`.
    """
    own = inspect.signature(make)
    common = [
        parameter
        for parameter in inspect.signature(_Common.checked).parameters.values()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    keywords = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    make.__signature__ = own.replace(parameters=[*keywords, *common])  # type: ignore[attr-defined]
    return make


@dataclass(frozen=True)
class _Common:
    """The keyword arguments every family shares, validated, and the graph assembly they drive."""

    family: str
    n: int
    seed: int
    runtime_low: float
    runtime_high: float
    sizes: SizeDistribution
    temp_memory: SizeDistribution | None
    persistent_sources: bool
    name: str
    fusion: bool

    @staticmethod
    def checked(
        family: str,
        n: Any,
        min_n: int = 1,
        *,
        seed: Any = 0,
        runtime_low: Any = 0.0,
        runtime_high: Any = 1.0,
        sizes: Any = DEFAULT_SIZES,
        temp_memory: Any = None,
        persistent_sources: Any = False,
        fusion: Any = False,
        name: Any = None,
    ) -> _Common:
        """Validates the shared arguments before any drawing, so bad input fails fast.

        The keywords after `min_n` are `CommonOptions`, with their defaults.
        """
        n = _integer(family, "n", n, min_n)
        if n > MAX_GENERATED_OPS:
            raise GraphoptError(
                f"{family}: n must be at most {MAX_GENERATED_OPS:,} (the generators' limit), "
                f"got n={n:,}"
            )
        seed = _integer(family, "seed", seed, 0)
        low = _number(family, "runtime_low", runtime_low, 0.0)
        high = _number(family, "runtime_high", runtime_high, 0.0)
        if low > high:
            raise GraphoptError(
                f"{family}: runtime_low must be <= runtime_high, "
                f"got runtime_low={runtime_low!r}, runtime_high={runtime_high!r}"
            )
        if not isinstance(sizes, SizeDistribution):
            raise GraphoptError(f"{family}: sizes must be a SizeDistribution, got {sizes!r}")
        if temp_memory is not None and not isinstance(temp_memory, SizeDistribution):
            raise GraphoptError(
                f"{family}: temp_memory must be a SizeDistribution or None, got {temp_memory!r}"
            )
        if not isinstance(persistent_sources, bool):
            raise GraphoptError(
                f"{family}: persistent_sources must be a bool, got {persistent_sources!r}"
            )
        if not isinstance(fusion, bool):
            raise GraphoptError(f"{family}: fusion must be a bool, got {fusion!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise GraphoptError(f"{family}: name must be a non-empty string or None, got {name!r}")
        return _Common(
            family=family,
            n=n,
            seed=seed,
            runtime_low=low,
            runtime_high=high,
            sizes=sizes,
            temp_memory=temp_memory,
            persistent_sources=persistent_sources,
            name=f"{family}_n{n}_s{seed}" if name is None else name,
            fusion=fusion,
        )

    def build(
        self,
        rng: np.random.Generator,
        src: np.ndarray,
        dst: np.ndarray,
        params: dict[str, Any],
        extra_attrs: dict[str, Any] | None = None,
    ) -> Graph:
        """Turns DAG edges into a graph: one tensor per op, consumed by the op's successors.

        Args:
            rng: the family's generator, after the topology draws; runtimes, sizes and scratch
                memory are drawn from it in that order.
            src: [n_edges] producer op of each edge (no duplicates, acyclic).
            dst: [n_edges] consumer op of each edge.
            params: the family's resolved parameters, recorded in `attrs["params"]`.
            extra_attrs: further JSON values for `attrs` (e.g. layer sizes).

        Returns:
            The validated graph.
        """
        n = self.n
        order = np.lexsort((dst, src))
        consumer_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=consumer_ptr[1:])
        runtime = rng.uniform(self.runtime_low, self.runtime_high, size=n)
        tensor_size = self.sizes.sample(rng, n)
        temp = None if self.temp_memory is None else self.temp_memory.sample(rng, n)
        persistent = np.bincount(dst, minlength=n) == 0 if self.persistent_sources else None
        attrs = {
            "family": self.family,
            "seed": self.seed,
            "params": {
                "n": n,
                **params,
                "runtime_low": self.runtime_low,
                "runtime_high": self.runtime_high,
                "sizes": asdict(self.sizes),
                "temp_memory": None if self.temp_memory is None else asdict(self.temp_memory),
                "persistent_sources": self.persistent_sources,
                "fusion": self.fusion,
            },
            **(extra_attrs or {}),
        }
        op_names = [f"op{i}" for i in range(n)]
        op_extras = None
        if self.fusion:
            runtime, op_extras, attrs["kernel"] = _fusion_fields(
                rng, runtime, tensor_size, src, dst
            )
        return Graph.from_arrays(
            self.name,
            op_names,
            runtime,
            [f"{op}:0" for op in op_names],
            tensor_size,
            np.arange(n, dtype=np.int64),
            consumer_ptr,
            dst[order],
            op_temp_memory=temp,
            tensor_persistent=persistent,
            attrs=attrs,
            op_attrs=op_extras,
        )


FUSION_MIX = {"none": 0.2, "elementwise": 0.5, "reduction": 0.15, "contraction": 0.15}
"""Share of each fusion class among generated ops: about the mix of a transformer's training
step in the zoo, where most ops are pointwise and a fifth neither fuse nor compute."""


def _fusion_fields(
    rng: np.random.Generator,
    runtime: np.ndarray,
    tensor_size: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
) -> tuple[np.ndarray, list[dict[str, Any]], dict[str, float]]:
    """Fusion classes by `FUSION_MIX`, compute times, a kernel, and roofline runtimes.

    The drawn runtime becomes the op's compute time and its runtime becomes its roofline time
    alone on the kernel (max(compute, traffic / bandwidth) + launch), so that a fused group and
    the ops it replaces are timed by one model. The bandwidth moves the median op's traffic
    (its input tensors and its output) in the mean compute time, so about half the ops are
    bound by memory, which fusing relieves; a launch costs a twentieth of the mean compute.
    Drawn after every other field, so the topology and sizes of a seed's graph do not change.

    Returns:
        (runtimes [n], op fields, kernel).
    """
    n = runtime.shape[0]
    classes = rng.choice(list(FUSION_MIX), size=n, p=list(FUSION_MIX.values()))
    compute = runtime.copy()
    traffic = tensor_size.astype(np.float64) + np.bincount(
        dst, weights=tensor_size[src].astype(np.float64), minlength=n
    )
    mean_compute = float(compute.mean()) if n and compute.mean() > 0 else 1.0
    bandwidth = max(float(np.median(traffic)), 1.0) / mean_compute
    launch = 0.05 * mean_compute
    roofline = np.maximum(compute, traffic / bandwidth) + launch
    extras = [
        {"fusion": str(c), "compute_time": float(s)} for c, s in zip(classes, compute, strict=True)
    ]
    return roofline, extras, {"memory_bandwidth": bandwidth, "launch_overhead": launch}


# ------------------------------------------------------------------------------ edge samplers
def _bernoulli_pairs(
    rng: np.random.Generator, lower_start: np.ndarray, lower_count: np.ndarray, p: float
) -> tuple[np.ndarray, np.ndarray]:
    """Keeps each candidate pair independently with probability `p`, in O(kept) time.

    The candidates of node j are the pairs (i, j) with i in
    [lower_start[j], lower_start[j] + lower_count[j]). Drawing the number of kept pairs from
    Binomial(total, p) and then a uniform subset of that size is exactly independent coin flips.

    Returns:
        (i, j): [n_kept] int64 endpoints, i < j.
    """
    offsets = np.zeros(lower_count.shape[0] + 1, dtype=np.int64)
    np.cumsum(lower_count, out=offsets[1:])
    total = int(offsets[-1])
    n_kept = int(rng.binomial(total, p))
    if n_kept == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    index = rng.choice(total, size=n_kept, replace=False, shuffle=False).astype(np.int64)
    j = np.searchsorted(offsets, index, side="right") - 1
    return lower_start[j] + (index - offsets[j]), j


def _orient(
    rng: np.random.Generator, n: int, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Directs each undirected edge from the lower to the higher rank of a random permutation."""
    rank = rng.permutation(n)
    forward = rank[a] < rank[b]
    return np.where(forward, a, b), np.where(forward, b, a)


@numba.njit(cache=True)
def _floyd_parents(
    children: np.ndarray,
    first: np.ndarray,
    count: np.ndarray,
    n_parents: np.ndarray,
    uniforms: np.ndarray,
    n: int,
) -> np.ndarray:
    """Floyd's sampling: for each child, `n_parents` distinct ops of a contiguous range.

    Args:
        children: [c] child op of each draw group.
        first: [c] first op of the child's candidate range.
        count: [c] length of the range (>= n_parents).
        n_parents: [c] how many distinct parents to pick.
        uniforms: [sum(n_parents)] U(0, 1) draws, used one per pick.
        n: number of ops.

    Returns:
        [sum(n_parents)] parent ops, grouped by child in `children` order.
    """
    parents = np.empty(uniforms.shape[0], dtype=np.int64)
    marked_for = np.full(n, -1, dtype=np.int64)
    draw = 0
    for c in range(children.shape[0]):
        child = children[c]
        for j in range(count[c] - n_parents[c], count[c]):
            pick = first[c] + int(uniforms[draw] * (j + 1))
            if marked_for[pick] == child:
                pick = first[c] + j
            marked_for[pick] = child
            parents[draw] = pick
            draw += 1
    return parents


@numba.njit(cache=True)
def _ring_has_edge(
    n: int,
    half_k: int,
    u: int,
    w: int,
    removed: np.ndarray,
    head: np.ndarray,
    next_entry: np.ndarray,
    partner: np.ndarray,
) -> bool:
    """Whether u-w is an edge: a lattice edge not rewired away, or an edge added by rewiring."""
    d = (w - u) % n
    if d <= half_k:
        if not removed[(d - 1) * n + u]:
            return True
    elif n - d <= half_k:
        if not removed[(n - d - 1) * n + w]:
            return True
    entry = head[u]
    while entry >= 0:
        if partner[entry] == w:
            return True
        entry = next_entry[entry]
    return False


@numba.njit(cache=True)
def _rewire_ring(
    n: int,
    half_k: int,
    start: int,
    rewire: np.ndarray,
    uniforms: np.ndarray,
    removed: np.ndarray,
    degree: np.ndarray,
    head: np.ndarray,
    next_entry: np.ndarray,
    partner: np.ndarray,
    n_added: np.ndarray,
) -> int:
    """Watts–Strogatz rewiring of lattice edges `start..`, in networkx's order, until out of draws.

    Lattice edge e joins u = e % n and u + e // n + 1 (mod n). A rewired edge keeps u and gets a
    uniformly random new end w that is neither u nor a current neighbour of u (rejection sampling
    on `uniforms`); when u already neighbours every op, the edge stays. Added edges are kept in
    per-op linked lists (`head`, `next_entry`, `partner`, two entries per edge).

    Returns:
        The first lattice edge not processed: n * half_k when done, else the edge whose draws ran
        out (nothing of it was committed; call again from there with fresh draws).
    """
    draw = 0
    for e in range(start, n * half_k):
        if not rewire[e]:
            continue
        u = e % n
        if degree[u] >= n - 1:
            continue
        while True:
            if draw == uniforms.shape[0]:
                return e
            w = int(uniforms[draw] * n)
            draw += 1
            if w != u and not _ring_has_edge(n, half_k, u, w, removed, head, next_entry, partner):
                break
        removed[e] = True
        degree[(u + e // n + 1) % n] -= 1
        degree[w] += 1
        entry = 2 * n_added[0]
        partner[entry], next_entry[entry], head[u] = w, head[u], entry
        partner[entry + 1], next_entry[entry + 1], head[w] = u, head[w], entry + 1
        n_added[0] += 1
    return n * half_k


@numba.njit(cache=True)
def _attach(
    n: int,
    m: int,
    start: int,
    uniforms: np.ndarray,
    repeated: np.ndarray,
    n_repeated: np.ndarray,
    targets: np.ndarray,
    marked_for: np.ndarray,
) -> int:
    """Barabási–Albert growth of ops `start..`, as networkx does it, until out of draws.

    Each new op picks m distinct targets by drawing uniformly from `repeated` (every op listed
    once per incident edge, i.e. proportionally to degree) and rejecting repeats.

    Returns:
        The first op not attached: n when done, else the op whose draws ran out (nothing of it
        was committed; call again from there with fresh draws).
    """
    draw = 0
    picks = np.empty(m, dtype=np.int64)
    for source in range(start, n):
        picked = 0
        while picked < m:
            if draw == uniforms.shape[0]:
                for i in range(picked):
                    marked_for[picks[i]] = -1
                return source
            target = repeated[int(uniforms[draw] * n_repeated[0])]
            draw += 1
            if marked_for[target] != source:
                marked_for[target] = source
                picks[picked] = target
                picked += 1
        length = n_repeated[0]
        for i in range(m):
            targets[(source - m) * m + i] = picks[i]
            repeated[length + i] = picks[i]
            repeated[length + m + i] = source
        n_repeated[0] = length + 2 * m
    return n


# ------------------------------------------------------------------------------- families
@_family
def erdos_renyi(
    n: int,
    *,
    avg_degree: float = 6.0,
    p: float | None = None,
    **options: Unpack[CommonOptions],
) -> Graph:
    """Erdős–Rényi G(n, p), randomly oriented into a DAG (paper 004, appendix E.5).

    Args:
        n: number of ops (>= 1).
        avg_degree: expected undirected degree; sets p = min(1, avg_degree / (n - 1)).
        p: edge probability in [0, 1]; overrides `avg_degree` when given.
        **options: what every family takes (`CommonOptions`).

    Returns:
        A graph of n ops; expected edges p * n * (n - 1) / 2.
    """
    family = "erdos_renyi"
    common = _Common.checked(family, n, **options)
    n = common.n
    avg_degree = _number(family, "avg_degree", avg_degree, 0.0)
    if p is None:
        p = min(1.0, avg_degree / (n - 1)) if n > 1 else 0.0
    p = _number(family, "p", p, 0.0, 1.0)
    rng = np.random.default_rng(common.seed)
    nodes = np.arange(n, dtype=np.int64)
    a, b = _bernoulli_pairs(rng, np.zeros(n, dtype=np.int64), nodes, p)
    src, dst = _orient(rng, n, a, b)
    return common.build(rng, src, dst, {"avg_degree": avg_degree, "p": p})


@_family
def layered(
    n: int,
    *,
    n_layers: int | None = None,
    fan_in: float = 3.0,
    skip_prob: float = 0.1,
    **options: Unpack[CommonOptions],
) -> Graph:
    """Layered DAG in the style of Gagrani et al. 2022, like a deep network's layers.

    Ops are split into `n_layers` non-empty layers (each gets one op, the rest are spread
    uniformly: sizes 1 + Multinomial(n - n_layers)) and numbered layer by layer, so op indices
    are a topological order; `node_layers` gives each op's layer. Every op after the first layer
    takes 1 + Poisson(fan_in - 1) distinct parents (at most the layer's size) uniformly from the
    previous layer, and, with probability `skip_prob`, one skip parent uniformly from all layers
    before that. With the defaults (sqrt(n) layers, fan_in 3, skip_prob 0.1) that is about
    3 (n - sqrt(n)) + 0.1 n edges, a mean undirected degree of about 6 (5.99 at n = 1000, 6.2 at
    n = 100,000).

    Args:
        n: number of ops (>= 1).
        n_layers: number of layers in [1, n]; default max(1, round(sqrt(n))).
        fan_in: mean number of parents in the previous layer (>= 1).
        skip_prob: probability in [0, 1] that an op of layer 2 or later has a skip parent.
        **options: what every family takes (`CommonOptions`).

    Returns:
        A graph of n ops with `attrs["layer_sizes"]`, the number of ops of each layer.
    """
    family = "layered"
    common = _Common.checked(family, n, **options)
    n = common.n
    if n_layers is None:
        n_layers = max(1, round(math.sqrt(n)))
    n_layers = _integer(family, "n_layers", n_layers, 1, n)
    fan_in = _number(family, "fan_in", fan_in, 1.0)
    skip_prob = _number(family, "skip_prob", skip_prob, 0.0, 1.0)
    rng = np.random.default_rng(common.seed)

    layer_size = 1 + rng.multinomial(n - n_layers, np.full(n_layers, 1.0 / n_layers))
    layer_start = np.zeros(n_layers + 1, dtype=np.int64)
    np.cumsum(layer_size, out=layer_start[1:])
    layer = np.repeat(np.arange(n_layers, dtype=np.int64), layer_size)

    children = np.arange(layer_size[0], n, dtype=np.int64)
    previous = layer[children] - 1
    count = layer_size[previous].astype(np.int64)
    n_parents = np.minimum(1 + rng.poisson(fan_in - 1.0, size=children.shape[0]), count)
    uniforms = rng.random(int(n_parents.sum()))
    parents = _floyd_parents(children, layer_start[previous], count, n_parents, uniforms, n)

    deep = children[previous >= 1]
    skippers = deep[rng.random(deep.shape[0]) < skip_prob]
    reach = layer_start[layer[skippers] - 1]
    skip_parents = (rng.random(skippers.shape[0]) * reach).astype(np.int64)

    src = np.concatenate([parents, skip_parents])
    dst = np.concatenate([np.repeat(children, n_parents), skippers])
    params = {"n_layers": n_layers, "fan_in": fan_in, "skip_prob": skip_prob}
    return common.build(rng, src, dst, params, {"layer_sizes": layer_size.tolist()})


@_family
def stochastic_block(
    n: int,
    *,
    n_blocks: int = 4,
    p_in: float | None = None,
    p_out: float | None = None,
    avg_degree: float = 6.0,
    intra_fraction: float = 0.8,
    **options: Unpack[CommonOptions],
) -> Graph:
    """Stochastic block model (Holland et al. 1983), randomly oriented into a DAG (paper 004).

    Ops are numbered block by block; block sizes differ by at most one (with n < n_blocks some
    blocks are empty) and `node_blocks` gives each op's block. Pairs in one block are joined with
    probability p_in, pairs across blocks with p_out. By default both are chosen so that the
    expected mean undirected degree is `avg_degree` with a share `intra_fraction` of the edges
    inside blocks (each capped at 1): 6 and 80%, i.e. p_in ~ 0.019, p_out ~ 0.0016 at n = 1000.

    Args:
        n: number of ops (>= 1).
        n_blocks: number of blocks (>= 1).
        p_in: probability in [0, 1] of an edge inside a block; default from the two below.
        p_out: probability in [0, 1] of an edge across blocks; default from the two below.
        avg_degree: expected mean undirected degree that sets the default p_in and p_out.
        intra_fraction: expected share in [0, 1] of edges inside blocks, for the defaults.
        **options: what every family takes (`CommonOptions`).

    Returns:
        A graph of n ops with `attrs["block_sizes"]`, the number of ops of each block.
    """
    family = "sbm"
    common = _Common.checked(family, n, **options)
    n = common.n
    n_blocks = _integer(family, "n_blocks", n_blocks, 1)
    avg_degree = _number(family, "avg_degree", avg_degree, 0.0)
    intra_fraction = _number(family, "intra_fraction", intra_fraction, 0.0, 1.0)
    block_size = n // n_blocks + (np.arange(n_blocks) < n % n_blocks).astype(np.int64)
    block_start = np.zeros(n_blocks + 1, dtype=np.int64)
    np.cumsum(block_size, out=block_start[1:])
    intra_pairs = int((block_size * (block_size - 1) // 2).sum())
    inter_pairs = n * (n - 1) // 2 - intra_pairs
    expected_edges = avg_degree * n / 2
    if p_in is None:
        p_in = min(1.0, intra_fraction * expected_edges / intra_pairs) if intra_pairs else 0.0
    if p_out is None:
        p_out = (
            min(1.0, (1 - intra_fraction) * expected_edges / inter_pairs) if inter_pairs else 0.0
        )
    p_in = _number(family, "p_in", p_in, 0.0, 1.0)
    p_out = _number(family, "p_out", p_out, 0.0, 1.0)
    rng = np.random.default_rng(common.seed)

    nodes = np.arange(n, dtype=np.int64)
    own_start = block_start[np.repeat(np.arange(n_blocks), block_size)]
    a_in, b_in = _bernoulli_pairs(rng, own_start, nodes - own_start, p_in)
    a_out, b_out = _bernoulli_pairs(rng, np.zeros(n, dtype=np.int64), own_start, p_out)
    src, dst = _orient(rng, n, np.concatenate([a_in, a_out]), np.concatenate([b_in, b_out]))
    params = {
        "n_blocks": n_blocks,
        "p_in": p_in,
        "p_out": p_out,
        "avg_degree": avg_degree,
        "intra_fraction": intra_fraction,
    }
    return common.build(rng, src, dst, params, {"block_sizes": block_size.tolist()})


@_family
def watts_strogatz(
    n: int,
    *,
    k: int = 6,
    beta: float = 0.1,
    **options: Unpack[CommonOptions],
) -> Graph:
    """Watts–Strogatz small world (1998), randomly oriented into a DAG (paper 004).

    A ring lattice joins each op to its k nearest neighbours; then, in networkx's order, each
    lattice edge (u, u + j) is rewired with probability beta to (u, w), w uniform among the ops
    that are not u and not yet u's neighbours. There are always exactly n * k / 2 edges, so the
    mean undirected degree is exactly k (6 by default).

    Args:
        n: number of ops (>= 1).
        k: number of lattice neighbours of each op; even, >= 0 and < n.
        beta: rewiring probability in [0, 1].
        **options: what every family takes (`CommonOptions`).

    Returns:
        A graph of n ops and n * k / 2 edges.
    """
    family = "watts_strogatz"
    common = _Common.checked(family, n, **options)
    n = common.n
    k = _integer(family, "k", k, 0)
    if k % 2 or k >= n:
        raise GraphoptError(f"{family}: k must be even and < n, got k={k}, n={n}")
    beta = _number(family, "beta", beta, 0.0, 1.0)
    rng = np.random.default_rng(common.seed)

    half_k = k // 2
    n_lattice = n * half_k
    rewire = rng.random(n_lattice) < beta
    n_rewire = int(rewire.sum())
    removed = np.zeros(n_lattice, dtype=np.bool_)
    degree = np.full(n, k, dtype=np.int64)
    head = np.full(n, -1, dtype=np.int64)
    next_entry = np.empty(2 * n_rewire, dtype=np.int64)
    partner = np.empty(2 * n_rewire, dtype=np.int64)
    n_added = np.zeros(1, dtype=np.int64)
    position, chunk = 0, 2 * n_rewire + 64
    while position < n_lattice:
        uniforms = rng.random(chunk)
        position = _rewire_ring(
            n,
            half_k,
            position,
            rewire,
            uniforms,
            removed,
            degree,
            head,
            next_entry,
            partner,
            n_added,
        )
        chunk *= 2

    kept = np.flatnonzero(~removed)
    added_u = partner[1 : 2 * n_added[0] : 2]
    added_w = partner[0 : 2 * n_added[0] : 2]
    a = np.concatenate([kept % n, added_u])
    b = np.concatenate([(kept % n + kept // n + 1) % n, added_w])
    src, dst = _orient(rng, n, a, b)
    return common.build(rng, src, dst, {"k": k, "beta": beta})


@_family
def barabasi_albert(
    n: int,
    *,
    m: int = 3,
    **options: Unpack[CommonOptions],
) -> Graph:
    """Barabási–Albert preferential attachment (2002), randomly oriented into a DAG (paper 004).

    Ops 0..m-1 start unconnected and op m joins all of them (networkx's initial star); each later
    op joins m distinct earlier ops chosen with probability proportional to their degree. That is
    exactly (n - m) * m edges, a mean undirected degree of 2m(n - m)/n (about 6 by default).

    Args:
        n: number of ops (>= 2).
        m: edges added per new op; 1 <= m < n.
        **options: what every family takes (`CommonOptions`).

    Returns:
        A graph of n ops and (n - m) * m edges.
    """
    family = "barabasi_albert"
    common = _Common.checked(family, n, 2, **options)
    n = common.n
    if not isinstance(m, numbers.Integral) or isinstance(m, bool) or not 1 <= m < n:
        raise GraphoptError(f"{family}: m must be >= 1 and < n, got m={m!r}, n={n}")
    m = int(m)
    rng = np.random.default_rng(common.seed)

    targets = np.empty((n - m) * m, dtype=np.int64)
    targets[:m] = np.arange(m)
    repeated = np.empty(2 * (n - m) * m, dtype=np.int64)
    repeated[:m] = np.arange(m)
    repeated[m : 2 * m] = m
    n_repeated = np.array([2 * m], dtype=np.int64)
    marked_for = np.full(n, -1, dtype=np.int64)
    position, chunk = m + 1, 2 * (n - m) * m + 64
    while position < n:
        uniforms = rng.random(chunk)
        position = _attach(n, m, position, uniforms, repeated, n_repeated, targets, marked_for)
        chunk *= 2

    sources = np.repeat(np.arange(m, n, dtype=np.int64), m)
    src, dst = _orient(rng, n, sources, targets)
    return common.build(rng, src, dst, {"m": m})


FAMILIES: dict[str, Family] = {
    "erdos_renyi": erdos_renyi,
    "layered": layered,
    "sbm": stochastic_block,
    "watts_strogatz": watts_strogatz,
    "barabasi_albert": barabasi_albert,
}
"""The synthetic families by name (the names `generate` and `attrs["family"]` use)."""


def generate(family: str, n: int, *, seed: int = 0, **params: Any) -> Graph:
    """Generates a graph of a family named by string (for the CLI and dataset configs).

    Args:
        family: a key of `FAMILIES`.
        n: number of ops.
        seed: seed of the one generator every draw comes from.
        **params: the family's other keyword arguments.

    Raises:
        GraphoptError: for an unknown family or parameter, or an invalid value.
    """
    if family not in FAMILIES:
        raise GraphoptError(
            f"unknown graph family {family!r}; valid families: {', '.join(FAMILIES)}"
        )
    make = FAMILIES[family]
    accepted = [key for key in inspect.signature(make).parameters if key not in ("n", "seed")]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise GraphoptError(
            f"{family}: unknown parameter {unknown[0]!r}; valid parameters: seed, "
            + ", ".join(accepted)
        )
    return make(n, seed=seed, **params)


def augment(
    graph: Graph, copies: int, *, seed: int = 0, low: float = 0.5, high: float = 1.5
) -> list[Graph]:
    """REGAL's dataset augmentation (paper 001, appendix A.1): copies with noisy tensor sizes.

    Each copy multiplies every tensor size by its own U(low, high) draw (one per tensor per copy)
    and rounds to the nearest integer; the topology, runtimes and scratch memory are unchanged.

    Args:
        graph: the graph to copy.
        copies: number of copies (>= 0); REGAL uses 99.
        seed: seed of the one generator every draw comes from.
        low: smallest factor (>= 0).
        high: largest factor (>= low).

    Returns:
        The copies, named "{graph.name}/aug{k}" for k = 0..copies-1.
    """
    context = "augment"
    copies = _integer(context, "copies", copies, 0)
    seed = _integer(context, "seed", seed, 0)
    low = _number(context, "low", low, 0.0)
    high = _number(context, "high", high, 0.0)
    if low > high:
        raise GraphoptError(f"{context}: low must be <= high, got low={low}, high={high}")
    rng = np.random.default_rng(seed)
    factors = rng.uniform(low, high, size=(copies, graph.n_tensors))
    sizes = np.rint(graph.tensor_size * factors).astype(np.int64)
    return [graph.with_tensor_sizes(sizes[k], name=f"{graph.name}/aug{k}") for k in range(copies)]


def _groups(graph: Graph, family: str, key: str) -> np.ndarray:
    """Group index of each op from the contiguous group sizes a family recorded in `attrs`."""
    if graph.attrs.get("family") != family or key not in graph.attrs:
        raise GraphoptError(f"graph '{graph.name}': has no {key}, it was not made by {family}")
    group_size = np.asarray(graph.attrs[key], dtype=np.int64)
    return np.repeat(np.arange(group_size.shape[0], dtype=np.int64), group_size)


def node_layers(graph: Graph) -> np.ndarray:
    """[n_ops] int64 layer of each op of a graph made by `layered` (0 = the sources' layer)."""
    return _groups(graph, "layered", "layer_sizes")


def node_blocks(graph: Graph) -> np.ndarray:
    """[n_ops] int64 block of each op of a graph made by `stochastic_block`."""
    return _groups(graph, "sbm", "block_sizes")
