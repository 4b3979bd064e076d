"""Comparisons, boolean logic, where and masked_fill (cross-frontend twin of
tests/models/compare_where.py): one store per PyTorch op, booleans as bool temporaries.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, where

B, D = Dim("B", 64), Dim("D", 1024)


@kernel
def logic(x: Tensor("B,D"), y: Tensor("B,D"), gt: Temp("B,D", "bool"), lt: Temp("B,D", "bool"),
          nt: Temp("B,D", "bool"), m: Temp("B,D", "bool"), z: Temp("B,D"), eq: Temp("B,D", "bool"),
          mf: Temp("B,D"), ge: Temp("B,D", "bool"), gef: Temp("B,D"), out: Out("B,D")):
    for b in B:
        for d in D:
            gt[b, d] = x[b, d] > y[b, d]
            lt[b, d] = x[b, d] < 0.0
            nt[b, d] = not lt[b, d]
            m[b, d] = gt[b, d] and nt[b, d]
            z[b, d] = where(m[b, d], x[b, d], y[b, d])
            eq[b, d] = x[b, d] == y[b, d]
            mf[b, d] = where(eq[b, d], 0.0, z[b, d])
            ge[b, d] = x[b, d] >= 0.5
            gef[b, d] = ge[b, d]
            out[b, d] = mf[b, d] + gef[b, d]


def model(x: Tensor("B,D"), y: Tensor("B,D")):
    return {"out": logic(x, y)}
