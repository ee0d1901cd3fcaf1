"""Training the GFlowNet scheduler, top to bottom (paper 004 section 3, appendix C).

Each step picks one training graph (a random connected sub-graph of `sampling.subgraph_ops`
ops when it is larger, section 3.3) and one temperature sigma, log-uniform on
[sigma_min, sigma_max], samples `sampling.trajectories` schedules from the forward policy at
that temperature, scores them with the proxy (contract section 6 on `proxy`'s machine) and
minimizes the log-partition variance loss (eq. 7-8) or, as the ablation, trajectory balance
with the policy's log Z head, with Adam and gradient clipping. Every `run.validate_every` steps
the policy samples `sampling.validation_samples` schedules of each validation graph at
`sampling.validation_sigma`; their mean speedup is the validation reward, and the best policy is
kept in best.pt.

The PPO baseline of paper 004 (section 5, `"loss": "ppo"`) trains the same policy on the same
states, actions and reward at one fixed temperature, `ppo.sigma` (paper: 0.25): a step samples
the trajectories without gradient, then makes `ppo.epochs` passes of `ppo.minibatches` clipped
updates over them (`objectives.ppo`), each replaying its trajectories under the current policy
(`replay_trajectories`). The entropy bonus's weight and the learning rate decay linearly from
step 0 to `run.steps` (a run resumed with more steps stretches what is left of the decay). A
policy conditioned on log sigma but trained at one sigma has never seen another, so a PPO run
validates at `ppo.sigma` (`TrainConfig.validation_temperature`), and the GFlowNet solver samples
its checkpoints there by default (`TrainConfig.inference_sigma`).

With `expert` set (a per-graph policy and a GFlowNet loss), each step also scores the best
schedules of a randomized HEFT search as off-policy trajectories (`experts`) and adds them to
the loss's batch. With `init` the run starts from a trained checkpoint's weights.

Everything random in step s is seeded by (run.seed, s), so a run resumed from last.pt
continues exactly as the uninterrupted run would; a resumed run's config must equal the
checkpoint's (only run.steps and run.workers may change). log.csv and TensorBoard as in
REGAL's training (`learning.runs`). Non-finite losses or gradients stop training with the last
good checkpoint intact.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import torch

from graphopt.costmodels.machine import Machine
from graphopt.costmodels.score import Scorer
from graphopt.datasets import Dataset
from graphopt.ir.graph import Graph
from graphopt.learning.formats import CheckpointError, checkpoint_file
from graphopt.learning.graphs import GraphCache
from graphopt.learning.objectives.log_partition_variance import log_partition_variance_loss
from graphopt.learning.objectives.ppo import PPOLoss, ppo_loss, ppo_update, trajectory_advantages
from graphopt.learning.objectives.trajectory_balance import trajectory_balance_loss
from graphopt.learning.optim import clipped_step, minibatches
from graphopt.learning.run_dir import TrainingError
from graphopt.learning.runs import GRAPH_PREFIX, graph_files, stored_configs, training_graphs
from graphopt.learning.saving import load_weights, read_checkpoint
from graphopt.learning.systems.gflownet.config import GFLOWNET_FORMAT, GFlowNetConfig, TrainConfig
from graphopt.learning.systems.gflownet.env import PartialSchedules, connected_subgraph, log_reward
from graphopt.learning.systems.gflownet.experts import expert_trajectories
from graphopt.learning.systems.gflownet.network import GraphEncodedPolicy, Policy, build_policy
from graphopt.learning.systems.gflownet.sampling import (
    replay_trajectories,
    sample_trajectories,
    score_trajectories,
)
from graphopt.learning.training import Run, Session, System
from graphopt.solvers.list_scheduling import heft_events

LOG_COLUMNS = (
    "step",
    "seconds",
    "loss",
    "speedup",
    "log_reward",
    "log_z",
    "sigma",
    "ops",
    "devices",
    "grad_norm",
    "expert_speedup",
    "entropy",
    "clip_fraction",
    "approx_kl",
    "validation_reward",
    "validation_speedup",
    "validation_best",
    "validation_heft",
)
"""What log.csv records: per step the loss, the mean sampled speedup, mean log-reward and mean
zeta (the implied log Z), the temperature, the graph size and the device count; with PPO also
the mean per-step entropy of P_F, the share of clipped steps and the approximate KL divergence
from the sampling policy (each averaged over the step's updates, as are its loss and gradient
norm); with search trajectories (`experts`) the best one's speedup; per validation the mean
speedup (the criterion), the mean of each graph's best sample and, as a fixed reference for
the learning curve, the mean of HEFT's speedups on the same graphs."""


