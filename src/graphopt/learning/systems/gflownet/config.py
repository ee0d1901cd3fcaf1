"""GFlowNet scheduling's configs: the policy's shape and the training run's settings.

A checkpoint stores both; the solver reads them back (the run's inference temperature) without
importing the trainer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from graphopt.configs import FieldError
from graphopt.costmodels.machine import Machine
from graphopt.learning.formats import run_format
from graphopt.learning.objectives.ppo import PPOConfig
from graphopt.learning.optim import AdamConfig
from graphopt.learning.runs import RunConfig, TrainingConfig
from graphopt.limits import MAX_DEVICES

SIGMA_MIN = 0.01
"""Smallest training temperature (paper 004 E.1: log-uniform on [0.01, 1])."""
SIGMA_MAX = 1.0
"""Largest training temperature."""
SIGMA_INFERENCE = 0.005
"""Temperature the shipped sampler uses (paper 004 E.1)."""


@dataclass(frozen=True)
class GFlowNetConfig:
    """The temperature-conditioned Topoformer policy's shape (paper 004 section 3.3, appendix D).

    Attributes:
        n_devices: devices the forward head places ops on (the action is (op, device)); a
            'per-graph' policy places on any count, and this is only its proxy's default.
        hidden: width of the encoder and heads (a multiple of `heads`). 32 by default: the
            masked attention's B x heads x n^2 scores set the sampling time whatever the width,
            and 64 sampled 1,000 schedules of a 100-op graph 1.4x slower (24.9-26.6 s vs
            16.3-18.4 s on 2 cores).
        layers: Topoformer layers L.
        heads: attention heads per layer, spread over the topological relations.
        condition: width of the temperature embedding e_sigma (eq. 29).
        prior: 'none' (paper 004) or 'list': the forward logits also add list scheduling's
            preferences (`PartialSchedules.list_prior`) with two positive weights that depend
            on the temperature, so the untrained policy already samples like a randomized
            critical-path list scheduler and training learns what to change.
        encoding: 'per-state' (paper 004): every step encodes the whole partial schedule with
            the dense Topoformer, O(n^2) per step; 'per-graph': the graph is encoded once
            (`SparseTopoformer`, attention over DAG edges, O(edges)) and each step scores only
            its (ready op, device) candidates with a light head on their state features
            (`PAIR_FEATURES`), as neural routing's attention-model decoders do.
    """

    n_devices: int = 4
    hidden: int = 32
    layers: int = 2
    heads: int = 4
    condition: int = 32
    prior: Literal["none", "list"] = "none"
    encoding: Literal["per-state", "per-graph"] = "per-state"
    window: int = 32

    def __post_init__(self) -> None:
        for name, low, high in (
            ("window", 1, 4096),
            ("n_devices", 1, MAX_DEVICES),
            ("hidden", 1, 4096),
            ("layers", 1, 64),
            ("heads", 1, 64),
            ("condition", 1, 4096),
        ):
            if not low <= getattr(self, name) <= high:
                raise FieldError(name, f"must be in [{low}, {high}], got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise FieldError(
                "hidden", f"must be a multiple of heads ({self.heads}), got {self.hidden}"
            )


GFLOWNET_FORMAT = run_format(
    "graphopt.gflownet-policy/1", "GFlowNet policy", ("policy_config", "proxy")
)
"""GFlowNet checkpoints: the policy with its proxy machine and training config, and a training
run's state with them (last.pt)."""


Backward = Literal["learned", "uniform"]
"""P_B learned by the backward head (paper 004) or fixed uniform over the removable ops."""


Loss = Literal["variance", "balance", "ppo"]
"""The log-partition variance loss (paper 004), trajectory balance with a learned log Z, or the
PPO baseline."""


@dataclass(frozen=True)
class ProxyConfig:
    """The machine the proxy scores schedules on (contract sections 3 and 6).

    Attributes:
        latency: seconds added to every transfer (paper 004: 0, free transfers).
        bandwidth: bytes per second of a transfer (None: unlimited, as in paper 004; JSON has
            no infinity).
        mode: 'sync' (a receive occupies its device) or 'async'.
    """

    latency: float = 0.0
    bandwidth: float | None = None
    mode: Literal["sync", "async"] = "sync"

    def __post_init__(self) -> None:
        if not self.latency >= 0:
            raise FieldError("latency", f"must be >= 0, got {self.latency}")
        if self.bandwidth is not None and not self.bandwidth > 0:
            raise FieldError("bandwidth", f"must be > 0 (or null: unlimited), got {self.bandwidth}")

    def machine(self, n_devices: int) -> Machine:
        """The proxy's machine for a policy of `n_devices`."""
        bandwidth = math.inf if self.bandwidth is None else self.bandwidth
        return Machine(n_devices, latency=self.latency, bandwidth=bandwidth, mode=self.mode)


