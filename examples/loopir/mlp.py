"""Two linear layers with biases and an exact GELU between them (as examples/graphs/mlp.yaml).

One small kernel per operation, so that each lifts to exactly one einsum.
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, gelu, kernel

B = Dim("B", 512, parallel=True)
D, H, O = Dim("D", 1024), Dim("H", 4096), Dim("O", 1024)


@kernel
def linear(x: Tensor("B,D"), w: Tensor("D,H"), y: Out("B,H")):
    for b in B:
        for h in H:
            for d in D:
                y[b, h] += x[b, d] * w[d, h]


@kernel
def bias(x: Tensor("B,H"), b: Tensor("H"), y: Out("B,H")):
    for i in B:
        for h in H:
            y[i, h] = x[i, h] + b[h]


@kernel
def act(x: Tensor("B,H"), y: Out("B,H")):
    for b in B:
        for h in H:
            y[b, h] = gelu(x[b, h])


def model(x: Tensor("B,D", dtype="bf16"), w1: Tensor("D,H", dtype="bf16", role="weight"),
          b1: Tensor("H", dtype="bf16", role="weight"), w2: Tensor("H,O", dtype="bf16", role="weight"),
          b2: Tensor("O", dtype="bf16", role="weight")):
    a = act(bias(linear(x, w1), b1))
    return {"y": bias(linear(a, w2), b2)}