def _graph_files(
    config: TrainConfig, machine: Machine, network: Policy
) -> tuple[_Graphs, np.ndarray, np.ndarray]:
    """The graphs of a `graph:` dataset: all trained on, the smallest validated on."""
    files = graph_files(config.dataset)
    train_ids = np.arange(len(files))
    sizes = np.array([graph.n_ops for graph in files])
    valid_ids = np.sort(np.argsort(sizes, kind="stable")[: config.run.validation_graphs])
    return _Graphs({"train": files, "valid": files}, machine, network), train_ids, valid_ids


class _Graphs(GraphCache[tuple[Graph, Scorer, Any]]):
    """The training and validation graphs with their scorers and policy contexts, loaded once."""

    def __init__(self, splits: dict[str, Sequence[Graph]], machine: Machine, network: Policy):
        super().__init__(
            splits.__getitem__,
            lambda _s, _i, g: (g, Scorer(g, machine), network.context(g, machine)),
        )
        self.machine = machine


def _step(
    config: TrainConfig,
    network: Policy,
    optimizer: torch.optim.Optimizer,
    graphs: _Graphs,
    train_ids: np.ndarray,
    step: int,
) -> dict[str, float]:
    """One update on one graph at one temperature; everything random is seeded by (seed, step)."""
    rng = np.random.default_rng([config.run.seed, step])
    sampling = config.sampling
    graph, scorer, masks = graphs.get("train", int(rng.choice(train_ids)))
    machine = graphs.machine
    if config.devices:
        machine = config.proxy.machine(int(rng.choice(config.devices)))
    if graph.n_ops > sampling.subgraph_ops:
        low, high = sampling.subgraph_ops // 2, sampling.subgraph_ops * 3 // 2
        graph = connected_subgraph(graph, int(rng.integers(low, high + 1)), rng)
        scorer, masks = Scorer(graph, machine), network.context(graph, machine)
    elif machine is not graphs.machine:
        scorer, masks = Scorer(graph, machine), network.context(graph, machine)
    if config.loss == "ppo":
        return _ppo_step(config, network, optimizer, graph, scorer, masks, rng, step)
    sigma = float(np.exp(rng.uniform(np.log(sampling.sigma_min), np.log(sampling.sigma_max))))
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    network.train()
    replayed = config.replay.updates > 1
    with torch.set_grad_enabled(not replayed):
        sampled = sample_trajectories(
            network,
            graph,
            machine,
            sampling.trajectories,
            sigma,
            generator,
            masks,
            uniform_backward=config.backward == "uniform",
        )
    speedups = sampled.schedules.speedups(scorer)
    log_r = torch.from_numpy(log_reward(speedups, machine.n_devices, sigma)).float()
    zeta = log_r + sampled.log_pb - sampled.log_pf

    def loss_of(rewards: torch.Tensor, log_pf: torch.Tensor, log_pb: torch.Tensor) -> torch.Tensor:
        return _gflownet_loss(
            config, network, graph, machine, masks, sigma, rewards, log_pf, log_pb
        )

    rewards, log_pf, log_pb, logged = log_r, sampled.log_pf, sampled.log_pb, {}
    if config.expert.trajectories and isinstance(network, GraphEncodedPolicy):
        actions, expert_speedups = expert_trajectories(
            graph, machine, scorer, config.expert, config.policy.window, rng
        )
        if len(actions):
            scored = score_trajectories(
                network, graph, machine, actions, sigma, masks, config.backward == "uniform"
            )
            expert_r = log_reward(expert_speedups, machine.n_devices, sigma)
            rewards = torch.cat([rewards, torch.from_numpy(expert_r).float()])
            log_pf = torch.cat([log_pf, scored.log_pf])
            log_pb = torch.cat([log_pb, scored.log_pb])
            logged["expert_speedup"] = float(expert_speedups[0])
    if not replayed:
        loss = loss_of(rewards, log_pf, log_pb)
        losses, norms = (
            [float(loss.detach())],
            [clipped_step(network, optimizer, loss, step, config.optimizer.grad_clip)],
        )
    else:
        losses, norms = [], []
        for index in minibatches(rng, len(log_r), config.replay.epochs, config.replay.minibatches):
            replay = replay_trajectories(
                network, graph, machine, sampled.actions[index], sigma, masks
            )
            loss = loss_of(log_r[index], replay.log_pf.sum(dim=1), sampled.log_pb[index])
            losses.append(float(loss.detach()))
            norms.append(clipped_step(network, optimizer, loss, step, config.optimizer.grad_clip))
    return {
        "step": step + 1,
        "loss": float(np.mean(losses)),
        "speedup": float(speedups.mean()),
        "log_reward": float(log_r.mean()),
        "log_z": float(zeta.detach().mean()),
        "sigma": sigma,
        "ops": float(graph.n_ops),
        "devices": float(machine.n_devices),
        "grad_norm": float(np.mean(norms)),
        **logged,
    }


