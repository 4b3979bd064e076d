"""Smooth activations summed (cross-frontend twin of tests/models/activations_smooth.py):
gelu (erf) + gelu (tanh) + silu + sigmoid * tanh, one store per op."""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, gelu, gelu_tanh, kernel, sigmoid, silu, tanh

B, D = Dim("B", 4096), Dim("D", 4096)


@kernel
def smooth(x: Tensor("B,D"), g1: Temp("B,D"), g2: Temp("B,D"), a1: Temp("B,D"), s1: Temp("B,D"), a2: Temp("B,D"),
           sg: Temp("B,D"), th: Temp("B,D"), m: Temp("B,D"), y: Out("B,D")):
    for b in B:
        for d in D:
            g1[b, d] = gelu(x[b, d])
            g2[b, d] = gelu_tanh(x[b, d])
            a1[b, d] = g1[b, d] + g2[b, d]
            s1[b, d] = silu(x[b, d])
            a2[b, d] = a1[b, d] + s1[b, d]
            sg[b, d] = sigmoid(x[b, d])
            th[b, d] = tanh(x[b, d])
            m[b, d] = sg[b, d] * th[b, d]
            y[b, d] = a2[b, d] + m[b, d]


def model(x: Tensor("B,D")):
    return {"y": smooth(x)}
