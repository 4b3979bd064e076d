"""A 3-d convolution, kernel 3, stride (1, 2, 2), padding 1, with a bias (cross-frontend twin
of tests/models/conv3d.py): P = T, Q = (H - 1) // 2 + 1, R = (W - 1) // 2 + 1."""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel

N, C, T, H, W = Dim("N", 2), Dim("C", 64), Dim("T", 16), Dim("H", 56), Dim("W", 56)
K, KT, KH, KW = Dim("K", 64), Dim("KT", 3), Dim("KH", 3), Dim("KW", 3)
P, Q, R = Dim("P", 16), Dim("Q", 28), Dim("R", 28)


@kernel
def conv3d(x: Tensor("N,C,T,H,W", fill=0.0), w: Tensor("K,C,KT,KH,KW"), y: Out("N,K,P,Q,R")):
    for n in N:
        for k in K:
            for p in P:
                for q in Q:
                    for r in R:
                        for c in C:
                            for a in KT:
                                for b in KH:
                                    for e in KW:
                                        y[n, k, p, q, r] += (x[n, c, p + a - 1, 2 * q + b - 1, 2 * r + e - 1]
                                                             * w[k, c, a, b, e])


@kernel
def bias_add(x: Tensor("N,K,P,Q,R"), bias: Tensor("K"), y: Out("N,K,P,Q,R")):
    for n in N:
        for k in K:
            for p in P:
                for q in Q:
                    for r in R:
                        y[n, k, p, q, r] = x[n, k, p, q, r] + bias[k]


def model(x: Tensor("N,C,T,H,W"), w: Tensor("K,C,KT,KH,KW", role="weight"), bias: Tensor("K", role="weight")):
    return {"y": bias_add(conv3d(x, w), bias)}
