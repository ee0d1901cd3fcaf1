"""PyTorch importer: inference and training-step graphs from `nn.Module`s, with per-op costs.

Inference graphs come from `torch.export.export` (eval mode, `torch.no_grad()`, static shapes)
decomposed to core ATen with `run_decompositions()`; training steps (forward, backward and a plain
SGD update, no optimizer state) from `make_fx(..., tracing_mode="fake")` of
`torch.func.functional_call` + `torch.autograd.grad`, decomposed by the same table less the
entries autograd cannot trace through (`training_decompositions`: CPU flash attention stays one
op, with its own backward), not functionalized (in-place ops such as batch norm's counter and
dropout's mask stay).
Either way nothing runs: every shape comes from fake tensors in `node.meta["val"]`.

Conversion rules (docs/format.md section 1):
- one op per call node; its outputs are its tensors, sized shape x dtype item size, one per element
  of a tuple result (`getitem` nodes are folded into the producer);
- parameters, buffers, constants and user inputs (from the graph signature) are source ops with one
  persistent tensor per storage, sized by the storage's bytes: a source whose storage an earlier
  one holds (a head tied to its embedding, one weight under two names, a buffer that views
  another) adds no op, and its readers read that tensor, so a storage is counted once;
- ops whose schema says they return a view of an input (`Tensor(a)` returns) allocate nothing:
  they are merged into the tensor they alias, so memory is never counted twice; in-place ops
  (`Tensor(a!)`) run as ops but write into their input, and their readers also depend on them
  through a zero-size tensor;
- `_assert_*`-style checks are dropped; the innermost `nn_module_stack` entry is kept as the op's
  `module` (for layer-wise placements and coarsening);
- what the program returns (inference: its outputs; training step: the loss and the updated
  parameters) are `output` tensors, held until it ends;
- order constraints a real run needs and the data flow does not give are zero-size tensors:
  every reader of a buffer before an in-place write to it runs before the write (and every later
  one after it), and random ops keep their traced order, so every valid order computes the same
  values as the traced one.

`capture_module` and `capture_training_step` also return the traced program, real values for its
inputs and a map between graph ops and fx nodes (`Capture`), which `graphopt.execution` uses to
run a solution's order on the model itself.

Costs: FLOPs from torch's own FLOP formula registry (`torch.utils.flop_counter`), evaluated on the
fake shapes; where it has no formula, pointwise ops count one FLOP per output element, softmax and
normalizations five per input element, reductions one per input element, and data movement
(copies, concatenation, indexing) none. Bytes accessed are the bytes of the distinct inputs and
outputs. Runtimes are the roofline estimate of `graphopt.costmodels.roofline` for a named device.

Modules that `torch.export` rejects can use `method="fx"`: `torch.fx.symbolic_trace` with
`ShapeProp` on fake tensors, one op per traced call.

Whatever torch prints, warns or logs while it traces is silenced (`_quiet_torch`): a failure is
one `ModelImportError` line with the tracer's reason, never torch's traceback or graph dump.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import math
import operator
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, Unpack

import torch
from torch.fx import Graph as FxGraph
from torch.fx import Node
from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

from graphopt._messages import raised
from graphopt.costmodels.roofline import (
    ATTENTION_BACKWARD,
    DEFAULT_DEVICE,
    DeviceSpec,
    annotate_runtimes,
    attention_flops,
    fusion_class,
)
from graphopt.errors import ModelImportError
from graphopt.importers.builder import GraphBuilder
from graphopt.ir.graph import Graph

Loss = Callable[[Any, tuple[torch.Tensor, ...]], torch.Tensor]

_DROPPED = ("_assert", "sym_constrain_range", "_functional_assert")
_AUTOGRAD_UNSAFE = frozenset({"aten._scaled_dot_product_flash_attention_for_cpu.default"})
"""The default table's decompositions whose outputs are not the op's (count, shape or dtype).

Found by running every entry against its op on torch 2.13's OpInfo samples (the 195 entries they
reach: this one alone differs; `empty_like` and `new_empty` only in uninitialized values); of
the entries no sample reaches, the CompositeImplicitAutograd ones are the op's own code, and the
rest are out= and CUDA variants or were checked by hand (`_weight_norm_interface`,
`_fused_rms_norm`, `_euclidean_dist`). The test models' calls are checked on every test run."""
_QUIET_LEVEL = logging.CRITICAL + 1
"""Above every level torch logs at: what `_quiet_torch` sets its loggers to."""
_SOFTMAX_AND_NORMS = (
    "_softmax",
    "_log_softmax",
    "native_layer_norm",
    "native_batch_norm",
    "_native_batch_norm_legit",
    "native_group_norm",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "native_layer_norm_backward",
    "native_batch_norm_backward",
    "native_group_norm_backward",
)
_REDUCTIONS = (
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "prod",
    "var",
    "var_mean",
    "std",
    "logsumexp",
    "argmax",
    "argmin",
    "any",
    "all",
    "norm",
    "linalg_vector_norm",
    "cumsum",
)


