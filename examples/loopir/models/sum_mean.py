"""Sums and a mean (cross-frontend twin of tests/models/sum_mean.py): a sum over (C, H), a
mean over W (a sum scaled by 1/W), and the sum of all elements."""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel

N, C, H, W = Dim("N", 32), Dim("C", 64), Dim("H", 56), Dim("W", 56)


@kernel
def sum_ch(x: Tensor("N,C,H,W"), y: Out("N,W")):
    for n in N:
        for c in C:
            for h in H:
                for w in W:
                    y[n, w] += x[n, c, h, w]


@kernel
def mean_w(x: Tensor("N,C,H,W"), inv_w: float, total: Temp("N,C,H"), y: Out("N,C,H")):
    for n in N:
        for c in C:
            for h in H:
                for w in W:
                    total[n, c, h] += x[n, c, h, w]
    for n in N:
        for c in C:
            for h in H:
                y[n, c, h] = total[n, c, h] * inv_w


@kernel
def sum_all(x: Tensor("N,C,H,W"), y: Out("")):
    for n in N:
        for c in C:
            for h in H:
                for w in W:
                    y[()] += x[n, c, h, w]


def model(x: Tensor("N,C,H,W")):
    return {"s": sum_ch(x), "m": mean_w(x, 1.0 / x.size_of("W")), "t": sum_all(x)}
