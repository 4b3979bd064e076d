"""A bidirectional one-layer GRU, sequence first (cross-frontend twin of
tests/models/gru_bidirectional.py), unrolled as the torch frontend does: per direction
the input projection of all steps at once, then per step the hidden projection and the
cell; the reverse direction walks the steps backwards. Outputs: the per-step states of
both directions side by side [T, B, 2*Hd], and the final state of each direction.

Gate order (PyTorch): reset r, update z, new n; h' = n + z * (h - n).
"""

from _common import linear

from solar_io.frontends.loopir import (
    Dim,
    Out,
    Temp,
    Tensor,
    concat,
    kernel,
    reshape,
    select,
    sigmoid,
    size,
    slice,
    stack,
    tanh,
)

T, B, D, G, Hd = Dim("T", 128), Dim("B", 16), Dim("D", 256), Dim("G", 768), Dim("Hd", 256)
A = Dim("A", 2)  # the zero initial state of each direction


@kernel
def cell(x0: Tensor("B,Hd"), x1: Tensor("B,Hd"), x2: Tensor("B,Hd"), h0: Tensor("B,Hd"), h1: Tensor("B,Hd"),
         h2: Tensor("B,Hd"), h: Tensor("B,Hd"), rp: Temp("B,Hd"), r: Temp("B,Hd"), zp: Temp("B,Hd"), z: Temp("B,Hd"),
         rh: Temp("B,Hd"), np_: Temp("B,Hd"), n: Temp("B,Hd"), hmn: Temp("B,Hd"), zd: Temp("B,Hd"),
         y: Out("B,Hd")):
    for b in B:
        for j in Hd:
            rp[b, j] = x0[b, j] + h0[b, j]
            r[b, j] = sigmoid(rp[b, j])
            zp[b, j] = x1[b, j] + h1[b, j]
            z[b, j] = sigmoid(zp[b, j])
            rh[b, j] = r[b, j] * h2[b, j]
            np_[b, j] = x2[b, j] + rh[b, j]
            n[b, j] = tanh(np_[b, j])
            hmn[b, j] = h[b, j] - n[b, j]
            zd[b, j] = z[b, j] * hmn[b, j]
            y[b, j] = n[b, j] + zd[b, j]


def direction(x, wi, wh, bi, bh, h, steps):
    """States of one direction in time order, walking ``steps``."""
    nt, nb, nh = x.size_of("T"), x.size_of("B"), size(Hd)
    xw = reshape(linear(reshape(x, "N,D", N=nt * nb), wi, bi), "T,B,G", T=nt, B=nb)
    states = {}
    for t in steps:
        xt, hw = select(xw, "T", t), linear(h, wh, bh)
        xs = [slice(xt, "G", nh * q, nh * q + nh) for q in range(3)]
        hs = [slice(hw, "G", nh * q, nh * q + nh) for q in range(3)]
        h = states[t] = cell(*xs, *hs, h)
    return [states[t] for t in range(nt)], h


def model(x: Tensor("T,B,D"), wi: Tensor("G,D", role="weight"), wh: Tensor("G,Hd", role="weight"),
          bi: Tensor("G", role="weight"), bh: Tensor("G", role="weight"), wir: Tensor("G,D", role="weight"),
          whr: Tensor("G,Hd", role="weight"), bir: Tensor("G", role="weight"), bhr: Tensor("G", role="weight"),
          zeros: Tensor("A,B,Hd", role="constant", value=0.0)):
    nt = x.size_of("T")
    fwd, hf = direction(x, wi, wh, bi, bh, select(zeros, "A", 0), range(nt))
    rev, hr = direction(x, wir, whr, bir, bhr, select(zeros, "A", 1), range(nt - 1, -1, -1))
    out = concat([stack(fwd, "T"), stack(rev, "T")], "Hd", as_dim="H2")
    return {"out": out, "h": stack([hf, hr], "J")}
