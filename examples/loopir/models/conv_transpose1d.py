"""A transposed 1-d convolution, kernel 3, stride 1, padding 1, with a bias (cross-frontend
twin of tests/models/conv_transpose1d.py), as the torch frontend lowers it: every input
position times every tap (``cols``, the MACs), then each output position sums the taps
that land on it, ``cols[b, k, p - r + 1, r]`` (zero outside: the padding), then the bias.
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel

B, C, L, K, R, P = Dim("B", 16), Dim("C", 256), Dim("L", 1024), Dim("K", 128), Dim("R", 3), Dim("P", 1024)


@kernel
def taps(x: Tensor("B,C,L"), w: Tensor("C,K,R"), cols: Out("B,K,L,R")):
    for b in B:
        for k in K:
            for i in L:
                for r in R:
                    for c in C:
                        cols[b, k, i, r] += x[b, c, i] * w[c, k, r]


@kernel
def col2im(cols: Tensor("B,K,L,R", fill=0.0), y: Out("B,K,P")):
    for b in B:
        for k in K:
            for p in P:
                for r in R:
                    y[b, k, p] += cols[b, k, p - r + 1, r]


@kernel
def bias_add(z: Tensor("B,K,P"), bias: Tensor("K"), y: Out("B,K,P")):
    for b in B:
        for k in K:
            for p in P:
                y[b, k, p] = z[b, k, p] + bias[k]


def model(x: Tensor("B,C,L"), w: Tensor("C,K,R", role="weight"), bias: Tensor("K", role="weight")):
    return {"y": bias_add(col2im(taps(x, w)), bias)}
