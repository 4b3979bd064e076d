"""Kernels shared by several cross-frontend programs of this folder (imported by name:
``from _common import log_softmax``; a capture puts the program's folder on the path).

Their Dims are bound by the arguments' shapes at each call, so the importing program's
sizes apply.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, exp, kernel, log, reshape, where

B, S, D, G = Dim("B"), Dim("S"), Dim("D"), Dim("G")


@kernel
def linear(x: Tensor("B,D"), w: Tensor("G,D"), bias: Tensor("G"), mm: Temp("B,G"), y: Out("B,G")):
    """``x @ w.T + bias`` as ``aten.linear`` lowers it: the contraction, then the bias add."""
    for b in B:
        for g in G:
            for d in D:
                mm[b, g] += x[b, d] * w[g, d]
    for b in B:
        for g in G:
            y[b, g] = mm[b, g] + bias[g]


@kernel
def exp_sum(x: Tensor("B,S,D"), mx: Out("B,S"), sh: Out("B,S,D"), e: Out("B,S,D"), t: Out("B,S")):
    """The stable start of softmax-like ops over D: the max, x minus the max, its exp and
    the sum of the exps."""
    for b in B:
        for s in S:
            for d in D:
                mx[b, s] = max(mx[b, s], x[b, s, d])
    for b in B:
        for s in S:
            for d in D:
                sh[b, s, d] = x[b, s, d] - mx[b, s]
                e[b, s, d] = exp(sh[b, s, d])
    for b in B:
        for s in S:
            for d in D:
                t[b, s] += e[b, s, d]


@kernel
def normalise(e: Tensor("B,S,D"), t: Tensor("B,S"), y: Out("B,S,D")):
    """Softmax's last step: each exp divided by its row's sum."""
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = e[b, s, d] / t[b, s]


@kernel
def log_normalise(sh: Tensor("B,S,D"), t: Tensor("B,S"), lt: Temp("B,S"), y: Out("B,S,D")):
    """Log-softmax's last steps: the shifted values minus the log of the row's sum."""
    for b in B:
        for s in S:
            lt[b, s] = log(t[b, s])
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = sh[b, s, d] - lt[b, s]


def rows(x):
    """A [B, D] tensor viewed as [B, 1, D] for the kernels above (a reshape: no bytes)."""
    return reshape(x, "B,S,D", S=1)


def softmax(x):
    """Softmax over the last dim of a [B, S, D] tensor."""
    _, _, e, t = exp_sum(x)
    return normalise(e, t)


def log_softmax(x):
    """Log-softmax over the last dim of a [B, D] tensor."""
    _, sh, _, t = exp_sum(rows(x))
    return reshape(log_normalise(sh, t), "B,D")


@kernel
def valid_targets(target: Tensor("B"), ignore: int, valid: Out("B", "bool"), safe: Out("B", "int64")):
    """Targets that are not the ignore index, and the targets with ignored ones set to 0."""
    for b in B:
        valid[b] = target[b] != ignore
        safe[b] = where(valid[b], target[b], 0)