def _gflownet_loss(
    config: TrainConfig,
    network: Policy,
    graph: Graph,
    machine: Machine,
    masks: Any,
    sigma: float,
    log_r: torch.Tensor,
    log_pf: torch.Tensor,
    log_pb: torch.Tensor,
) -> torch.Tensor:
    """The configured GFlowNet loss of trajectories of one graph at one temperature."""
    if config.loss == "variance":
        return log_partition_variance_loss(log_r, log_pf, log_pb)
    log_sigma = torch.log(torch.tensor([sigma]))
    if isinstance(network, GraphEncodedPolicy):
        log_z = network.log_partition(network.encode(masks), log_sigma)
    else:
        empty = torch.from_numpy(PartialSchedules(graph, machine, 1).features())
        log_z = network.log_partition(empty, masks, log_sigma)
    return trajectory_balance_loss(log_z, log_r, log_pf, log_pb)


def _ppo_step(
    config: TrainConfig,
    network: Policy,
    optimizer: torch.optim.Optimizer,
    graph: Graph,
    scorer: Scorer,
    masks: Any,
    rng: np.random.Generator,
    step: int,
) -> dict[str, float]:
    """PPO's epochs of minibatch updates on one batch of trajectories sampled at `ppo.sigma`.

    The reward is the GFlowNet's log-reward at that sigma (paper 004: the same reward); with
    advantage normalization its scale 1 / sigma cancels. The decayed entropy weight and learning
    rate are functions of the step number, so a resumed run repeats them exactly.
    """
    ppo, machine = config.ppo, scorer.machine
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    network.train()
    with torch.no_grad():
        sampled = sample_trajectories(
            network, graph, machine, config.sampling.trajectories, ppo.sigma, generator, masks
        )
    speedups = sampled.schedules.speedups(scorer)
    log_r = torch.from_numpy(log_reward(speedups, machine.n_devices, ppo.sigma)).float()
    advantages = trajectory_advantages(log_r, ppo.normalize_advantages)

    def minibatch(index: torch.Tensor, entropy_weight: float) -> PPOLoss:
        replay = replay_trajectories(
            network, graph, machine, sampled.actions[index], ppo.sigma, masks
        )
        return ppo_loss(
            replay.log_pf,
            sampled.step_log_pf[index],
            advantages[index],
            replay.entropy,
            ppo.clip,
            entropy_weight,
        )

    means = ppo_update(
        network, optimizer, ppo, config.optimizer, step / config.run.steps, step, rng,
        sampled.actions.shape[0], minibatch,
    )  # fmt: skip
    zeta = log_r + sampled.log_pb - sampled.log_pf
    return {
        "step": step + 1,
        "loss": means.pop("loss"),
        "speedup": float(speedups.mean()),
        "log_reward": float(log_r.mean()),
        "log_z": float(zeta.mean()),
        "sigma": ppo.sigma,
        "ops": float(graph.n_ops),
        "devices": float(machine.n_devices),
        **means,
    }


