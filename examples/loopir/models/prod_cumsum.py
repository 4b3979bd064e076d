"""A product, a cumulative sum and a cumulative product (cross-frontend twin of
tests/models/prod_cumsum.py): the product over D is a ``*=`` reduction; the scans are the
``scan`` builtin; x * 0.5 + 1 is one kernel statement (a mul, then an add einsum).
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel, scan

B, D = Dim("B", 64), Dim("D", 4096)


@kernel
def prod(x: Tensor("B,D"), y: Out("B")):
    for b in B:
        for d in D:
            y[b] *= x[b, d]


@kernel
def affine(x: Tensor("B,D"), y: Out("B,D")):
    for b in B:
        for d in D:
            y[b, d] = x[b, d] * 0.5 + 1.0


def model(x: Tensor("B,D")):
    return {"p": prod(x), "s": scan(x, "D"), "c": scan(affine(x), "B", op="mul")}
