"""GroupNorm with an affine scale and shift (cross-frontend twin of tests/models/groupnorm.py,
and of tests/models/instancenorm.py: instance norm is group norm with one channel per
group, G = C and Cg = 1).

Channels are split into G groups of Cg by a reshape view (no bytes); statistics reduce
over (Cg, H, W) of each group; the normalised tensor is viewed back as N,C,H,W for the
per-channel affine step. 1/(Cg*H*W) comes from the shapes.
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, reshape, rsqrt, size, square

N, C, H, W = Dim("N", 16), Dim("C", 256), Dim("H", 32), Dim("W", 32)
G, Cg = Dim("G", 32), Dim("Cg", 8)
EPS = 1e-5


@kernel
def normalize(x: Tensor("N,G,Cg,H,W"), inv: float, total: Temp("N,G"), mean: Temp("N,G"), xc: Temp("N,G,Cg,H,W"),
              sq: Temp("N,G,Cg,H,W"), total2: Temp("N,G"), var: Temp("N,G"), ve: Temp("N,G"), rstd: Temp("N,G"),
              xhat: Out("N,G,Cg,H,W")):
    for n in N:
        for g in G:
            for c in Cg:
                for h in H:
                    for w in W:
                        total[n, g] += x[n, g, c, h, w]
    for n in N:
        for g in G:
            mean[n, g] = total[n, g] * inv
    for n in N:
        for g in G:
            for c in Cg:
                for h in H:
                    for w in W:
                        xc[n, g, c, h, w] = x[n, g, c, h, w] - mean[n, g]
                        sq[n, g, c, h, w] = square(xc[n, g, c, h, w])
    for n in N:
        for g in G:
            for c in Cg:
                for h in H:
                    for w in W:
                        total2[n, g] += sq[n, g, c, h, w]
    for n in N:
        for g in G:
            var[n, g] = total2[n, g] * inv
            ve[n, g] = var[n, g] + EPS
            rstd[n, g] = rsqrt(ve[n, g])
    for n in N:
        for g in G:
            for c in Cg:
                for h in H:
                    for w in W:
                        xhat[n, g, c, h, w] = xc[n, g, c, h, w] * rstd[n, g]


@kernel
def affine(x: Tensor("N,C,H,W"), g: Tensor("C"), beta: Tensor("C"), scaled: Temp("N,C,H,W"), y: Out("N,C,H,W")):
    for n in N:
        for c in C:
            for h in H:
                for w in W:
                    scaled[n, c, h, w] = x[n, c, h, w] * g[c]
                    y[n, c, h, w] = scaled[n, c, h, w] + beta[c]


def model(x: Tensor("N,C,H,W"), g: Tensor("C", role="weight"), beta: Tensor("C", role="weight")):
    grouped = reshape(x, "N,G,Cg,H,W", G=size(G), Cg=size(Cg))
    inv = 1.0 / (size(Cg) * x.size_of("H") * x.size_of("W"))
    return {"y": affine(reshape(normalize(grouped, inv), "N,C,H,W"), g, beta)}
