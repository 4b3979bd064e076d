"""What changed between two einsum-graph files: structure, work, traffic and speed-of-light.

Ranks, tensors and nodes are matched by name. A tensor is *changed* when its ranks, shape (the
sizes of its ranks), dtype, role, density, value, ``updates`` or ``prefilled`` differ; a node when its
kind, op, space, accesses (inputs, outputs with their index expressions), map, reduce, data-movement
fields, padding, fill, opaque reason, attributes or any other field of ``Node`` differ (source
locations are ignored: they move with every edit of the source). Totals are those of
``solar_io.metrics`` (MACs, FLOPs per unit class, bytes unfused and at the fused boundary) and, on a
chip, the unfused and fused SOL of the roofline backend.

A *regression* is a total that grows by more than a threshold (a fraction: 0.05 for 5 %): the SOL,
unfused or fused, when a chip is given, else the MACs. Growth from 0 to anything is a regression.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

from ..errors import SolarIOError
from ..graph import Graph, Node, Tensor
from ..hardware import HardwareSpec
from ..metrics import graph_metrics

#: Totals compared, in report order: (key, label).
TOTALS = (("macs", "MACs"), ("flops_matrix", "FLOPs matrix"), ("flops_vector", "FLOPs vector"),
          ("transcendental", "transcendental"), ("bytes", "bytes unfused"), ("boundary_bytes", "bytes boundary"),
          ("sol_unfused", "SOL unfused (s)"), ("sol_fused", "SOL fused (s)"))
#: Node fields compared: every field of ``Node`` but its name and source location.
NODE_FIELDS = tuple(f.name for f in fields(Node) if f.name not in ("name", "location"))
_PERCENT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(%?)\s*\Z")


class DiffError(SolarIOError):
    """A diff request that cannot be met (a bad threshold)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One rank, tensor or node added, removed or changed, with (field, old, new) for a change."""

    kind: str  # "rank", "tensor" or "node"
    name: str
    status: str  # "added", "removed" or "changed"
    fields: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Totals:
    """The totals of one graph (SOL seconds only when a chip was given)."""

    nodes: int
    tensors: int
    macs: int
    flops_matrix: float
    flops_vector: float
    transcendental: float
    bytes: float
    boundary_bytes: float
    opaque: tuple[str, ...]
    sol_unfused: float | None = None
    sol_fused: float | None = None


@dataclass(frozen=True, slots=True)
class Delta:
    """One total, old and new; ``percent`` is None when old is 0 (or either is unknown)."""

    key: str
    label: str
    old: float | None
    new: float | None

    @property
    def change(self) -> float | None:
        return None if self.old is None or self.new is None else self.new - self.old

    @property
    def percent(self) -> float | None:
        if self.old is None or self.new is None or self.old == 0:
            return None
        return 100.0 * (self.new - self.old) / self.old

    def grows_over(self, threshold: float) -> bool:
        """True when new exceeds old by more than the fraction ``threshold`` (or grows from 0)."""
        if self.old is None or self.new is None:
            return False
        if self.old == 0:
            return self.new > 0
        return (self.new - self.old) / self.old > threshold


@dataclass(frozen=True)
class GraphDiff:
    """The diff of two graphs: changes by kind, and totals old vs new."""

    changes: tuple[Change, ...]
    old: Totals
    new: Totals
    hardware: str | None

    def of(self, kind: str, status: str | None = None) -> list[Change]:
        """The changes of ``kind`` (``rank``, ``tensor``, ``node``), optionally of one status."""
        return [c for c in self.changes if c.kind == kind and (status is None or c.status == status)]

    @property
    def deltas(self) -> list[Delta]:
        """Every total, old vs new (SOL rows only with a chip)."""
        out = []
        for key, label in TOTALS:
            if key.startswith("sol") and self.hardware is None:
                continue
            out.append(Delta(key, label, getattr(self.old, key), getattr(self.new, key)))
        return out

    def regressions(self, threshold: float) -> list[str]:
        """One line per watched total (SOL with a chip, else MACs) grown by more than ``threshold``."""
        watched = ("sol_unfused", "sol_fused") if self.hardware else ("macs",)
        lines = []
        for d in self.deltas:
            if d.key in watched and d.grows_over(threshold):
                pct = "from 0" if d.percent is None else f"by {d.percent:.2f}%"
                on = f" on {self.hardware}" if d.key.startswith("sol") else ""
                lines.append(f"{d.label.split(' (')[0]}{on} grew {pct} ({d.old:.6g} -> {d.new:.6g}), over the "
                             f"{100 * threshold:g}% threshold")
        return lines


def parse_threshold(text: str) -> float:
    """``'5%'`` or ``'5'`` (percent) -> 0.05; DiffError otherwise."""
    m = _PERCENT.match(text)
    if not m:
        raise DiffError(f"--fail-on-regression: cannot read {text!r} as a percentage; write e.g. 5% or 0.5%")
    return float(m.group(1)) / 100.0


def _shape(g: Graph, t: Tensor) -> str:
    return "[" + ", ".join(f"{r}={g.rank_sizes[r]}" for r in t.ranks) + "]"


def _tensor_fields(g: Graph, t: Tensor) -> dict[str, str]:
    return {"ranks": f"[{', '.join(t.ranks)}]", "shape": _shape(g, t), "dtype": t.dtype, "role": t.role,
            "density": str(t.density), "value": str(t.value), "updates": str(t.updates), "prefilled": str(t.prefilled)}


def _node_fields(n: Node) -> dict[str, str]:
    out = {}
    for f in NODE_FIELDS:
        v = getattr(n, f)
        if f in ("inputs", "outputs"):
            out[f] = ", ".join(str(a) for a in v)
        elif f == "space":
            out[f] = f"[{', '.join(v)}]"
        elif f == "pad":
            out[f] = "; ".join(f"{t}: " + ", ".join(f"{r}=({lo}, {hi})" for r, lo, hi in dims) for t, dims in v) or "-"
        elif f == "attrs":
            out[f] = str(dict(v)) if v else "-"
        else:
            out[f] = str(v)
    return out


def _match(kind: str, old: dict[str, dict[str, str]], new: dict[str, dict[str, str]]) -> list[Change]:
    """Changes between two {name: {field: text}} maps."""
    out = [Change(kind, n, "removed") for n in old if n not in new]
    out += [Change(kind, n, "added") for n in new if n not in old]
    for name, before in old.items():
        after = new.get(name)
        if after is None:
            continue
        diffs = tuple((f, before[f], after[f]) for f in before if before[f] != after[f])
        if diffs:
            out.append(Change(kind, name, "changed", diffs))
    return out


def totals(g: Graph, hw: HardwareSpec | str | None = None) -> Totals:
    """The totals of ``g``; with ``hw`` (a HardwareSpec, name or path) its unfused and fused SOL."""
    m = graph_metrics(g)
    sol_u = sol_f = None
    if hw is not None:
        from ..backends.roofline import bound

        r = bound(g, hw)
        sol_u, sol_f = r.unfused.time, r.fused.time
    return Totals(len(g.nodes), len(g.tensors), m.macs, m.flops_matrix, m.flops_vector, m.transcendental, m.bytes,
                  m.boundary_bytes, m.opaque, sol_u, sol_f)


def diff_graphs(old: Graph, new: Graph, hw: HardwareSpec | str | None = None) -> GraphDiff:
    """The diff of ``old`` and ``new``; with ``hw`` (a HardwareSpec, name or path) SOL totals too."""
    spec = None
    if hw is not None:
        from ..backends.bound import resolve_hardware

        spec = resolve_hardware(hw)
    ranks_old, ranks_new = old.rank_sizes, new.rank_sizes
    changes = _match("rank", {r: {"size": str(n)} for r, n in ranks_old.items()},
                     {r: {"size": str(n)} for r, n in ranks_new.items()})
    changes += _match("tensor", {t.name: _tensor_fields(old, t) for t in old.tensors},
                      {t.name: _tensor_fields(new, t) for t in new.tensors})
    changes += _match("node", {n.name: _node_fields(n) for n in old.nodes},
                      {n.name: _node_fields(n) for n in new.nodes})
    return GraphDiff(tuple(changes), totals(old, spec), totals(new, spec), spec.name if spec else None)


def describe(c: Change) -> str:
    """``~ tensor x: shape [S=1024] -> [S=2048]; dtype bf16 -> fp8_e4m3``."""
    mark = {"added": "+", "removed": "-", "changed": "~"}[c.status]
    if c.status != "changed":
        return f"{mark} {c.kind} {c.name}"
    return f"{mark} {c.kind} {c.name}: " + "; ".join(f"{f} {a} -> {b}" for f, a, b in c.fields)


def to_dict(d: GraphDiff, threshold: float | None = None) -> dict:
    """A JSON-ready document of the diff (and of the regressions at ``threshold``)."""
    def num(x: float | None) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

    doc: dict = {
        "hardware": d.hardware,
        "changes": {kind: {status: [c.name for c in d.of(kind, status)] for status in ("added", "removed", "changed")}
                    for kind in ("rank", "tensor", "node")},
        "changed_fields": [{"kind": c.kind, "name": c.name, "fields": [{"field": f, "old": a, "new": b}
                                                                     for f, a, b in c.fields]}
                           for c in d.changes if c.status == "changed"],
        "totals": [{"key": x.key, "old": num(x.old), "new": num(x.new), "change": num(x.change),
                    "percent": num(x.percent)} for x in d.deltas],
        "opaque": {"old": list(d.old.opaque), "new": list(d.new.opaque)},
    }
    if threshold is not None:
        doc["threshold"] = threshold
        doc["regressions"] = d.regressions(threshold)
    return doc


__all__ = ["Change", "Delta", "DiffError", "GraphDiff", "TOTALS", "Totals", "describe", "diff_graphs",
           "parse_threshold", "to_dict", "totals"]
