"""BatchNorm1d in training mode on [B, D] features (cross-frontend twin of
tests/models/batchnorm1d.py): batch mean and (biased) variance over B, then centre,
scale and shift — one store per op, as ``aten.batch_norm`` lowers. 1/B comes from the
input's shape.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, rsqrt, square

B, D = Dim("B", 256), Dim("D", 1024)
EPS = 1e-5


@kernel
def batchnorm(x: Tensor("B,D"), g: Tensor("D"), beta: Tensor("D"), inv_b: float, total: Temp("D"),
              mean: Temp("D"), xc: Temp("B,D"), sq: Temp("B,D"), total2: Temp("D"), var: Temp("D"), ve: Temp("D"),
              rstd: Temp("D"), xhat: Temp("B,D"), scaled: Temp("B,D"), y: Out("B,D")):
    for d in D:
        for b in B:
            total[d] += x[b, d]
    for d in D:
        mean[d] = total[d] * inv_b
    for b in B:
        for d in D:
            xc[b, d] = x[b, d] - mean[d]
            sq[b, d] = square(xc[b, d])
    for d in D:
        for b in B:
            total2[d] += sq[b, d]
    for d in D:
        var[d] = total2[d] * inv_b
        ve[d] = var[d] + EPS
        rstd[d] = rsqrt(ve[d])
    for b in B:
        for d in D:
            xhat[b, d] = xc[b, d] * rstd[d]
            scaled[b, d] = xhat[b, d] * g[d]
            y[b, d] = scaled[b, d] + beta[d]


def model(x: Tensor("B,D"), g: Tensor("D", role="weight"), beta: Tensor("D", role="weight")):
    return {"y": batchnorm(x, g, beta, 1.0 / x.size_of("B"))}