@dataclass
class _Value:
    """What a consumer of an fx node reads: per output, the tensors it must depend on.

    The first tensor of each list is the one whose storage the value lives in (a view's list
    starts with its base's, an in-place result's with the buffer it wrote).
    """

    outputs: list[list[int]] = field(default_factory=list)


@dataclass(frozen=True)
class Capture:
    """An imported graph with the fx program it came from, so solutions can be applied to it.

    Attributes:
        graph: the computation graph (what solvers see).
        program: the captured `GraphModule` in core ATen; `program(*args)` runs it.
        args: real values for the program's inputs: parameters, buffers and constants as the
            module holds them, then the example inputs (for a training step, its dicts of
            parameters and buffers, then the inputs).
        inputs: the positions in `args` of the example inputs (what a user feeds).
        node_ops: every placeholder and call node of `program` -> the graph op it became, or the
            op whose value it merely views or unpacks (merged views, tuple getitems); None for
            dropped runtime checks.
        op_nodes: every graph op -> the fx node it came from.
        tensor_values: every graph tensor that holds data -> (fx node, output index) of the
            value it is (index 0 for a node with one result); order-only and in-place marker
            tensors (size 0, no value of their own) are absent.
        writes: every in-place op's node -> the input node whose storage it writes (its result
            is that storage, not a value of its own).
        mutates: every node that writes inputs in place -> those input nodes (in-place ops,
            and ops such as batch norm that update an input and return something else).
        aliases: every placeholder whose storage an earlier placeholder's op holds (a tied
            weight, a buffer that views another) -> that placeholder; it is no op of its own.
        eager: what the program computes, run in eager PyTorch on the module itself (its own
            kernels and autograd, nothing decomposed) from the same arguments: `eager(args)`
            returns what `program(*args)` returns, None at the outputs it does not compute (an
            exported program's buffer updates). The reference for the program's values; None
            for a program captured without its module (torch.compile's graphs).
    """

    graph: Graph
    program: torch.fx.GraphModule
    args: tuple[Any, ...]
    inputs: tuple[int, ...]
    node_ops: Mapping[str, str | None]
    op_nodes: Mapping[str, str]
    tensor_values: Mapping[str, tuple[str, int]]
    writes: Mapping[str, str]
    mutates: Mapping[str, tuple[str, ...]]
    aliases: Mapping[str, str]
    eager: Callable[[tuple[Any, ...]], Any] | None = None


class _Conversion:
    """The state of one walk over an fx graph: values, the node map and ordering constraints.

    Besides data edges it adds two kinds of zero-size dependencies that a real run needs and the
    data flow alone does not give: every earlier reader of a buffer before an in-place write to
    it (so no order moves a write ahead of a read), and the random ops in their traced order (so
    every order draws the same random numbers).
    """

    def __init__(self, name: str, attrs: dict[str, Any]) -> None:
        self.builder = GraphBuilder(name, attrs)
        self.values: dict[Node, _Value] = {}
        self.node_ops: dict[str, str | None] = {}
        self.op_nodes: dict[str, str] = {}
        self.tensor_values: dict[str, tuple[str, int]] = {}
        self.writes: dict[str, str] = {}
        self.mutates: dict[str, tuple[str, ...]] = {}
        self.readers: dict[int, list[int]] = {}
        self.last_write: dict[int, tuple[int, int]] = {}
        self.last_random: int | None = None
        self.storages: dict[StorageWeakRef, int] = {}  # a source's storage -> its tensor
        self.aliases: dict[str, str] = {}

    def add_op(self, node: Node | None, label: str, **attrs: Any) -> int:
        """Adds the op of `node` (None: an op with no node, like an fx module's parameter)."""
        op = self.builder.add_op(label, **attrs)
        if node is not None:
            self.node_ops[node.name] = self.builder.op_names[op]
            self.op_nodes[self.builder.op_names[op]] = node.name
        return op

    def add_value(
        self, node: Node | None, index: int, label: str, size: int, op: int, **attrs: Any
    ) -> int:
        """Adds the tensor holding `node`'s result `index` and records which value it is."""
        tensor = self.builder.add_tensor(label, size, op, **attrs)
        if node is not None:
            self.tensor_values[self.builder.tensor_names[tensor]] = (node.name, index)
        return tensor

    def alias(self, node: Node | None, label: str, tensor: int) -> _Value:
        """A source whose storage persistent `tensor` already holds: its readers read that."""
        builder = self.builder
        op = builder.tensor_producer[tensor]
        builder.op_attrs[op].setdefault("aliases", []).append(label)
        if node is not None:
            self.node_ops[node.name] = builder.op_names[op]
            held = self.tensor_values.get(builder.tensor_names[tensor])
            if held is not None:
                self.aliases[node.name] = held[0]
        return _Value([[tensor]])

    def merge(self, node: Node, into: Node | None) -> None:
        """Records a node that became no op of its own, belonging to `into`'s op."""
        self.node_ops[node.name] = None if into is None else self.node_ops.get(into.name)

    def add_reads(self, op: int, inputs: list[_Value]) -> None:
        """Makes `op` a consumer of every tensor its input values stand for.

        A value taken (as a view) before an in-place write to its storage and read after it
        does not list the write's tensor: the read then gets an explicit edge from the write.
        """
        for value in inputs:
            for tensors in value.outputs:
                for tensor in tensors:
                    self.builder.add_consumer(tensor, op)
                if not tensors:
                    continue
                self.readers.setdefault(tensors[0], []).append(op)
                writer, done = self.last_write.get(tensors[0], (op, -1))
                if done not in tensors:
                    self.after(writer, op, "write")

    def mark_outputs(self, output: Node) -> None:
        """Marks what the program returns as graph outputs: held until it ends."""
        for returned in output.all_input_nodes:
            for tensors in self.values[returned].outputs if returned in self.values else ():
                if tensors:
                    self.builder.mark_output(tensors[0])

    def after(self, earlier: int, op: int, label: str) -> None:
        """A zero-size tensor from `earlier` to `op`: an order constraint without data."""
        if earlier != op:
            builder = self.builder
            tensor = builder.add_tensor(f"{builder.op_names[earlier]}:{label}", 0, earlier)
            builder.add_consumer(tensor, op)

    def write(self, op: int, storage: int, done: int) -> None:
        """`op` writes `storage` in place (`done` marks it written).

        Every reader so far runs before it, every later one after it.
        """
        for reader in dict.fromkeys(self.readers.pop(storage, [])):
            self.after(reader, op, "read")
        self.last_write[storage] = (op, done)

    def draw(self, op: int) -> None:
        """`op` draws random numbers: it runs after the previous random op."""
        if self.last_random is not None:
            self.after(self.last_random, op, "rng")
        self.last_random = op


