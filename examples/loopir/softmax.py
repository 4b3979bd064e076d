"""Softmax over N: a max reduction, exp(x - max) with its sum, a divide.

The second nest stores e and reads it back at the same index to accumulate the sum:
it lifts to three einsums (sub, exp, identity + add-reduce).
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, exp, kernel

B = Dim("B", 4, parallel=True)
N = Dim("N", 1000)


@kernel
def softmax(x: Tensor("B,N"), mx: Temp("B"), e: Temp("B,N"), total: Temp("B"), y: Out("B,N")):
    for b in B:
        for n in N:
            mx[b] = max(mx[b], x[b, n])
    for b in B:
        for n in N:
            e[b, n] = exp(x[b, n] - mx[b])
            total[b] += e[b, n]
    for b in B:
        for n in N:
            y[b, n] = e[b, n] / total[b]


def model(x: Tensor("B,N", dtype="fp32")):
    return {"y": softmax(x)}
