"""A three-layer MLP with GELU (cross-frontend twin of tests/models/mlp.py): each linear
layer is a contraction then a bias add, as ``aten.linear`` lowers; dropout is inactive.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, gelu, kernel

B = Dim("B", 256)
I, O = Dim("I", 1024), Dim("O", 4096)  # noqa: E741
O2, C = Dim("O2", 4096), Dim("C", 1000)


@kernel
def linear(x: Tensor("B,I"), w: Tensor("O,I"), bias: Tensor("O"), h: Temp("B,O"), y: Out("B,O")):
    for b in B:
        for o in O:
            for i in I:
                h[b, o] += x[b, i] * w[o, i]
    for b in B:
        for o in O:
            y[b, o] = h[b, o] + bias[o]


@kernel
def act(x: Tensor("B,I"), y: Out("B,I")):
    for b in B:
        for i in I:
            y[b, i] = gelu(x[b, i])


def model(x: Tensor("B,I"), w0: Tensor("O,I", role="weight"), b0: Tensor("O", role="weight"),
          w3: Tensor("O2,O", role="weight"), b3: Tensor("O2", role="weight"),
          w5: Tensor("C,O2", role="weight"), b5: Tensor("C", role="weight")):
    h = act(linear(x, w0, b0))
    h = act(linear(h, w3, b3))
    return {"y": linear(h, w5, b5)}
