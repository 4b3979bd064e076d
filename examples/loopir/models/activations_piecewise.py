"""Piecewise-linear activations (cross-frontend twin of tests/models/activations_piecewise.py):
leaky ReLU (slope 0.1) as max(x, 0.1 x), hardtanh to [-0.5, 0.5] as min(max(x, -0.5), 0.5),
ReLU6 of 4x, and threshold (x > 0.2 ? x : -1)."""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, where

B, D = Dim("B", 4096), Dim("D", 4096)


@kernel
def piecewise(x: Tensor("B,D"), sx: Temp("B,D"), hmax: Temp("B,D"), x4: Temp("B,D"), r: Temp("B,D"),
              gt: Temp("B,D", "bool"), leaky: Out("B,D"), hard: Out("B,D"), relu6: Out("B,D"), thr: Out("B,D")):
    for b in B:
        for d in D:
            sx[b, d] = x[b, d] * 0.1
            leaky[b, d] = max(x[b, d], sx[b, d])
            hmax[b, d] = max(x[b, d], -0.5)
            hard[b, d] = min(hmax[b, d], 0.5)
            x4[b, d] = x[b, d] * 4.0
            r[b, d] = max(x4[b, d], 0.0)
            relu6[b, d] = min(r[b, d], 6.0)
            gt[b, d] = x[b, d] > 0.2
            thr[b, d] = where(gt[b, d], x[b, d], -1.0)


def model(x: Tensor("B,D")):
    leaky, hard, relu6, thr = piecewise(x)
    return {"leaky": leaky, "hard": hard, "relu6": relu6, "threshold": thr}
