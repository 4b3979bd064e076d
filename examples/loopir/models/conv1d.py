"""A 1-d convolution, kernel 5, stride 2, padding 1, with a bias (cross-frontend twin of
tests/models/conv1d.py). The output length P = (L + 2 - 5) // 2 + 1 is a Dim of its own.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel

B, C, L, K, R, P = Dim("B", 8), Dim("C", 64), Dim("L", 1025), Dim("K", 128), Dim("R", 5), Dim("P", 512)


@kernel
def conv(x: Tensor("B,C,L", fill=0.0), w: Tensor("K,C,R"), bias: Tensor("K"), acc: Temp("B,K,P"), y: Out("B,K,P")):
    for b in B:
        for k in K:
            for p in P:
                for c in C:
                    for r in R:
                        acc[b, k, p] += x[b, c, 2 * p + r - 1] * w[k, c, r]
    for b in B:
        for k in K:
            for p in P:
                y[b, k, p] = acc[b, k, p] + bias[k]


def model(x: Tensor("B,C,L"), w: Tensor("K,C,R", role="weight"), bias: Tensor("K", role="weight")):
    return {"y": conv(x, w, bias)}
