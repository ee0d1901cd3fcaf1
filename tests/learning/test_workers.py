import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# A training process that owns a pool of rollout workers, prints a worker's pid and waits.
OWNER = """
import os, time
from graphopt.learning.systems.regal.actions import ActionConfig
from functools import partial
from graphopt.learning.systems.regal.env import EnvSpec, RolloutEnv
from graphopt.learning.workers import ProcessWorkers
spec = EnvSpec("unused", 2, "peak-memory", "brkga", 100, ActionConfig())
rollouts = ProcessWorkers(partial(RolloutEnv, spec), 1)
print(rollouts.pool.submit(os.getpid).result(), flush=True)
time.sleep(120)
"""


def _running(pid: int) -> bool:
    """Whether the process exists and has not exited (an unreaped zombie has exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_rollout_workers_exit_when_their_training_process_is_killed() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(owner.stdout.readline())
        assert worker != owner.pid and _running(worker)
        os.kill(owner.pid, signal.SIGKILL)  # no cleanup runs: only the watchdog can end it
        owner.wait()
        deadline = time.monotonic() + 20
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(worker)
    finally:
        owner.kill()
        owner.stdout.close()