def _validate(
    config: TrainConfig, network: Policy, graphs: _Graphs, ids: np.ndarray, step: int
) -> dict[str, float]:
    """Mean speedup of schedules sampled at `validation_temperature` on the validation graphs.

    Beside it, the mean best sample and HEFT's mean (`heft_events`), which the issue's bar
    compares the best of K with.
    """
    network.eval()
    means, best, heft = [], [], []
    with torch.no_grad():
        for position, index in enumerate(ids.tolist()):
            graph, scorer, masks = graphs.get("valid", index)
            generator = torch.Generator().manual_seed(1000 + position)
            sampled = sample_trajectories(
                network,
                graph,
                graphs.machine,
                config.sampling.validation_samples,
                config.validation_temperature,
                generator,
                masks,
            )
            speedups = sampled.schedules.speedups(scorer)
            means.append(float(speedups.mean()))
            best.append(float(speedups.max()))
            span = scorer.evaluate(*heft_events(graph, graphs.machine))[1]
            heft.append(graph.total_runtime / span if span > 0 else 1.0)
    mean = float(np.mean(means))
    return {
        "step": step,
        "validation_reward": mean,
        "validation_speedup": mean,
        "validation_best": float(np.mean(best)),
        "validation_heft": float(np.mean(heft)),
    }


def _start_from(network: Policy, config: TrainConfig) -> None:
    """Loads `config.init`'s weights into the new network, whose config must be the same."""
    path = checkpoint_file(str(config.init))
    try:
        record = read_checkpoint(path, GFLOWNET_FORMAT)
        _, stored = stored_configs(record, path, TrainConfig.from_dict, GFlowNetConfig)
        ours = config.policy
        if stored.encoding == "per-graph":
            stored = replace(stored, n_devices=ours.n_devices)
        if stored != ours:
            field = next(k for k, v in asdict(ours).items() if getattr(stored, k) != v)
            raise TrainingError(
                f"init {path}: its policy.{field} is {getattr(stored, field)!r}, this config's "
                f"is {getattr(ours, field)!r} (a run starts from a network of its own shape)"
            )
        load_weights(network, record["model_state"], f"{path}: model_state")
    except CheckpointError as error:
        raise TrainingError(f"init: {error}") from None


class GFlowNetSystem(System):
    """GFlowNet scheduling for the training skeleton (`training.train`)."""

    name = "gflownet"
    form = GFLOWNET_FORMAT
    log_columns = LOG_COLUMNS
    config_class = TrainConfig

    def network(self, config: Any) -> torch.nn.Module:
        """The untrained scheduling policy, or `config.init`'s trained one."""
        network = build_policy(config.policy)
        if config.init is not None:
            _start_from(network, config)
        return network

    def updates_per_step(self, config: Any) -> int:
        """PPO's updates per step with the PPO loss, else one."""
        return config.updates_per_step

    def fields(self, config: Any) -> dict[str, Any]:
        """The network's config and the proxy machine, which the solver reads back."""
        return {
            "policy_config": json.dumps(asdict(config.policy)),
            "proxy": json.dumps(asdict(config.proxy)),
        }

    def start(self, run: Run) -> Session:
        """The graphs on the proxy machine (a `graph:` dataset: its smallest are validated on)."""
        config, network, optimizer = run.config, run.network, run.optimizer
        machine = config.proxy.machine(config.policy.n_devices)
        if config.dataset.startswith(GRAPH_PREFIX):
            graphs, train_ids, valid_ids = _graph_files(config, machine, network)
        else:
            dataset, train_ids, valid_ids = training_graphs(
                config.dataset, run.run_dir, config.run, run.phase
            )
            splits = {split: Dataset.open(dataset, split) for split in ("train", "valid")}
            graphs = _Graphs(splits, machine, network)
        return Session(
            lambda step: _step(config, network, optimizer, graphs, train_ids, step),
            lambda step: _validate(config, network, graphs, valid_ids, step),
        )


SYSTEM = GFlowNetSystem()
"""GFlowNet scheduling's system (`training.SYSTEMS['gflownet']`)."""