def _is_random(target: Any) -> bool:
    return torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())


def import_module(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    *,
    name: str | None = None,
    device: str | DeviceSpec = DEFAULT_DEVICE,
    method: Literal["export", "fx"] = "export",
    strict: bool = False,
) -> Graph:
    """The inference graph of `module` on `example_inputs`, costed for `device`.

    Args:
        module: the model; traced in eval mode (each submodule's mode restored afterwards).
        example_inputs: positional tensors with the static shapes to import at.
        name: graph name (default: the module's class name).
        device: roofline device spec name or object for the runtimes.
        method: "export" (torch.export + core ATen) or "fx" (symbolic_trace + ShapeProp).
        strict: torch.export's strict mode (TorchDynamo tracing) instead of non-strict.

    Raises:
        ModelImportError: the exporter's reason in one line, with a hint.
    """
    if method == "fx":
        inputs = tuple(example_inputs)
        name = name or type(module).__name__
        with _modes_kept(module), _quiet_torch():
            module.eval()
            builder = _trace_fx(module, inputs, name)
        return annotate_runtimes(builder.build(), device)
    if method != "export":
        raise ModelImportError(f"unknown import method '{method}' (known: export, fx)")
    return capture_module(module, example_inputs, name=name, device=device, strict=strict).graph


