"""Adaptive pools (cross-frontend twin of tests/models/adaptive_pool.py): average to 1x1 and
4x4 and max to 2x2, where the output size divides the input's (uniform windows: strided
window reads), and average to 3x5, max to 5x3 and a 1-D average to 3, where it does not.

Output element i of a dim of length L pooled to O covers [floor(i L / O), ceil((i + 1) L / O)):
windows of unequal widths, at most K. As PyTorch's capture lowers it, each such dim is a
gather of K-wide windows through a constant index table, a ``where`` that blanks the slots
past a window's end (0 for the average, -inf for the max), the window reduction and, for
the average, a multiply by the constant 1 / width of each window. The tables are constant
inputs (``get_inputs``); the 2-D pools do the rows (H), then the columns (W).
"""

import math

import numpy as np

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, gather, kernel, select, size, where


def width(n: int, o: int) -> int:
    """The widest window of a dim of ``n`` pooled to ``o``."""
    return max(math.ceil((i + 1) * n / o) - (i * n) // o for i in range(o))


def windows(n: int, o: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(index [o, K], valid [o, K], 1 / width [o]) of a dim of ``n`` pooled to ``o``."""
    k = width(n, o)
    start = np.array([(i * n) // o for i in range(o)])
    end = np.array([math.ceil((i + 1) * n / o) for i in range(o)])
    slot = start[:, None] + np.arange(k)[None, :]
    return np.minimum(slot, n - 1), slot < end[:, None], 1.0 / (end - start)


N, C, H, W = Dim("N", 8), Dim("C", 64), Dim("H", 56), Dim("W", 56)
P1, Q1, P2, Q2, P3, Q3 = Dim("P1", 1), Dim("Q1", 1), Dim("P2", 4), Dim("Q2", 4), Dim("P3", 2), Dim("Q3", 2)
R1, S1 = Dim("R1", size(H) // size(P1)), Dim("S1", size(W) // size(Q1))  # uniform windows
R2, S2 = Dim("R2", size(H) // size(P2)), Dim("S2", size(W) // size(Q2))
R3, S3 = Dim("R3", size(H) // size(P3)), Dim("S3", size(W) // size(Q3))
A, B = Dim("A", 3), Dim("B", 5)  # the average to 3x5 (and the 1-D average to 3: A over W)
A2, B2 = Dim("A2", 5), Dim("B2", 3)  # the max to 5x3
KA, KB = Dim("KA", width(size(H), size(A))), Dim("KB", width(size(W), size(B)))
KA2, KB2 = Dim("KA2", width(size(H), size(A2))), Dim("KB2", width(size(W), size(B2)))
KA3 = Dim("KA3", width(size(W), size(A)))
SR1, SS1, SR2, SS2, SR3, SS3 = size(R1), size(S1), size(R2), size(S2), size(R3), size(S3)  # strides
INV1 = 1.0 / (size(R1) * size(S1))
INV2 = 1.0 / (size(R2) * size(S2))


@kernel
def avg_1x1(x: Tensor("N,C,H,W"), total: Temp("N,C,P1,Q1"), y: Out("N,C,P1,Q1")):
    for n in N:
        for c in C:
            for p in P1:
                for q in Q1:
                    for r in R1:
                        for s in S1:
                            total[n, c, p, q] += x[n, c, SR1 * p + r, SS1 * q + s]
    for n in N:
        for c in C:
            for p in P1:
                for q in Q1:
                    y[n, c, p, q] = total[n, c, p, q] * INV1


@kernel
def avg_4x4(x: Tensor("N,C,H,W"), total: Temp("N,C,P2,Q2"), y: Out("N,C,P2,Q2")):
    for n in N:
        for c in C:
            for p in P2:
                for q in Q2:
                    for r in R2:
                        for s in S2:
                            total[n, c, p, q] += x[n, c, SR2 * p + r, SS2 * q + s]
    for n in N:
        for c in C:
            for p in P2:
                for q in Q2:
                    y[n, c, p, q] = total[n, c, p, q] * INV2


@kernel
def max_2x2(x: Tensor("N,C,H,W"), y: Out("N,C,P3,Q3")):
    for n in N:
        for c in C:
            for p in P3:
                for q in Q3:
                    for r in R3:
                        for s in S3:
                            y[n, c, p, q] = max(y[n, c, p, q], x[n, c, SR3 * p + r, SS3 * q + s])


@kernel
def avg_rows(win: Tensor("N,C,A,KA,W"), valid: Tensor("A,KA"), inv: Tensor("A"), m: Temp("N,C,A,KA,W"),
             total: Temp("N,C,A,W"), y: Out("N,C,A,W")):
    for n in N:
        for c in C:
            for a in A:
                for w in W:
                    for k in KA:
                        m[n, c, a, k, w] = where(valid[a, k], win[n, c, a, k, w], 0.0)
                        total[n, c, a, w] += m[n, c, a, k, w]
    for n in N:
        for c in C:
            for a in A:
                for w in W:
                    y[n, c, a, w] = total[n, c, a, w] * inv[a]


@kernel
def avg_cols(win: Tensor("N,C,A,B,KB"), valid: Tensor("B,KB"), inv: Tensor("B"), m: Temp("N,C,A,B,KB"),
             total: Temp("N,C,A,B"), y: Out("N,C,A,B")):
    for n in N:
        for c in C:
            for a in A:
                for b in B:
                    for k in KB:
                        m[n, c, a, b, k] = where(valid[b, k], win[n, c, a, b, k], 0.0)
                        total[n, c, a, b] += m[n, c, a, b, k]
    for n in N:
        for c in C:
            for a in A:
                for b in B:
                    y[n, c, a, b] = total[n, c, a, b] * inv[b]


@kernel
def max_rows(win: Tensor("N,C,A,KA,W"), valid: Tensor("A,KA"), m: Temp("N,C,A,KA,W"), y: Out("N,C,A,W")):
    for n in N:
        for c in C:
            for a in A:
                for w in W:
                    for k in KA:
                        m[n, c, a, k, w] = where(valid[a, k], win[n, c, a, k, w], -math.inf)
                        y[n, c, a, w] = max(y[n, c, a, w], m[n, c, a, k, w])


@kernel
def max_cols(win: Tensor("N,C,A,B,KB"), valid: Tensor("B,KB"), m: Temp("N,C,A,B,KB"), y: Out("N,C,A,B")):
    for n in N:
        for c in C:
            for a in A:
                for b in B:
                    for k in KB:
                        m[n, c, a, b, k] = where(valid[b, k], win[n, c, a, b, k], -math.inf)
                        y[n, c, a, b] = max(y[n, c, a, b], m[n, c, a, b, k])


@kernel
def avg_last(win: Tensor("N,H,A,KA"), valid: Tensor("A,KA"), inv: Tensor("A"), m: Temp("N,H,A,KA"),
             total: Temp("N,H,A"), y: Out("N,H,A")):
    for n in N:
        for h in H:
            for a in A:
                for k in KA:
                    m[n, h, a, k] = where(valid[a, k], win[n, h, a, k], 0.0)
                    total[n, h, a] += m[n, h, a, k]
    for n in N:
        for h in H:
            for a in A:
                y[n, h, a] = total[n, h, a] * inv[a]


def model(x: Tensor("N,C,H,W"),
          ia: Tensor("A,KA", dtype="int64", role="constant", generated=True),
          va: Tensor("A,KA", dtype="bool", role="constant", generated=True),
          fa: Tensor("A", role="constant", generated=True),
          ib: Tensor("B,KB", dtype="int64", role="constant", generated=True),
          vb: Tensor("B,KB", dtype="bool", role="constant", generated=True),
          fb: Tensor("B", role="constant", generated=True),
          ia2: Tensor("A2,KA2", dtype="int64", role="constant", generated=True),
          va2: Tensor("A2,KA2", dtype="bool", role="constant", generated=True),
          ib2: Tensor("B2,KB2", dtype="int64", role="constant", generated=True),
          vb2: Tensor("B2,KB2", dtype="bool", role="constant", generated=True),
          ia3: Tensor("A,KA3", dtype="int64", role="constant", generated=True),
          va3: Tensor("A,KA3", dtype="bool", role="constant", generated=True),
          fa3: Tensor("A", role="constant", generated=True)):
    avg35 = avg_cols(gather(avg_rows(gather(x, ia, "H"), va, fa), ib, "W"), vb, fb)
    max53 = max_cols(gather(max_rows(gather(x, ia2, "H"), va2), ib2, "W"), vb2)
    avg1d = avg_last(gather(select(x, "C", 0), ia3, "W"), va3, fa3)
    return {"a": avg_1x1(x), "b": avg_4x4(x), "c": max_2x2(x), "d": avg35, "e": max53, "f": avg1d}


def get_inputs(rng):
    out = {}
    for suffix, n, o in (("a", size(H), size(A)), ("b", size(W), size(B)), ("a2", size(H), size(A2)),
                         ("b2", size(W), size(B2)), ("a3", size(W), size(A))):
        index, valid, inv = windows(n, o)
        out["i" + suffix], out["v" + suffix] = index, valid
        if suffix in ("a", "b", "a3"):
            out["f" + suffix] = inv
    return out
