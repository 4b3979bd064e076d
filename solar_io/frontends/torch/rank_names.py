"""Canonical rank names: of a reshape's output dims, and the hints for a graph input's ranks.

:func:`reshape_ranks` aligns the input and output dims into runs of equal product
(:func:`align_dims`) and names each output dim after the dims it comes from: a dim that keeps its
size keeps its rank, a hidden ``D`` split in two reads ``H, E`` (heads, head dim), size-1 dims read
``U``. ``_INPUT_HINTS`` and ``_INT_HINTS`` name a graph input's ranks by its number of dims.

>>> align_dims([2, 12], [2, 3, 4])
[((0, 1), (0, 1)), ((1, 2), (1, 3))]
"""

from __future__ import annotations

from collections.abc import Sequence

from ..common.builder import GraphBuilder, family

#: Rank-name hints of a graph input by its number of dims (floating inputs; integer ones: ``_INT_HINTS``).
_INPUT_HINTS = {1: ("D",), 2: ("B", "D"), 3: ("B", "S", "D"), 4: ("N", "C", "H", "W"),
                5: ("N", "C", "T", "H", "W")}
_INT_HINTS = {1: ("B",), 2: ("B", "S"), 3: ("B", "S", "K")}


def reshape_ranks(b: GraphBuilder, xr: Sequence[str], xs: Sequence[int], shape: Sequence[int]) -> tuple[str, ...]:
    """Ranks for a reshape of a tensor (ranks ``xr``, shape ``xs``) to ``shape``.

    Input and output dims are aligned into groups of equal product. A dim that keeps its size
    keeps its rank; a hidden ``D`` split in two reads ``H, E`` (heads, head dim); a merge ending
    in ``E`` reads ``D``; other new dims keep the family of the dims they come from, and
    size-1 dims read ``U``.
    """
    groups = align_dims(list(xs), list(shape))
    out: list[str] = []
    taken: set[str] = set()
    plans: list[tuple[list[str], list[int]]] = []
    for (i0, i1), (j0, j1) in groups:
        plans.append((list(xr[i0:i1]), list(shape[j0:j1])))
    # Dims that keep their rank first, so new names avoid them.
    for ins, outs in plans:
        if len(ins) == 1 and len(outs) == 1:
            taken.add(ins[0])
    for ins, outs in plans:
        if len(ins) == 1 and len(outs) == 1:
            out.append(ins[0])
            continue
        fams = [family(r) for r in ins if b.sizes[r] != 1] or ["U"]
        real = [s for s in outs if s != 1]
        if len(fams) == 1 and fams[0] == "D" and len(real) == 2:
            hints = iter(["H", "E"])
        elif len(real) == 1 and fams[-1] == "E":
            hints = iter(["D"])
        else:
            hints = iter([fams[0]] * len(real))
        for s in outs:
            r = b.rank("U" if s == 1 else next(hints), s, taken)
            taken.add(r)
            out.append(r)
    return tuple(out)


def align_dims(xs: list[int], ys: list[int]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Group dims of two shapes with the same number of elements into runs of equal product:
    ``((i0, i1), (j0, j1))`` pairs, ``xs[i0:i1]`` and ``ys[j0:j1]`` of equal product.

    >>> align_dims([1, 4096, 4096], [1, 4096, 32, 128])
    [((0, 1), (0, 1)), ((1, 2), (1, 2)), ((2, 3), (2, 4))]
    """
    groups = []
    i = j = 0
    n, m = len(xs), len(ys)
    while i < n or j < m:
        i0, j0 = i, j
        if i < n and j < m and xs[i] == ys[j]:
            groups.append(((i, i + 1), (j, j + 1)))
            i, j = i + 1, j + 1
            continue
        if i < n and xs[i] == 1:
            groups.append(((i, i + 1), (j, j)))
            i += 1
            continue
        if j < m and ys[j] == 1:
            groups.append(((i, i), (j, j + 1)))
            j += 1
            continue
        pa = xs[i] if i < n else 1
        pb = ys[j] if j < m else 1
        i, j = min(i + 1, n), min(j + 1, m)
        while pa != pb and (i < n or j < m):
            if pa < pb and i < n:
                pa *= xs[i]
                i += 1
            elif j < m:
                pb *= ys[j]
                j += 1
            else:
                pa *= xs[i]
                i += 1
        if pa != pb:
            return [((i0, n), (j0, m))] if not groups else groups + [((i0, n), (j0, m))]
        groups.append(((i0, i), (j0, j)))
    return groups


def _resolve_shape(shape: Sequence[int], numel: int) -> tuple[int, ...]:
    shape = [int(s) for s in shape]
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        shape[shape.index(-1)] = numel // known if known else 0
    return tuple(shape)
