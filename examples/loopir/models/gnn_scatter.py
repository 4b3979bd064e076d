"""A graph neural network layer (cross-frontend twin of tests/models/gnn_scatter.py): gather
the source node's features along each edge, a linear message with ReLU, a scatter-add of
the messages into their target nodes (``index_add``), the mean over each node's incoming
edges (a scatter-add of ones counts them), then a linear update of [x, mean].

``scatter_add(zeros, dst, m, "N")`` is one einsum over the edges writing ``agg[@dst, H]``
from an all-zero ``init`` (an immediate: no bytes); the edge count adds an immediate 1.
"""

from _common import linear

from solar_io.frontends.loopir import Dim, Out, Tensor, concat, gather, kernel, relu, scatter_add, size

N, E, D, H = Dim("N", 4096), Dim("E", 65536), Dim("D", 128), Dim("H", 256)
F = Dim("F", size(D) + size(H))  # [x, mean] joined


@kernel
def act(x: Tensor("E,H"), y: Out("E,H")):
    for e in E:
        for h in H:
            y[e, h] = relu(x[e, h])


@kernel
def mean(total: Tensor("N,H"), count: Tensor("N"), c: Out("N"), y: Out("N,H")):
    for n in N:
        c[n] = max(count[n], 1.0)
    for n in N:
        for h in H:
            y[n, h] = total[n, h] / c[n]


def model(x: Tensor("N,D"), src: Tensor("E", dtype="int64"), dst: Tensor("E", dtype="int64"),
          w_msg: Tensor("H,D", role="weight"), b_msg: Tensor("H", role="weight"),
          w_upd: Tensor("D,F", role="weight"), b_upd: Tensor("D", role="weight"),
          zeros: Tensor("N,H", role="constant", value=0.0), zeros_n: Tensor("N", role="constant", value=0.0),
          ones: Tensor("E", role="constant", value=1.0)):
    m = act(linear(gather(x, src, "N"), w_msg, b_msg))
    _, agg = mean(scatter_add(zeros, dst, m, "N"), scatter_add(zeros_n, dst, ones, "N"))
    return {"y": linear(concat([x, agg], "D", as_dim="F"), w_upd, b_upd)}


def get_inputs(rng):
    return {"src": rng.integers(0, size(N), size=size(E)), "dst": rng.integers(0, size(N), size=size(E))}
