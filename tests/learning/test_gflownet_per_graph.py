"""The per-graph GFlowNet policy: its environment views against plain twins, its sampler, and
that it learns.

The candidate lists, pair features, removable ops and static features are fast paths over the
partial schedules' state; each is compared here with a plain recomputation from the state the
paper's policy reads (`forward_mask`, `backward_mask`, `earliest_starts`, `list_prior`).
"""

from __future__ import annotations

import math
import platform
import sys

import numpy as np
import pytest
import torch
from torch import Tensor

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.ir.generators import generate
from graphopt.ir.graph import Graph
from graphopt.learning.memory import _malloc_trim, release_freed_memory
from graphopt.learning.objectives.log_partition_variance import log_partition_variance_loss
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.systems.gflownet.config import Decoding, GFlowNetConfig, TrainConfig
from graphopt.learning.systems.gflownet.env import (
    PAIR_FEATURES,
    STATIC_FEATURES,
    ActionError,
    PartialSchedules,
    log_reward,
    static_features,
)
from graphopt.learning.systems.gflownet.network import GraphEncodedPolicy, build_policy
from graphopt.learning.systems.gflownet.sampling import replay_trajectories, sample_trajectories
from graphopt.solvers.list_scheduling import bottom_levels

FAMILIES = ("layered", "erdos_renyi", "sbm", "watts_strogatz", "barabasi_albert")
CONFIG = GFlowNetConfig(
    hidden=16, layers=2, heads=2, condition=8, prior="list", encoding="per-graph"
)


def walk_randomly(graph: Graph, machine: Machine, batch: int, seed: int):
    """Yields the partial schedules after each of a random walk's steps (the start included)."""
    rng = np.random.default_rng(seed)
    schedules = PartialSchedules(graph, machine, batch)
    yield schedules
    for _ in range(graph.n_ops):
        ready = schedules.forward_mask()
        ops = np.array([rng.choice(np.flatnonzero(row)) for row in ready])
        schedules.step(ops, rng.integers(0, machine.n_devices, batch))
        yield schedules


def plain_pair_features(s: PartialSchedules, b: int, ops: list[int]) -> np.ndarray:
    """[len(ops), d, len(PAIR_FEATURES)] from the schedule's arrays, one entry at a time."""
    graph, d = s.graph, s.machine.n_devices
    unit = graph.total_runtime / graph.n_ops
    bottom = bottom_levels(graph)
    starts = s.earliest_starts()[b]
    earliest = min(starts[op, k] for op in ops for k in range(d))
    free = [
        max(
            [s.finish[b, j] for j in range(graph.n_ops) if s.added[b, j] and s.device[b, j] == k],
            default=0.0,
        )
        for k in range(d)
    ]
    out = np.zeros((len(ops), d, len(PAIR_FEATURES)))
    for i, op in enumerate(ops):
        sizes = {}
        for t in graph.inputs(op):
            home = int(s.device[b, graph.tensor_producer[t]])
            sizes[home] = sizes.get(home, 0.0) + float(graph.tensor_size[t])
        total_in = sum(sizes.values())
        for k in range(d):
            load = sum(
                graph.op_runtime[j]
                for j in range(graph.n_ops)
                if s.added[b, j] and s.device[b, j] == k
            )
            out[i, k] = [
                bottom[op] / bottom.max(),
                math.log1p((starts[op, k] - earliest) / unit),
                math.log1p((free[k] - min(free)) / unit),
                sizes.get(k, 0.0) / total_in if total_in > 0 else 0.0,
                float(not any(s.added[b, j] and s.device[b, j] == k for j in range(graph.n_ops))),
                load / (graph.total_runtime / d),
                s.steps / graph.n_ops,
            ]
    return out


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("window", [3, 64])
def test_candidates_pair_features_and_removable_ops_equal_plain_twins(family, window) -> None:
    graph = generate(family, 24, seed=3)
    machine = Machine(3, latency=1e-6, bandwidth=1e9)
    bottom = bottom_levels(graph)
    for step, s in enumerate(walk_randomly(graph, machine, 3, seed=5)):
        if s.done:
            break
        ops, counts = s.candidates(window)
        ready = s.forward_mask()
        features, prior = s.pair_features(ops, counts)
        full_prior = s.list_prior()
        row = 0
        for b in range(s.batch):
            chosen = [int(op) for op in ops[b, : counts[b]]]
            assert (ops[b, counts[b] :] == -1).all()
            free = np.flatnonzero(ready[b])
            assert set(chosen) <= set(free.tolist()) and counts[b] == min(window, free.size)
            # the window holds the ready ops of largest bottom level, largest first
            assert sorted(bottom[chosen], reverse=True) == list(bottom[chosen])
            assert sorted(bottom[free], reverse=True)[: counts[b]] == list(bottom[chosen])
            twin = plain_pair_features(s, b, chosen)
            np.testing.assert_allclose(features[row : row + counts[b]], twin, rtol=1e-5, atol=1e-6)
            if counts[b] == free.size:  # the whole ready set: list_prior's earliest start too
                np.testing.assert_allclose(
                    prior[row : row + counts[b]], full_prior[b, chosen], rtol=1e-5, atol=1e-5
                )
            row += counts[b]
        assert row == features.shape[0]
        removable = s.removable()
        mask = s.backward_mask()
        for b in range(s.batch):
            assert set(removable[b][removable[b] >= 0].tolist()) == set(
                np.flatnonzero(mask[b]).tolist()
            )
        assert np.allclose(s.proxy_makespans(), np.where(s.added, s.finish, 0.0).max(axis=1))
        assert step < graph.n_ops


