"""Regression losses (cross-frontend twin of tests/models/regression_losses.py): MSE (mean),
L1 (sum), smooth L1 with beta 0.5 (mean) and Huber with delta 0.7 (per element), one store
per op as the torch frontend lowers them; means scale the full sum by 1/(B*D).
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, size, square, where

B, D = Dim("B", 1024), Dim("D", 1024)
INV_N = 1.0 / (size(B) * size(D))
BETA, DELTA = 0.5, 0.7


@kernel
def mse(x: Tensor("B,D"), y: Tensor("B,D"), diff: Temp("B,D"), sq: Temp("B,D"), total: Temp(""), loss: Out("")):
    for b in B:
        for d in D:
            diff[b, d] = x[b, d] - y[b, d]
            sq[b, d] = square(diff[b, d])
    for b in B:
        for d in D:
            total[()] += sq[b, d]
    loss[()] = total[()] * INV_N


@kernel
def l1_sum(x: Tensor("B,D"), y: Tensor("B,D"), diff: Temp("B,D"), ad: Temp("B,D"), loss: Out("")):
    for b in B:
        for d in D:
            diff[b, d] = x[b, d] - y[b, d]
            ad[b, d] = abs(diff[b, d])
    for b in B:
        for d in D:
            loss[()] += ad[b, d]


@kernel
def smooth_l1(x: Tensor("B,D"), y: Tensor("B,D"), diff: Temp("B,D"), ad: Temp("B,D"), sq: Temp("B,D"),
              quad: Temp("B,D"), lin: Temp("B,D"), small: Temp("B,D", "bool"), elem: Temp("B,D"), total: Temp(""),
              loss: Out("")):
    for b in B:
        for d in D:
            diff[b, d] = x[b, d] - y[b, d]
            ad[b, d] = abs(diff[b, d])
            sq[b, d] = square(ad[b, d])
            quad[b, d] = sq[b, d] * (0.5 / BETA)
            lin[b, d] = ad[b, d] - 0.5 * BETA
            small[b, d] = ad[b, d] < BETA
            elem[b, d] = where(small[b, d], quad[b, d], lin[b, d])
    for b in B:
        for d in D:
            total[()] += elem[b, d]
    loss[()] = total[()] * INV_N


@kernel
def huber(x: Tensor("B,D"), y: Tensor("B,D"), diff: Temp("B,D"), ad: Temp("B,D"), sq: Temp("B,D"),
          quad: Temp("B,D"), lin: Temp("B,D"), scaled: Temp("B,D"), small: Temp("B,D", "bool"), loss: Out("B,D")):
    for b in B:
        for d in D:
            diff[b, d] = x[b, d] - y[b, d]
            ad[b, d] = abs(diff[b, d])
            sq[b, d] = square(ad[b, d])
            quad[b, d] = sq[b, d] * 0.5
            lin[b, d] = ad[b, d] - 0.5 * DELTA
            scaled[b, d] = lin[b, d] * DELTA
            small[b, d] = ad[b, d] < DELTA
            loss[b, d] = where(small[b, d], quad[b, d], scaled[b, d])


def model(x: Tensor("B,D"), y: Tensor("B,D")):
    return {"mse": mse(x, y), "l1": l1_sum(x, y), "smooth_l1": smooth_l1(x, y), "huber": huber(x, y)}
