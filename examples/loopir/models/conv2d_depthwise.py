"""A depthwise 3x3 convolution (groups = channels, padding 1) then a pointwise 1x1
convolution, both with biases (cross-frontend twin of tests/models/conv2d_depthwise.py).

Each channel convolves only its own plane: the depthwise weight is C,U,R,S with U = 1
(one input channel per group), read at the constant index 0.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel

N, C, H, W = Dim("N", 8), Dim("C", 256), Dim("H", 56), Dim("W", 56)
K, R, S = Dim("K", 512), Dim("R", 3), Dim("S", 3)
U, U2 = Dim("U", 1), Dim("U2", 1)


@kernel
def depthwise(x: Tensor("N,C,H,W", fill=0.0), w: Tensor("C,U,R,S"), bias: Tensor("C"), acc: Temp("N,C,H,W"),
              y: Out("N,C,H,W")):
    for n in N:
        for c in C:
            for h in H:
                for v in W:
                    for r in R:
                        for s in S:
                            acc[n, c, h, v] += x[n, c, h + r - 1, v + s - 1] * w[c, 0, r, s]
    for n in N:
        for c in C:
            for h in H:
                for v in W:
                    y[n, c, h, v] = acc[n, c, h, v] + bias[c]


@kernel
def pointwise(x: Tensor("N,C,H,W"), w: Tensor("K,C,U,U2"), bias: Tensor("K"), acc: Temp("N,K,H,W"),
              y: Out("N,K,H,W")):
    for n in N:
        for k in K:
            for h in H:
                for v in W:
                    for c in C:
                        acc[n, k, h, v] += x[n, c, h, v] * w[k, c, 0, 0]
    for n in N:
        for k in K:
            for h in H:
                for v in W:
                    y[n, k, h, v] = acc[n, k, h, v] + bias[k]


def model(x: Tensor("N,C,H,W"), dw: Tensor("C,U,R,S", role="weight"), dwb: Tensor("C", role="weight"),
          pw: Tensor("K,C,U,U2", role="weight"), pwb: Tensor("K", role="weight")):
    return {"y": pointwise(depthwise(x, dw, dwb), pw, pwb)}
