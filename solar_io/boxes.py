"""Parts of a tensor's dimension as boxes over its mixed-radix digits: which rows of a result are used.

A dimension of size N is read as the digits of a factoring N = n1 * n2 * ... (outermost first), and a
*digit box* is one interval per digit, ``((n1, lo1, hi1), (n2, lo2, hi2), ...)``: the values whose
digits all lie in their intervals. Windows 0-1 of each of 64 batches of a ``[64 * 43]`` dimension are
``((64, 0, 64), (43, 0, 2))``: 128 of 2,752 values, which no single interval describes. A reshape, a
shift and a union move such sets between tensors (:mod:`solar_io.liveness`). Where the exact set is
not a digit box, the smallest box holding it is taken: a superset, so more of a tensor is kept, never
less.

>>> d = regroup([((1720, 0, 80),)], (1720,), (43, 40))  # rows 0-79 of 43 windows of 40 queries each
>>> d
[((43, 0, 2),), ((40, 0, 40),)]
>>> count(union(((1720, 0, 80),), ((1720, 100, 120),)))  # the hull of two intervals
120
>>> regroup([((64, 0, 64),), ((43, 0, 2),)], (64, 43), (2752,))  # flattened: not an interval
[((64, 0, 64), (43, 0, 2))]
"""

from __future__ import annotations

from math import prod

#: one dimension's part: (digit size, low, high) per digit, outermost first; high is exclusive
Digits = tuple[tuple[int, int, int], ...]


def full(n: int) -> Digits:
    """The whole of a dimension of size ``n``."""
    return ((n, 0, n),)


def count(d: Digits) -> int:
    """How many values ``d`` holds."""
    return prod(hi - lo for _, lo, hi in d)


def size(d: Digits) -> int:
    """The size of the dimension ``d`` is a part of."""
    return prod(n for n, _, _ in d)


def is_full(d: Digits) -> bool:
    return all(lo == 0 and hi == n for n, lo, hi in d)


def hull(d: Digits) -> tuple[int, int]:
    """The smallest interval [low, high) holding ``d``."""
    lo = hi = 0
    stride = 1
    for n, a, b in reversed(d):
        lo += a * stride
        hi += (b - 1) * stride
        stride *= n
    return lo, hi + 1


def interval(n: int, lo: int, hi: int) -> Digits | None:
    """[lo, hi) clipped to a dimension of size ``n``; None when nothing is left."""
    lo, hi = max(lo, 0), min(hi, n)
    return ((n, lo, hi),) if lo < hi else None


def normal(d: Digits) -> Digits:
    """``d`` with neighbouring digits merged where the merged interval holds the same values."""
    out: list[tuple[int, int, int]] = []
    for n, lo, hi in d:
        if out:
            m, a, b = out[-1]
            if lo == 0 and hi == n:  # the inner digit is whole: a contiguous run of the outer
                out[-1] = (m * n, a * n, b * n)
                continue
            if b - a == 1:  # the outer digit is one value: an interval inside it
                out[-1] = (m * n, a * n + lo, a * n + hi)
                continue
        out.append((n, lo, hi))
    return tuple(out)


def _split(n: int, lo: int, hi: int, inner: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The digit (n, lo, hi) as two digits (n / inner, ...), (inner, ...): exact when it can be, else the hull."""
    if lo % inner == 0 and hi % inner == 0:
        return (n // inner, lo // inner, hi // inner), (inner, 0, inner)
    q = lo // inner
    if q == (hi - 1) // inner:
        return (n // inner, q, q + 1), (inner, lo - q * inner, hi - q * inner)
    return (n // inner, q, (hi - 1) // inner + 1), (inner, 0, inner)


def _strides(d: Digits) -> list[int]:
    out, s = [], 1
    for n, _, _ in reversed(d):
        out.append(s)
        s *= n
    return out[::-1]


def refine(d: Digits, strides: set[int]) -> Digits | None:
    """``d`` with a digit boundary at each stride of ``strides`` (a value count below the dimension's
    size); None where a stride does not divide the digits (no common factoring)."""
    out = list(d)
    for s in sorted(strides, reverse=True):
        at = _strides(tuple(out))
        for i, ((n, lo, hi), st) in enumerate(zip(out, at, strict=True)):
            if st == s or not st < s < st * n:
                continue
            if s % st or n % (s // st):
                return None
            out[i:i + 1] = _split(n, lo, hi, s // st)
            break
    return tuple(out)


def union(a: Digits, b: Digits) -> Digits:
    """The smallest digit box holding both parts of one dimension (their hull over a common factoring,
    else over a single interval)."""
    if a == b:
        return a
    ra, rb = refine(a, set(_strides(b))), refine(b, set(_strides(a)))
    if ra is not None and rb is not None and [n for n, _, _ in ra] == [n for n, _, _ in rb]:
        return normal(tuple((n, min(x, u), max(y, v)) for (n, x, y), (_, u, v) in zip(ra, rb, strict=True)))
    (x, y), (u, v) = hull(a), hull(b)
    return ((size(a), min(x, u), max(y, v)),)


def regroup(dims: list[Digits], old: tuple[int, ...], new: tuple[int, ...]) -> list[Digits] | None:
    """The parts ``dims`` of a tensor of shape ``old`` seen through a row-major reshape to ``new``; None
    when the shapes share no factoring the parts can be carried through."""
    flat: Digits = tuple(x for d in dims for x in d if x[0] > 1)  # a digit of size 1 holds its one value
    total = prod(old)
    bounds = {prod(new[i:]) for i in range(1, len(new))} - {total}
    fine = refine(flat, {s for s in bounds if 1 < s < total} if total > 1 else set())
    if fine is None:
        return None
    out: list[Digits] = []
    at = _strides(fine)
    start = 0
    for i in range(len(new)):
        inner = prod(new[i + 1:])
        end = start
        while end < len(fine) and at[end] >= inner:
            end += 1
        part = fine[start:end]
        out.append(normal(part) if part else ((1, 0, 1),))
        start = end
    return out if start == len(fine) else None


__all__ = ["Digits", "count", "full", "hull", "interval", "is_full", "normal", "refine", "regroup", "size",
           "union"]