def capture_module(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    *,
    name: str | None = None,
    device: str | DeviceSpec = DEFAULT_DEVICE,
    strict: bool = False,
) -> Capture:
    """The inference graph of `module` (as `import_module` with torch.export) and its program.

    Raises:
        ModelImportError: the exporter's reason in one line, with a hint.
    """
    inputs = tuple(example_inputs)
    name = name or type(module).__name__
    try:
        with _modes_kept(module), torch.no_grad(), _quiet_torch():
            module.eval()
            program = torch.export.export(module, inputs, strict=strict).run_decompositions()
    except Exception as error:  # the exporter raises many unrelated types
        raise ModelImportError(
            f"torch.export failed for {name}: {raised(error)} "
            f"(hint: try {'strict=False' if strict else 'method=fx'})"
        ) from None
    kinds: dict[str, tuple[str, str | None]] = {}
    args: list[Any] = []
    user_inputs = iter(inputs)
    for spec in program.graph_signature.input_specs:
        kind = spec.kind.name.lower()
        if hasattr(spec.arg, "name"):
            kinds[spec.arg.name] = (kind, spec.target)
        if kind == "user_input":
            args.append(next(user_inputs))
        elif spec.target in program.state_dict:
            args.append(program.state_dict[spec.target])
        else:
            args.append(program.constants[spec.target])
    conversion = _convert(program.graph, kinds, name, {"source": "torch.export"})
    positions = tuple(
        i
        for i, spec in enumerate(program.graph_signature.input_specs)
        if spec.kind.name == "USER_INPUT"
    )
    returned = tuple(
        spec.kind.name == "USER_OUTPUT" for spec in program.graph_signature.output_specs
    )

    def eager(args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The module in eval mode without gradients, its outputs where the program's are."""
        with _modes_kept(module), torch.no_grad():
            module.eval()
            outputs = iter(tree_leaves(module(*(args[i] for i in positions))))
        return tuple(next(outputs) if user else None for user in returned)

    return _capture(conversion, program.graph_module, tuple(args), positions, device, eager)


def capture_graph_module(
    program: torch.fx.GraphModule, *, name: str, device: str | DeviceSpec = DEFAULT_DEVICE
) -> Capture:
    """The graph of an ATen-level `GraphModule` whose nodes carry fake values (`meta["val"]`).

    What torch.compile's AOT autograd hands a backend: parameters are lifted to placeholders, so
    every placeholder is a persistent input. The capture has no argument values (`args` is
    empty): the caller runs the program on its own.

    Raises:
        ModelImportError: a node without a recorded shape, or one the importer cannot size.
    """
    placeholders = [node for node in program.graph.nodes if node.op == "placeholder"]
    kinds = {node.name: ("user_input", node.name) for node in placeholders}
    conversion = _convert(program.graph, kinds, name, {"source": "torch.compile"})
    return _capture(conversion, program, (), tuple(range(len(placeholders))), device)


def _capture(
    conversion: _Conversion,
    program: torch.fx.GraphModule,
    args: tuple[Any, ...],
    inputs: tuple[int, ...],
    device: str | DeviceSpec,
    eager: Callable[[tuple[Any, ...]], Any] | None = None,
) -> Capture:
    graph = annotate_runtimes(conversion.builder.build(), device)
    return Capture(
        graph,
        program,
        args,
        inputs,
        conversion.node_ops,
        conversion.op_nodes,
        conversion.tensor_values,
        conversion.writes,
        conversion.mutates,
        conversion.aliases,
        eager,
    )


class TrainingStepOptions(TypedDict, total=False):
    """The keywords of a training step's import, `capture_training_step`'s (and its defaults).

    `import_training_step` passes them on as they are, so they are declared once, there.
    """

    loss: Loss | None
    learning_rate: float
    name: str | None
    device: str | DeviceSpec


def import_training_step(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    **options: Unpack[TrainingStepOptions],
) -> Graph:
    """The graph of one training step: forward, loss, backward and an SGD update of every parameter.

    Args:
        module: the model; traced in train mode (each submodule's mode restored afterwards).
        example_inputs: positional tensors with static shapes.
        **options: `TrainingStepOptions`, keywords only:
            loss: scalar loss from (output, inputs); default the mean of the output (of its
                first item when it is a tuple, list or dict).
            learning_rate: step size of the update `p - lr * grad` (no optimizer state;
                default 1e-3).
            name: graph name (default: "<class name>-train").
            device: roofline device spec for the runtimes.

    Raises:
        ModelImportError: the tracer's reason in one line.
    """
    return capture_training_step(module, example_inputs, **options).graph


def capture_training_step(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    *,
    loss: Loss | None = None,
    learning_rate: float = 1e-3,
    name: str | None = None,
    device: str | DeviceSpec = DEFAULT_DEVICE,
) -> Capture:
    """The training step's graph (as `import_training_step`) and its traced program.

    The program returns the loss and the updated parameters: the graph's outputs.

    Raises:
        ModelImportError: the tracer's reason in one line.
    """
    inputs = tuple(example_inputs)
    name = name or f"{type(module).__name__}-train"
    loss = loss or _mean_of_output
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    trainable = [key for key, value in params.items() if value.requires_grad]
    if not trainable:
        raise ModelImportError(
            f"{name}: the module has no trainable parameters, so a training step would update "
            "nothing (hint: import the inference graph)"
        )

    def step(
        params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], *inputs: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        output = torch.func.functional_call(module, (params, buffers), inputs)
        value = loss(output, inputs)
        grads = torch.autograd.grad(value, [params[key] for key in trainable])
        updated = [params[key] - learning_rate * g for key, g in zip(trainable, grads, strict=True)]
        return (value, *updated)

    spans: list[tuple[int, str | None]] = []
    try:
        with _modes_kept(module), _recording_module_spans(module, spans), _quiet_torch():
            module.train()
            traced = make_fx(
                step, decomposition_table=training_decompositions(), tracing_mode="fake"
            )(params, buffers, *inputs)
    except Exception as error:  # the tracer raises many unrelated types
        raise ModelImportError(
            f"tracing the training step of {name} failed: {raised(error)} "
            "(hint: import the inference graph, or simplify the loss)"
        ) from None
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    labels = (
        [("parameter", key) for key in params]
        + [("buffer", key) for key in buffers]
        + [("user_input", f"input_{i}") for i in range(len(inputs))]
    )
    kinds = {node.name: label for node, label in zip(placeholders, labels, strict=True)}
    _attach_module_paths(traced.graph, spans)
    conversion = _convert(traced.graph, kinds, name, {"source": "make_fx", "training": True})
    detached = {key: value.detach() for key, value in params.items()}
    args = (detached, dict(buffers), *inputs)

    def eager(args: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        """The same step on real tensors: the module's own kernels and autograd, in train mode."""
        given, given_buffers, *given_inputs = args
        leaves = {
            key: value.detach().requires_grad_(key in trainable) for key, value in given.items()
        }
        with _modes_kept(module), torch.enable_grad():
            module.train()
            return tuple(value.detach() for value in step(leaves, given_buffers, *given_inputs))

    return _capture(conversion, traced, args, tuple(range(2, len(args))), device, eager)


def training_decompositions() -> dict[Any, Callable[..., Any]]:
    """torch.export's default decompositions less those autograd cannot trace through.

    make_fx and AOT autograd decompose below autograd, which still records the op's own
    backward, fed with what the decomposition returned. A decomposition must then return the
    op's outputs; CPU flash attention's returns the attention weights [N, H, L, S] where the op
    returns the logsumexp [N, H, L] its backward reads, and the backward computes garbage. Those
    ops (`_AUTOGRAD_UNSAFE`) stay whole, and their own backward runs.
    """
    table = torch.export.default_decompositions()
    return {op: rule for op, rule in table.items() if str(op) not in _AUTOGRAD_UNSAFE}


@contextlib.contextmanager
def _modes_kept(module: torch.nn.Module) -> Iterator[None]:
    """Restores the train/eval mode of `module` and of each of its submodules afterwards."""
    modes = [(submodule, submodule.training) for submodule in module.modules()]
    try:
        yield
    finally:
        for submodule, training in modes:
            submodule.training = training


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """Silences what torch prints, warns and logs while it traces a module.

    Before raising, a failed export or trace prints the partial graph or a traceback and logs
    from deep inside torch (torch._dynamo, torch.export, fx passes, fake tensors, symbolic
    shapes); successful ones warn about torch's own internals. The importer reports a failure
    itself in one line, which that output would bury. So, for the duration only: `sys.stdout`
    and `sys.stderr` go to a discarded buffer (what the traced code prints is lost too), every
    warning is ignored, and every `torch` logger (each has its own stderr handler and does not
    propagate) is raised above CRITICAL. Logging is left alone when `TORCH_LOGS` is set: whoever
    set it asked for torch's logs.
    """
    loggers = [] if "TORCH_LOGS" in os.environ else _torch_loggers()
    levels = [logger.level for logger in loggers]
    discarded = io.StringIO()
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(discarded),
        contextlib.redirect_stderr(discarded),
    ):
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(_QUIET_LEVEL)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)


