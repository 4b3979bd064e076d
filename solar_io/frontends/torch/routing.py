"""The MoE routing model: which experts the tokens of a router's top-k go to, when the capture assumes it.

A mixture-of-experts layer routes each of its ``T`` tokens to ``k`` of ``E`` experts (a ``topk`` over
the router's scores). The work of the experts (``T * k`` token-expert pairs, whatever the routing)
and the weight bytes read (one copy of every expert that receives a token) follow from the routing;
the routing follows from the data. ``--routing`` says what a capture assumes:

- ``observed``: the routing the model computes on the example inputs (``get_inputs()``, seeded
  weights), run on the CPU. Exact for those inputs, and only for them.
- ``uniform`` (default): tokens choose their ``k`` experts independently and uniformly (what
  routers trained with a load-balancing loss approximate). The number of distinct experts hit is
  its expected value ``E * (1 - (1 - k/E)**T)``, rounded, and the ``T * k`` pairs are spread evenly
  over those experts. For a decode step (``T`` small) this reads far fewer experts than ``balanced``.
- ``balanced``: the ``T * k`` pairs spread evenly over ``min(E, T * k)`` experts (the target of
  capacity and auxiliary-loss routing); the most weight bytes any routing of ``T`` tokens reads.
- ``skewed=ALPHA``: expert ``i`` (0-based) gets a share proportional to ``(i + 1) ** -ALPHA`` (a power
  law: popular experts), no expert more than ``T`` tokens (a token picks ``k`` distinct experts). A
  large ALPHA approaches the fewest experts any routing can use (``k``: every token to the same ones),
  which gives the lowest bound over all routings.

Why these are fair for a lower bound: the bound is a lower bound of a run *whose routing has these
counts*; expert MACs do not depend on the mode (``T * k`` pairs in every mode), only the distinct
experts (weight bytes) and the per-expert tile shapes do. ``skewed`` with a large ALPHA is the
unconditional floor; ``observed`` uses the example inputs' routing, nothing else.

Grouped routing (DeepSeek-V3's ``n_group``/``topk_group``: a token's experts lie in its
``topk_group`` best groups) does not change these counts (each expert is still hit with probability
``k/E`` per token under uniform group choice); :func:`assign` keeps each token's experts in as few
consecutive groups as the counts allow, and :func:`check_groups` says whether ``topk_group`` holds.
Shared experts are dense code: every token goes through them in every mode. A capacity factor is the
model's own code (tokens past ``ceil(factor * T * k / E)`` per expert dropped by a cumulative count of
the routing mask): it runs on the routing the capture assumes, so what it drops does no work in the graph.

>>> counts("balanced", tokens=4, experts=4, k=1)
(1, 1, 1, 1)
>>> counts("uniform", tokens=4, experts=4, k=1)  # E(1-(1-k/E)^T) = 2.73 -> 3 experts
(2, 1, 1, 0)
>>> assign((2, 1, 1, 0), tokens=4, k=1).tolist()
[[0], [1], [2], [0]]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ..common.errors import CaptureError

MODES = ("observed", "uniform", "balanced", "skewed")


@dataclass(frozen=True)
class Routing:
    """A parsed ``--routing`` value: the mode and ALPHA for ``skewed``."""

    mode: str = "uniform"
    alpha: float | None = None

    def __str__(self) -> str:
        return f"skewed={self.alpha:g}" if self.mode == "skewed" else self.mode

    @property
    def forced(self) -> bool:
        """Whether the capture replaces the router's choice (every mode but ``observed``)."""
        return self.mode != "observed"


def parse_routing(text: str | None) -> Routing:
    """``observed``, ``uniform``, ``balanced`` or ``skewed=ALPHA``; CaptureError (one line) otherwise.

    >>> parse_routing("skewed=1.2")
    Routing(mode='skewed', alpha=1.2)
    """
    if text is None or str(text).strip() == "":
        return Routing()
    head = str(text).strip()
    m = re.fullmatch(r"skewed\s*=\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)", head)
    if m and float(m.group(1)) > 0 and math.isfinite(float(m.group(1))):
        return Routing("skewed", float(m.group(1)))
    if head in ("observed", "uniform", "balanced"):
        return Routing(head)
    raise CaptureError(f"bad --routing {text!r}: use observed, uniform, balanced or skewed=ALPHA (ALPHA > 0)")


def expected_distinct(tokens: int, experts: int, k: int) -> float:
    """Expected number of distinct experts hit by ``tokens`` independent uniform top-``k`` choices:
    ``E * (1 - (1 - k/E)**T)``.

    >>> round(expected_distinct(1, 8, 2), 6), round(expected_distinct(4, 8, 2), 4)
    (2.0, 5.4688)
    """
    return experts * (1.0 - (1.0 - k / experts) ** tokens)


