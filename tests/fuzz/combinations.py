"""Seeded command lines that combine options a user could type (issue 43).

Not mutated values (`test_fuzz_cli` does those) but combinations: every command, every solver,
both objectives, fusion policies, capacities that fit, are tight or lie below the lower bound,
1 to 8 devices, pins (valid, of an unknown op, to a device the machine lacks), candidates and
targets with a sampling solver and without, policies that do not fit the problem, fine-tuning,
transfer settings, seeds, `--json`, and output paths that are fine, in a missing folder or name a
folder. Each draw is a `Case` that knows what it asked for: the exit statuses right for it
(those of the faults it carries, when it carries any), the files it may write, and what its
results must re-score to, so that the test checks answers, not only the absence of a crash.

Case `i` comes from its own `random.Random(f"{seed}:{i}")`, so a failing case is drawn again
from its index alone, whatever the number of cases of the run. Inputs (`Inputs`) are small
graphs made once per session by the command line itself (`Inputs.commands`, for a repro).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from graphopt.costmodels.roofline import DEVICE_SPECS
from graphopt.ir.generators import FAMILIES
from graphopt.optimize import FUSION_CHOICES
from graphopt.solvers.registry import FINETUNERS, LEARNED, SAMPLERS, SOLVERS

TARGETS = ("noisy:0.1", "bandwidth:1e9", "latency:1e-5")
ZOO_MODELS = ("wavenet-tiny", "resnet-tiny", "gpt2-tiny", "vit-tiny", "lstm-lm-tiny")
"""The zoo's smallest models (under 120 ops in inference), for `zoo export`."""
MAY_REFUSE = frozenset({*LEARNED, "hdp"})
"""Solvers that refuse problems their shipped policy or design does not cover (devices,
objective) with status 2: a refusal from them is not a defect by itself."""
TORCH_SOLVERS = MAY_REFUSE
"""Solvers that import torch: not in the fast tier."""

COMMANDS: dict[str, tuple[float, bool]] = {
    "optimize": (50, True),
    "score": (10, True),
    "generate": (6, True),
    "info": (4, True),
    "import": (3, True),
    "solvers": (1, True),
    "zoo list": (1, True),
    "plot": (5, False),
    "compare": (3, False),
    "bench": (3, False),
    "zoo export": (0.3, False),
    "apply": (0.3, False),
    "measure": (0.3, False),
    "replay": (0.3, False),
}
"""Command: (weight of its draws, whether the fast tier draws it). The others import torch or
matplotlib, or run a whole benchmark."""


class MachineOptions(NamedTuple):
    """Machine options as given on the command line (None: not given)."""

    devices: int | None = None
    capacity: str | None = None
    latency: float | None = None
    bandwidth: float | None = None
    mode: str | None = None


@dataclass(frozen=True)
class GraphInput:
    """A graph file of the session's inputs.

    Attributes:
        path: relative to the working folder.
        ops: its op names.
        fusable: whether its ops carry fusion classes.
        bounds: [d - 1] the lowest and the highest of the peak memory lower bounds without and
            with fusion on d = 1..8 devices: a capacity below the lowest is refused at once (exit
            3), one below the highest may be, depending on the fusion asked for.
        total: bytes of all tensors and scratch memory: any capacity at least this fits.
        model: the zoo model it was exported from, if any.
    """

    path: str
    ops: tuple[str, ...]
    fusable: bool
    bounds: tuple[tuple[int, int], ...]
    total: int
    model: str | None = None


@dataclass(frozen=True)
class SolutionInput:
    """A solution file of the session's inputs, of the graph at `graph`, on `devices`."""

    path: str
    graph: str
    devices: int


@dataclass(frozen=True)
class Inputs:
    """What the draws refer to: graphs, solutions, a folder suite, policy checkpoints.

    Attributes:
        objectives: solver name -> the objectives it optimizes, where its class says so
            without importing torch (absent: unknown).
        commands: the command lines that made the graphs and solutions, in order.
    """

    graphs: tuple[GraphInput, ...]
    solutions: tuple[SolutionInput, ...]
    suite: str
    policies: tuple[str, ...]
    objectives: dict[str, frozenset[str]]
    commands: tuple[tuple[str, ...], ...]

    @property
    def model(self) -> GraphInput | None:
        """The graph exported from the zoo, for apply, measure and replay."""
        return next((g for g in self.graphs if g.model is not None), None)

    def solutions_of(self, graph: str, devices: int | None = None) -> list[SolutionInput]:
        """The solutions of the graph at `graph` (on `devices` only, when given)."""
        return [
            s
            for s in self.solutions
            if s.graph == graph and (devices is None or s.devices == devices)
        ]


