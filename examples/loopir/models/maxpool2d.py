"""Max pools (cross-frontend twin of tests/models/maxpool2d.py): 3x3 stride 2 padding 1,
and 2x2 stride 2 with ceil_mode (its last window runs past the border: read as -inf).
"""

import math

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel

N, C, H, W = Dim("N", 8), Dim("C", 64), Dim("H", 111), Dim("W", 111)
R, S, R2, S2 = Dim("R", 3), Dim("S", 3), Dim("R2", 2), Dim("S2", 2)
P, Q = Dim("P", 56), Dim("Q", 56)


@kernel
def pool3(x: Tensor("N,C,H,W", fill=-math.inf), y: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    for r in R:
                        for s in S:
                            y[n, c, p, q] = max(y[n, c, p, q], x[n, c, 2 * p + r - 1, 2 * q + s - 1])


@kernel
def pool2(x: Tensor("N,C,H,W", fill=-math.inf), y: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    for r in R2:
                        for s in S2:
                            y[n, c, p, q] = max(y[n, c, p, q], x[n, c, 2 * p + r, 2 * q + s])


def model(x: Tensor("N,C,H,W")):
    return {"a": pool3(x), "b": pool2(x)}
