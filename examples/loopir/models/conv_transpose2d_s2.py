"""A transposed 2-d convolution with stride 2, grouped, with a bias (cross-frontend twin of
tests/models/conv_transpose2d_s2.py: kernel 4, padding 1, one group; and of
tests/models/conv_transpose2d_k2s2.py: kernel 2, padding 0, two groups), by the phase
decomposition the torch frontend uses, since an output index ``(p + pad - r) / 2`` is not
affine:

1. every input pixel times every kernel tap of its group: ``cols[n, g, k, h, w, kh, kw]``
   (the MACs), viewed as ``[N, G*Kg, H, W, KH, KW]``;
2. output phase (a, b) of the stride: sum the taps ``kh = 2*i + a`` of the pixels
   ``h2 - i`` (zero outside): ``phases[n, k, h2, a, w2, b]``, an add-reduction;
3. a row-major view interleaves the phases into ``[N, K, 2*H2, 2*W2]``;
4. the padding is cropped off (a copy kernel with the padding an int parameter: a
   data_movement node), then the bias is added.

Sizes: KH = 2*I, H2 = H + I - 1, P = 2*H2 - 2*pad (likewise for W).
"""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel, reshape, size

N, C, H, W, K = Dim("N", 8), Dim("C", 128), Dim("H", 32), Dim("W", 32), Dim("K", 64)
G, Cg, Kg = Dim("G", 1), Dim("Cg", 128), Dim("Kg", 64)
KH, KW = Dim("KH", 4), Dim("KW", 4)
H2, W2, PH, PW, I, J = Dim("H2", 33), Dim("W2", 33), Dim("PH", 2), Dim("PW", 2), Dim("I", 2), Dim("J", 2)
P, Q = Dim("P", 64), Dim("Q", 64)


CG = size(Cg)  # an index coefficient: a module-level int


@kernel
def taps(x: Tensor("N,C,H,W"), w: Tensor("C,Kg,KH,KW"), cols: Out("N,G,Kg,H,W,KH,KW")):
    for n in N:
        for g in G:
            for k in Kg:
                for h in H:
                    for v in W:
                        for kh in KH:
                            for kw in KW:
                                for c in Cg:
                                    cols[n, g, k, h, v, kh, kw] += x[n, CG * g + c, h, v] * w[CG * g + c, k, kh, kw]


@kernel
def phases(cols: Tensor("N,K,H,W,KH,KW", fill=0.0), y: Out("N,K,H2,PH,W2,PW")):
    for n in N:
        for k in K:
            for h in H2:
                for a in PH:
                    for v in W2:
                        for b in PW:
                            for i in I:
                                for j in J:
                                    y[n, k, h, a, v, b] += cols[n, k, h - i, v - j, 2 * i + a, 2 * j + b]


@kernel
def crop(z: Tensor("N,K,H,W"), pad: int, y: Out("N,K,P,Q")):
    for n in N:
        for k in K:
            for p in P:
                for q in Q:
                    y[n, k, p, q] = z[n, k, p + pad, q + pad]


@kernel
def bias_add(z: Tensor("N,K,P,Q"), bias: Tensor("K"), y: Out("N,K,P,Q")):
    for n in N:
        for k in K:
            for p in P:
                for q in Q:
                    y[n, k, p, q] = z[n, k, p, q] + bias[k]


def model(x: Tensor("N,C,H,W"), w: Tensor("C,Kg,KH,KW", role="weight"), bias: Tensor("K", role="weight")):
    cols = taps(x, w)
    ph = phases(reshape(cols, "N,K,H,W,KH,KW", K=cols.size_of("G") * cols.size_of("Kg")))
    full = reshape(ph, "N,K,H,W", H=2 * ph.size_of("H2"), W=2 * ph.size_of("W2"))
    pad = (full.size_of("H") - size(P)) // 2
    return {"y": bias_add(crop(full, pad), bias)}
