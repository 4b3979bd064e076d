"""Multi-head self-attention (as examples/graphs/attention.yaml): projections, heads split
by reshape views, scores, a scaled softmax over T, the weighted sum and an output
projection. Keys are indexed by T, a second Dim of the sequence length.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, exp, kernel, reshape

B = Dim("B", 4, parallel=True)
S, T = Dim("S", 1024), Dim("T", 1024)
D, F = Dim("D", 1024), Dim("F", 1024)
H, E = Dim("H", 16), Dim("E", 64)
SCALE = 0.125  # 1 / sqrt(E)


@kernel
def linear(x: Tensor("B,S,D"), w: Tensor("D,F"), y: Out("B,S,F")):
    for b in B:
        for s in S:
            for f in F:
                for d in D:
                    y[b, s, f] += x[b, s, d] * w[d, f]


@kernel
def scores(q: Tensor("B,S,H,E"), k: Tensor("B,T,H,E"), sc: Out("B,H,S,T")):
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    for e in E:
                        sc[b, h, s, t] += q[b, s, h, e] * k[b, t, h, e]


@kernel
def softmax(x: Tensor("B,H,S,T"), scaled: Temp("B,H,S,T"), mx: Temp("B,H,S"), ex: Temp("B,H,S,T"),
            total: Temp("B,H,S"), p: Out("B,H,S,T")):
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    scaled[b, h, s, t] = x[b, h, s, t] * SCALE
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    mx[b, h, s] = max(mx[b, h, s], scaled[b, h, s, t])
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    ex[b, h, s, t] = exp(scaled[b, h, s, t] - mx[b, h, s])
                    total[b, h, s] += ex[b, h, s, t]
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    p[b, h, s, t] = ex[b, h, s, t] / total[b, h, s]


@kernel
def weighted(p: Tensor("B,H,S,T"), v: Tensor("B,T,H,E"), ctx: Out("B,S,H,E")):
    for b in B:
        for s in S:
            for h in H:
                for e in E:
                    for t in T:
                        ctx[b, s, h, e] += p[b, h, s, t] * v[b, t, h, e]


def model(x: Tensor("B,S,D", dtype="bf16"), wq: Tensor("D,F", dtype="bf16", role="weight"),
          wk: Tensor("D,F", dtype="bf16", role="weight"), wv: Tensor("D,F", dtype="bf16", role="weight"),
          wo: Tensor("F,D", dtype="bf16", role="weight")):
    q = reshape(linear(x, wq), "B,S,H,E")  # H and E: the sizes of Dims H and E
    k = reshape(linear(x, wk), "B,S,H,E")
    v = reshape(linear(x, wv), "B,S,H,E")
    ctx = weighted(softmax(scores(q, k)), v)
    return {"y": linear(reshape(ctx, "B,S,F"), wo)}