@dataclass(frozen=True)
class Case:
    """One command line and what is right for it.

    Attributes:
        index: its draw's index.
        command: the command's name ("optimize", "zoo export", ...).
        argv: the arguments after `graphopt`.
        allowed: exit statuses right for it.
        faults: what makes the request invalid, if anything (then `allowed` holds only their
            statuses, and nothing may be written).
        writes: paths it may create or replace when it succeeds (a folder: anything under it).
        folders: folders to make before it runs; files: files to make before it runs (an
            output that exists already, or names a folder).
        graph, solutions: the inputs it reads; output: the file it writes; candidates: the
            candidates' folder; machine: its machine options; objective, pins: as asked.
        as_json: whether it asked for `--json`.
    """

    index: int
    command: str
    argv: tuple[str, ...]
    allowed: frozenset[int]
    faults: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    graph: str | None = None
    solutions: tuple[str, ...] = ()
    output: str | None = None
    candidates: str | None = None
    machine: MachineOptions | None = None
    objective: str = "peak-memory"
    pins: dict[str, int] = field(default_factory=dict)
    as_json: bool = False

    @property
    def folder(self) -> str:
        """The folder its outputs go to (made before it runs, removed after)."""
        return case_folder(self.index)


def case_folder(index: int) -> str:
    """The folder of case `index`'s outputs, relative to the working folder."""
    return f"c{index}"


@dataclass
class _Draft:
    """A case being drawn: its arguments, faults and expectations so far."""

    command: str
    where: str
    argv: list[str]
    allowed: set[int]
    faults: list[tuple[str, int]] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    details: dict[str, object] = field(default_factory=dict)
    may_refuse: bool = False
    """Whether the solver may refuse the problem (`MAY_REFUSE`), before any fault shows."""

    def add(self, *tokens: object) -> None:
        self.argv.extend(str(t) for t in tokens)

    def fault(self, what: str, status: int = 2) -> None:
        self.faults.append((what, status))

    def flag(self, rng: random.Random, option: str, chance: float) -> bool:
        """Adds `option` with probability `chance`; returns whether it did."""
        if rng.random() < chance:
            self.add(option)
            return True
        return False

    def output(self, rng: random.Random, name: str, option: str = "-o") -> str:
        """An output file: fine, already there, in a missing folder, or naming a folder."""
        path = f"{self.where}/{name}"
        draw = rng.random()
        if draw < 0.04:
            path = f"{self.where}/missing/{name}"
            self.fault(f"{option} in a missing folder")
        elif draw < 0.08:
            self.folders.append(path)
            self.fault(f"{option} names a folder")
        elif draw < 0.15:
            self.files.append(path)
        self.writes.append(path)
        self.add(option, path)
        return path

    def folder_output(self, rng: random.Random, name: str, option: str) -> str:
        """An output folder: new (with missing parents), already there, or an existing file."""
        path = f"{self.where}/{name}"
        draw = rng.random()
        if draw < 0.04:
            self.files.append(path)
            self.fault(f"{option} names a file")
        elif draw < 0.15:
            self.folders.append(path)
        elif draw < 0.25:
            path = f"{self.where}/new/{name}"
        self.writes.append(path)
        self.add(option, path)
        return path

    def case(self, index: int) -> Case:
        faults = tuple(what for what, _ in self.faults)
        allowed = (
            {status for _, status in self.faults} | ({2} if self.may_refuse else set())
            if faults
            else self.allowed
        )
        return Case(
            index=index,
            command=self.command,
            argv=tuple(self.argv),
            allowed=frozenset(allowed),
            faults=faults,
            writes=() if faults else tuple(self.writes),
            folders=tuple(self.folders),
            files=tuple(self.files),
            **self.details,  # type: ignore[arg-type]
        )


