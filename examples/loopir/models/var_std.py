"""Variance and standard deviation (cross-frontend twin of tests/models/var_std.py): the
unbiased variance over D, the biased standard deviation over D, and the unbiased variance
of all elements — mean, centre, square, sum, scale (1/(n-1) unbiased, 1/n biased)."""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, sqrt

B, D = Dim("B", 1024), Dim("D", 4096)


@kernel
def row_var(x: Tensor("B,D"), inv_n: float, inv_dof: float, total: Temp("B"), mean: Temp("B"), xc: Temp("B,D"),
            sq: Temp("B,D"), ss: Temp("B"), y: Out("B")):
    for b in B:
        for d in D:
            total[b] += x[b, d]
    for b in B:
        mean[b] = total[b] * inv_n
    for b in B:
        for d in D:
            xc[b, d] = x[b, d] - mean[b]
            sq[b, d] = xc[b, d] ** 2
    for b in B:
        for d in D:
            ss[b] += sq[b, d]
    for b in B:
        y[b] = ss[b] * inv_dof


@kernel
def root(v: Tensor("B"), y: Out("B")):
    for b in B:
        y[b] = sqrt(v[b])


@kernel
def all_var(x: Tensor("B,D"), inv_n: float, inv_dof: float, total: Temp(""), mean: Temp(""), xc: Temp("B,D"),
            sq: Temp("B,D"), ss: Temp(""), y: Out("")):
    for b in B:
        for d in D:
            total[()] += x[b, d]
    mean[()] = total[()] * inv_n
    for b in B:
        for d in D:
            xc[b, d] = x[b, d] - mean[()]
            sq[b, d] = xc[b, d] ** 2
    for b in B:
        for d in D:
            ss[()] += sq[b, d]
    y[()] = ss[()] * inv_dof


def model(x: Tensor("B,D")):
    n, rows = x.size_of("D"), x.size_of("B")
    return {"var": row_var(x, 1.0 / n, 1.0 / (n - 1)), "std": root(row_var(x, 1.0 / n, 1.0 / n)),
            "var_all": all_var(x, 1.0 / (n * rows), 1.0 / (n * rows - 1))}
