"""A linear layer then ReLU (cross-frontend twin of tests/models/linear_relu.py)."""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, relu

B, D, E = Dim("B", 256), Dim("D", 1024), Dim("E", 4096)


@kernel
def fc(x: Tensor("B,D"), w: Tensor("E,D"), bias: Tensor("E"), mm: Temp("B,E"), lin: Temp("B,E"), y: Out("B,E")):
    for b in B:
        for e in E:
            for d in D:
                mm[b, e] += x[b, d] * w[e, d]
    for b in B:
        for e in E:
            lin[b, e] = mm[b, e] + bias[e]
            y[b, e] = relu(lin[b, e])


def model(x: Tensor("B,D"), w: Tensor("E,D", role="weight"), bias: Tensor("E", role="weight")):
    return {"y": fc(x, w, bias)}
