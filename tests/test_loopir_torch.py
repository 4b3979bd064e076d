"""Cross-frontend: IR programs lift to the same work and traffic as the PyTorch captures.

Each IR program below is a hand translation of a model in tests/models (one kernel
nest per PyTorch op, as the torch frontend lowers it); both captures must give the same
MACs, matrix and vector FLOPs, transcendental count and bytes.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from solar_io import graph_metrics
from solar_io.frontends.loopir import capture_file

torch_frontend = pytest.importorskip("solar_io.frontends.torch")
MODELS = Path(__file__).resolve().parent / "models"

IR = {
    "matmul_square": """
M, K, N = Dim("M", 48), Dim("K", 48), Dim("N", 48)

@kernel
def mm(a: Tensor("M,K"), b: Tensor("K,N"), c: Out("M,N")):
    for m in M:
        for n in N:
            for k in K:
                c[m, n] += a[m, k] * b[k, n]

def model(a: Tensor("M,K"), b: Tensor("K,N")):
    return {"c": mm(a, b)}
""",
    "conv2d_strided_padded": """
N, C, H, W = Dim("N", 2), Dim("C", 3), Dim("H", 17), Dim("W", 17)
K, R, S, P, Q = Dim("K", 16), Dim("R", 3), Dim("S", 3), Dim("P", 9), Dim("Q", 9)

@kernel
def conv(x: Tensor("N,C,H,W", fill=0.0), w: Tensor("K,C,R,S"), y: Out("N,K,P,Q")):
    for n in N:
        for k in K:
            for p in P:
                for q in Q:
                    for c in C:
                        for r in R:
                            for s in S:
                                y[n, k, p, q] += x[n, c, 2 * p + r - 1, 2 * q + s - 1] * w[k, c, r, s]

@kernel
def bias(x: Tensor("N,K,P,Q"), b: Tensor("K"), y: Out("N,K,P,Q")):
    for n in N:
        for k in K:
            for p in P:
                for q in Q:
                    y[n, k, p, q] = x[n, k, p, q] + b[k]

def model(x: Tensor("N,C,H,W"), w: Tensor("K,C,R,S", role="weight"), b: Tensor("K", role="weight")):
    return {"y": bias(conv(x, w), b)}
""",
    "layernorm": """
B, S, D = Dim("B", 2), Dim("S", 10), Dim("D", 48)

