"""Workers: any environment's calls run here, in a pool of processes, or on a Ray cluster.

Training maps an environment's method over many small items (rollout tasks, graphs to prepare).
The environment is built in each worker by a picklable factory (`functools.partial(Env, spec)`)
and kept there with its caches; a call is a picklable function of the environment and one
item, such as the method `Env.rollout` itself. Results come back in item order and depend only
on the items, so the same run gives the same rewards here, in worker processes (the default) or
on a Ray cluster (`--ray ADDRESS`; Ray stays an optional dependency).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Generic, Protocol, TypeVar

from graphopt.errors import GraphoptError

Env = TypeVar("Env")
Item = TypeVar("Item")
Output = TypeVar("Output")


class Workers(Protocol[Env]):
    """Runs calls on an environment over many items, returning results in item order."""

    def map(self, call: Callable[[Env, Item], Output], items: Sequence[Item]) -> list[Output]:
        """[call(env, item) for item in items], possibly in parallel."""

    def close(self) -> None:
        """Releases workers."""


class SerialWorkers(Generic[Env]):
    """Everything in this process (workers = 0; tests and debugging)."""

    def __init__(self, factory: Callable[[], Env]) -> None:
        self.env = factory()

    def map(self, call: Callable[[Env, Item], Output], items: Sequence[Item]) -> list[Output]:
        """Runs the items one after another."""
        return [call(self.env, item) for item in items]

    def close(self) -> None:
        """Nothing to release."""


_WORKER_ENV: Any = None


def _start_worker(factory: Callable[[], Any], parent: int) -> None:
    global _WORKER_ENV
    _WORKER_ENV = factory()
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """Ends the worker once its parent is gone (a killed training run leaves no orphans)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _call(call: Callable[[Any, Any], Any], item: Any) -> Any:
    return call(_WORKER_ENV, item)


class ProcessWorkers(Generic[Env]):
    """A pool of worker processes (spawned, so no torch state is forked)."""

    def __init__(self, factory: Callable[[], Env], workers: int) -> None:
        self.workers = workers
        self.pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(factory, os.getpid()),
        )

    def map(self, call: Callable[[Env, Item], Output], items: Sequence[Item]) -> list[Output]:
        """Spreads the items over the workers in chunks."""
        chunk = max(1, len(items) // (4 * self.workers))
        return list(self.pool.map(_call, [call] * len(items), items, chunksize=chunk))

    def close(self) -> None:
        """Stops the workers."""
        self.pool.shutdown(cancel_futures=True)


class RayWorkers(Generic[Env]):
    """Actors on a Ray cluster, one environment each.

    Args:
        factory: builds the environment in each actor.
        address: the cluster's address ('auto', 'ray://host:port', or 'local' for an
            in-process cluster).
        workers: number of actors.
    """

    def __init__(self, factory: Callable[[], Env], address: str, workers: int) -> None:
        try:
            import ray
        except ImportError:
            raise GraphoptError(
                "--ray needs the optional Ray dependency: pip install 'graphopt[ray]'"
            ) from None
        self.ray = ray
        if not ray.is_initialized():
            if address == "local":
                ray.init(num_cpus=max(workers, 1), include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        actor = ray.remote(_RayActor)
        self.actors = [actor.remote(factory) for _ in range(max(workers, 1))]

    def map(self, call: Callable[[Env, Item], Output], items: Sequence[Item]) -> list[Output]:
        """Round-robin over the actors; results in item order."""
        n = len(self.actors)
        futures = [self.actors[i % n].call.remote(call, item) for i, item in enumerate(items)]
        return self.ray.get(futures)

    def close(self) -> None:
        """Releases the actors (the cluster itself is left running)."""
        for actor in self.actors:
            self.ray.kill(actor)


class _RayActor:
    """An environment inside a Ray actor."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.env = factory()

    def call(self, call: Callable[[Any, Any], Any], item: Any) -> Any:
        return call(self.env, item)


def make_workers(factory: Callable[[], Env], workers: int, ray_address: str | None) -> Workers[Env]:
    """Ray actors when an address is given, else worker processes, else (0) this process."""
    if ray_address is not None:
        return RayWorkers(factory, ray_address, workers)
    if workers > 0:
        return ProcessWorkers(factory, workers)
    return SerialWorkers(factory)
