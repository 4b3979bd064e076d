"""Causal scaled dot-product attention with grouped-query heads (cross-frontend twin of
tests/models/sdpa_gqa.py, and of tests/models/sdpa_causal.py with one query head a group,
R = 1): the H = G*R query heads are viewed as [G, R] (a reshape: no bytes) and the R heads of
group g share key/value head g.

The causal mask is a generated constant boolean tensor (made from indices where it is used: no
bytes); every score-shaped tensor declares the kept
fraction of the S x T rectangle as its density, as the torch frontend does (a causal
kernel computes and stores only the triangle). KEPT and SCALE are computed from the sizes
at import time, so they follow a size override.
"""

import math

import numpy as np

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, exp, kernel, reshape, size, where

B, H, G, R = Dim("B", 4), Dim("H", 32), Dim("G", 8), Dim("R", 4)
S, T, E = Dim("S", 1024), Dim("T", 1024), Dim("E", 64)
KEPT = float(np.tril(np.ones((size(S), size(T)), dtype=bool)).mean())  # the causal triangle
SCALE = 1 / math.sqrt(size(E))


@kernel
def sdpa(q: Tensor("B,G,R,S,E"), k: Tensor("B,G,T,E"), v: Tensor("B,G,T,E"), mask: Tensor("S,T", density=KEPT),
         sc: Temp("B,G,R,S,T", density=KEPT), scaled: Temp("B,G,R,S,T", density=KEPT),
         masked: Temp("B,G,R,S,T", density=KEPT), mx: Temp("B,G,R,S"),
         sh: Temp("B,G,R,S,T", density=KEPT), ex: Temp("B,G,R,S,T", density=KEPT),
         tot: Temp("B,G,R,S"), p: Temp("B,G,R,S,T", density=KEPT), o: Out("B,G,R,S,E")):
    for b in B:
        for g in G:
            for r in R:
                for s in S:
                    for t in T:
                        for e in E:
                            sc[b, g, r, s, t] += q[b, g, r, s, e] * k[b, g, t, e]
    for b in B:
        for g in G:
            for r in R:
                for s in S:
                    for t in T:
                        scaled[b, g, r, s, t] = sc[b, g, r, s, t] * SCALE
                        masked[b, g, r, s, t] = where(mask[s, t], scaled[b, g, r, s, t], -math.inf)
    for b in B:
        for g in G:
            for r in R:
                for s in S:
                    for t in T:
                        mx[b, g, r, s] = max(mx[b, g, r, s], masked[b, g, r, s, t])
    for b in B:
        for g in G:
            for r in R:
                for s in S:
                    for t in T:
                        sh[b, g, r, s, t] = masked[b, g, r, s, t] - mx[b, g, r, s]
                        ex[b, g, r, s, t] = exp(sh[b, g, r, s, t])
    for b in B:
        for g in G:
            for r in R:
                for s in S:
                    for t in T:
                        tot[b, g, r, s] += ex[b, g, r, s, t]
    for b in B:
        for g in G:
            for r in R:
                for s in S:
                    for t in T:
                        p[b, g, r, s, t] = ex[b, g, r, s, t] / tot[b, g, r, s]
    for b in B:
        for g in G:
            for r in R:
                for s in S:
                    for e in E:
                        for t in T:
                            o[b, g, r, s, e] += p[b, g, r, s, t] * v[b, g, t, e]


def model(q: Tensor("B,H,S,E"), k: Tensor("B,G,S,E"), v: Tensor("B,G,S,E"),
          mask: Tensor("S,T", dtype="bool", role="constant", density=KEPT, generated=True)):
    grouped = reshape(q, "B,G,R,S,E", G=k.size_of("G"), R=q.size_of("H") // k.size_of("G"))
    return {"o": reshape(sdpa(grouped, k, v, mask), "B,H,S,E", H=q.size_of("H"))}


def get_inputs(rng):
    return {"mask": np.tril(np.ones((size(S), size(T)), dtype=bool))}
