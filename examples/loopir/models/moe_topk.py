"""A mixture of experts with top-k routing (cross-frontend twin of tests/models/moe_topk.py):
router softmax, top-k (an opaque op: no affine kernel sorts), renormalised weights, every
expert evaluated densely, then each token's k expert outputs picked by a per-token
gather (``gather(y, idx, "E")``: idx's dim B is shared with y) and combined.
"""

import numpy as np

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, exp, gather, gelu, kernel, opaque, size

B, D, E, F, K = Dim("B", 4096), Dim("D", 1024), Dim("E", 8), Dim("F", 4096), Dim("K", 2)


@kernel
def router_probs(x: Tensor("B,D"), w: Tensor("E,D"), logits: Temp("B,E"), mx: Temp("B"), sh: Temp("B,E"),
                 ex: Temp("B,E"), t: Temp("B"), p: Out("B,E")):
    for b in B:
        for e in E:
            for d in D:
                logits[b, e] += x[b, d] * w[e, d]
    for b in B:
        for e in E:
            mx[b] = max(mx[b], logits[b, e])
    for b in B:
        for e in E:
            sh[b, e] = logits[b, e] - mx[b]
            ex[b, e] = exp(sh[b, e])
    for b in B:
        for e in E:
            t[b] += ex[b, e]
    for b in B:
        for e in E:
            p[b, e] = ex[b, e] / t[b]


@kernel
def renormalise(v: Tensor("B,K"), t: Temp("B"), y: Out("B,K")):
    for b in B:
        for k in K:
            t[b] += v[b, k]
    for b in B:
        for k in K:
            y[b, k] = v[b, k] / t[b]


@kernel
def experts(x: Tensor("B,D"), w1: Tensor("E,D,F"), w2: Tensor("E,F,D"), h: Temp("B,E,F"), g: Temp("B,E,F"),
            y: Out("B,E,D")):
    for b in B:
        for e in E:
            for f in F:
                for d in D:
                    h[b, e, f] += x[b, d] * w1[e, d, f]
    for b in B:
        for e in E:
            for f in F:
                g[b, e, f] = gelu(h[b, e, f])
    for b in B:
        for e in E:
            for d in D:
                for f in F:
                    y[b, e, d] += g[b, e, f] * w2[e, f, d]


@kernel
def combine(picked: Tensor("B,K,D"), wk: Tensor("B,K"), m: Temp("B,K,D"), y: Out("B,D")):
    for b in B:
        for k in K:
            for d in D:
                m[b, k, d] = picked[b, k, d] * wk[b, k]
    for b in B:
        for d in D:
            for k in K:
                y[b, d] += m[b, k, d]


def top_k(p):
    """The K largest probabilities of each row and their expert indexes (largest first)."""
    idx = np.argsort(-p, axis=1, kind="stable")[:, :size(K)]
    return np.take_along_axis(p, idx, axis=1), idx


def model(x: Tensor("B,D"), router: Tensor("E,D", role="weight"), w1: Tensor("E,D,F", role="weight"),
          w2: Tensor("E,F,D", role="weight")):
    probs = router_probs(x, router)
    vals, idx = opaque(top_k, [probs], ["B,K", "B,K"], reason="top-k selection", dtype=["fp32", "int64"],
                       op="topk")
    return {"y": combine(gather(experts(x, w1, w2), idx, "E"), renormalise(vals))}
