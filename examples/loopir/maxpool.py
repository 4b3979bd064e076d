"""A 3x3 max pool, stride 2, padding 1 (a ResNet stem's pool).

``fill=-math.inf`` makes the border neutral for max; the accumulation form
``y = max(y, e)`` lifts to map identity, reduce max over the window dims R, S.
"""

import math

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel

N = Dim("N", 8, parallel=True)
C, H, W = Dim("C", 64), Dim("H", 112), Dim("W", 112)
R, S = Dim("R", 3), Dim("S", 3)
P, Q = Dim("P", 56), Dim("Q", 56)


@kernel
def maxpool(x: Tensor("N,C,H,W", fill=-math.inf), y: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    for r in R:
                        for s in S:
                            y[n, c, p, q] = max(y[n, c, p, q], x[n, c, 2 * p + r - 1, 2 * q + s - 1])


def model(x: Tensor("N,C,H,W", dtype="bf16")):
    return {"y": maxpool(x)}
