"""A 3x3 convolution, stride 2, padding 1, then a bias add (as examples/graphs/conv2d.yaml).

``fill=0.0`` on x makes reads outside its H x W plane return 0 (zero padding); the
lifted node reads ``x[N, C, 2*P + R - 1, 2*Q + S - 1]`` with a declared border.
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel

N = Dim("N", 8, parallel=True)
C, H, W = Dim("C", 64), Dim("H", 56), Dim("W", 56)
K, R, S = Dim("K", 128), Dim("R", 3), Dim("S", 3)
P, Q = Dim("P", 28), Dim("Q", 28)


@kernel
def conv2d(x: Tensor("N,C,H,W", fill=0.0), w: Tensor("K,C,R,S"), y: Out("N,K,P,Q")):
    for n in N:
        for k in K:
            for p in P:
                for q in Q:
                    for c in C:
                        for r in R:
                            for s in S:
                                y[n, k, p, q] += x[n, c, 2 * p + r - 1, 2 * q + s - 1] * w[k, c, r, s]


@kernel
def bias_add(x: Tensor("N,K,P,Q"), b: Tensor("K"), y: Out("N,K,P,Q")):
    for n in N:
        for k in K:
            for p in P:
                for q in Q:
                    y[n, k, p, q] = x[n, k, p, q] + b[k]


def model(x: Tensor("N,C,H,W", dtype="bf16"), w: Tensor("K,C,R,S", dtype="bf16", role="weight"),
          b: Tensor("K", dtype="bf16", role="weight")):
    return {"y": bias_add(conv2d(x, w), b)}
