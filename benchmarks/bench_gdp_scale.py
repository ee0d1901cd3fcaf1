"""Zero-shot GDP placement of a large graph: seconds and peak memory (issue 21's scale bar).

    .venv/bin/python benchmarks/bench_gdp_scale.py [--model lstm-lm-unrolled-512] [--graph G]
        [--devices 8] [--policy best.pt]

Places one zoo model's training graph (built once; or a graph file) with the shipped GDP policy
(or `--policy`), step by step as the solver does: the features, the partition hint (when the
policy takes one), one forward pass, the most likely placement scheduled by the policy's
schedulers (GO's ready queues, and insertion timelines for the shipped one) and scored, then
`--samples` sampled placements scheduled and scored (the solver's default: 64). Prints each
phase's seconds, their sum, the import time, and the process's peak resident memory. The bar:
at most 60 s and 8 GB for a 50,000-op graph on this machine.
"""

from __future__ import annotations

import argparse
import resource
import time

start = time.perf_counter()
import torch  # noqa: E402

from graphopt.costmodels.machine import Machine  # noqa: E402
from graphopt.ir.io import read_graph  # noqa: E402
from graphopt.learning.batching import make_batch  # noqa: E402
from graphopt.learning.formats import shipped_policy_path  # noqa: E402
from graphopt.learning.placement.env import PlacementEnv  # noqa: E402
from graphopt.learning.placement.features import placement_features  # noqa: E402
from graphopt.learning.placement.hint import partition_hint  # noqa: E402
from graphopt.learning.systems.gdp.env import PlacementTask, most_likely, sample  # noqa: E402
from graphopt.learning.systems.gdp.network import GDPPolicy  # noqa: E402
from graphopt.learning.systems.gdp.solver import load_gdp_checkpoint  # noqa: E402

IMPORTS = time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lstm-lm-unrolled-512", help="zoo model (training)")
    parser.add_argument("--graph", help="a graph file instead of a zoo model")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--policy", help="a GDP checkpoint (default: the shipped one)")
    parser.add_argument("--samples", type=int, default=64, help="sampled placements scored")
    args = parser.parse_args()
    if args.graph:
        graph = read_graph(args.graph)
    else:
        from graphopt.evaluation.fusion_bench import zoo_training_graphs

        graph = zoo_training_graphs([args.model])[0]
    config, state, trained = load_gdp_checkpoint(
        args.policy or shipped_policy_path("gdp", "makespan")
    )
    policy = GDPPolicy(config)
    policy.load_state_dict(state)
    machine = Machine(n_devices=args.devices, latency=1e-5, bandwidth=1e10)
    times = {}
    env = PlacementEnv(graph, machine, reference=graph.total_runtime, schedulers=trained.schedulers)
    clock = time.perf_counter()
    batch = make_batch([placement_features(graph)])
    times["features"] = time.perf_counter() - clock
    clock = time.perf_counter()
    hint = None if policy.hint_strength is None else torch.from_numpy(partition_hint(env))
    times["partition hint"] = time.perf_counter() - clock
    clock = time.perf_counter()
    task = PlacementTask(env, batch, hint)
    with torch.no_grad():
        placement = most_likely(policy, task)
    times["forward"] = time.perf_counter() - clock
    clock = time.perf_counter()
    makespan = env.step(placement).makespan[0]
    times["schedule and score"] = time.perf_counter() - clock
    clock = time.perf_counter()
    if args.samples:
        sampled, _ = sample(policy, task, args.samples, torch.Generator().manual_seed(0))
        makespan = min(makespan, env.step(sampled).makespan.min())
    times[f"{args.samples} samples"] = time.perf_counter() - clock
    print(f"{graph.name}: {graph.n_ops:,} ops on {args.devices} devices")
    for name, seconds in times.items():
        print(f"  {name:<20} {seconds:8.2f} s")
    print(f"  {'placement total':<20} {sum(times.values()):8.2f} s (imports {IMPORTS:.1f} s)")
    print(f"  best makespan {makespan:.6g} s; one device {graph.total_runtime:.6g} s")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"  peak resident memory {rss:.2f} GB (graph building included)")


if __name__ == "__main__":
    main()
