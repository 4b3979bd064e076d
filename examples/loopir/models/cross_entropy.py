"""Cross-entropy over class logits, mean and per-sample (cross-frontend twin of
tests/models/cross_entropy.py), as the torch frontend lowers it: a log-softmax over D,
then nll: targets equal to the ignore index (-100) are masked, the log-probability of
each row's target is picked by a per-row gather (``gather(logp, target, "D")``: the
target's dim B is shared with the table), negated, and averaged over the valid rows.
"""

from _common import log_softmax, valid_targets

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, gather, kernel, size, where

B, D = Dim("B", 4096), Dim("D", 32000)
IGNORE = -100


@kernel
def nll_terms(picked: Tensor("B"), valid: Tensor("B"), neg: Temp("B"), y: Out("B")):
    for b in B:
        neg[b] = -picked[b]
        y[b] = where(valid[b], neg[b], 0.0)


@kernel
def nll_mean(picked: Tensor("B"), valid: Tensor("B"), neg: Temp("B"), masked: Temp("B"), total: Temp(""),
             vf: Temp("B"), count: Temp(""), y: Out("")):
    for b in B:
        neg[b] = -picked[b]
        masked[b] = where(valid[b], neg[b], 0.0)
    for b in B:
        total[()] += masked[b]
    for b in B:
        vf[b] = valid[b]
    for b in B:
        count[()] += vf[b]
    y[()] = total[()] / count[()]


def model(logits: Tensor("B,D"), target: Tensor("B", dtype="int64")):
    valid, safe = valid_targets(target, IGNORE)
    mean = nll_mean(gather(log_softmax(logits), safe, "D"), valid)
    valid2, safe2 = valid_targets(target, IGNORE)
    return {"mean": mean, "none": nll_terms(gather(log_softmax(logits), safe2, "D"), valid2)}


def get_inputs(rng):
    return {"target": rng.integers(0, size(D), size=size(B))}
