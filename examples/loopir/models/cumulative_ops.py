"""Scans (cross-frontend twin of tests/models/cumulative_ops.py): cumsum, cumprod, running
max and min along different dims, and logcumsumexp.

Each scan is the ``scan`` builtin (one einsum with ``scan: dim``, counted as a sequential
scan: n - 1 combines per row). logcumsumexp is lowered as PyTorch's capture lowers it:
the maximum along the dim, exp(x - max), the cumulative sum, its log plus the maximum.
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, exp, kernel, log, scan, size

B, S, D = Dim("B", 8), Dim("S", 1024), Dim("D", 256)
R, C = Dim("R", 64), Dim("C", 512)


@kernel
def row_max(x: Tensor("B,S,D"), mx: Out("B,D")):
    for b in B:
        for d in D:
            for s in S:
                mx[b, d] = max(mx[b, d], x[b, s, d])


@kernel
def shifted_exp(x: Tensor("B,S,D"), mx: Tensor("B,D"), e: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                e[b, s, d] = exp(x[b, s, d] - mx[b, d])


@kernel
def log_add(c: Tensor("B,S,D"), mx: Tensor("B,D"), y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = log(c[b, s, d]) + mx[b, d]


@kernel
def add_sub(a: Tensor("B,S,D"), hi: Tensor("B,S,D"), lo: Tensor("B,S,D"), y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = a[b, s, d] + hi[b, s, d] - lo[b, s, d]


def model(x: Tensor("B,S,D"), p: Tensor("R,C")):
    s = scan(x, "S")
    c = scan(p, "C", op="mul")
    hi = scan(x, "D", op="max")
    lo = scan(x, "B", op="min")
    mx = row_max(x)
    lse = log_add(scan(shifted_exp(x, mx), "S"), mx)
    return {"y": add_sub(s, hi, lo), "c": c, "lse": lse}


def get_inputs(rng):  # factors near 1: the product of C = 512 of them (default sizes) stays finite
    return {"p": rng.uniform(0.9, 1.1, size=(size(R), size(C)))}