def draw_case(seed: int, index: int, inputs: Inputs, light: bool) -> Case:
    """Case `index` of the run seeded `seed`; `light`: only commands and solvers without torch,
    matplotlib or whole benchmarks (the fast tier)."""
    rng = random.Random(f"{seed}:{index}")
    names = [
        name
        for name, (_, cheap) in COMMANDS.items()
        if (cheap or not light) and (name not in ("apply", "measure", "replay") or inputs.model)
    ]
    command = rng.choices(names, weights=[COMMANDS[name][0] for name in names])[0]
    draft = _Draft(command, case_folder(index), command.split(), {0})
    _DRAWS[command](draft, rng, inputs, light)
    return draft.case(index)


def _graph(rng: random.Random, inputs: Inputs, light: bool) -> GraphInput:
    """A graph of the inputs; the zoo's at a low rate (it is larger)."""
    small = [g for g in inputs.graphs if g.model is None]
    if inputs.model is not None and not light and rng.random() < 0.1:
        return inputs.model
    return rng.choice(small)


def _machine(draft: _Draft, rng: random.Random, devices: int | None, capacity: bool) -> None:
    """Transfer options (and a capacity for the solution's own peaks) of score and plot."""
    options = MachineOptions(
        devices,
        rng.choice(("16GiB", "64KiB", str(rng.randint(1, 10**7))))
        if capacity and rng.random() < 0.25
        else None,
        rng.choice((0.0, 1e-6, 1e-3)) if rng.random() < 0.25 else None,
        rng.choice((1e6, 1e9, 2.5e10)) if rng.random() < 0.25 else None,
        rng.choice(("sync", "async")) if rng.random() < 0.25 else None,
    )
    for option, value in zip(
        ("--devices", "--capacity", "--latency", "--bandwidth", "--mode"), options, strict=True
    ):
        if value is not None:
            draft.add(option, value)
    draft.details["machine"] = options