def transfer(graph: Graph, machine: Machine, tensors: list[int]) -> float:
    """Seconds to send each of `tensors` once."""
    return sum(machine.latency + graph.tensor_size[t] / machine.bandwidth for t in tensors)


@pytest.mark.parametrize("family", FAMILIES)
def test_static_features_equal_plain_twins(family) -> None:
    graph = generate(family, 30, seed=2)
    machine = Machine(4, latency=2e-6, bandwidth=5e9)
    features = static_features(graph, machine)
    assert features.shape == (graph.n_ops, len(STATIC_FEATURES))
    unit = graph.total_runtime / graph.n_ops
    bottom = bottom_levels(graph)
    top = np.zeros(graph.n_ops)
    for op in graph.topological_order:
        for t in graph.outputs(op):
            for c in graph.consumers(t):
                top[c] = max(top[c], top[op] + graph.op_runtime[op])
    for op in range(graph.n_ops):
        inputs, outputs = list(graph.inputs(op)), list(graph.outputs(op))
        expected = [
            math.log1p(graph.op_runtime[op] / unit),
            bottom[op] / bottom.max(),
            top[op] / bottom.max(),
            math.log1p(len(inputs)),
            math.log1p(len(outputs)),
            math.log1p(transfer(graph, machine, outputs) / unit),
            math.log1p(transfer(graph, machine, inputs) / unit),
        ]
        np.testing.assert_allclose(features[op], expected, rtol=1e-5, atol=1e-6)


def sample(policy, graph, machine, batch=6, sigma=0.3, seed=0, **kwargs):
    with torch.no_grad():
        return sample_trajectories(
            policy, graph, machine, batch, sigma, torch.Generator().manual_seed(seed), **kwargs
        )


@pytest.mark.parametrize("devices", [1, 2, 3, 8])
def test_one_policy_samples_valid_seeded_schedules_on_any_device_count(devices) -> None:
    torch.manual_seed(0)
    policy = build_policy(CONFIG).eval()
    assert isinstance(policy, GraphEncodedPolicy)
    graph = generate("layered", 30, seed=4)
    machine = Machine(devices)
    first, again = sample(policy, graph, machine), sample(policy, graph, machine)
    assert torch.equal(first.actions, again.actions)
    assert torch.equal(first.log_pf, again.log_pf)
    placements, events = first.schedules.solutions()
    scorer = Scorer(graph, machine)
    for b in range(first.actions.shape[0]):
        _, makespan, violations = scorer.evaluate(placements[b], events[b])
        assert violations[0] == 0
        # free transfers: the proxy's start times are the contract's makespan
        assert makespan == pytest.approx(first.schedules.proxy_makespans()[b], rel=1e-9)
    assert bool((first.log_pf <= 0).all()) and bool((first.log_pb <= 0).all())
    assert not torch.equal(first.actions, sample(policy, graph, machine, seed=1).actions)


