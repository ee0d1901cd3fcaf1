"""GO's multi-task policy (paper 002 sections 4.3-4.4): placement, scheduling and fusion at once.

GDP's network (`gdp.network`) is the shared trunk: GraphSAGE, then the segmented placer layers
with parameter superposition on the graph and the device count. Each task then has its own
recurrent attention layers over the trunk's states (segments in topological order, attending to
the previous segment's states as Transformer-XL does) and its own head: the placement head over
devices (with GDP's partition-hint prior), and heads over L priority levels for scheduling and
fusion. When the tasks are decided together (a '+' mode), the embedding of each task's actions is
added to the next task's layer input (GO eq. 5-6's residual action connections), so the
scheduling head sees where each op was placed and the fusion head also sees its priorities:
one forward pass of the trunk, then one of each task layer per batch of samples.

Two learned priors give an untrained network the compiler's defaults: the scheduling levels
are pulled toward the middle level (all ops tie, so the ready queues follow the critical path)
and the fusion levels toward the upper half (the priority decoder fuses every legal pair).
A search may centre the priors on its incumbent's decisions instead (`act`'s `centre`), so that
samples are the incumbent with a few decisions changed (`go.train.CentredGOTrainer`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from graphopt.learning.batching import GraphBatch
from graphopt.learning.encoders.mlp import mlp
from graphopt.learning.systems.gdp.network import (
    GDPPolicy,
    SegmentLayer,
    learned_strength,
    raw_strength,
    segmented,
)
from graphopt.learning.systems.go.config import TASKS, GOConfig

Behaviour = Literal["sample", "greedy"]
"""How a task's actions are chosen: sampled (and scored by PPO) or the most likely (fixed)."""


@dataclass(frozen=True)
class Acted:
    """Actions of S samples and what PPO needs of them.

    Attributes:
        actions: [S, 3, n] int64 actions per task of `TASKS` (device, scheduling level, fusion
            level), -1 for a task not decided.
        log_p: [S, n] per-op log-probability of the sampled tasks' actions (summed over them).
        entropy: [S, n] per-op entropy of the sampled tasks' distributions (summed over them).
    """

    actions: Tensor
    log_p: Tensor
    entropy: Tensor