@dataclass(frozen=True)
class Decoding:
    """How a trained policy's P_F logits become each step's draw at inference.

    Training samples the GFlowNet itself (the default); both are chosen after training on the
    validation graphs (`SamplingConfig.inference_logit_temperature`, `inference_locality`).

    Attributes:
        logit_temperature: the logits are divided by it (1: the policy's own distribution;
            below 1 sharper, toward its preferred actions).
        locality: a per-graph policy's logits gain this times the share of the op's input
            bytes already on the device (`env.PAIR_FEATURES`' inputs_here), before the division:
            among devices the proxy finds equally good (free transfers tie them) it keeps ops
            beside their producers, as HEFT's tie-break does, so fewer transfers are cut where
            the real machine pays for them.
    """

    logit_temperature: float = 1.0
    locality: float = 0.0

    def __post_init__(self) -> None:
        if not self.logit_temperature > 0:
            raise ValueError(f"logit temperature must be > 0, got {self.logit_temperature}")
        if not self.locality >= 0:
            raise ValueError(f"locality must be >= 0, got {self.locality}")


PLAIN = Decoding()
"""Sampling P_F itself, as training does."""


@dataclass(frozen=True)
class SamplingConfig:
    """What a step samples and what a validation samples (paper 004 appendix C, E.1).

    Attributes:
        trajectories: schedules per step, all of one graph and one temperature (paper: 100).
        sigma_min: smallest training temperature (log-uniform sampling).
        sigma_max: largest training temperature.
        subgraph_ops: graphs with more ops are trained on random connected sub-graphs of
            between half and one and a half times this many ops (paper 004: 25-75).
        validation_samples: schedules sampled per validation graph.
        validation_sigma: temperature of validation samples (paper: 0.005 at inference); a PPO
            run validates at `ppo.sigma` instead.
        inference_sigma: the temperature the trained policy samples at by default (the solver,
            the benchmarks); None: `validation_sigma`. Set after training, when another
            temperature proves better on the validation graphs; training never reads it.
        inference_logit_temperature: what the trained policy divides P_F's logits by when it
            samples by default: 1 draws from the GFlowNet itself; below 1 sharpens each step
            toward the policy's preferred actions, a lower effective temperature than training
            reached (a sigma below `sigma_min` is outside what the conditioning was trained
            on). Set after training, like `inference_sigma`, from the validation graphs;
            training never reads it.
        inference_locality: `Decoding.locality` of the trained policy's default sampling, set
            and never read by training likewise.
    """

    trajectories: int = 100
    sigma_min: float = SIGMA_MIN
    sigma_max: float = SIGMA_MAX
    subgraph_ops: int = 50
    validation_samples: int = 32
    validation_sigma: float = SIGMA_INFERENCE
    inference_sigma: float | None = None
    inference_logit_temperature: float = 1.0
    inference_locality: float = 0.0

    def __post_init__(self) -> None:
        for name in ("trajectories", "subgraph_ops", "validation_samples"):
            if getattr(self, name) < 2:
                raise FieldError(name, f"must be >= 2, got {getattr(self, name)}")
        if not 0 < self.sigma_min <= self.sigma_max:
            raise FieldError(
                "sigma_min", f"must be in (0, sigma_max], got {self.sigma_min}, {self.sigma_max}"
            )
        for name in ("validation_sigma", "inference_sigma", "inference_logit_temperature"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise FieldError(name, f"must be > 0, got {value}")
        if not self.inference_locality >= 0:
            raise FieldError("inference_locality", f"must be >= 0, got {self.inference_locality}")

    @property
    def decoding(self) -> Decoding:
        """How the trained policy samples by default (`inference_logit_temperature`, ...)."""
        return Decoding(self.inference_logit_temperature, self.inference_locality)


@dataclass(frozen=True)
class ReplayConfig:
    """Updates per batch of sampled trajectories (the GFlowNet losses; PPO has its own).

    The GFlowNet losses hold off-policy, so a batch may be replayed: each of `epochs` passes
    splits it into `minibatches` and takes one update on each, re-scoring the recorded actions
    under the policy as it is then. 1 x 1 is paper 004's one on-policy update per batch. A
    replayed update needs the fixed uniform P_B (its log-probabilities do not change).

    Attributes:
        epochs: passes over each batch.
        minibatches: updates per pass.
    """

    epochs: int = 1
    minibatches: int = 1

    def __post_init__(self) -> None:
        for name in ("epochs", "minibatches"):
            if not 1 <= getattr(self, name) <= 64:
                raise FieldError(name, f"must be in [1, 64], got {getattr(self, name)}")

    @property
    def updates(self) -> int:
        """Optimizer steps per batch."""
        return self.epochs * self.minibatches


@dataclass(frozen=True)
class ExpertConfig:
    """Search trajectories added to each step of the GFlowNet losses (none by default).

    Attributes:
        trajectories: how many: the best distinct schedules of the search (fewer when fewer
            are distinct or reachable within the window); 0: none, paper 004's on-policy
            training.
        candidates: randomized HEFT schedules the search draws per step (the first is HEFT's).
        noise: standard deviation of the log-normal factor on each upward rank.
    """

    trajectories: int = 0
    candidates: int = 32
    noise: float = 0.1

    def __post_init__(self) -> None:
        if self.trajectories < 0:
            raise FieldError("trajectories", f"must be >= 0, got {self.trajectories}")
        if not self.trajectories <= self.candidates:
            raise FieldError(
                "candidates",
                f"must be >= trajectories ({self.trajectories}), got {self.candidates}",
            )
        if not self.noise >= 0:
            raise FieldError("noise", f"must be >= 0, got {self.noise}")


@dataclass(frozen=True)
class TrainConfig(TrainingConfig):
    """Everything that defines a GFlowNet training run (saved with every checkpoint).

    Attributes:
        name: the run's name.
        dataset: a built dataset directory, a dataset config JSON, a shipped config name, or
            `graph:PATH[,PATH...]`: graph files, trained on (random connected sub-graphs of
            those above `sampling.subgraph_ops`) and validated on whole, the
            `run.validation_graphs` smallest of them (paper 004 tables 1 and 3).
        loss: 'variance' (paper 004's), 'balance' (trajectory balance, the ablation) or 'ppo'
            (the PPO baseline).
        backward: 'learned' (paper 004: the backward head's P_B) or 'uniform' (a fixed P_B,
            uniform over the ops that may be removed; the losses can then lower their variance
            only through P_F).
        policy: the network, and the device count it places on.
        proxy: the machine schedules are scored on.
        sampling: trajectories per step, temperatures, sub-graphs, validation samples (PPO
            uses the trajectories, sub-graphs and validation samples, not the temperatures).
        ppo: the PPO baseline's settings (read only with loss 'ppo').
        replay: updates per batch of the GFlowNet losses (1 x 1: the paper's one).
        expert: search trajectories added to each step of the GFlowNet losses (`experts`).
        optimizer: Adam and gradient clipping (paper: Adam's defaults).
        run: steps, cadence, graphs used, seed (workers are not used: sampling is batched).
        devices: device counts a step draws from, uniformly (a per-graph policy, which serves
            any count; empty: always `policy.n_devices`, on which validation runs either way).
        init: a GFlowNet checkpoint (a run's best.pt, or a shipped policy's file name when no
            such file exists) whose weights start this run instead of the seeded random ones:
            a trained policy trained on with another config (more steps, other graphs, search
            trajectories). Its network config must be `policy`'s
            (any `n_devices` for a per-graph policy).
    """

    what: ClassVar[str] = "GFlowNet training config"
    name: str = "gflownet"
    dataset: str = "default"
    loss: Loss = "variance"
    backward: Backward = "learned"
    policy: GFlowNetConfig = field(default_factory=GFlowNetConfig)
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    expert: ExpertConfig = field(default_factory=ExpertConfig)
    optimizer: AdamConfig = field(default_factory=lambda: AdamConfig(learning_rate=1e-3))
    run: RunConfig = field(default_factory=RunConfig)
    devices: tuple[int, ...] = ()
    init: str | None = None

    def __post_init__(self) -> None:
        if self.devices and self.policy.encoding != "per-graph":
            raise FieldError(
                "devices", 'needs a "per-graph" policy (the paper\'s serves one count)'
            )
        for count in self.devices:
            if not 1 <= count <= MAX_DEVICES:
                raise FieldError("devices", f"must be in [1, {MAX_DEVICES}], got {count}")
        if self.replay.minibatches > self.sampling.trajectories:
            raise FieldError(
                "replay.minibatches",
                f"must be at most sampling.trajectories ({self.sampling.trajectories}), got "
                f"{self.replay.minibatches}",
            )
        if self.replay.updates > 1 and self.loss != "ppo" and self.backward != "uniform":
            raise FieldError(
                "replay", '(more than one update per batch) needs "backward": "uniform"'
            )
        if self.expert.trajectories and (
            self.loss == "ppo" or self.policy.encoding != "per-graph" or self.replay.updates > 1
        ):
            raise FieldError(
                "expert",
                'needs a GFlowNet loss, a "per-graph" policy and one update per batch',
            )
        if self.loss == "ppo" and self.ppo.minibatches > self.sampling.trajectories:
            raise FieldError(
                "ppo.minibatches",
                f"must be at most sampling.trajectories ({self.sampling.trajectories}), got "
                f"{self.ppo.minibatches}",
            )

    @property
    def validation_temperature(self) -> float:
        """The temperature validation samples at: PPO's one, else `sampling.validation_sigma`."""
        return self.ppo.sigma if self.loss == "ppo" else self.sampling.validation_sigma

    @property
    def inference_sigma(self) -> float:
        """The temperature the trained policy samples at by default.

        PPO's one temperature; else `sampling.inference_sigma` when set, else the validation's.
        """
        if self.loss != "ppo" and self.sampling.inference_sigma is not None:
            return self.sampling.inference_sigma
        return self.validation_temperature

    @property
    def updates_per_step(self) -> int:
        """Optimizer steps per training step (Adam's step count is at most this times it)."""
        return self.ppo.updates if self.loss == "ppo" else self.replay.updates
