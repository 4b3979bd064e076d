"""The partition's short candidate groups as whole arrays, one per window offset (:mod:`.partition`).

A *window* is a group of ``d + 1`` consecutive nodes ``i..i+d`` with ``d < max_group``. What the
partition needs of each window splits three ways, and each part is computed once where it can be:

- per graph (:class:`Windows`, kept on the graph's traffic model): its segment context
  (:mod:`.structure`: windows of one context have one traffic at every capacity) and the two sums of
  its residency credit (:meth:`.partition.Credit.sums`: bytes re-read from earlier nodes, bytes
  kept for later ones; neither depends on S);
- per capacity (:meth:`Windows.at`): the span of each context, from
  :meth:`.segments.Segments.span` of its first window in the order the partition visits them
  (node j ascending, then i descending), and the traffic of every window;
- per chip (:meth:`Windows.times`): the residency credit at ``held`` bytes, ``Q``, the busiest unit's
  seconds and ``max(compute, Q / bandwidth)``.

Every figure is the float a loop over the windows computes: the unit sums add node j first, then
j - 1, ..., as the loop did, and every other step is one correctly rounded operation per element.

>>> import numpy as np
>>> busiest = busiest_unit(np.array([[1.0, 0.0, 0.0], [2.0, 5.0, 0.0], [4.0, 0.0, 0.0]]), 2)
>>> [b.tolist() for b in busiest]  # d = 0: each node alone; d = 1: nodes 0..1 (3 | 5 | 0) and 1..2 (6 | 5 | 0)
[[1.0, 5.0, 4.0], [5.0, 6.0]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Windows:
    """The windows of one graph (see the module docstring). ``context``: the segment context of each
    node (:attr:`.structure.Structure.context`); with ``reuse`` False every window is its own context
    (each is analysed afresh, as :class:`.segments.Segments` does then)."""

    def __init__(self, n: int, max_group: int, context: Sequence, credit, reuse: bool = True) -> None:  # noqa: ANN001
        self.n, self.w = n, min(max_group, n)
        keys: dict[object, int] = {}
        self.first: list[tuple[int, int]] = []  # the first window of each context, in the partition's order
        ids = [[0] * (n - d) for d in range(self.w)]
        for j in range(n):
            cj = context[j]
            for d in range(min(j + 1, self.w)):
                i = j - d
                # the contexts of i..j as (the id of i..j-1, that of j): ids[d - 1][i] is set, at j - 1,
                # and equal tuples of contexts get equal pairs, so ids are numbered as the tuples would be
                key = (i, j) if not reuse else (-1, cj) if d == 0 else (ids[d - 1][i], cj)
                k = keys.get(key)
                if k is None:
                    k = keys[key] = len(self.first)
                    self.first.append((i, j))
                ids[d][i] = k
        reread, kept = credit.window_sums(self.w)
        self.ids = [np.array(x, dtype=np.intp) for x in ids]
        self.reread = [np.array(x, dtype=float) for x in reread]
        self.kept = [np.array(x, dtype=float) for x in kept]
        self.pairs = sum(n - d for d in range(self.w))  # windows in all

    def at(self, seg) -> tuple[list, list[np.ndarray]]:  # noqa: ANN001
        """(the span of each context, each window's traffic per offset, NaN where it is no group)
        at the capacity of ``seg`` (a :class:`.segments.Segments`)."""
        spans = [seg.span(i, j) for i, j in self.first]
        by_id = np.array([np.nan if s is None else s.traffic for s in spans], dtype=float)
        return spans, [by_id[ids] for ids in self.ids]

    def times(self, traffic: list[np.ndarray], units: np.ndarray, held: float,
              bw: float) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """Per offset: (Q, compute, time) of every window on one chip: ``Q`` = traffic less the credit of
        what on-chip memory holds (``held`` bytes: ``min(held, re-read) + min(held, kept)``, none when 0),
        ``time = max(compute, Q / bw)``."""
        compute = busiest_unit(units, self.w)
        qs, ts = [], []
        for d in range(self.w):
            if held <= 0:
                q = traffic[d] - 0.0
            else:
                q = traffic[d] - (np.minimum(held, self.reread[d]) + np.minimum(held, self.kept[d]))
            qs.append(q)
            ts.append(np.maximum(compute[d], q / bw))
        return qs, compute, ts

    def by_end(self, per_offset: list[np.ndarray]) -> list[list[float]]:
        """Per last node j, the values of the windows ending there by offset d (NaN past the start)."""
        grid = np.full((self.n, self.w), np.nan)
        for d, x in enumerate(per_offset):
            grid[d:, d] = x
        return grid.tolist()


def busiest_unit(units: np.ndarray, w: int) -> list[np.ndarray]:
    """Per offset d < ``w``, the busiest unit's seconds of each window ``i..i+d`` (entry i):
    ``max(matrix, vector, special)`` of its nodes' sums (``units``: a row of the three per node),
    each sum added from the window's last node back to its first."""
    n = len(units)
    out: list[np.ndarray] = []
    cols = np.ascontiguousarray(units.T)
    acc = cols
    for d in range(min(w, n)):
        acc = 0.0 + cols if d == 0 else acc[:, 1:] + cols[:, :n - d]
        out.append(np.maximum(np.maximum(acc[0], acc[1]), acc[2]))
    return out


__all__ = ["Windows", "busiest_unit"]
