"""logsumexp over the last dim (cross-frontend twin of tests/models/logsumexp.py), the
stable form: max, shift, exp, sum, log, add the max back."""

from _common import exp_sum

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, log

B, S, D = Dim("B", 16), Dim("S", 512), Dim("D", 4096)


@kernel
def log_add(t: Tensor("B,S"), mx: Tensor("B,S"), lt: Temp("B,S"), y: Out("B,S")):
    for b in B:
        for s in S:
            lt[b, s] = log(t[b, s])
            y[b, s] = lt[b, s] + mx[b, s]


def model(x: Tensor("B,S,D")):
    mx, _, _, t = exp_sum(x)
    return {"y": log_add(t, mx)}
