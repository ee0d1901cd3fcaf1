"""Would bf16 speed up the GFlowNet walk on this CPU? The per-step heads, float32 against bfloat16.

    .venv/bin/python benchmarks/bench_gflownet_bf16.py [--policy P] [--ops 100] [--batch 1000]
        [--steps 40] [--repeats 5] [--quick] [--json out.json]

The per-graph policy's walk spends its torch time in the forward head: one small matmul per
step over every candidate pair (`GraphEncodedPolicy.forward_logits`). This records the real
candidates and pair features of the first `--steps` steps of one walk of `--batch` schedules
of an `--ops`-op Erdos-Renyi graph on 4 devices, then times the head over those steps with the
policy's folded tables in float32 and in bfloat16 (the pair features arrive from numba as
float32, so the bfloat16 side pays their cast, as a walk would; its head's own layers are
bfloat16 too). Median of `--repeats` passes,
one torch thread, both in one run; also how far the bfloat16 logits are from float32's and how
often each step's most likely action differs. The graph encoding runs once per graph and is
not timed.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.formats import shipped_policy_path
from graphopt.learning.systems.gflownet.env import PartialSchedules
from graphopt.learning.systems.gflownet.network import GraphEncodedPolicy, Prepared
from graphopt.learning.systems.gflownet.solver import load_gflownet_policy
from graphopt.learning.threads import one_torch_thread

Step = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def recorded_steps(
    policy: GraphEncodedPolicy, prepared: Prepared, ops: int, batch: int, steps: int
) -> list[Step]:
    """The (candidates, pair features, prior) of the first `steps` steps of a real walk."""
    graph, machine = generate("erdos_renyi", ops, seed=7), Machine(4)
    schedules = PartialSchedules(graph, machine, batch)
    generator = torch.Generator().manual_seed(0)
    recorded = []
    for _ in range(min(steps, graph.n_ops)):
        candidates, counts = schedules.candidates(policy.config.window)
        pairs, prior = schedules.pair_features(candidates, counts)
        ops_t = torch.from_numpy(candidates)
        packed = ops_t[ops_t >= 0]
        step = (packed, torch.from_numpy(pairs), torch.from_numpy(prior))
        recorded.append(step)
        with torch.no_grad():
            logits = policy.forward_logits(prepared, *step)
        full = logits.new_full((batch, ops_t.shape[1], 4), -math.inf)
        full = full.masked_scatter((ops_t >= 0)[:, :, None], logits).reshape(batch, -1)
        index = torch.multinomial(full.softmax(1), 1, generator=generator).squeeze(1)
        op = ops_t[torch.arange(batch), index // 4]
        schedules.step(op.numpy(), (index % 4).numpy())
    return recorded


def as_bf16(prepared: Prepared) -> Prepared:
    """The folded heads and prior weights in bfloat16."""
    table, weight = prepared.forward
    prior = None if prepared.prior is None else prepared.prior.bfloat16()
    return replace(prepared, forward=(table.bfloat16(), weight.bfloat16()), prior=prior)


def run_head(
    policy: GraphEncodedPolicy, prepared: Prepared, steps: list[Step], dtype: torch.dtype
) -> tuple[float, list[torch.Tensor]]:
    """Seconds for the head over every recorded step, and its logits (float32)."""
    out = []
    start = time.perf_counter()
    with torch.no_grad():
        for ops, pairs, prior in steps:
            if dtype != torch.float32:
                pairs, prior = pairs.to(dtype), prior.to(dtype)
            out.append(policy.forward_logits(prepared, ops, pairs, prior))
    seconds = time.perf_counter() - start
    return seconds, [logits.float() for logits in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=None)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20 ops, 8 schedules, 2 repeats")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.ops, args.batch, args.steps, args.repeats = 20, 8, 10, 2
    path = args.policy or shipped_policy_path("gflownet", "makespan", 4)
    policy = load_gflownet_policy(path, 4).policy
    if not isinstance(policy, GraphEncodedPolicy):
        raise SystemExit(f"{path}: needs a per-graph policy")
    graph, machine = generate("erdos_renyi", args.ops, seed=7), Machine(4)
    with one_torch_thread():
        with torch.no_grad():
            prepared = policy.prepare(policy.context(graph, machine), math.log(0.002))
        steps = recorded_steps(policy, prepared, args.ops, args.batch, args.steps)
        half, half_policy = as_bf16(prepared), copy.deepcopy(policy).bfloat16()
        times: dict[str, list[float]] = {"float32": [], "bfloat16": []}
        for _ in range(args.repeats):
            seconds, full = run_head(policy, prepared, steps, torch.float32)
            times["float32"].append(seconds)
            seconds, low = run_head(half_policy, half, steps, torch.bfloat16)
            times["bfloat16"].append(seconds)
    differs = [
        float(
            (a.reshape(a.shape[0], -1).argmax(1) != b.reshape(b.shape[0], -1).argmax(1))
            .float()
            .mean()
        )
        for a, b in zip(full, low, strict=True)
    ]
    gap = max(float((a - b).abs().max()) for a, b in zip(full, low, strict=True))
    medians = {name: float(np.median(values)) for name, values in times.items()}
    results = {
        "quick": args.quick,
        "machine": platform.processor() or platform.machine(),
        "ops": args.ops,
        "batch": args.batch,
        "steps": len(steps),
        "repeats": args.repeats,
        "seconds": times,
        "median_seconds": medians,
        "bf16_over_fp32": medians["bfloat16"] / medians["float32"],
        "max_abs_logit_gap": gap,
        "argmax_differs_share": float(np.mean(differs)),
    }
    print(
        f"head over {len(steps)} steps of {args.batch} schedules ({args.ops} ops): float32 "
        f"{medians['float32'] * 1e3:.1f} ms, bfloat16 {medians['bfloat16'] * 1e3:.1f} ms "
        f"({results['bf16_over_fp32']:.2f}x); largest logit gap {gap:.3g}, the most likely "
        f"candidate differs in {100 * results['argmax_differs_share']:.1f}% of the rows"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
