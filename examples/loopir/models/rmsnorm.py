"""RMSNorm with a learned scale, eps 1e-6 (cross-frontend twin of tests/models/rmsnorm.py)."""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, rsqrt, size, square

B, S, D = Dim("B", 8), Dim("S", 2048), Dim("D", 4096)
INV_D = 1.0 / size(D)


@kernel
def rms(x: Tensor("B,S,D"), g: Tensor("D"), sq: Temp("B,S,D"), tot: Temp("B,S"), ms: Temp("B,S"),
        r: Temp("B,S"), xh: Temp("B,S,D"), y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                sq[b, s, d] = square(x[b, s, d])
                tot[b, s] += sq[b, s, d]
    for b in B:
        for s in S:
            ms[b, s] = tot[b, s] * INV_D
            r[b, s] = rsqrt(ms[b, s] + 1e-6)
    for b in B:
        for s in S:
            for d in D:
                xh[b, s, d] = x[b, s, d] * r[b, s]
                y[b, s, d] = xh[b, s, d] * g[d]


def model(x: Tensor("B,S,D"), g: Tensor("D", role="weight")):
    return {"y": rms(x, g)}
