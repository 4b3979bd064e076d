"""The classic decode roofline: a serving step's DRAM bytes per token, split into weights and KV cache.

A graph captured with ``--phase`` carries ``Assumption("step", ...)`` (batch, seq, kv_len, the
cache's input and output tensors). Its fused boundary traffic (:func:`solar_io.views.boundary_bytes`)
splits into

- ``weight_bytes``: every weight as far as the step reads it (all of them, except the embedding
  table, read at the batch's token rows);
- ``cache_bytes``: the cache's inputs as read (kv_len positions per sequence; a paged cache's
  block table too) and the entries the step writes (the new ones, or the grown cache of a
  ``dynamic`` cache);
- ``other_bytes``: the rest (token ids, logits, stored constants).

Per token (``tokens`` = batch x seq): the weights' share falls as 1 / batch while the cache's stays
(it grows with kv_len): small batches are dominated by the weights, large batches and long
contexts by the cache.

>>> t = StepTraffic(tokens=64, weight_bytes=16e9, cache_bytes=68.7e9, other_bytes=1e6)
>>> t.dominated_by, round(t.bytes_per_token / 1e9, 3)
('cache', 1.323)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..graph import Graph
from ..metrics import graph_metrics
from ..units import format_si as _si
from ..units import format_time
from ..views import ViewChains, boundary_reads

#: Extra sweep columns of a serving-step sweep (after :data:`solar_io.dse.sweep.COLUMNS`).
STEP_COLUMNS = ("tokens", "weight_bytes", "cache_bytes", "bytes_per_token", "tokens_per_s", "dominated_by")


@dataclass(frozen=True)
class StepTraffic:
    """The fused boundary bytes of one serving step, by what they are."""

    tokens: int
    weight_bytes: float
    cache_bytes: float
    other_bytes: float

    @property
    def total(self) -> float:
        return self.weight_bytes + self.cache_bytes + self.other_bytes

    @property
    def bytes_per_token(self) -> float:
        return self.total / self.tokens

    @property
    def dominated_by(self) -> str:
        """``weights``, ``cache`` or ``other``: the largest share."""
        shares = {"weights": self.weight_bytes, "cache": self.cache_bytes, "other": self.other_bytes}
        return max(shares, key=lambda k: shares[k])


def step_values(g: Graph) -> dict | None:
    """The values of the graph's ``step`` assumption, or None when it records no serving step."""
    for a in g.assumptions:
        if a.kind == "step":
            return dict(a.values)
    return None


def step_traffic(g: Graph) -> StepTraffic | None:
    """:class:`StepTraffic` of a step graph (None without a ``step`` assumption)."""
    values = step_values(g)
    if values is None:
        return None
    m = graph_metrics(g)
    chains = ViewChains(g)
    reads = boundary_reads(g, m.nodes, chains)
    tmap = g.tensor_map
    cache_in = set(values.get("cache_inputs", ()))
    cache_in |= {t.name for t in g.tensors if t.role == "input" and t.name == "block_table"}
    cache_out = set(values.get("cache_outputs", ()))
    weights = math.fsum(b for t, b in reads.items() if tmap[t].role == "weight")
    cache = math.fsum(b for t, b in reads.items() if t in cache_in)
    cache += math.fsum(b for n in m.nodes for t, b in n.bytes_written.items() if t in cache_out)
    viewed = {chains.root[t] for t in cache_out} - cache_out  # entries returned as views (a transpose)
    cache += math.fsum(b for r, b in chains.exposed().items() if r in viewed)
    tokens = int(values.get("batch", 1)) * int(values.get("seq", 1))
    return StepTraffic(tokens, weights, cache, max(0.0, m.boundary_bytes - weights - cache))


def step_row(traffic: StepTraffic, sol_s: float) -> dict:
    """The :data:`STEP_COLUMNS` of a sweep row whose bound is ``sol_s`` seconds."""
    return {"tokens": traffic.tokens, "weight_bytes": traffic.weight_bytes, "cache_bytes": traffic.cache_bytes,
            "bytes_per_token": traffic.bytes_per_token,
            "tokens_per_s": traffic.tokens / sol_s if sol_s > 0 else math.inf,
            "dominated_by": traffic.dominated_by}


def roofline_table(rows: list[dict], params: list[str], fidelity: str = "fused") -> str:
    """The decode roofline as text: one line per point and chip at ``fidelity``: the bound, tokens/s,
    bytes per token and the weights' and cache's shares of them."""
    head = [*params, "chip", "sol", "tokens/s", "B/token", "weights/token", "cache/token", "dominated by"]
    lines = []
    for r in rows:
        if r.get("fidelity") != fidelity or "tokens" not in r:
            continue
        tok = r["tokens"]
        lines.append([*(str(r[p]) for p in params), str(r["chip"]), format_time(r["sol_s"]),
                      f"{r['tokens_per_s']:.4g}", _si(r["bytes_per_token"], "B"), _si(r["weight_bytes"] / tok, "B"),
                      _si(r["cache_bytes"] / tok, "B"), str(r["dominated_by"])])
    if not lines:
        return ""
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = [f"decode roofline ({fidelity} bound; bytes per token = weights / batch + cache per sequence):",
           "  " + "  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    out += ["  " + "  ".join(c.rjust(w) for c, w in zip(x, widths, strict=True)) for x in lines]
    return "\n".join(out)

