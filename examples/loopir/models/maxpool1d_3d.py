"""A 1-d max pool with window 3, stride 1, dilation 2, and a 3-d max pool with window 2,
stride 2 (cross-frontend twin of tests/models/maxpool1d_3d.py): max-reductions over the
window dims; dilation is the coefficient of the window index.
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel

B, S, L, P, R = Dim("B", 32), Dim("S", 64), Dim("L", 1024), Dim("P", 1020), Dim("R", 3)
N, C, T, H, W = Dim("N", 4), Dim("C", 64), Dim("T", 16), Dim("H", 56), Dim("W", 56)
KD, KH, KW = Dim("KD", 2), Dim("KH", 2), Dim("KW", 2)
T2, H2, W2 = Dim("T2", 8), Dim("H2", 28), Dim("W2", 28)


@kernel
def maxpool1d(x: Tensor("B,S,L"), y: Out("B,S,P")):
    for b in B:
        for s in S:
            for p in P:
                for r in R:
                    y[b, s, p] = max(y[b, s, p], x[b, s, p + 2 * r])


@kernel
def maxpool3d(x: Tensor("N,C,T,H,W"), y: Out("N,C,T2,H2,W2")):
    for n in N:
        for c in C:
            for t in T2:
                for h in H2:
                    for w in W2:
                        for a in KD:
                            for b in KH:
                                for e in KW:
                                    y[n, c, t, h, w] = max(y[n, c, t, h, w], x[n, c, 2 * t + a, 2 * h + b, 2 * w + e])


def model(x: Tensor("B,S,L"), y: Tensor("N,C,T,H,W")):
    return {"a": maxpool1d(x), "b": maxpool3d(y)}
