"""The scheduler's queue: highest priority first, round-robin between batches of equal priority.

Round-robin is the fairness rule: two batches of the same priority share the workers evenly, however
many items each has queued; a batch at its own concurrency cap is skipped, not waited on. Ray has no
priorities, so this queue stays on the driver whichever backend executes.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Callable, Generic, Hashable, TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    def __init__(self) -> None:
        # priority -> group -> FIFO of items; group order rotates as groups are served
        self._levels: dict[int, OrderedDict[Hashable, deque[T]]] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def push(self, item: T, priority: int, group: Hashable) -> None:
        groups = self._levels.setdefault(priority, OrderedDict())
        groups.setdefault(group, deque()).append(item)
        self._size += 1

    def pop(self, eligible: Callable[[Hashable], bool] = lambda g: True) -> T | None:
        """The next item of the highest priority whose group is ``eligible``; its group goes last."""
        for priority in sorted(self._levels, reverse=True):
            groups = self._levels[priority]
            for group in list(groups):
                if not eligible(group):
                    continue
                fifo = groups.pop(group)
                item = fifo.popleft()
                if fifo:
                    groups[group] = fifo  # re-inserted at the end: the next group is served next
                if not groups:
                    del self._levels[priority]
                self._size -= 1
                return item
        return None

    def remove(self, predicate: Callable[[T], bool]) -> list[T]:
        """Take out every item matching ``predicate`` (cancelling queued work)."""
        removed: list[T] = []
        for priority in list(self._levels):
            groups = self._levels[priority]
            for group in list(groups):
                keep = deque(i for i in groups[group] if not predicate(i))
                removed += [i for i in groups[group] if predicate(i)]
                if keep:
                    groups[group] = keep
                else:
                    del groups[group]
            if not groups:
                del self._levels[priority]
        self._size -= len(removed)
        return removed

    def counts_by_priority(self) -> dict[int, int]:
        return {p: sum(len(f) for f in g.values()) for p, g in self._levels.items()}
