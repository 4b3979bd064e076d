"""A batched matrix product (cross-frontend twin of tests/models/bmm.py)."""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel

B, S, D, E = Dim("B", 32, parallel=True), Dim("S", 512), Dim("D", 64), Dim("E", 512)


@kernel
def bmm(a: Tensor("B,S,D"), b: Tensor("B,D,E"), c: Out("B,S,E")):
    for i in B:
        for s in S:
            for e in E:
                for d in D:
                    c[i, s, e] += a[i, s, d] * b[i, d, e]


def model(a: Tensor("B,S,D"), b: Tensor("B,D,E")):
    return {"c": bmm(a, b)}
