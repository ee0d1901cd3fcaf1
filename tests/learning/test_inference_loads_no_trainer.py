"""A zero-shot solve of every learned solver loads no trainer (docs/architecture.md), and none of
the heavy packages that a cold `optimize --time S` would pay for inside S.

The architecture test reads the imports; this one runs the solves in a fresh interpreter and
looks at what was loaded, so an import hidden behind a call would be caught too. Fine-tuning
then loads its trainer in the same interpreter, which shows that the look would see one.
torch-geometric (and, through its datasets, transformers) and torch._dynamo (imported by torch's
Python reference initializers on the meta device) took 1-4 s of a cold solve's budget (issue 45).
"""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, sys
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.optimize import optimize

def trainers():
    return sorted(m for m in sys.modules if m.endswith((".train", ".finetune", ".training")))

graph = generate("layered", 30, seed=1)
for solver, devices, objective in (
    ("regal", 2, "peak-memory"), ("gdp", 4, "makespan"), ("go", 4, "makespan"),
    ("gflownet", 4, "makespan"),
):
    optimize(graph, Machine(devices), objective, solver=solver, evaluations=8, seed=0)
zero_shot = trainers()
heavy = [m for m in ("torch_geometric", "transformers", "torch._dynamo") if m in sys.modules]
optimize(graph, Machine(4), "makespan", solver="gdp", evaluations=40, seed=0, finetune=1)
print(json.dumps([zero_shot, trainers(), heavy]))
"""


def test_a_zero_shot_solve_of_each_learned_solver_loads_no_trainer() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, check=True
    )
    zero_shot, fine_tuned, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert zero_shot == []
    assert heavy == []
    assert "graphopt.learning.systems.gdp.finetune" in fine_tuned
    assert "graphopt.learning.systems.gdp.train" in fine_tuned
