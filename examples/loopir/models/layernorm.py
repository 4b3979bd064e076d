"""LayerNorm over the last dim with a learned scale and shift, one nest per op as the
PyTorch frontend lowers ``aten.layer_norm`` (cross-frontend twin of tests/models/layernorm.py).

The 1/D factor is a scalar parameter taken from the input's shape, so any D works.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, rsqrt, square

B, S, D = Dim("B", 8), Dim("S", 512), Dim("D", 768)
EPS = 1e-5


@kernel
def ln(x: Tensor("B,S,D"), g: Tensor("D"), beta: Tensor("D"), c: float, total: Temp("B,S"), mean: Temp("B,S"),
       xc: Temp("B,S,D"), sq: Temp("B,S,D"), total2: Temp("B,S"), var: Temp("B,S"), ve: Temp("B,S"),
       rstd: Temp("B,S"), xhat: Temp("B,S,D"), scaled: Temp("B,S,D"), y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                total[b, s] += x[b, s, d]
    for b in B:
        for s in S:
            mean[b, s] = total[b, s] * c
    for b in B:
        for s in S:
            for d in D:
                xc[b, s, d] = x[b, s, d] - mean[b, s]
                sq[b, s, d] = square(xc[b, s, d])
    for b in B:
        for s in S:
            for d in D:
                total2[b, s] += sq[b, s, d]
    for b in B:
        for s in S:
            var[b, s] = total2[b, s] * c
            ve[b, s] = var[b, s] + EPS
            rstd[b, s] = rsqrt(ve[b, s])
    for b in B:
        for s in S:
            for d in D:
                xhat[b, s, d] = xc[b, s, d] * rstd[b, s]
                scaled[b, s, d] = xhat[b, s, d] * g[d]
                y[b, s, d] = scaled[b, s, d] + beta[d]


def model(x: Tensor("B,S,D"), g: Tensor("D", role="weight"), beta: Tensor("D", role="weight")):
    return {"y": ln(x, g, beta, 1.0 / x.size_of("D"))}