def test_replaying_the_actions_gives_the_sampled_log_probabilities() -> None:
    torch.manual_seed(1)
    policy = build_policy(CONFIG)
    graph, machine = generate("erdos_renyi", 25, seed=2), Machine(3, bandwidth=1e9)
    sampled = sample(policy, graph, machine, sigma=0.7)
    replay = replay_trajectories(policy, graph, machine, sampled.actions, 0.7)
    torch.testing.assert_close(replay.log_pf, sampled.step_log_pf, rtol=1e-5, atol=1e-5)
    assert bool((replay.entropy >= -1e-6).all())
    (replay.log_pf.sum() + replay.entropy.sum()).backward()
    assert all(p.grad is not None for p in policy.forward_head.parameters())
    assert all(p.grad is not None for p in policy.encoder.parameters())
    bad = sampled.actions.clone()
    bad[0, 0] = bad[0, -1]  # the last op is not ready at the start
    with pytest.raises(ActionError, match="schedule 0: action"):
        replay_trajectories(policy, graph, machine, bad, 0.7)


def test_pins_are_kept_and_one_temperature_per_batch_is_required() -> None:
    policy = build_policy(CONFIG).eval()
    graph, machine = generate("sbm", 20, seed=1), Machine(4)
    pinned = np.full(graph.n_ops, -1)
    pinned[::3] = 2
    placements, _ = sample(policy, graph, machine, pinned=pinned).schedules.solutions()
    assert (placements[:, ::3] == 2).all()
    with pytest.raises(ValueError, match="one temperature"):
        sample(policy, graph, machine, sigma=torch.tensor([0.1, 0.2, 0.1, 0.1, 0.1, 0.1]))


def test_a_narrow_window_only_offers_the_ops_of_largest_bottom_level() -> None:
    policy = build_policy(GFlowNetConfig(**{**CONFIG.__dict__, "window": 1})).eval()
    graph, machine = generate("layered", 30, seed=6), Machine(2)
    sampled = sample(policy, graph, machine)
    bottom = bottom_levels(graph)
    for b in range(sampled.actions.shape[0]):
        s = PartialSchedules(graph, machine, 1)
        for action in sampled.actions[b].tolist():
            ready = np.flatnonzero(s.forward_mask()[0])
            op = action // 2
            assert bottom[op] == bottom[ready].max()
            s.step(np.array([op]), np.array([action % 2]))


