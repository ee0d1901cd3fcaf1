"""HDP, the hierarchical device placer (Mirhoseini et al. 2018), as a per-graph search baseline.

GDP (paper 003 section 4.1) compares against HDP: a two-level policy trained from scratch on the
one graph it places, with REINFORCE. A *grouper* (a feed-forward net over each op's features)
gives every op a softmax over G groups and each op samples its group; a *placer* (an LSTM over
the groups in order, each group read as the mean features of its member ops and its size) gives
every group a softmax over the d devices and each group samples its device. Every op runs on
its group's device. Grouping first keeps the placer's sequence short (G, not n_ops), which is
what let HDP place graphs of tens of thousands of ops. The reward of a placement is GDP's,
`-sqrt(makespan / reference)` (`learning.placement`: GO's ready-queue schedule, scored exactly),
the negative square-root runtime HDP uses; the baseline is an exponential moving average of the
mean sampled reward, and both networks are trained jointly with one Adam optimizer. There is no
pre-training, so the search starts from near-uniform placements on every graph.

Simplified from the paper: the grouper reads `placement_features` (runtime, bytes, fan-in and
fan-out, position in the graph) instead of embeddings of op type, output shape and adjacency;
the placer is a bidirectional LSTM encoder whose per-group softmaxes are independent given the
grouping, instead of a sequence-to-sequence decoder with attention that conditions each group's
device on the devices chosen before it; and runtimes come from the cost model, not from running
the placement on hardware.

As a solver (`HDP`), each REINFORCE step samples up to `samples` placements (each one
evaluation of the budget; pinned ops keep their pins), scores them in one batch, and offers the
batch's best to the tracker with GO's ready-queue order; steps go on until the budget or the
time is spent.
"""

from __future__ import annotations

import numpy as np

from graphopt.learning.run_dir import TrainingError
from graphopt.learning.systems.hdp.config import HDPConfig
from graphopt.learning.systems.hdp.train import HDPTrainer
from graphopt.solvers.base import Initial, Objective, Problem, Rng, Solver, Tracker
from graphopt.solvers.ready_queue import offer_only_placement, ready_queue_orders


class HDP(Solver):
    """HDP's per-graph REINFORCE search; every step's best sampled placement is offered.

    Args:
        config: network sizes and REINFORCE settings.
    """

    name = "hdp"
    objectives = frozenset({Objective.MAKESPAN})

    def __init__(self, config: HDPConfig | None = None) -> None:
        self.config = config or HDPConfig()

    def run(self, problem: Problem, tracker: Tracker, rng: Rng, initial: Initial) -> None:
        """Trains on the graph step after step until the tracker's budget or time is spent."""
        graph, machine = problem.graph, problem.machine
        if offer_only_placement(problem, tracker):
            return
        trainer = HDPTrainer(
            graph, machine, self.config, seed=int(rng.integers(2**62)), pinned=problem.pinned
        )
        while True:
            try:
                step = trainer.step(min(self.config.samples, tracker.remaining))
            except TrainingError:
                tracker.note(
                    f"hdp stopped at REINFORCE step {trainer.steps + 1}: a non-finite loss or "
                    "gradient; the best placement so far is kept"
                )
                return
            excess, value = problem.fitness(step.outcome.peaks, step.outcome.makespan)
            best = int(np.lexsort((value, excess))[0])
            placement = step.placements[best]
            orders, lengths = ready_queue_orders(graph, machine, placement, trainer.env.priorities)
            # The batch was scored once in the environment: all of it counts, its best is kept.
            tracker.offer_best(
                placement,
                orders[0, : lengths[0]],
                int(excess[best]),
                float(value[best]),
                len(value),
            )