class GOPolicy(GDPPolicy):
    """Per-op placement, scheduling and fusion decisions of one graph.

    Args:
        config: the network's shape and mode.
    """

    min_devices = 1

    def __init__(self, config: GOConfig) -> None:
        super().__init__(config.placer)
        self.go = config
        hidden, levels = config.placer.hidden, config.levels
        self.task_layers = nn.ModuleDict(
            {
                task: nn.ModuleList(
                    SegmentLayer(hidden, config.placer.heads) for _ in range(config.task_layers)
                )
                for task in config.tasks
            }
        )
        self.level_heads = nn.ModuleDict(
            {task: mlp(hidden, hidden, levels) for task in config.tasks if task != "placement"}
        )
        self.action_embeddings = nn.ModuleDict()
        if config.residual:
            sizes = {"placement": config.placer.max_devices, "scheduling": levels}
            for task in config.tasks[:-1]:
                embedding = nn.Embedding(sizes[task], hidden)
                nn.init.zeros_(embedding.weight)  # untrained: no task sees another's actions
                self.action_embeddings[task] = embedding
        self.schedule_strength = learned_strength(config.schedule_prior)
        self.fusion_strength = learned_strength(config.fusion_prior)

    def act(
        self,
        batch: GraphBatch,
        n_devices: int,
        hint: Tensor | None,
        behaviour: Mapping[str, Behaviour],
        samples: int = 1,
        generator: torch.Generator | None = None,
        actions: Tensor | None = None,
        fusable: Tensor | None = None,
        centre: Tensor | None = None,
    ) -> Acted:
        """Decides the tasks of `behaviour` for one graph; the others stay -1.

        Args:
            batch: one graph's features.
            n_devices: d.
            hint: [n] partition hint (when the placer takes one).
            behaviour: task -> 'sample' or 'greedy'; tasks of the network only.
            samples: S, placements drawn (1 when every task is greedy).
            generator: torch's generator for the draws.
            actions: [S, 3, n] given actions (re-scoring samples for PPO): taken instead of
                drawing, and the log-probabilities carry gradients.
            fusable: [n] bool, ops whose fusion level matters (fusion class and kernel); the
                fusion task's log-probability and entropy count only there. None: every op.
            centre: [3, n] decisions the priors pull toward instead of the defaults (the
                hint, the middle scheduling level, the fusing half): a search's incumbent, so
                that samples explore around it. A task's row of -1 keeps its default pull.
        """
        if batch.ptr.shape[0] != 2:
            raise ValueError("GO's policy decides one graph at a time")
        unknown = set(behaviour) - set(self.go.tasks)
        if unknown:
            raise ValueError(f"this {self.go.mode} policy has no {sorted(unknown)} head")
        placed, condition = self.trunk(batch, n_devices, hint)
        order = torch.argsort(batch.topological_rank)
        n = placed.shape[0]
        if actions is not None:
            samples = actions.shape[0]
        chosen = torch.full((samples, len(TASKS), n), -1, dtype=torch.long)
        log_p = placed.new_zeros(samples, n)
        entropy = placed.new_zeros(samples, n)
        extra: Tensor | None = None
        for task in self.go.tasks:
            if task not in behaviour:
                continue
            x = placed if extra is None else placed[None] + extra
            h = torch.empty_like(x)
            h[..., order, :] = segmented(
                self.task_layers[task], x[..., order, :], condition[0], self.config.segment
            )
            slot = TASKS.index(task)
            pull = None if centre is None or bool((centre[slot] < 0).any()) else centre[slot]
            logits = self._logits(task, h, batch, n_devices, hint, pull)
            if actions is not None:
                a = actions[:, slot]
            elif behaviour[task] == "greedy":
                a = logits.argmax(-1).expand(samples, n)
            else:
                probabilities = torch.softmax(logits.detach(), -1).reshape(-1, logits.shape[-1])
                drawn = torch.multinomial(
                    probabilities, samples if logits.dim() == 2 else 1, True, generator=generator
                )
                a = drawn.T if logits.dim() == 2 else drawn.reshape(samples, n)
            chosen[:, slot] = a
            if behaviour[task] == "sample":
                lp = torch.log_softmax(logits, -1).expand(samples, n, logits.shape[-1])
                p = lp.exp()
                task_entropy = -(p * torch.where(p > 0, lp, 0.0)).sum(-1)
                task_log_p = lp.gather(-1, a[..., None]).squeeze(-1)
                if task == "fusion" and fusable is not None:
                    task_log_p = task_log_p * fusable
                    task_entropy = task_entropy * fusable
                log_p = log_p + task_log_p
                entropy = entropy + task_entropy
            if task in self.action_embeddings:
                embedded = self.action_embeddings[task](a)
                extra = embedded if extra is None else extra + embedded
        return Acted(chosen, log_p, entropy)

    def explore(self, n_devices: int, n_ops: int, n_fusable: int, changes: float) -> None:
        """Sets the priors' strengths so that a sample changes about `changes` decisions per task.

        A prior of strength b over K choices leaves its centre with probability
        (K - 1) / (e^b + K - 1) while the head's own logits are small, so b = log((K - 1)
        (m / changes - 1)) over a task's m decided ops; at least 0.1 (a task with few ops
        samples nearly uniformly). Local search needs this scale: GO's shipped priors change
        tens of decisions per sample on a few hundred ops.
        """
        counts = {
            "placement": (self.hint_strength, n_devices, n_ops),
            "scheduling": (self.schedule_strength, self.go.levels, n_ops),
            "fusion": (self.fusion_strength, self.go.levels, n_fusable),
        }
        with torch.no_grad():
            for task in self.go.tasks:
                strength, choices, ops = counts[task]
                if strength is None or choices < 2 or ops == 0:
                    continue
                target = math.log((choices - 1) * max(ops / changes - 1, 1e-9))
                strength.copy_(raw_strength(max(target, 0.1)))

    def _logits(
        self,
        task: str,
        h: Tensor,
        batch: GraphBatch,
        n_devices: int,
        hint: Tensor | None,
        centre: Tensor | None = None,
    ) -> Tensor:
        """[..., n, K] one task's logits from its layer's states, with its prior.

        The prior pulls toward `centre` ([n] actions) when given, else the task's default.
        """
        if task == "placement":
            pulled_to = hint if centre is None or hint is None else centre
            return self.placement_logits(self.head(h), batch, n_devices, pulled_to)
        logits = self.level_heads[task](h)
        strength = self.schedule_strength if task == "scheduling" else self.fusion_strength
        if strength is None:
            return logits
        levels = torch.arange(self.go.levels)
        if centre is not None:
            pulled = nn.functional.one_hot(centre.long(), self.go.levels)
        elif task == "scheduling":
            pulled = levels == self.go.levels // 2
        else:
            pulled = levels >= self.go.levels // 2
        return logits + nn.functional.softplus(strength) * pulled.to(logits.dtype)
