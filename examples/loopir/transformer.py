"""A decoder-only transformer: LAYERS pre-norm blocks (causal attention + GELU MLP).

Layer weights are stacked along L; ``select(w, "L", i)`` takes layer i as a view (no
bytes), so each kernel reads exactly its layer's weights. The causal mask is a constant
boolean tensor (kernels never branch on loop indexes). Used by benchmarks/bench_loopir.py
(trace + lift of 24 layers).
"""

import math

import numpy as np

from solar_io.frontends.loopir import (
    Dim,
    Out,
    Temp,
    Tensor,
    exp,
    gelu,
    kernel,
    reshape,
    rsqrt,
    select,
    size,
    square,
    where,
)

LAYERS = 24
L = Dim("L", LAYERS)
B = Dim("B", 1, parallel=True)
S, T = Dim("S", 128), Dim("T", 128)
D, F, Hm = Dim("D", 512), Dim("F", 512), Dim("Hm", 2048)
H, E = Dim("H", 8), Dim("E", 64)
EPS = 1e-5


@kernel
def layernorm(x: Tensor("B,S,D"), g: Tensor("D"), inv_d: float, total: Temp("B,S"), xc: Temp("B,S,D"),
              sq: Temp("B,S"), rstd: Temp("B,S"), y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                total[b, s] += x[b, s, d]
    for b in B:
        for s in S:
            for d in D:
                xc[b, s, d] = x[b, s, d] - total[b, s] * inv_d
    for b in B:
        for s in S:
            for d in D:
                sq[b, s] += square(xc[b, s, d])
    for b in B:
        for s in S:
            rstd[b, s] = rsqrt(sq[b, s] * inv_d + EPS)
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = xc[b, s, d] * rstd[b, s] * g[d]


@kernel
def linear(x: Tensor("B,S,D"), w: Tensor("D,F"), y: Out("B,S,F")):
    for b in B:
        for s in S:
            for f in F:
                for d in D:
                    y[b, s, f] += x[b, s, d] * w[d, f]


@kernel
def attention(q: Tensor("B,S,H,E"), k: Tensor("B,T,H,E"), v: Tensor("B,T,H,E"), mask: Tensor("S,T"),
              scale: float, sc: Temp("B,H,S,T"), mx: Temp("B,H,S"), ex: Temp("B,H,S,T"), total: Temp("B,H,S"),
              p: Temp("B,H,S,T"), ctx: Out("B,S,H,E")):
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    for e in E:
                        sc[b, h, s, t] += q[b, s, h, e] * k[b, t, h, e]
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    mx[b, h, s] = max(mx[b, h, s], where(mask[s, t], sc[b, h, s, t] * scale, -math.inf))
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    ex[b, h, s, t] = where(mask[s, t], exp(sc[b, h, s, t] * scale - mx[b, h, s]), 0.0)
                    total[b, h, s] += ex[b, h, s, t]
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    p[b, h, s, t] = ex[b, h, s, t] / total[b, h, s]
    for b in B:
        for s in S:
            for h in H:
                for e in E:
                    for t in T:
                        ctx[b, s, h, e] += p[b, h, s, t] * v[b, t, h, e]


@kernel
def act(x: Tensor("B,S,F"), y: Out("B,S,F")):
    for b in B:
        for s in S:
            for f in F:
                y[b, s, f] = gelu(x[b, s, f])


@kernel
def residual(x: Tensor("B,S,D"), r: Tensor("B,S,D"), y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = x[b, s, d] + r[b, s, d]


def block(x, i, ln1, wq, wk, wv, wo, ln2, w1, w2, mask):
    inv_d = 1.0 / x.size_of("D")
    h = layernorm(x, select(ln1, "L", i), inv_d)
    q = reshape(linear(h, select(wq, "L", i)), "B,S,H,E")
    k = reshape(linear(h, select(wk, "L", i)), "B,S,H,E")
    v = reshape(linear(h, select(wv, "L", i)), "B,S,H,E")
    ctx = attention(q, k, v, mask, 1.0 / math.sqrt(q.size_of("E")))
    x = residual(x, linear(reshape(ctx, "B,S,F"), select(wo, "L", i)))
    h = layernorm(x, select(ln2, "L", i), inv_d)
    return residual(x, linear(act(linear(h, select(w1, "L", i))), select(w2, "L", i)))


def model(x: Tensor("B,S,D", dtype="bf16"), mask: Tensor("S,T", dtype="bool", role="constant"),
          ln1: Tensor("L,D", dtype="bf16", role="weight"), wq: Tensor("L,D,F", dtype="bf16", role="weight"),
          wk: Tensor("L,D,F", dtype="bf16", role="weight"), wv: Tensor("L,D,F", dtype="bf16", role="weight"),
          wo: Tensor("L,F,D", dtype="bf16", role="weight"), ln2: Tensor("L,D", dtype="bf16", role="weight"),
          w1: Tensor("L,D,Hm", dtype="bf16", role="weight"), w2: Tensor("L,Hm,D", dtype="bf16", role="weight")):
    for i in range(ln1.size_of("L")):
        x = block(x, i, ln1, wq, wk, wv, wo, ln2, w1, w2, mask)
    return {"y": x}


def get_inputs(rng):
    n = size(S)
    return {"mask": np.tril(np.ones((n, n), dtype=bool)),
            "ln1": np.ones((size(L), size(D))), "ln2": np.ones((size(L), size(D)))}
