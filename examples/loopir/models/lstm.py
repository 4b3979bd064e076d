"""A two-layer LSTM, batch first (cross-frontend twin of tests/models/lstm.py), as the torch
frontend unrolls it: the input projection of all time steps at once, then per step the
hidden projection, the gate sum and the cell; outputs are stacked along the sequence.

The input projection is ``linear`` on a (B*S)-row view of the sequence (a reshape: no
bytes). The gate slices are ``size(Hd)`` wide, so the program works at any sizes.
"""

from _common import linear

from solar_io.frontends.loopir import (
    Dim,
    Out,
    Temp,
    Tensor,
    kernel,
    reshape,
    select,
    sigmoid,
    size,
    slice,
    stack,
    tanh,
)

B, S, D, G, Hd = Dim("B", 16), Dim("S", 64), Dim("D", 256), Dim("G", 2048), Dim("Hd", 512)
A = Dim("A", 1)  # the leading dim of the zero initial state


@kernel
def add(x: Tensor("B,G"), z: Tensor("B,G"), y: Out("B,G")):
    for b in B:
        for g in G:
            y[b, g] = x[b, g] + z[b, g]


@kernel
def cell(gi: Tensor("B,Hd"), gf: Tensor("B,Hd"), gg: Tensor("B,Hd"), go: Tensor("B,Hd"), c: Tensor("B,Hd"),
         i: Temp("B,Hd"), f: Temp("B,Hd"), g: Temp("B,Hd"), o: Temp("B,Hd"), fc: Temp("B,Hd"), ig: Temp("B,Hd"),
         c2: Out("B,Hd"), tc: Temp("B,Hd"), h: Out("B,Hd")):
    for b in B:
        for j in Hd:
            i[b, j] = sigmoid(gi[b, j])
            f[b, j] = sigmoid(gf[b, j])
            g[b, j] = tanh(gg[b, j])
            o[b, j] = sigmoid(go[b, j])
            fc[b, j] = f[b, j] * c[b, j]
            ig[b, j] = i[b, j] * g[b, j]
            c2[b, j] = fc[b, j] + ig[b, j]
            tc[b, j] = tanh(c2[b, j])
            h[b, j] = o[b, j] * tc[b, j]


def layer(x, wi, wh, bi, bh, zeros):
    rows = reshape(x, "N,D", N=x.size_of("B") * x.size_of("S"))
    xw = reshape(linear(rows, wi, bi), "B,S,G", B=x.size_of("B"), S=x.size_of("S"))
    n = size(Hd)
    h, c = select(zeros, "A", 0), select(zeros, "A", 0)
    hs = []
    for t in range(x.size_of("S")):
        gates = add(select(xw, "S", t), linear(h, wh, bh))
        c, h = cell(*(slice(gates, "G", n * q, n * q + n) for q in range(4)), c)
        hs.append(h)
    return stack(hs, "S", axis=1), h, c


def model(x: Tensor("B,S,D"), wi0: Tensor("G,D", role="weight"), wh0: Tensor("G,Hd", role="weight"),
          bi0: Tensor("G", role="weight"), bh0: Tensor("G", role="weight"), wi1: Tensor("G,Hd", role="weight"),
          wh1: Tensor("G,Hd", role="weight"), bi1: Tensor("G", role="weight"), bh1: Tensor("G", role="weight"),
          zeros: Tensor("A,B,Hd", role="constant", value=0.0)):
    out0, h0, c0 = layer(x, wi0, wh0, bi0, bh0, zeros)
    out1, h1, c1 = layer(out0, wi1, wh1, bi1, bh1, zeros)
    return {"out": out1, "h": stack([h0, h1], "J"), "c": stack([c0, c1], "J")}
