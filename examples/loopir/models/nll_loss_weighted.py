"""Class-weighted NLL loss with an ignore index (cross-frontend twin of
tests/models/nll_loss_weighted.py), as the torch frontend lowers it: targets equal to
the ignore index are masked; each row's log-probability of its target and the target's
class weight are picked by gathers; the loss is the weighted sum over valid rows divided
by their total weight.
"""

from _common import valid_targets

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, gather, kernel, size, where

B, C = Dim("B", 4096), Dim("C", 1000)
IGNORE = 2


@kernel
def weighted_mean(picked: Tensor("B"), w: Tensor("B"), valid: Tensor("B"), wp: Temp("B"), neg: Temp("B"),
                  masked: Temp("B"), total: Temp(""), wv: Temp("B"), wsum: Temp(""), y: Out("")):
    for b in B:
        wp[b] = picked[b] * w[b]
        neg[b] = -wp[b]
        masked[b] = where(valid[b], neg[b], 0.0)
    for b in B:
        total[()] += masked[b]
    for b in B:
        wv[b] = where(valid[b], w[b], 0.0)
    for b in B:
        wsum[()] += wv[b]
    y[()] = total[()] / wsum[()]


def model(logp: Tensor("B,C"), target: Tensor("B", dtype="int64"), w: Tensor("C", role="constant")):
    valid, safe = valid_targets(target, IGNORE)
    return {"loss": weighted_mean(gather(logp, safe, "C"), gather(w, safe, "C"), valid)}


def get_inputs(rng):
    return {"target": rng.integers(0, size(C), size=size(B)), "w": rng.uniform(0.5, 1.5, size(C))}