def _torch_loggers() -> list[logging.Logger]:
    """The `torch` logger and those below it with a level of their own (the rest inherit it)."""
    below = [
        logger
        for key, logger in list(logging.Logger.manager.loggerDict.items())
        if key.startswith("torch.")
        and isinstance(logger, logging.Logger)
        and logger.level != logging.NOTSET
    ]
    return [logging.getLogger("torch"), *below]


@contextlib.contextmanager
def _recording_module_spans(
    module: torch.nn.Module, spans: list[tuple[int, str | None]]
) -> Iterator[None]:
    """Records (graph size, submodule path entered / None on exit) while make_fx traces.

    make_fx keeps no `nn_module_stack` when parameters come through `functional_call`, so
    forward hooks note how many nodes the tracer's graph had when each submodule started and
    finished: the forward ops created in between belong to it.
    """

    def size() -> int | None:
        mode = get_proxy_mode()
        return None if mode is None else len(mode.tracer.graph.nodes)

    def enter(path: str) -> Callable[..., None]:
        def hook(*_: Any) -> None:
            if (count := size()) is not None:
                spans.append((count, path))

        return hook

    def leave(*_: Any) -> None:
        if (count := size()) is not None:
            spans.append((count, None))

    handles = []
    for path, submodule in module.named_modules():
        if path:
            handles.append(submodule.register_forward_pre_hook(enter(path)))
            handles.append(submodule.register_forward_hook(leave))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _attach_module_paths(graph: FxGraph, spans: list[tuple[int, str | None]]) -> None:
    """Sets each forward node's innermost module path from the recorded spans, as export does."""
    if not spans:  # a module without submodules: no op belongs to one
        return
    nodes = list(graph.nodes)
    stack: list[str] = []
    for (start, path), (end, _) in zip(spans, [*spans[1:], (len(nodes), None)], strict=True):
        if path is None:
            stack.pop()
        else:
            stack.append(path)
        for node in nodes[start:end] if stack else ():
            node.meta["nn_module_stack"] = {stack[-1]: (stack[-1], "")}


