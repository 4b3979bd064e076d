"""Kernels and repeated blocks of a graph (the layers of a decoder, the stages of a ResNet).

A *kernel* is the run of nodes lowered from one source op: frontends name them ``OP`` or
``OP.part`` (``rms_norm.sq``, ``rms_norm.sum``, ...), so the kernel of a node is its name up to
the first dot. A *repeated block* is the longest stretch of kernels that is one sequence of kernel
signatures (source op and node count) repeated back to back: :func:`repeated_blocks` finds the
period and repeat count that cover the most kernels (the shortest period on a tie), with one numpy
pass per candidate period.

>>> kernel_of("rms_norm_3.sq"), kernel_of("linear_7")
('rms_norm_3', 'linear_7')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Graph

#: Longest block period (in kernels) searched; the cost is one vector pass per period.
MAX_PERIOD = 1024


def kernel_of(name: str) -> str:
    return name.split(".", 1)[0]


@dataclass(frozen=True)
class Kernel:
    name: str
    op: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Blocks:
    """``repeats`` copies of a block of ``period`` kernels, the first starting at kernel ``start``."""

    start: int
    period: int
    repeats: int
    kernels: tuple[Kernel, ...]

    def block(self, i: int) -> list[str]:
        """Node names of block ``i`` (0-based)."""
        ks = self.kernels[self.start + i * self.period: self.start + (i + 1) * self.period]
        return [n for k in ks for n in k.nodes]

    @property
    def nodes_per_block(self) -> int:
        return len(self.block(0))


def kernels(g: Graph) -> list[Kernel]:
    """Consecutive runs of nodes with one kernel name, in file order."""
    out: list[Kernel] = []
    for n in g.nodes:
        k = kernel_of(n.name)
        if out and out[-1].name == k:
            out[-1] = Kernel(k, out[-1].op, (*out[-1].nodes, n.name))
        else:
            out.append(Kernel(k, n.op, (n.name,)))
    return out


def repeated_blocks(g: Graph, min_repeats: int = 2) -> Blocks | None:
    """The repeated block covering the most kernels, or None when nothing repeats ``min_repeats`` times
    with a block of at least two kernels."""
    ks = kernels(g)
    codes: dict[tuple[str, int], int] = {}
    seq = np.array([codes.setdefault((k.op, len(k.nodes)), len(codes)) for k in ks], dtype=np.int64)
    m = len(seq)
    best: tuple[int, int, int, int] | None = None  # (covered, -period, start, repeats)
    for p in range(2, min(m // min_repeats, MAX_PERIOD) + 1):
        eq = np.concatenate(([False], seq[:-p] == seq[p:], [False]))
        edges = np.flatnonzero(np.diff(eq.astype(np.int8)))
        starts, ends = edges[::2], edges[1::2]
        lengths = ends - starts
        if not len(lengths):
            continue
        reps = lengths // p + 1
        covered = reps * p
        j = int(np.argmax(covered))
        if reps[j] >= min_repeats:
            cand = (int(covered[j]), -p, int(starts[j]), int(reps[j]))
            if best is None or cand[:2] > best[:2]:
                best = cand
    if best is None:
        return None
    covered, neg_p, start, reps = best
    return Blocks(start, -neg_p, reps, tuple(ks))


__all__ = ["Blocks", "Kernel", "MAX_PERIOD", "kernel_of", "kernels", "repeated_blocks"]