def test_the_variance_loss_raises_the_sampled_speedup_on_a_toy_graph() -> None:
    """40 seeded updates on one 10-op graph, 2 devices, no prior: the mean speedup of 128
    schedules rises (1.33 -> 1.62 when written)."""
    graph, machine = generate("layered", 10, seed=1), Machine(2)
    scorer, sigma = Scorer(graph, machine), 0.1
    torch.manual_seed(0)
    policy = build_policy(
        GFlowNetConfig(hidden=32, layers=2, heads=2, condition=16, encoding="per-graph")
    )
    optimizer = torch.optim.Adam(policy.parameters(), 3e-3)
    context = policy.context(graph, machine)

    def mean_speedup() -> float:
        drawn = sample(policy, graph, machine, batch=128, sigma=sigma, seed=123, context=context)
        return float(drawn.schedules.speedups(scorer).mean())

    before = mean_speedup()
    for step in range(40):
        drawn = sample_trajectories(
            policy, graph, machine, 16, sigma, torch.Generator().manual_seed(step), context
        )
        log_r = torch.from_numpy(log_reward(drawn.schedules.speedups(scorer), 2, sigma)).float()
        loss = log_partition_variance_loss(log_r, drawn.log_pf, drawn.log_pb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = mean_speedup()
    assert after > before + 0.1, (before, after)


def test_devices_in_a_training_config_need_a_per_graph_policy() -> None:
    with pytest.raises(TrainingError, match='devices needs a "per-graph" policy'):
        TrainConfig.from_dict({"devices": [2, 4]})
    with pytest.raises(TrainingError, match=r"devices must be in \[1, "):
        TrainConfig.from_dict({"devices": [0], "policy": {"encoding": "per-graph"}})
    config = TrainConfig.from_dict({"devices": [2, 8], "policy": {"encoding": "per-graph"}})
    assert config.devices == (2, 8)


def test_the_untrained_policy_is_its_list_scheduling_prior() -> None:
    """The heads' output layers start at zero: P_F is the prior's softmax, P_B uniform."""
    policy = build_policy(CONFIG).eval()
    graph, machine = generate("layered", 20, seed=3), Machine(3)
    schedules = PartialSchedules(graph, machine, 2)
    ops, counts = schedules.candidates(CONFIG.window)
    pairs, prior = schedules.pair_features(ops, counts)
    with torch.no_grad():
        prepared = policy.prepare(policy.context(graph, machine), math.log(0.01))
        logits = policy.forward_logits(
            prepared,
            torch.from_numpy(ops[ops >= 0]),
            torch.from_numpy(pairs),
            torch.from_numpy(prior),
        )
    torch.testing.assert_close(logits, torch.from_numpy(prior).sum(dim=-1))
    sampled = sample(policy, graph, machine, batch=4, sigma=0.01)
    uniform = sample_trajectories(
        policy, graph, machine, 4, 0.01, torch.Generator().manual_seed(0), uniform_backward=True
    )
    torch.testing.assert_close(sampled.log_pb, uniform.log_pb)


def test_sampling_without_the_backward_policy_draws_the_same_schedules() -> None:
    """The solver skips P_B (`backward=False`): same actions and log P_F, log P_B left 0."""
    torch.manual_seed(2)
    policy = build_policy(CONFIG).eval()
    graph, machine = generate("barabasi_albert", 25, seed=2), Machine(3)
    full, light = sample(policy, graph, machine), sample(policy, graph, machine, backward=False)
    assert torch.equal(full.actions, light.actions) and torch.equal(full.log_pf, light.log_pf)
    assert bool((full.log_pb < 0).all()) and bool((light.log_pb == 0).all())


@pytest.mark.parametrize("encoding", ["per-graph", "per-state"])
def test_a_decoding_sharpens_each_step_toward_the_policy_s_choice(encoding) -> None:
    """PLAIN is the policy itself; the decoding's logits are (logits + locality x inputs_here)
    / tau, so the sampled log P_F is that of their softmax, and a tiny tau draws one of the
    most likely actions each step."""
    torch.manual_seed(3)
    config = GFlowNetConfig(**{**CONFIG.__dict__, "encoding": encoding, "n_devices": 2})
    policy = build_policy(config).eval()
    graph, machine = generate("erdos_renyi", 18, seed=5), Machine(2)
    plain = sample(policy, graph, machine, batch=8)
    same = sample(policy, graph, machine, batch=8, decoding=Decoding(1.0, 0.0))
    assert torch.equal(plain.actions, same.actions) and torch.equal(plain.log_pf, same.log_pf)
    locality = 1.5 if encoding == "per-graph" else 0.0
    decoding = Decoding(0.5, locality)
    sharp = sample(policy, graph, machine, batch=8, decoding=decoding)
    for b in range(2):  # log P_F of each step, recomputed from the policy's own logits
        schedules = PartialSchedules(graph, machine, 1)
        expected = 0.0
        for action in sharp.actions[b].tolist():
            logits = plain_step_logits(policy, schedules, graph, machine, locality)
            expected += float((logits / 0.5).log_softmax(0)[action])
            schedules.step(np.array([action // 2]), np.array([action % 2]))
        assert float(sharp.log_pf[b]) == pytest.approx(expected, abs=1e-3)
    greedy = sample(policy, graph, machine, batch=3, decoding=Decoding(1e-6, locality))
    for b in range(3):  # ties (an empty machine's devices) may go either way
        schedules = PartialSchedules(graph, machine, 1)
        for action in greedy.actions[b].tolist():
            logits = plain_step_logits(policy, schedules, graph, machine, locality)
            assert float(logits[action]) == pytest.approx(float(logits.max()), abs=1e-5)
            schedules.step(np.array([action // 2]), np.array([action % 2]))
    if encoding == "per-state":
        with pytest.raises(ValueError, match="locality decoding needs a per-graph policy"):
            sample(policy, graph, machine, decoding=Decoding(locality=1.0))
    with pytest.raises(ValueError, match="logit temperature must be > 0, got 0"):
        Decoding(logit_temperature=0.0)
    with pytest.raises(ValueError, match="locality must be >= 0, got -1"):
        Decoding(locality=-1.0)


def test_locality_keeps_ops_beside_their_producers() -> None:
    """On an untrained policy (its list prior), a locality weight cuts fewer edges across
    devices: the same seeds, the same graph, more of each op's inputs on its own device."""
    policy = build_policy(CONFIG).eval()
    graph, machine = generate("layered", 60, seed=2), Machine(4)
    src, dst = graph.edge_index
    cut = {}
    for locality in (0.0, 1.0):
        decoding = Decoding(0.5, locality)
        drawn = sample(policy, graph, machine, batch=32, sigma=0.01, decoding=decoding)
        placements, _ = drawn.schedules.solutions()
        cut[locality] = float((placements[:, src] != placements[:, dst]).mean())
    assert cut[1.0] < cut[0.0] - 0.05, cut  # 0.73 -> 0.66 when written


def plain_step_logits(
    policy, schedules: PartialSchedules, graph: Graph, machine: Machine, locality: float
):
    """[n * d] P_F's logits of one state plus locality x the share of the op's input bytes on
    each device, -inf where not offered: recomputed from the policy, not sampled."""
    d = machine.n_devices
    with torch.no_grad():
        if isinstance(policy, GraphEncodedPolicy):
            ops, counts = schedules.candidates(policy.config.window)
            pairs, prior = schedules.pair_features(ops, counts)
            prepared = policy.prepare(policy.context(graph, machine), math.log(0.3))
            real = torch.from_numpy(ops[ops >= 0])
            scores = policy.forward_logits(
                prepared, real, torch.from_numpy(pairs), torch.from_numpy(prior)
            )
            logits = torch.full((graph.n_ops, d), -math.inf)
            logits[real] = scores + locality * inputs_here(schedules, graph, real.tolist(), d)
            return logits.reshape(-1)
        features = torch.from_numpy(schedules.features())
        forward, _, _ = policy(
            features,
            policy.context(graph, machine),
            torch.tensor([math.log(0.3)]),
            None,
            policy.state_prior(schedules),
        )
        ready = torch.from_numpy(schedules.forward_mask())[0]
        return forward[0].masked_fill(~ready[:, None], -math.inf).reshape(-1)


def inputs_here(schedules: PartialSchedules, graph: Graph, ops: list[int], d: int) -> Tensor:
    """[len(ops), d] the share of each op's input bytes produced on each device (0: none)."""
    out = torch.zeros(len(ops), d)
    for row, op in enumerate(ops):
        for e in range(graph.op_input_ptr[op], graph.op_input_ptr[op + 1]):
            t = graph.op_input_tensor[e]
            out[row, schedules.device[0, graph.tensor_producer[t]]] += float(graph.tensor_size[t])
        out[row] /= max(float(out[row].sum()), 1e-300) if out[row].sum() > 0 else 1.0
    return out


def test_freed_heap_memory_can_be_given_back() -> None:
    """glibc's malloc_trim is found on Linux (the walk calls it every `TRIM_EVERY` steps)."""
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert _malloc_trim() is not None
    release_freed_memory()
