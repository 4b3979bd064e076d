"""Average pools (cross-frontend twin of tests/models/avgpool2d.py): 3x3 stride 2 padding 1
excluding the padding from the count, the same including it, and 2x2 stride 2.

Excluding the padding divides each window sum by the number of in-bounds elements: a
window sum of an all-ones constant (an immediate, no bytes) read with zero fill.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, size

N, C, H, W = Dim("N", 8), Dim("C", 64), Dim("H", 56), Dim("W", 56)
R, S, P, Q = Dim("R", 3), Dim("S", 3), Dim("P", 28), Dim("Q", 28)
R2, S2, P2, Q2 = Dim("R2", 2), Dim("S2", 2), Dim("P2", 28), Dim("Q2", 28)
INV_WINDOW = 1.0 / (size(R) * size(S))
INV_WINDOW2 = 1.0 / (size(R2) * size(S2))


@kernel
def window_sum(x: Tensor("N,C,H,W", fill=0.0), total: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    for r in R:
                        for s in S:
                            total[n, c, p, q] += x[n, c, 2 * p + r - 1, 2 * q + s - 1]


@kernel
def in_bounds(ones: Tensor("H,W", fill=0.0), count: Out("P,Q")):
    for p in P:
        for q in Q:
            for r in R:
                for s in S:
                    count[p, q] += ones[2 * p + r - 1, 2 * q + s - 1]


@kernel
def divide(total: Tensor("N,C,P,Q"), count: Tensor("P,Q"), y: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    y[n, c, p, q] = total[n, c, p, q] / count[p, q]


@kernel
def scale(total: Tensor("N,C,P,Q"), f: float, y: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    y[n, c, p, q] = total[n, c, p, q] * f


@kernel
def avg2(x: Tensor("N,C,H,W"), total: Temp("N,C,P2,Q2"), y: Out("N,C,P2,Q2")):
    for n in N:
        for c in C:
            for p in P2:
                for q in Q2:
                    for r in R2:
                        for s in S2:
                            total[n, c, p, q] += x[n, c, 2 * p + r, 2 * q + s]
    for n in N:
        for c in C:
            for p in P2:
                for q in Q2:
                    y[n, c, p, q] = total[n, c, p, q] * INV_WINDOW2


def model(x: Tensor("N,C,H,W"), ones: Tensor("H,W", role="constant", value=1.0)):
    return {"a": divide(window_sum(x), in_bounds(ones)), "b": scale(window_sum(x), INV_WINDOW), "c": avg2(x)}
