"""Softmax over the last dim and over a middle dim (cross-frontend twin of
tests/models/softmax.py): max, subtract, exp, sum, divide, as ``aten.softmax`` lowers.
"""

from _common import softmax

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, exp, kernel

B, S, D = Dim("B", 8), Dim("S", 128), Dim("D", 1024)


@kernel
def softmax_mid(x: Tensor("B,S,D"), mx: Temp("B,D"), e: Temp("B,S,D"), t: Temp("B,D"), y: Out("B,S,D")):
    for b in B:
        for d in D:
            for s in S:
                mx[b, d] = max(mx[b, d], x[b, s, d])
    for b in B:
        for s in S:
            for d in D:
                e[b, s, d] = exp(x[b, s, d] - mx[b, d])
    for b in B:
        for d in D:
            for s in S:
                t[b, d] += e[b, s, d]
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = e[b, s, d] / t[b, d]


def model(x: Tensor("B,S,D")):
    return {"a": softmax(x), "b": softmax_mid(x)}