@kernel
def ln(x: Tensor("B,S,D"), g: Tensor("D"), beta: Tensor("D"), c: float, total: Temp("B,S"), mean: Temp("B,S"),
       xc: Temp("B,S,D"), sq: Temp("B,S,D"), total2: Temp("B,S"), var: Temp("B,S"), ve: Temp("B,S"),
       rstd: Temp("B,S"), xhat: Temp("B,S,D"), scaled: Temp("B,S,D"), y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                total[b, s] += x[b, s, d]
    for b in B:
        for s in S:
            mean[b, s] = total[b, s] * c
    for b in B:
        for s in S:
            for d in D:
                xc[b, s, d] = x[b, s, d] - mean[b, s]
                sq[b, s, d] = square(xc[b, s, d])
    for b in B:
        for s in S:
            for d in D:
                total2[b, s] += sq[b, s, d]
    for b in B:
        for s in S:
            var[b, s] = total2[b, s] * c
            ve[b, s] = var[b, s] + 1e-5
            rstd[b, s] = rsqrt(ve[b, s])
    for b in B:
        for s in S:
            for d in D:
                xhat[b, s, d] = xc[b, s, d] * rstd[b, s]
                scaled[b, s, d] = xhat[b, s, d] * g[d]
                y[b, s, d] = scaled[b, s, d] + beta[d]

def model(x: Tensor("B,S,D"), g: Tensor("D", role="weight"), beta: Tensor("D", role="weight")):
    return {"y": ln(x, g, beta, 1.0 / 48)}
""",
    "embedding": """
B, S, V, D = Dim("B", 4), Dim("S", 12), Dim("V", 100), Dim("D", 32)

@kernel
def mean(e: Tensor("B,S,D"), total: Temp("B,D"), y: Out("B,D")):
    for b in B:
        for d in D:
            for s in S:
                total[b, d] += e[b, s, d]
    for b in B:
        for d in D:
            y[b, d] = total[b, d] * (1.0 / 12)

def model(ids: Tensor("B,S", dtype="int64"), table: Tensor("V,D", role="weight")):
    return {"y": mean(gather(table, ids, "V"))}

def get_inputs(rng):
    return {"ids": rng.integers(0, 100, size=(4, 12))}
""",
    "softmax": """
B, S, D = Dim("B", 2), Dim("S", 9), Dim("D", 40)

@kernel
def softmax_last(x: Tensor("B,S,D"), mx: Temp("B,S"), sh: Temp("B,S,D"), e: Temp("B,S,D"), t: Temp("B,S"),
                 y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                mx[b, s] = max(mx[b, s], x[b, s, d])
    for b in B:
        for s in S:
            for d in D:
                sh[b, s, d] = x[b, s, d] - mx[b, s]
                e[b, s, d] = exp(sh[b, s, d])
    for b in B:
        for s in S:
            for d in D:
                t[b, s] += e[b, s, d]
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = e[b, s, d] / t[b, s]

@kernel
def softmax_mid(x: Tensor("B,S,D"), mx: Temp("B,D"), e: Temp("B,S,D"), t: Temp("B,D"), y: Out("B,S,D")):
    for b in B:
        for d in D:
            for s in S:
                mx[b, d] = max(mx[b, d], x[b, s, d])
    for b in B:
        for s in S:
            for d in D:
                e[b, s, d] = exp(x[b, s, d] - mx[b, d])
    for b in B:
        for d in D:
            for s in S:
                t[b, d] += e[b, s, d]
    for b in B:
        for s in S:
            for d in D:
                y[b, s, d] = e[b, s, d] / t[b, d]

def model(x: Tensor("B,S,D")):
    return {"a": softmax_last(x), "b": softmax_mid(x)}
""",
    "mlp": """
B = Dim("B", 32)
I, O = Dim("I", 64), Dim("O", 256)

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

O2, C = Dim("O2", 256), Dim("C", 10)
""",
    "lstm": """
B, S, D, G, Hd = Dim("B", 3), Dim("S", 5), Dim("D", 12), Dim("G", 64), Dim("Hd", 16)

@kernel
def linear(x: Tensor("B,D"), w: Tensor("G,D"), bias: Tensor("G"), mm: Temp("B,G"), y: Out("B,G")):
    for b in B:
        for g in G:
            for d in D:
                mm[b, g] += x[b, d] * w[g, d]
    for b in B:
        for g in G:
            y[b, g] = mm[b, g] + bias[g]

@kernel
def linear_seq(x: Tensor("B,S,D"), w: Tensor("G,D"), bias: Tensor("G"), mm: Temp("B,S,G"), y: Out("B,S,G")):
    for b in B:
        for s in S:
            for g in G:
                for d in D:
                    mm[b, s, g] += x[b, s, d] * w[g, d]
    for b in B:
        for s in S:
            for g in G:
                y[b, s, g] = mm[b, s, g] + bias[g]

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
    xw = linear_seq(x, wi, bi)
    h, c = select(zeros, "A", 0), select(zeros, "A", 0)
    hs = []
    for t in range(x.size_of("S")):
        gates = add(select(xw, "S", t), linear(h, wh, bh))
        c, h = cell(*(slice(gates, "G", 16 * q, 16 * q + 16) for q in range(4)), c)
        hs.append(h)
    return stack(hs, "S", axis=1), h, c

def model(x: Tensor("B,S,D"), wi0: Tensor("G,D", role="weight"), wh0: Tensor("G,Hd", role="weight"),
          bi0: Tensor("G", role="weight"), bh0: Tensor("G", role="weight"), wi1: Tensor("G,Hd", role="weight"),
          wh1: Tensor("G,Hd", role="weight"), bi1: Tensor("G", role="weight"), bh1: Tensor("G", role="weight"),
          zeros: Tensor("A,B,Hd", role="constant", value=0.0)):
    out0, h0, c0 = layer(x, wi0, wh0, bi0, bh0, zeros)
    out1, h1, c1 = layer(out0, wi1, wh1, bi1, bh1, zeros)
    return {"out": out1, "h": stack([h0, h1], "J"), "c": stack([c0, c1], "J")}

A = Dim("A", 1)
""",
    "bmm": """
B, S, D, E = Dim("B", 4), Dim("S", 16), Dim("D", 32), Dim("E", 8)

@kernel
def bmm(a: Tensor("B,S,D"), b: Tensor("B,D,E"), c: Out("B,S,E")):
    for i in B:
        for s in S:
            for e in E:
                for d in D:
                    c[i, s, e] += a[i, s, d] * b[i, d, e]

def model(a: Tensor("B,S,D"), b: Tensor("B,D,E")):
    return {"c": bmm(a, b)}
""",
    "conv1d": """
B, C, L, K, R, P = Dim("B", 2), Dim("C", 4), Dim("L", 33), Dim("K", 8), Dim("R", 5), Dim("P", 16)

@kernel
def conv(x: Tensor("B,C,L", fill=0.0), w: Tensor("K,C,R"), bias: Tensor("K"), acc: Temp("B,K,P"), y: Out("B,K,P")):
    for b in B:
        for k in K:
            for p in P:
                for c in C:
                    for r in R:
                        acc[b, k, p] += x[b, c, 2 * p + r - 1] * w[k, c, r]
    for b in B:
        for k in K:
            for p in P:
                y[b, k, p] = acc[b, k, p] + bias[k]

def model(x: Tensor("B,C,L"), w: Tensor("K,C,R", role="weight"), bias: Tensor("K", role="weight")):
    return {"y": conv(x, w, bias)}
""",
    "avgpool2d": """
N, C, H, W = Dim("N", 2), Dim("C", 3), Dim("H", 11), Dim("W", 11)
R, S, P, Q = Dim("R", 3), Dim("S", 3), Dim("P", 6), Dim("Q", 6)
R2, S2, P2, Q2 = Dim("R2", 2), Dim("S2", 2), Dim("P2", 5), Dim("Q2", 5)

@kernel
def avg_exclude_pad(x: Tensor("N,C,H,W", fill=0.0), ones: Tensor("H,W", fill=0.0), total: Temp("N,C,P,Q"),
                    count: Temp("P,Q"), y: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    for r in R:
                        for s in S:
                            total[n, c, p, q] += x[n, c, 2 * p + r - 1, 2 * q + s - 1]
    for p in P:
        for q in Q:
            for r in R:
                for s in S:
                    count[p, q] += ones[2 * p + r - 1, 2 * q + s - 1]
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    y[n, c, p, q] = total[n, c, p, q] / count[p, q]

@kernel
def avg_include_pad(x: Tensor("N,C,H,W", fill=0.0), total: Temp("N,C,P,Q"), y: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    for r in R:
                        for s in S:
                            total[n, c, p, q] += x[n, c, 2 * p + r - 1, 2 * q + s - 1]
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    y[n, c, p, q] = total[n, c, p, q] * (1 / 9)

@kernel
def avg2(x: Tensor("N,C,H,W"), total: Temp("N,C,P2,Q2"), y: Out("N,C,P2,Q2")):
    for n in N:
        for c in C:
            for p in P2:
                for q in Q2:
                    for r in R2:
                        for s in S2:
                            total[n, c, p, q] += x[n, c, 2 * p + r, 2 * q + s]
    for n in N:
        for c in C:
            for p in P2:
                for q in Q2:
                    y[n, c, p, q] = total[n, c, p, q] * 0.25

def model(x: Tensor("N,C,H,W"), ones: Tensor("H,W", role="constant", value=1.0)):
    return {"a": avg_exclude_pad(x, ones), "b": avg_include_pad(x), "c": avg2(x)}
""",
    "compare_where": """
B, D = Dim("B", 6), Dim("D", 20)

@kernel
def logic(x: Tensor("B,D"), y: Tensor("B,D"), gt: Temp("B,D", "bool"), lt: Temp("B,D", "bool"),
          nt: Temp("B,D", "bool"), m: Temp("B,D", "bool"), z: Temp("B,D"), eq: Temp("B,D", "bool"),
          mf: Temp("B,D"), ge: Temp("B,D", "bool"), gef: Temp("B,D"), out: Out("B,D")):
    for b in B:
        for d in D:
            gt[b, d] = x[b, d] > y[b, d]
            lt[b, d] = x[b, d] < 0.0
            nt[b, d] = not lt[b, d]
            m[b, d] = gt[b, d] and nt[b, d]
            z[b, d] = where(m[b, d], x[b, d], y[b, d])
            eq[b, d] = x[b, d] == y[b, d]
            mf[b, d] = where(eq[b, d], 0.0, z[b, d])
            ge[b, d] = x[b, d] >= 0.5
            gef[b, d] = ge[b, d]
            out[b, d] = mf[b, d] + gef[b, d]

def model(x: Tensor("B,D"), y: Tensor("B,D")):
    return {"out": logic(x, y)}
""",
    "linear_relu": """
B, D, E = Dim("B", 16), Dim("D", 64), Dim("E", 96)

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
""",
    "maxpool2d": """
import math
N, C, H, W = Dim("N", 2), Dim("C", 4), Dim("H", 15), Dim("W", 15)
R, S, R2, S2 = Dim("R", 3), Dim("S", 3), Dim("R2", 2), Dim("S2", 2)
P, Q = Dim("P", 8), Dim("Q", 8)

@kernel
def pool3(x: Tensor("N,C,H,W", fill=-math.inf), y: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    for r in R:
                        for s in S:
                            y[n, c, p, q] = max(y[n, c, p, q], x[n, c, 2 * p + r - 1, 2 * q + s - 1])

@kernel
def pool2(x: Tensor("N,C,H,W", fill=-math.inf), y: Out("N,C,P,Q")):
    for n in N:
        for c in C:
            for p in P:
                for q in Q:
                    for r in R2:
                        for s in S2:
                            y[n, c, p, q] = max(y[n, c, p, q], x[n, c, 2 * p + r, 2 * q + s])

def model(x: Tensor("N,C,H,W")):
    return {"a": pool3(x), "b": pool2(x)}
""",
    "sdpa_causal": """
import math
B, H, S, T, E = Dim("B", 2), Dim("H", 4), Dim("S", 16), Dim("T", 16), Dim("E", 8)
KEPT = 136 / 256  # the causal triangle of a 16 x 16 score matrix, as the torch frontend declares it

@kernel
def sdpa(q: Tensor("B,H,S,E"), k: Tensor("B,H,T,E"), v: Tensor("B,H,T,E"), mask: Tensor("S,T", density=KEPT),
         sc: Temp("B,H,S,T", density=KEPT), scaled: Temp("B,H,S,T", density=KEPT),
         masked: Temp("B,H,S,T", density=KEPT), mx: Temp("B,H,S"),
         sh: Temp("B,H,S,T", density=KEPT), ex: Temp("B,H,S,T", density=KEPT),
        tot: Temp("B,H,S"), p: Temp("B,H,S,T", density=KEPT), o: Out("B,H,S,E")):
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    for e in E:
                        sc[b, h, s, t] += q[b, h, s, e] * k[b, h, t, e]
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    scaled[b, h, s, t] = sc[b, h, s, t] * (1 / math.sqrt(8))
                    masked[b, h, s, t] = where(mask[s, t], scaled[b, h, s, t], -math.inf)
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    mx[b, h, s] = max(mx[b, h, s], masked[b, h, s, t])
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    sh[b, h, s, t] = masked[b, h, s, t] - mx[b, h, s]
                    ex[b, h, s, t] = exp(sh[b, h, s, t])
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    tot[b, h, s] += ex[b, h, s, t]
    for b in B:
        for h in H:
            for s in S:
                for t in T:
                    p[b, h, s, t] = ex[b, h, s, t] / tot[b, h, s]
    for b in B:
        for h in H:
            for s in S:
                for e in E:
                    for t in T:
                        o[b, h, s, e] += p[b, h, s, t] * v[b, h, t, e]

def model(q: Tensor("B,H,S,E"), k: Tensor("B,H,S,E"), v: Tensor("B,H,S,E"),
          mask: Tensor("S,T", dtype="bool", role="constant", density=KEPT)):
    return {"o": sdpa(q, k, v, mask)}

def get_inputs(rng):
    import numpy as np
    return {"mask": np.tril(np.ones((16, 16), dtype=bool))}
""",
    "rmsnorm": """
B, S, D = Dim("B", 2), Dim("S", 7), Dim("D", 64)

@kernel
def rms(x: Tensor("B,S,D"), g: Tensor("D"), sq: Temp("B,S,D"), tot: Temp("B,S"), ms: Temp("B,S"),
        r: Temp("B,S"), xh: Temp("B,S,D"), y: Out("B,S,D")):
    for b in B:
        for s in S:
            for d in D:
                sq[b, s, d] = square(x[b, s, d])
                tot[b, s] += sq[b, s, d]
    for b in B:
        for s in S:
            ms[b, s] = tot[b, s] * (1 / 64)
            r[b, s] = rsqrt(ms[b, s] + 1e-6)
    for b in B:
        for s in S:
            for d in D:
                xh[b, s, d] = x[b, s, d] * r[b, s]
                y[b, s, d] = xh[b, s, d] * g[d]

def model(x: Tensor("B,S,D"), g: Tensor("D", role="weight")):
    return {"y": rms(x, g)}
""",
    "slice_select": """
B, D = Dim("B", 5), Dim("D", 9)

@kernel
def add1(x: Tensor("B,D"), y: Out("B,D")):
    for b in B:
        for d in D:
            y[b, d] = x[b, d] + 1.0

def model(x: Tensor("B,D")):
    inner = slice(slice(x, "B", 1, 5, as_dim="B4"), "D", 0, 4, as_dim="D4")
    return {"a": slice(x, "D", 1, 7, 2), "b": select(x, "B", 2), "c": select(x, "D", 8),
            "d": slice(x, "D", 2, 5), "e": add1(inner)}
""",
    "view_permute": """
B, S, F, H, E, G = Dim("B", 2), Dim("S", 8), Dim("F", 64), Dim("H", 4), Dim("E", 16), Dim("G", 128)

@kernel
def double(x: Tensor("B,G"), y: Out("B,G")):
    for b in B:
        for g in G:
            y[b, g] = x[b, g] * 2.0

def model(x: Tensor("B,S,F")):
    y = reshape(x, "B,S,H,E")
    z = reshape(transpose(y, "B,H,E,S"), "B,G")
    return {"z": double(z), "y": transpose(y, "B,H,S,E")}
""",
    "cat_stack_split": """
B, Da, Db = Dim("B", 4), Dim("Da", 5), Dim("Db", 7)

@kernel
def double(x: Tensor("B,Da"), y: Out("B,Da")):
    for b in B:
        for d in Da:
            y[b, d] = x[b, d] * 2.0

@kernel
def mul(x: Tensor("B,Da"), z: Tensor("B,Da"), y: Out("B,Da")):
    for b in B:
        for d in Da:
            y[b, d] = x[b, d] * z[b, d]

def model(a: Tensor("B,Da"), b: Tensor("B,Db")):
    c = concat([a, b], "Da", as_dim="Dc")
    s = stack([a, double(a)], "J")
    p, q = slice(c, "Dc", 0, 3), slice(c, "Dc", 3, 12)
    return {"c": c, "s": s, "pq": mul(p, slice(q, "Dc_9", 0, 3)), "u": slice(b, "B", 2, 4, as_dim="B2"),
            "v": select(a, "Da", 2)}
""",
}


def counts(g) -> tuple:
    m = graph_metrics(g)
    return m.macs, m.flops_matrix, m.flops_vector, m.transcendental, m.bytes


@pytest.mark.parametrize("name", sorted(IR))
def test_ir_program_counts_equal_the_torch_capture(name, tmp_path):
    prog = tmp_path / f"{name}_ir.py"
    prog.write_text("from solar_io.frontends.loopir import *  # noqa: F403\n" + textwrap.dedent(IR[name]))
    ir = capture_file(prog, jit=False)
    assert ir.validation.status == "passed", ir.validation.reason
    th = torch_frontend.capture_file(MODELS / f"{name}.py", validate=False)
    assert counts(ir) == counts(th)
