"""What a training-step graph adds to a bound: the work of each phase and the peak of live activations.

A training graph marks each node's ``phase`` (forward, loss, backward, optimizer; format 1.3).
:func:`live_activations` runs the nodes in file order and keeps every intermediate tensor from the
node that writes it to the last node that reads it: its peak is the activation memory that order
needs (a lower bound for it: an allocator can only add to it). A view (a ``view: true`` copy or
reshape) allocates nothing and keeps the tensor it aliases alive as long as the view is read.
Inputs, weights, constants and outputs live for the whole step and are not counted; gradients a
later optimizer node reads are intermediates and are (they live until the update, as in PyTorch). ``saved`` is
what the forward writes and the backward reads (the activations autograd keeps for the backward).

>>> from solar_io.affine import parse_access
>>> from solar_io.graph import Graph, Node, Tensor
>>> ts = (Tensor("x", ("I",), "fp32", "input"), Tensor("a", ("I",), "fp32", "intermediate"),
...       Tensor("b", ("I",), "fp32", "intermediate"), Tensor("y", ("I",), "fp32", "output"))
>>> def n(name, i, o, phase): return Node(name, "einsum", "op", (parse_access(i + "[I]"),),
...                                       (parse_access(o + "[I]"),), ("I",), map="exp", phase=phase)
>>> nodes = (n("f", "x", "a", "forward"), n("g", "a", "b", "backward"), n("h", "b", "y", "backward"))
>>> g = Graph((("I", 1000),), ts, nodes)
>>> live = live_activations(g)
>>> live.peak, live.at, live.saved
(8000.0, 'g', 4000.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import PHASES, Graph
from .metrics import tensor_bytes


@dataclass(frozen=True)
class LiveActivations:
    """The peak of live intermediate bytes in node order, the node where it is reached, and the
    bytes the forward saves for the backward."""

    peak: float
    at: str | None
    saved: float


def is_training(g: Graph) -> bool:
    """Whether ``g`` marks phases (a training step)."""
    return any(n.phase is not None for n in g.nodes)


def live_activations(g: Graph) -> LiveActivations:
    """See the module docstring."""
    tmap = g.tensor_map
    root: dict[str, str] = {}
    for n in g.nodes:  # a view aliases the tensor it is a view of
        if n.kind == "data_movement" and n.view and len(n.inputs) == 1 and len(n.outputs) == 1:
            src = n.inputs[0].tensor
            root[n.outputs[0].tensor] = root.get(src, src)
    last: dict[str, int] = {}
    for i, n in enumerate(g.nodes):
        for a in n.inputs:
            r = root.get(a.tensor, a.tensor)
            last[r] = i
    writer_phase: dict[str, str | None] = {}
    saved_set: set[str] = set()
    live: dict[str, float] = {}
    current = peak = 0.0
    at = None
    for i, n in enumerate(g.nodes):
        for a in n.outputs:
            t = tmap[a.tensor]
            if a.tensor in root or t.role != "intermediate" or a.tensor in live:
                continue
            live[a.tensor] = tensor_bytes(g, t)
            writer_phase[a.tensor] = n.phase
            current += live[a.tensor]
        if current > peak:
            peak, at = current, n.name
        for a in n.inputs:
            r = root.get(a.tensor, a.tensor)
            if n.phase == "backward" and writer_phase.get(r) == "forward":
                saved_set.add(r)
            if r in live and last.get(r) == i:
                current -= live.pop(r)
        for a in n.outputs:  # written and never read
            if a.tensor in live and a.tensor not in last:
                current -= live.pop(a.tensor)
    saved = sum(tensor_bytes(g, tmap[t]) for t in saved_set)
    return LiveActivations(peak, at, saved)


def phase_text(g: Graph, report: object) -> str:
    """The text report's training lines: per phase its unfused kernels, MACs, DRAM bytes and bound (the
    phases add up to the unfused SOL), then the live-activation peak; empty for a graph without
    phases. ``report`` is a ``backends.result.Report`` of ``g``."""
    if not is_training(g):
        return ""
    phase = {n.name.split(".", 1)[0]: n.phase or "forward" for n in g.nodes}  # a kernel's row name
    phase.update({n.name: n.phase or "forward" for n in g.nodes})
    rows: dict[str, list[float]] = {p: [0, 0, 0.0, 0.0] for p in PHASES}
    for kb in report.kernels or report.nodes:  # type: ignore[attr-defined]
        r = rows[phase.get(kb.name, "forward")]
        r[0] += 1
        r[1] += kb.macs
        r[2] += kb.dram_bytes
        r[3] += kb.time
    lines = ["training step (phases of the graph, unfused: each phase's kernels, their DRAM bytes and the sum of "
             "their bounds):"]
    for p in PHASES:
        n, macs, dram, t = rows[p]
        if n:
            lines.append(f"  {p:<9} {int(n):>6} kernels  {macs:.4g} MACs  {dram / 1e9:.4g} GB DRAM  {t * 1e3:.4g} ms")
    live = live_activations(g)
    where = f" (after node {live.at})" if live.at else ""
    lines.append(f"  peak live activations and gradients: {live.peak / 1e9:.4g} GB{where}, in node order; "
                 f"saved by the forward for the backward: {live.saved / 1e9:.4g} GB")
    for a in g.assumptions:
        if a.kind == "recompute":
            v = dict(a.values)
            lines.append(f"  recompute (activation checkpointing): {v['recomputed_nodes']} forward nodes re-run in "
                         f"the backward ({float(v['recomputed_macs']):.4g} MACs); peak live "
                         f"{float(v['peak_live_bytes_without']) / 1e9:.4g} GB without, "
                         f"{float(v['peak_live_bytes']) / 1e9:.4g} GB with")
    return "\n".join(lines) + "\n"