def _mean_of_output(output: Any, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The default loss: the mean of the output, or of its first item (tuple, list or dict)."""
    if isinstance(output, Mapping):
        output = list(output.values())
    first = output[0] if isinstance(output, list | tuple) else output
    return first.float().mean()


def _convert(
    graph: FxGraph, kinds: dict[str, tuple[str, str | None]], name: str, attrs: dict[str, Any]
) -> _Conversion:
    """Walks an ATen-level fx graph once and builds ops, tensors, edges and the node map."""
    conversion = _Conversion(name, attrs)
    values = conversion.values
    for node in graph.nodes:
        if node.op in ("placeholder", "get_attr"):
            kind, target = kinds.get(node.name, ("constant", None))
            values[node] = _source(conversion, node, kind, target or node.name)
        elif node.op == "call_function":
            target = node.target
            if target is operator.getitem:
                values[node] = _Value([values[node.args[0]].outputs[node.args[1]]])
                conversion.merge(node, node.args[0])
            elif _is_dropped(target):
                conversion.merge(node, None)
            else:
                values[node] = _call(conversion, node)
        elif node.op == "output":
            conversion.mark_outputs(node)
        else:
            raise ModelImportError(f"op '{node.name}': unsupported fx node kind '{node.op}'")
    return conversion


def _source(conversion: _Conversion, node: Node, kind: str, label: str) -> _Value:
    if node.op == "get_attr" and "val" not in node.meta:
        raise ModelImportError(
            f"op '{node.name}': a subgraph of a control-flow op (torch.cond, while_loop, ...); "
            "only straight-line programs can be imported"
        )
    value = _fake_value(node)
    if not isinstance(value, torch.Tensor):
        raise ModelImportError(
            f"input '{label}': only tensor inputs can be imported, got {type(value).__name__}"
        )
    return _source_op(conversion, node, label, kind, value)


def _source_op(
    conversion: _Conversion, node: Node | None, label: str, kind: str, value: torch.Tensor
) -> _Value:
    """A source op (parameter, buffer, input) producing one persistent tensor: its storage.

    What stays resident is the storage, not the view a name gives of it, so the tensor has the
    storage's bytes, and a later source on the same storage is an alias of it (`alias`).
    """
    builder = conversion.builder
    storage = StorageWeakRef(value.untyped_storage())
    if storage in conversion.storages:
        return conversion.alias(node, label, conversion.storages[storage])
    op = conversion.add_op(node, label, kind=kind)
    tensor_label = f"{builder.op_names[op]}:0"
    _nbytes(value, tensor_label)  # refuses a dynamic shape, naming the tensor
    size = int(value.untyped_storage().nbytes())
    tensor = conversion.add_value(node, 0, tensor_label, size, op, persistent=True, **_meta(value))
    conversion.storages[storage] = tensor
    return _Value([[tensor]])


def _call(conversion: _Conversion, node: Node) -> _Value:
    """One call node: a view is merged into its input; anything else becomes an op."""
    values, builder = conversion.values, conversion.builder
    result = _fake_value(node)
    inputs = [values[n] for n in node.all_input_nodes if n in values]
    aliased = _aliased_argument(node)
    base = values[aliased[0]].outputs[0] if aliased is not None and aliased[0] in values else []
    if aliased is not None and not aliased[1]:
        conversion.merge(node, aliased[0])
        count = len(result) if isinstance(result, list | tuple) else 1
        return _Value([list(base) for _ in range(count)])

    results = list(result) if isinstance(result, list | tuple) else [result]
    for item in results:
        if item is not None and not isinstance(item, torch.Tensor):
            raise ModelImportError(
                f"op '{node.name}' ({node.target}): returns {type(item).__name__}, not a tensor; "
                "dynamic shapes and data-dependent ops are not supported"
            )
    sizes = [
        _nbytes(item, f"{node.name}:{index}") if item is not None else 0
        for index, item in enumerate(results)
    ]
    op = conversion.add_op(node, node.name, **_op_attrs(node, results))
    conversion.add_reads(op, inputs)
    if _is_random(node.target):
        conversion.draw(op)
    mutated = [n for n in _mutated_inputs(node) if n in values]
    if mutated:
        conversion.mutates[node.name] = tuple(n.name for n in mutated)
    if aliased is not None:  # in place: readers use the input, after this op has written it
        done = builder.add_tensor(f"{builder.op_names[op]}:done", 0, op)
        conversion.writes[node.name] = aliased[0].name
        if base:
            conversion.write(op, base[0], done)
        return _Value([[*base, done]])
    for written in mutated:  # written but not returned: later readers get an edge from `op`
        for tensors in values[written].outputs[:1]:
            if tensors:
                conversion.write(op, tensors[0], -1)
    outputs = []
    for index, item in enumerate(results):
        if item is None:
            outputs.append([])
            continue
        label = f"{builder.op_names[op]}:{index}"
        outputs.append([conversion.add_value(node, index, label, sizes[index], op, **_meta(item))])
    return _Value(outputs)


@functools.cache
def _is_dropped(target: Any) -> bool:
    """Whether call nodes of `target` are runtime checks (`_assert_*` and the like), not ops.

    This and the other per-target facts below are cached: a graph calls the same few dozen
    targets thousands of times, and their names and schemas never change.
    """
    text = str(target)
    return any(part in text for part in _DROPPED)


@functools.cache
def _alias_candidates(target: Any) -> tuple[bool, tuple[tuple[int, str], ...]] | None:
    """(written in place, (position, name) of each argument the result may alias), or None.

    None when the op's schema does not return an alias of an input (or it has no schema).
    """
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.returns or schema.returns[0].alias_info is None:
        return None
    write = schema.returns[0].alias_info.is_write
    arguments = tuple(
        (position, argument.name)
        for position, argument in enumerate(schema.arguments)
        if argument.alias_info is not None and argument.alias_info.is_write == write
    )
    return write, arguments


@functools.cache
def _written_arguments(target: Any) -> tuple[tuple[int, str], ...]:
    """(position, name) of each argument the op's schema writes (`Tensor(a!)`)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return ()
    return tuple(
        (position, argument.name)
        for position, argument in enumerate(schema.arguments)
        if argument.alias_info is not None and argument.alias_info.is_write
    )


def _mutated_inputs(node: Node) -> list[Node]:
    """The input nodes an op writes in place, whether or not it returns them.

    Batch norm in training writes its running statistics and returns other tensors.
    """
    written = list(_written_arguments(node.target))
    if node.target is torch.ops.aten.native_batch_norm.default and _argument(node, 5, "training"):
        written += [(3, "running_mean"), (4, "running_var")]  # its schema does not say so
    mutated = []
    for position, name in written:
        value = _argument(node, position, name)
        if isinstance(value, Node):
            mutated.append(value)
    return mutated


def _argument(node: Node, position: int, name: str) -> Any:
    return node.args[position] if position < len(node.args) else node.kwargs.get(name)


def _aliased_argument(node: Node) -> tuple[Node, bool] | None:
    """(input node, written in place) when the op's schema returns an alias of an input."""
    candidates = _alias_candidates(node.target)
    if candidates is None:
        return None
    write, arguments = candidates
    for position, name in arguments:
        value = _argument(node, position, name)
        if isinstance(value, Node):
            return value, write
    return None


def _fake_value(node: Node) -> Any:
    if "val" not in node.meta:
        raise ModelImportError(f"op '{node.name}': the exporter recorded no shape for it")
    return node.meta["val"]


def _nbytes(value: torch.Tensor, label: str) -> int:
    if any(isinstance(dim, torch.SymInt) for dim in value.shape):
        raise ModelImportError(
            f"tensor '{label}': shape {tuple(value.shape)} is dynamic or data-dependent; "
            "import with static shapes and without data-dependent ops"
        )
    return math.prod(int(dim) for dim in value.shape) * value.dtype.itemsize


def _meta(value: torch.Tensor) -> dict[str, Any]:
    return {"shape": [int(d) for d in value.shape], "dtype": _dtype_name(value.dtype)}


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _fake_arguments(node: Node) -> tuple[Any, Any]:
    return torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))


