"""A 3x5 convolution with dilation 2 and padding (2, 1), no bias (cross-frontend twin of
tests/models/conv2d_dilated.py): the taps are 2 apart, ``x[n, c, p + 2*r - 2, q + 2*s - 1]``.
Output sizes: P = H + 4 - 2*(3-1) = H, Q = W + 2 - 2*(5-1) = W - 6.
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel

N, C, H, W = Dim("N", 8), Dim("C", 64), Dim("H", 64), Dim("W", 64)
K, R, S, P, Q = Dim("K", 64), Dim("R", 3), Dim("S", 5), Dim("P", 64), Dim("Q", 58)


@kernel
def conv(x: Tensor("N,C,H,W", fill=0.0), w: Tensor("K,C,R,S"), y: Out("N,K,P,Q")):
    for n in N:
        for k in K:
            for p in P:
                for q in Q:
                    for c in C:
                        for r in R:
                            for s in S:
                                y[n, k, p, q] += x[n, c, p + 2 * r - 2, q + 2 * s - 1] * w[k, c, r, s]


def model(x: Tensor("N,C,H,W"), w: Tensor("K,C,R,S", role="weight")):
    return {"y": conv(x, w)}
