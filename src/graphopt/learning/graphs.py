"""A run's graphs by (split, index), each turned once into what a trainer or a worker reads.

Every system keeps such a cache (GDP's and GO's environments and policy inputs, GFlowNet's
scorers and attention masks, REGAL's problems with their feature runs); this is the one they
share. A split's graphs are opened on first use, so a worker that serves one split opens only
that one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from graphopt.ir.graph import Graph

Item = TypeVar("Item")


class GraphCache(Generic[Item]):
    """Items made once per graph, by (split, index).

    Args:
        open_split: the graphs of a split (a list, or a dataset opened on first use).
        make: (split, index, graph) -> the item.
    """

    def __init__(
        self,
        open_split: Callable[[str], Sequence[Graph]],
        make: Callable[[str, int, Graph], Item],
    ) -> None:
        self._open_split = open_split
        self._make = make
        self._splits: dict[str, Sequence[Graph]] = {}
        self._items: dict[tuple[str, int], Item] = {}

    def split(self, name: str) -> Sequence[Graph]:
        """The graphs of split `name`, opened once."""
        if name not in self._splits:
            self._splits[name] = self._open_split(name)
        return self._splits[name]

    def get(self, split: str, index: int) -> Item:
        """The item of graph `index` of `split`, made on first use."""
        key = (split, index)
        if key not in self._items:
            self._items[key] = self._make(split, index, self.split(split)[index])
        return self._items[key]