def _op_attrs(node: Node, results: list[Any]) -> dict[str, Any]:
    """Type, module path, dtype, FLOPs and bytes accessed of one call node."""
    outputs = [r for r in results if isinstance(r, torch.Tensor)]
    out = results[0] if len(results) == 1 else tuple(results)
    stack = node.meta.get("nn_module_stack")
    module = list(stack.values())[-1][0] if stack else None
    op_type = _op_type(node.target)
    pointwise = torch.Tag.pointwise in getattr(node.target, "tags", ())
    return {
        "type": op_type,
        "fusion": fusion_class(op_type, pointwise),
        "module": module,
        "dtype": _dtype_name(outputs[0].dtype) if outputs else None,
        "flops": float(_flops(node.target, *_fake_arguments(node), out)),
        "bytes_accessed": float(_bytes_accessed(node, outputs)),
    }


@functools.cache
def _op_type(target: Any) -> str:
    """The op's `type` attribute: "aten.add" for ATen overloads, the callable's name otherwise."""
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return str(packet._qualified_op_name).replace("::", ".")
    return getattr(target, "__name__", str(target))


@functools.cache
def _fallback_rule(func: Any) -> str:
    """The rule for an op torch has no FLOP formula for: "pointwise", "norm", "reduction", ""."""
    if torch.Tag.pointwise in getattr(func, "tags", ()):
        return "pointwise"
    short = getattr(getattr(func, "overloadpacket", None), "__name__", "").split(".")[-1]
    if short in _SOFTMAX_AND_NORMS:
        return "norm"
    return "reduction" if short in _REDUCTIONS else ""


def _flops(func: Any, args: Any, kwargs: Any, out: Any) -> int:
    """The FLOP formula of torch for an ATen op where it has one; otherwise the fallback rules.

    Fused CPU attention, which torch's registry lacks, is priced by `attention_flops`.
    """
    backward = ATTENTION_BACKWARD.get(_op_type(func))
    if backward is not None:
        bound = _bound_arguments(func, args, kwargs)
        shapes = [tuple(bound[name].shape) for name in ("query", "key", "value")]
        return attention_flops(*shapes, causal=bool(bound["is_causal"]), backward=backward)
    packet = getattr(func, "overloadpacket", None)
    if packet is not None and packet in flop_registry:
        return int(flop_registry[packet](*args, **kwargs, out_val=out))
    rule = _fallback_rule(func)
    if rule == "pointwise":
        outputs = out if isinstance(out, list | tuple) else [out]
        return sum(t.numel() for t in outputs if isinstance(t, torch.Tensor))
    if not rule:
        return 0
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if first is None:
        return 0
    return 5 * first.numel() if rule == "norm" else first.numel()