def _optimize(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    graph = _graph(rng, inputs, light)
    solvers = [s for s in SOLVERS if not (light and s in TORCH_SOLVERS)]
    named = rng.random() > 0.1  # else the default solver, auto
    solver = rng.choice(solvers) if named else "auto"
    objective = rng.choice((None, "peak-memory", "makespan"))
    devices = rng.choice((None, None, *range(1, 9)))
    if solver in ("regal", "gas", "idrs") and rng.random() < 0.7:
        devices = 2
    if solver in ("gdp", "gdp-policy", "go", "go-policy", "hdp", "gflownet") and rng.random() < 0.7:
        objective = "makespan"
    if solver in SAMPLERS and rng.random() < 0.7:
        devices = 4
    known = inputs.objectives.get(solver)
    if known is not None and (objective or "peak-memory") not in known and rng.random() < 0.7:
        objective = rng.choice(sorted(known))
    d = 2 if devices is None else devices
    goal = objective or "peak-memory"
    draft.add(graph.path)
    output = draft.output(rng, "s.json")
    if named:
        draft.add("--solver", solver)
    if objective is not None:
        draft.add("--objective", objective)
    if devices is not None:
        draft.add("--devices", devices)
    if known is not None and goal not in known:
        draft.fault(f"{solver} does not optimize {goal}")
    if solver in MAY_REFUSE:
        draft.allowed |= {2, 4}
        draft.may_refuse = True
    if solver == "cp-sat":
        draft.allowed.add(4)
    capacity = _capacity(draft, rng, graph, d)
    latency = rng.choice((0.0, 1e-6, 1e-4, 0.01)) if rng.random() < 0.3 else None
    bandwidth = rng.choice((1e6, 1e9, 2.5e10)) if rng.random() < 0.3 else None
    mode = rng.choice(("sync", "async")) if rng.random() < 0.3 else None
    for option, value in (("--latency", latency), ("--bandwidth", bandwidth), ("--mode", mode)):
        if value is not None:
            draft.add(option, value)
    _budget(draft, rng, solver, light)
    if rng.random() < 0.5:
        draft.add("--seed", rng.randint(0, 1000))
    pins = _pins(draft, rng, graph, d)
    if rng.random() < 0.55:
        draft.add("--fusion", rng.choice(FUSION_CHOICES))
    _learned(draft, rng, inputs, graph, solver)
    as_json = draft.flag(rng, "--json", 0.75)
    draft.details.update(
        graph=graph.path,
        output=output,
        machine=MachineOptions(d, capacity, latency, bandwidth, mode),
        objective=goal,
        pins=pins,
        as_json=as_json,
    )


def _capacity(draft: _Draft, rng: random.Random, graph: GraphInput, devices: int) -> str | None:
    """No capacity, one that any solution fits, a tight one, or one below the lower bound."""
    kind = rng.choices(("none", "fit", "tight", "below"), weights=(50, 15, 20, 15))[0]
    low, high = graph.bounds[devices - 1]
    if kind == "none" or (kind == "below" and low == 0):
        return None
    if kind == "fit":
        capacity = rng.choice((f"{graph.total * rng.randint(1, 4)}", "1TiB"))
    elif kind == "tight":
        capacity = str(int(high * rng.uniform(1.0, 1.5)))
        draft.allowed.add(3)
    else:
        capacity = str(int(low * rng.uniform(0.2, 0.99)))
        draft.fault("capacity below the peak memory lower bound", 3)
    draft.add("--capacity", capacity)
    return capacity


def _budget(draft: _Draft, rng: random.Random, solver: str, light: bool) -> None:
    """Evaluations, seconds or both; seconds always for the solvers that train or prove."""
    seconds = round(rng.uniform(0.2, 0.4 if light else 1.0), 2)
    if solver in MAY_REFUSE or solver == "cp-sat":
        draft.add("--time", seconds)
        if rng.random() < 0.3:
            draft.add("--budget", rng.randint(20, 200))
        return
    draw = rng.random()
    if draw < 0.75:
        draft.add("--budget", rng.randint(20, 80 if light else 200))
    if draw > 0.6:
        draft.add("--time", seconds)


def _pins(draft: _Draft, rng: random.Random, graph: GraphInput, devices: int) -> dict[str, int]:
    """0 to 2 pins: valid, of an unknown op, to a device the machine lacks, or conflicting."""
    pins: dict[str, int] = {}
    for _ in range(rng.choices((0, 1, 2), weights=(70, 20, 10))[0]):
        op, device = rng.choice(graph.ops), rng.randrange(devices)
        kind = rng.choices(("valid", "unknown", "range", "twice"), weights=(85, 5, 5, 5))[0]
        if kind == "unknown":
            op = f"{op}_nowhere"
            draft.fault("pin of an op the graph lacks")
        elif kind == "range":
            device = devices + rng.randint(0, 3)
            draft.fault("pin to a device the machine lacks")
        elif kind == "twice" and devices > 1:
            draft.add("--pin", f"{op}={(device + 1) % devices}")
            draft.fault("op pinned to two devices")
        elif op in pins and pins[op] != device:
            draft.fault("op pinned to two devices")
        draft.add("--pin", f"{op}={device}")
        pins[op] = device
    return pins


def _learned(
    draft: _Draft, rng: random.Random, inputs: Inputs, graph: GraphInput, solver: str
) -> None:
    """--policy, --finetune, --candidates, --top-k and --target, fitting the solver or not."""
    entry = SOLVERS[solver]
    if rng.random() < (0.3 if entry.learned else 0.03):
        choice = rng.random()
        if choice < 0.8:
            draft.add("--policy", rng.choice(inputs.policies))
        elif choice < 0.9:
            draft.add("--policy", graph.path)
            draft.fault("a graph file as policy")
        else:
            draft.add("--policy", f"{draft.where}/none.pt")
            draft.fault("a missing policy file")
        if not entry.learned:
            draft.fault(f"--policy for {solver}, which takes none")
    if rng.random() < (0.3 if solver in FINETUNERS else 0.03):
        draft.add("--finetune", rng.randint(1, 3))
        if solver not in FINETUNERS:
            draft.fault(f"--finetune for {solver}, which does not fine-tune")
    top_k = None
    if rng.random() < (0.6 if entry.samples else 0.03):
        draft.details["candidates"] = draft.folder_output(rng, "candidates", "--candidates")
        if not entry.samples:
            draft.fault(f"--candidates for {solver}, which keeps one solution")
        if rng.random() < 0.7:
            top_k = rng.choice((1, 2, 5, 20, 50)) if rng.random() < 0.93 else 5000
            draft.add("--top-k", top_k)
            if top_k > 1000:
                draft.fault("--top-k above the schedules gflownet samples")
    sampled = "candidates" in draft.details
    if rng.random() < (0.4 if sampled else 0.03):
        for target in rng.sample(TARGETS, rng.randint(1, 2)):
            draft.add("--target", target)
        if not sampled:
            draft.fault("--target without --candidates")


def _score(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    solution, graph = _solution_and_graph(draft, rng, inputs, light)
    draft.add(graph, solution.path)
    devices = None
    if rng.random() < 0.25:
        devices = rng.choice((1, solution.devices, solution.devices + 1))
        if devices < solution.devices:
            draft.allowed.add(2)
    _machine(draft, rng, devices, capacity=True)
    draft.flag(rng, "--reference", 0.15)
    for target in rng.choices(TARGETS, k=rng.choices((0, 1, 2), weights=(80, 15, 5))[0]):
        draft.add("--target", target)
    if rng.random() < 0.1:
        draft.add("--seed", rng.randint(0, 100))
    as_json = draft.flag(rng, "--json", 0.8)
    draft.details.update(graph=graph, solutions=(solution.path,), as_json=as_json)


def _solution_and_graph(
    draft: _Draft, rng: random.Random, inputs: Inputs, light: bool
) -> tuple[SolutionInput, str]:
    """A solution and its graph; at a low rate another graph's, or a missing file."""
    graphs = {g.path for g in inputs.graphs if g.model is None or not light}
    solution = rng.choice([s for s in inputs.solutions if s.graph in graphs])
    graph = solution.graph
    draw = rng.random()
    if draw < 0.04:
        graph = rng.choice(sorted(graphs - {graph}))
        draft.fault("a solution of another graph")
    elif draw < 0.06:
        solution = SolutionInput(f"{draft.where}/none.json", graph, solution.devices)
        draft.fault("a missing solution file")
    return solution, graph


def _plot(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    solution, graph = _solution_and_graph(draft, rng, inputs, light)
    draft.add(graph, solution.path)
    suffix = rng.choice((".png", ".svg", ".pdf")) if rng.random() < 0.95 else ".txt"
    if suffix == ".txt":
        draft.fault("a picture suffix that is no format")
    output = draft.output(rng, f"plot{suffix}")
    devices = solution.devices + 1 if rng.random() < 0.1 else None
    _machine(draft, rng, devices, capacity=True)
    as_json = draft.flag(rng, "--json", 0.6)
    draft.details.update(graph=graph, solutions=(solution.path,), output=output, as_json=as_json)


def _compare(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    solution, graph = _solution_and_graph(draft, rng, inputs, light)
    others = inputs.solutions_of(solution.graph)
    chosen = [solution.path, *(s.path for s in rng.choices(others, k=rng.randint(0, 2)))]
    draft.add(graph, *chosen)
    output = draft.output(rng, f"compare{rng.choice(('.png', '.svg', '.pdf'))}")
    _machine(draft, rng, None, capacity=False)
    as_json = draft.flag(rng, "--json", 0.6)
    draft.details.update(graph=graph, solutions=tuple(chosen), output=output, as_json=as_json)


def _info(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    graph = _graph(rng, inputs, light).path
    if rng.random() < 0.05:
        graph = rng.choice(inputs.solutions).path
        draft.fault("a solution file as graph")
    draft.add(graph)
    draft.details.update(graph=graph, as_json=draft.flag(rng, "--json", 0.7))


def _generate(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    draft.add(rng.choice(sorted(FAMILIES)))
    output = draft.output(rng, f"g{rng.choice(('.json', '.npz'))}")
    draft.add("-n", rng.randint(10, 40))
    if rng.random() < 0.5:
        draft.add("--seed", rng.randint(0, 1000))
    if rng.random() < 0.4:
        draft.add("-p", "fusion=true")
    if rng.random() < 0.05:
        draft.add("-p", "fanciness=3")
        draft.fault("an unknown family parameter")
    draft.details.update(output=output, as_json=draft.flag(rng, "--json", 0.6))


def _import(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    draft.add(_graph(rng, inputs, light).path)
    output = draft.output(rng, f"imported{rng.choice(('.json', '.npz'))}")
    if rng.random() < 0.3:
        draft.add("--name", f"renamed-{rng.randint(0, 99)}")
    if rng.random() < 0.3:
        draft.add("--device", rng.choice(sorted(DEVICE_SPECS)))
    draft.details.update(output=output, as_json=draft.flag(rng, "--json", 0.6))


def _solvers(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    """`graphopt solvers` takes no option."""


def _zoo_list(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    draft.details["as_json"] = draft.flag(rng, "--json", 0.5)


def _zoo_export(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    model = rng.choice(ZOO_MODELS)
    if rng.random() < 0.05:
        model = "no-such-model"
        draft.fault("an unknown zoo model")
    draft.add(model)
    output = draft.output(rng, "zoo.json")
    draft.flag(rng, "--train", 0.3)
    if rng.random() < 0.3:
        draft.add("--device", rng.choice(sorted(DEVICE_SPECS)))
    draft.details.update(output=output, as_json=draft.flag(rng, "--json", 0.6))


def _bench(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    draft.add(inputs.suite)
    cheap = [s for s in SOLVERS if s not in TORCH_SOLVERS and s != "cp-sat"]
    chosen = rng.sample(cheap, rng.randint(1, 3))
    if rng.random() < 0.1:
        chosen.append(rng.choice(("cp-sat", *sorted(TORCH_SOLVERS))))
    if rng.random() < 0.04:
        chosen.append("no-such-solver")
        draft.fault("an unknown solver")
    draft.add("--solvers", ",".join(chosen))
    objective = rng.choice((None, "peak-memory", "makespan"))
    if objective is not None:
        draft.add("--objective", objective)
    devices = rng.choice((None, 1, 2, 3, 4))
    if devices is not None:
        draft.add("--devices", devices)
    if rng.random() < 0.15:
        draft.add("--capacity", rng.choice(("1GiB", "64KiB")))
    draft.add("--budget", rng.randint(10, 40), "--exact-time", round(rng.uniform(0.2, 0.5), 2))
    if rng.random() < 0.3:
        draft.add("--seeds", rng.randint(1, 2))
    if rng.random() < 0.15:
        draft.add("--budgets", "10,20")
    if rng.random() < 0.1:
        histogram = rng.choice(chosen[:1] + ["brkga"])
        draft.add("--histogram", histogram)
        if histogram == "brkga":
            draft.fault("--histogram of brkga against itself")
    if rng.random() < 0.15:
        draft.add("--exact-max-ops", rng.randint(1, 20))
    # Runs that fail (a solver refusing a graph) are recorded and the command exits 1.
    draft.allowed.add(1)
    draft.folder_output(rng, "bench", "-o")
    draft.details["as_json"] = draft.flag(rng, "--json", 0.6)


def _execution(draft: _Draft, rng: random.Random, inputs: Inputs, one_device: bool) -> str:
    """The model argument, --train (a capture the solution is not of) at a low rate, and a
    solution of the zoo graph: on one device when `one_device`, but for a fault at a low rate."""
    model = inputs.model
    assert model is not None and model.model is not None
    draft.add(model.model)
    if rng.random() < 0.1:
        draft.add("--train")
        draft.fault("--train with a solution of the inference graph")
    solutions = inputs.solutions_of(model.path)
    solution = rng.choice(solutions)
    if one_device and solution.devices > 1:
        if rng.random() < 0.2:
            draft.fault("a solution on several devices where one on 1 is asked")
        else:
            solution = rng.choice(inputs.solutions_of(model.path, 1))
    return solution.path


def _apply(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    draft.add(_execution(draft, rng, inputs, one_device=True))
    if rng.random() < 0.4:
        draft.output(rng, "reordered.py", "--code")
    draft.details["as_json"] = draft.flag(rng, "--json", 0.7)


def _measure(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    draft.add(_execution(draft, rng, inputs, one_device=True), "--repeats", rng.randint(1, 2))
    if rng.random() < 0.3:
        draft.add("--seed", rng.randint(0, 9))
    draft.details["as_json"] = draft.flag(rng, "--json", 0.7)


def _replay(draft: _Draft, rng: random.Random, inputs: Inputs, light: bool) -> None:
    draft.add(_execution(draft, rng, inputs, one_device=False))
    draft.details["as_json"] = draft.flag(rng, "--json", 0.7)


_DRAWS: dict[str, Callable[[_Draft, random.Random, Inputs, bool], None]] = {
    "optimize": _optimize,
    "score": _score,
    "generate": _generate,
    "info": _info,
    "import": _import,
    "solvers": _solvers,
    "zoo list": _zoo_list,
    "plot": _plot,
    "compare": _compare,
    "bench": _bench,
    "zoo export": _zoo_export,
    "apply": _apply,
    "measure": _measure,
    "replay": _replay,
}
