"""Layer normalisation over D with a learned scale and shift.

Sums are plain reductions and the 1/D factor is a scalar parameter applied once per
row, so that no row sum is mistaken for a contraction.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, rsqrt, square

B = Dim("B", 16, parallel=True)
D = Dim("D", 256)
EPS = 1e-5


@kernel
def layernorm(x: Tensor("B,D"), g: Tensor("D"), beta: Tensor("D"), inv_d: float,
              total: Temp("B"), xc: Temp("B,D"), sq: Temp("B"), rstd: Temp("B"), y: Out("B,D")):
    for b in B:
        for d in D:
            total[b] += x[b, d]
    for b in B:
        for d in D:
            xc[b, d] = x[b, d] - total[b] * inv_d
    for b in B:
        for d in D:
            sq[b] += square(xc[b, d])
    for b in B:
        rstd[b] = rsqrt(sq[b] * inv_d + EPS)
    for b in B:
        for d in D:
            y[b, d] = xc[b, d] * rstd[b] * g[d] + beta[d]


def model(x: Tensor("B,D"), g: Tensor("D", role="weight"), beta: Tensor("D", role="weight")):
    return {"y": layernorm(x, g, beta, 1.0 / x.size_of("D"))}
