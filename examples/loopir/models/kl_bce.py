"""KL divergence (batchmean) between log-softmax(x) and softmax(y), binary cross-entropy of
sigmoid(x) against probabilities p, and BCE with logits (cross-frontend twin of
tests/models/kl_bce.py), one store per op as the torch frontend lowers them: xlogy
guards t*log(t) at t = 0, BCE clamps its logs at -100, BCE with logits uses the stable
form log(1 + exp(-|x|)) + relu(-x).
"""

from _common import log_softmax, rows, softmax

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, exp, kernel, log, relu, reshape, sigmoid, size, where

B, D = Dim("B", 512), Dim("D", 32000)
INV_N = 1.0 / (size(B) * size(D))


@kernel
def kl_batchmean(ls: Tensor("B,D"), t: Tensor("B,D"), n_rows: float, logt: Temp("B,D"), tlogt: Temp("B,D"),
                 zero: Temp("B,D", "bool"), xlogy: Temp("B,D"), tx: Temp("B,D"), elem: Temp("B,D"),
                 total: Temp(""), y: Out("")):
    for b in B:
        for d in D:
            logt[b, d] = log(t[b, d])
            tlogt[b, d] = t[b, d] * logt[b, d]
            zero[b, d] = t[b, d] == 0.0
            xlogy[b, d] = where(zero[b, d], 0.0, tlogt[b, d])
            tx[b, d] = t[b, d] * ls[b, d]
            elem[b, d] = xlogy[b, d] - tx[b, d]
    for b in B:
        for d in D:
            total[()] += elem[b, d]
    y[()] = total[()] / n_rows


@kernel
def bce(x: Tensor("B,D"), p: Tensor("B,D"), s: Temp("B,D"), lx: Temp("B,D"), lxc: Temp("B,D"), omx: Temp("B,D"),
        l1mx: Temp("B,D"), l1mxc: Temp("B,D"), t1: Temp("B,D"), omp: Temp("B,D"), t2: Temp("B,D"),
        tsum: Temp("B,D"), elem: Temp("B,D"), total: Temp(""), y: Out("")):
    for b in B:
        for d in D:
            s[b, d] = sigmoid(x[b, d])
            lx[b, d] = log(s[b, d])
            lxc[b, d] = max(lx[b, d], -100.0)
            omx[b, d] = 1.0 - s[b, d]
            l1mx[b, d] = log(omx[b, d])
            l1mxc[b, d] = max(l1mx[b, d], -100.0)
            t1[b, d] = p[b, d] * lxc[b, d]
            omp[b, d] = 1.0 - p[b, d]
            t2[b, d] = omp[b, d] * l1mxc[b, d]
            tsum[b, d] = t1[b, d] + t2[b, d]
            elem[b, d] = -tsum[b, d]
    for b in B:
        for d in D:
            total[()] += elem[b, d]
    y[()] = total[()] * INV_N


@kernel
def bce_logits(x: Tensor("B,D"), p: Tensor("B,D"), ax: Temp("B,D"), nax: Temp("B,D"), e: Temp("B,D"),
               ope: Temp("B,D"), lg: Temp("B,D"), nx: Temp("B,D"), rn: Temp("B,D"), lt: Temp("B,D"),
               omp: Temp("B,D"), lin: Temp("B,D"), elem: Temp("B,D"), total: Temp(""), y: Out("")):
    for b in B:
        for d in D:
            ax[b, d] = abs(x[b, d])
            nax[b, d] = -ax[b, d]
            e[b, d] = exp(nax[b, d])
            ope[b, d] = e[b, d] + 1.0
            lg[b, d] = log(ope[b, d])
            nx[b, d] = -x[b, d]
            rn[b, d] = relu(nx[b, d])
            lt[b, d] = lg[b, d] + rn[b, d]
            omp[b, d] = 1.0 - p[b, d]
            lin[b, d] = omp[b, d] * x[b, d]
            elem[b, d] = lin[b, d] + lt[b, d]
    for b in B:
        for d in D:
            total[()] += elem[b, d]
    y[()] = total[()] * INV_N


def model(x: Tensor("B,D"), y: Tensor("B,D"), p: Tensor("B,D")):
    kl = kl_batchmean(log_softmax(x), reshape(softmax(rows(y)), "B,D"), float(x.size_of("B")))
    return {"kl": kl, "bce": bce(x, p), "bce_logits": bce_logits(x, p)}


def get_inputs(rng):
    return {"p": rng.random((size(B), size(D)))}