def _bound_arguments(func: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    """An ATen call's arguments by schema name, defaults filled in."""
    bound = {}
    for position, argument in enumerate(func._schema.arguments):
        if position < len(args):
            bound[argument.name] = args[position]
        else:
            bound[argument.name] = kwargs.get(argument.name, argument.default_value)
    return bound


class _FlopCounter(TorchDispatchMode):
    """Sums `_flops` over the ATen ops one traced fx call dispatches to (fx fallback)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.total += _flops(func, args, kwargs, out)
        return out


def _trace_fx(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], name: str) -> GraphBuilder:
    """Fallback: symbolic_trace + ShapeProp on fake tensors, one op per traced call."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.shape_prop import ShapeProp

    try:
        traced = torch.fx.symbolic_trace(module)
    except Exception as error:  # symbolic tracing raises many unrelated types
        raise ModelImportError(
            f"torch.fx.symbolic_trace failed for {name}: {raised(error)} (hint: try method=export)"
        ) from None
    flops: dict[Node, int] = {}
    failures: list[tuple[Node, BaseException]] = []

    class CountingShapeProp(ShapeProp):
        """ShapeProp that also counts each node's FLOPs by the rules of `_flops`."""

        def run_node(self, n: Node) -> Any:
            try:
                with _FlopCounter() as counter:
                    result = super().run_node(n)
            except Exception as error:
                # ShapeProp wraps the op's own error in one that spells out the node and its
                # meta, and the interpreter appends pages to whatever passes through it: the
                # op and the original error are kept here for a one-line message.
                failures.append((n, error.__cause__ or error))
                raise
            flops[n] = counter.total
            n.meta["val"] = result
            return result

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        propagation = CountingShapeProp(traced, fake_mode=mode)
        with torch.no_grad():
            propagation.propagate(*inputs)
    except Exception as error:  # shape propagation runs arbitrary module code
        where = f" at op '{failures[0][0].name}'" if failures else ""
        reason = failures[0][1] if failures else error
        raise ModelImportError(
            f"shape propagation failed for {name}{where}: {raised(reason)}"
        ) from None

    conversion = _Conversion(name, {"source": "torch.fx"})
    builder, values = conversion.builder, conversion.values
    # Every name of every tensor, as the fake copy `get_attr` nodes read holds it: a tied
    # weight's second name then reaches the same storage, so the source op is shared.
    fake = propagation.fake_module
    owned = dict(fake.named_parameters(remove_duplicate=False)) | dict(
        fake.named_buffers(remove_duplicate=False)
    )
    parameters: dict[str, _Value] = {}
    for node in traced.graph.nodes:
        if node.op == "placeholder":
            values[node] = _source(conversion, node, "user_input", node.name)
        elif node.op == "get_attr":
            values[node] = _source(conversion, node, "parameter", str(node.target))
        elif node.op in ("call_module", "call_function", "call_method"):
            if node.target is operator.getitem and node.args[0] in values:
                source = values[node.args[0]].outputs
                values[node] = _Value([source[node.args[1]] if len(source) > 1 else source[0]])
                continue
            result = node.meta["val"]
            results = list(result) if isinstance(result, list | tuple) else [result]
            inputs_ = [values[n] for n in node.all_input_nodes if n in values]
            if node.op == "call_module":
                prefix = f"{node.target}."
                for key, tensor in owned.items():
                    if key.startswith(prefix) and "." not in key[len(prefix) :]:
                        if key not in parameters:
                            parameters[key] = _source_op(conversion, None, key, "parameter", tensor)
                        inputs_.append(parameters[key])
            shared = _shares_storage(results, node)
            if shared is not None and flops[node] == 0:
                values[node] = _Value([list(values[shared].outputs[0]) for _ in results])
                continue
            op_type = str(node.target) if node.op != "call_function" else node.target.__name__
            outputs = [r for r in results if isinstance(r, torch.Tensor)]
            op = conversion.add_op(
                node,
                node.name,
                type=op_type,
                module=str(node.target) if node.op == "call_module" else None,
                dtype=_dtype_name(outputs[0].dtype) if outputs else None,
                flops=float(flops[node]),
                bytes_accessed=float(_bytes_accessed(node, outputs)),
            )
            conversion.add_reads(op, inputs_)
            values[node] = _Value(
                [
                    [
                        builder.add_tensor(
                            f"{builder.op_names[op]}:{i}", _nbytes(r, node.name), op, **_meta(r)
                        )
                    ]
                    if isinstance(r, torch.Tensor)
                    else []
                    for i, r in enumerate(results)
                ]
            )
        elif node.op == "output":
            conversion.mark_outputs(node)
    return builder


def _bytes_accessed(node: Node, outputs: list[torch.Tensor]) -> int:
    """Bytes of the node's distinct tensor inputs plus its outputs."""
    inputs = [n.meta.get("val") for n in node.all_input_nodes]
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)] + outputs
    return sum(t.numel() * t.dtype.itemsize for t in tensors)


def _shares_storage(results: list[Any], node: Node) -> Node | None:
    """The input node whose storage the (first) result views, if any (fx fallback's views)."""
    first = results[0] if results else None
    if not isinstance(first, torch.Tensor):
        return None
    storage = StorageWeakRef(first.untyped_storage())
    for n in node.all_input_nodes:
        value = n.meta.get("val")
        if isinstance(value, torch.Tensor) and StorageWeakRef(value.untyped_storage()) == storage:
            return n
    return None
