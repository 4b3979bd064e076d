"""A grouped 3x3 convolution (G groups, padding 1) with a bias (cross-frontend twin of
tests/models/conv2d_grouped.py): output channel k of group g reads only that group's Cg
input channels, ``x[n, Cg*g + c, ...]`` and ``w[Kg*g + k, c, r, s]``; the result
[N, G, Kg, H, W] is viewed as [N, G*Kg, H, W] for the bias add.
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel, reshape, size

N, C, H, W = Dim("N", 8), Dim("C", 256), Dim("H", 28), Dim("W", 28)
G, Cg, Kg, K = Dim("G", 32), Dim("Cg", 8), Dim("Kg", 8), Dim("K", 256)
R, S = Dim("R", 3), Dim("S", 3)
CG, KG = size(Cg), size(Kg)  # index coefficients: module-level ints


@kernel
def grouped_conv(x: Tensor("N,C,H,W", fill=0.0), w: Tensor("K,Cg,R,S"), y: Out("N,G,Kg,H,W")):
    for n in N:
        for g in G:
            for k in Kg:
                for h in H:
                    for v in W:
                        for c in Cg:
                            for r in R:
                                for s in S:
                                    y[n, g, k, h, v] += x[n, CG * g + c, h + r - 1, v + s - 1] * w[KG * g + k, c, r, s]


@kernel
def bias_add(x: Tensor("N,K,H,W"), b: Tensor("K"), y: Out("N,K,H,W")):
    for n in N:
        for k in K:
            for h in H:
                for v in W:
                    y[n, k, h, v] = x[n, k, h, v] + b[k]


def model(x: Tensor("N,C,H,W"), w: Tensor("K,Cg,R,S", role="weight"), b: Tensor("K", role="weight")):
    y = grouped_conv(x, w)
    return {"y": bias_add(reshape(y, "N,K,H,W", K=y.size_of("G") * y.size_of("Kg")), b)}
