"""A 3-d average pool, window 2, stride 2 (cross-frontend twin of tests/models/avgpool3d.py):
a window sum (add-reduce over the window dims) then a scale by 1/(window volume).
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, size

N, C, T, H, W = Dim("N", 4), Dim("C", 64), Dim("T", 16), Dim("H", 56), Dim("W", 56)
KD, KH, KW = Dim("KD", 2), Dim("KH", 2), Dim("KW", 2)
T2, H2, W2 = Dim("T2", 8), Dim("H2", 28), Dim("W2", 28)
INV_WINDOW = 1.0 / (size(KD) * size(KH) * size(KW))


@kernel
def avgpool3d(x: Tensor("N,C,T,H,W"), total: Temp("N,C,T2,H2,W2"), y: Out("N,C,T2,H2,W2")):
    for n in N:
        for c in C:
            for t in T2:
                for h in H2:
                    for w in W2:
                        for a in KD:
                            for b in KH:
                                for e in KW:
                                    total[n, c, t, h, w] += x[n, c, 2 * t + a, 2 * h + b, 2 * w + e]
    for n in N:
        for c in C:
            for t in T2:
                for h in H2:
                    for w in W2:
                        y[n, c, t, h, w] = total[n, c, t, h, w] * INV_WINDOW


def model(x: Tensor("N,C,T,H,W")):
    return {"y": avgpool3d(x)}