def _spread(total: int, weights: list[float], cap: int) -> list[int]:
    """``total`` integer units over ``weights`` (largest remainder), none above ``cap`` (water-filling)."""
    n = len(weights)
    out = [0] * n
    free = list(range(n))
    left = total
    while left > 0 and free:
        wsum = sum(weights[i] for i in free)
        share = {i: left * weights[i] / wsum for i in free}
        over = [i for i in free if out[i] + share[i] >= cap]
        if over:  # these saturate: give them the cap, spread the rest again
            for i in over:
                left -= cap - out[i]
                out[i] = cap
            free = [i for i in free if i not in over]
            continue
        base = {i: math.floor(share[i]) for i in free}
        for i in free:
            out[i] += base[i]
        rem = left - sum(base.values())
        order = sorted(free, key=lambda i: (-(share[i] - base[i]), i))
        for i in order[:rem]:
            out[i] += 1
        left = 0
    return out


def counts(mode: str, tokens: int, experts: int, k: int, alpha: float | None = None) -> tuple[int, ...]:
    """Tokens per expert under a synthetic routing ``mode`` (see the module docstring); sums to
    ``tokens * k``, no expert above ``tokens``.

    >>> counts("skewed", tokens=8, experts=4, k=2, alpha=1.0)
    (8, 4, 2, 2)
    """
    if not 1 <= k <= experts:
        raise CaptureError(f"routing: top-{k} of {experts} experts is not a routing")
    total = tokens * k
    if mode == "balanced":
        used = min(experts, total)
        weights = [1.0] * used + [0.0] * (experts - used)
    elif mode == "uniform":
        used = min(experts, total, max(k, round(expected_distinct(tokens, experts, k))))
        weights = [1.0] * used + [0.0] * (experts - used)
    elif mode == "skewed":
        weights = [(i + 1) ** -(alpha or 1.0) for i in range(experts)]
    else:
        raise CaptureError(f"routing mode {mode!r} has no synthetic counts")
    return tuple(_spread(total, weights, tokens) if total else [0] * experts)


def assign(per_expert: tuple[int, ...] | list[int], tokens: int, k: int) -> np.ndarray:
    """A ``[tokens, k]`` table of expert ids, ``k`` distinct ones per token, whose counts are
    ``per_expert`` (each ``<= tokens``, summing to ``tokens * k``).

    Equal counts over the first ``u`` experts (``uniform``, ``balanced``) are dealt cyclically: token
    ``t`` gets experts ``(t*k + j) mod u``, ``k`` consecutive ones (so few groups of a grouped router).
    Other counts are dealt column-major, expert by expert, so one expert's tokens are distinct.

    >>> assign((3, 2, 1), tokens=3, k=2).tolist()
    [[0, 1], [0, 1], [0, 2]]
    >>> assign((2, 2, 2, 2), tokens=4, k=2).tolist()
    [[0, 1], [2, 3], [0, 1], [2, 3]]
    """
    per_expert = [int(c) for c in per_expert]
    if sum(per_expert) != tokens * k or any(c > tokens for c in per_expert):
        raise CaptureError(f"routing: counts {per_expert} are not a top-{k} routing of {tokens} tokens")
    used = sum(1 for c in per_expert if c)
    cyclic = np.array([[(t * k + j) % used for j in range(k)] for t in range(tokens)], dtype=np.int64) \
        if used >= k and tokens else np.zeros((tokens, k), dtype=np.int64)
    if used >= k and tuple(np.bincount(cyclic.ravel(), minlength=len(per_expert))) == tuple(per_expert):
        return cyclic
    flat = np.repeat(np.arange(len(per_expert), dtype=np.int64), per_expert)
    return flat.reshape(k, tokens).T.copy()


def check_groups(table: np.ndarray, experts: int, n_group: int, topk_group: int) -> bool:
    """Whether every token's experts in ``table`` lie within ``topk_group`` of the ``n_group``
    equal groups of consecutive experts (DeepSeek-V3 grouped routing).

    >>> check_groups(np.array([[0, 2], [1, 3]]), experts=4, n_group=2, topk_group=1)
    False
    >>> check_groups(np.array([[0, 1], [2, 3]]), experts=4, n_group=2, topk_group=1)
    True
    """
    size = experts // n_group
    return all(len({int(e) // size for e in row}) <= topk_group for row in table)


def per_expert_counts(table: np.ndarray, experts: int) -> tuple[int, ...]:
    """Tokens per expert of a ``[tokens, k]`` routing table (each token once per expert it names)."""
    out = [0] * experts
    for row in np.asarray(table).reshape(-1, np.asarray(table).shape[-1]):
        for e in {int(x) for x in row}:
            out[e] += 1
    return tuple(out)
