"""BatchNorm2d in inference mode (running statistics) then ReLU (cross-frontend twin of
tests/models/batchnorm2d.py): rstd = rsqrt(running_var + eps) over C, then centre, scale
by rstd, by the weight, shift, ReLU — one store per op, as ``aten.batch_norm`` lowers.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, relu, rsqrt, size

N, C, H, W = Dim("N", 32), Dim("C", 256), Dim("H", 28), Dim("W", 28)
EPS = 1e-5


@kernel
def batchnorm_relu(x: Tensor("N,C,H,W"), mean: Tensor("C"), var: Tensor("C"), g: Tensor("C"), beta: Tensor("C"),
                   ve: Temp("C"), rstd: Temp("C"), xc: Temp("N,C,H,W"), xhat: Temp("N,C,H,W"),
                   scaled: Temp("N,C,H,W"), bn: Temp("N,C,H,W"), y: Out("N,C,H,W")):
    for c in C:
        ve[c] = var[c] + EPS
        rstd[c] = rsqrt(ve[c])
    for n in N:
        for c in C:
            for h in H:
                for w in W:
                    xc[n, c, h, w] = x[n, c, h, w] - mean[c]
                    xhat[n, c, h, w] = xc[n, c, h, w] * rstd[c]
                    scaled[n, c, h, w] = xhat[n, c, h, w] * g[c]
                    bn[n, c, h, w] = scaled[n, c, h, w] + beta[c]
                    y[n, c, h, w] = relu(bn[n, c, h, w])


def model(x: Tensor("N,C,H,W"), g: Tensor("C", role="weight"), beta: Tensor("C", role="weight"),
          running_mean: Tensor("C", role="constant"), running_var: Tensor("C", role="constant")):
    return {"y": batchnorm_relu(x, running_mean, running_var, g, beta)}


def get_inputs(rng):
    return {"running_var": rng.uniform(0.5, 2.0, size(C))}
