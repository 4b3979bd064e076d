"""Activation checkpointing of a training graph (``capture --train --recompute``): memory for FLOPs.

A training graph (phases marked, ``frontends/common/training.py``) keeps every tensor the forward
writes and the backward reads alive from the forward to the backward. With checkpointing, the
forward keeps only the tensors at layer boundaries and the backward re-runs the forward nodes it
needs to get the rest back, segment by segment, just before it uses them. This module rewrites the
graph that way:

- **Activations** are the forward's float graph inputs and every tensor that depends on a weight
  or on one of them (a view counts as the tensor it aliases). Tensors that depend on neither
  (boolean or integer inputs and what is computed from them alone, constants: masks, position
  tables) are side data: kept, never a reason for a cut to fail. An additive mask given as a float
  graph input counts as an activation.
- **Boundaries** (cuts) are the activations that every path from the inputs to the loss passes
  through: in file order, the activation is the only one written at or before its writer and read
  by a forward or loss node after it (a graph input counts from its first reader on, so a loss
  target crosses nothing before the loss). In a residual network these are the residual stream
  between blocks (and between the attention and MLP halves of a transformer layer); inside a
  block the residual branch bypasses every tensor. In a chain every tensor is a cut, so a chain
  recomputes nothing. The forward and loss nodes between consecutive cuts form a **segment**.
- Per segment, every activation it writes that the backward reads and that is no boundary is
  **recomputed**: the segment's nodes it depends on (back to boundaries, weights and side data)
  are cloned, in order, right before the first backward node that reads one of them, and the
  backward reads the clones. A clone is named ``recompute:<node>`` (its tensors
  ``recompute:<tensor>``), has phase ``backward``, the attribute ``recompute: <node>`` and the
  kernel ``recompute:<kernel>`` (a fused forward stays one kernel when re-run). Only what the
  backward reads is re-run: a down projection whose output only the residual add reads is not.

The result is the same function (the training step validates against the source program as
before); its MACs rise by the clones' and its peak of live activations
(:func:`solar_io.training.live_activations`) falls. :func:`recompute` returns both peaks.

Two residual layers ``y = x + exp(x*w)``, ``z = y + exp(y*w)``: ``y`` and ``z`` are the cuts; each
layer's ``h`` and ``a`` are re-run before the backward of that layer reads ``a``:

>>> from solar_io.affine import parse_access
>>> from solar_io.graph import Graph, Node, Tensor
>>> ts = [Tensor("x", ("I",), "fp32", "input"), Tensor("w", ("I",), "fp32", "weight")]
>>> ts += [Tensor(t, ("I",), "fp32", "intermediate") for t in ("h", "a", "y", "g", "b", "z", "db", "da")]
>>> ts += [Tensor(t, ("I",), "fp32", "output") for t in ("loss", "dv", "dw")]
>>> def n(name, ins, out, map, phase="backward"):
...     return Node(name, "einsum", "op", tuple(parse_access(i + "[I]") for i in ins), (parse_access(out + "[I]"),),
...                 ("I",), map=map, phase=phase)
>>> nodes = (n("h", "xw", "h", "mul", "forward"), n("a", "h", "a", "exp", "forward"),
...          n("y", "xa", "y", "add", "forward"), n("g", "yw", "g", "mul", "forward"),
...          n("b", "g", "b", "exp", "forward"), n("z", "yb", "z", "add", "forward"),
...          n("loss", "z", "loss", "identity", "loss"), n("db", "b", "db", "identity"), n("dv", "by", "dv", "mul"),
...          n("da", ["db", "a"], "da", "mul"), n("dw", ["da", "x"], "dw", "mul"))
>>> g2, rec = recompute(Graph((("I", 1000),), tuple(ts), nodes))
>>> [m.name for m in g2.nodes][7:]
['recompute:g', 'recompute:b', 'db', 'dv', 'recompute:h', 'recompute:a', 'da', 'dw']
>>> rec.cuts, rec.recomputed_nodes, rec.peak_before, rec.peak_after
(['y', 'z', 'loss'], 4, 16000.0, 12000.0)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...affine import Access, Indirect
from ...graph import Assumption, Graph, Node
from ...metrics import node_metrics
from ...training import live_activations

PREFIX = "recompute:"
_FORWARD = ("forward", "loss")


@dataclass(frozen=True)
class Recompute:
    """What :func:`recompute` did: the boundary tensors kept, the segments between them, the nodes
    and MACs re-run in the backward, and the peak of live activation bytes before and after."""

    cuts: list[str]
    segments: int
    recomputed_nodes: int
    recomputed_macs: int
    peak_before: float
    peak_after: float

    def assumption(self) -> Assumption:
        """The ``recompute`` assumption written into the graph."""
        detail = (f"activation checkpointing: the forward keeps the {len(self.cuts)} boundary tensors between "
                  f"{self.segments} segments; the backward re-runs {self.recomputed_nodes} forward nodes "
                  f"({self.recomputed_macs} MACs); peak live activations {self.peak_before:.6g} B without, "
                  f"{self.peak_after:.6g} B with")
        return Assumption("recompute", "step", detail, (
            ("segments", self.segments), ("boundaries", len(self.cuts)),
            ("recomputed_nodes", self.recomputed_nodes), ("recomputed_macs", self.recomputed_macs),
            ("peak_live_bytes_without", self.peak_before), ("peak_live_bytes", self.peak_after)))


def _roots(g: Graph) -> dict[str, str]:
    """{view tensor: the tensor it aliases} (as ``live_activations`` reads views)."""
    root: dict[str, str] = {}
    for n in g.nodes:
        if n.kind == "data_movement" and n.view and len(n.inputs) == 1 and len(n.outputs) == 1:
            src = n.inputs[0].tensor
            root[n.outputs[0].tensor] = root.get(src, src)
    return root


def recompute(g: Graph) -> tuple[Graph, Recompute]:
    """``g`` with activation checkpointing (see the module docstring) and what it changed."""
    before = live_activations(g).peak
    tmap = g.tensor_map
    root = _roots(g)

    def r(t: str) -> str:
        return root.get(t, t)

    # the forward runs up to its last forward or loss node; a node there marked backward (a flash
    # kernel's log-sum-exp, a batch norm's statistics: only the backward reads them) is forward work
    end = max((i for i, n in enumerate(g.nodes) if n.phase in _FORWARD), default=-1)
    fwd = [i for i in range(end + 1) if g.nodes[i].phase != "optimizer"]
    # activations: float inputs and what depends on a weight or on them
    act = {t.name for t in g.tensors if t.role == "weight" or (t.role == "input" and not t.dtype.startswith(
        ("int", "uint", "bool")))}
    for i in fwd:
        n = g.nodes[i]
        if any(a.tensor in act or r(a.tensor) in act for a in n.inputs):
            act.update(a.tensor for a in n.outputs)
    act -= {t.name for t in g.tensors if t.role == "weight"}
    # the loss's ancestors among the forward nodes (what lies on a path to the loss)
    loss = {a.tensor for i in fwd for a in g.nodes[i].outputs if tmap[a.tensor].role == "output"
            and g.nodes[i].phase == "loss"} or {a.tensor for i in fwd for a in g.nodes[i].outputs
                                                 if tmap[a.tensor].role == "output"}
    needed, on_path = set(loss), set()
    for i in reversed(fwd):
        n = g.nodes[i]
        if any(a.tensor in needed for a in n.outputs):
            on_path.add(i)
            needed.update(a.tensor for a in n.inputs)
    # crossing counts in half steps (node i at 2i): an activation root is live from its writer (a graph
    # input: from just before its first reader) to its last forward reader on a path to the loss
    start: dict[str, int] = {}
    last: dict[str, int] = {}
    for i in fwd:
        if i not in on_path:
            continue
        n = g.nodes[i]
        for a in n.inputs:
            t = r(a.tensor)
            if t in act and t in needed:
                start.setdefault(t, 2 * i - 1)
                last[t] = 2 * i
        for a in n.outputs:
            if a.tensor in act and a.tensor not in start and r(a.tensor) == a.tensor:
                start[a.tensor] = 2 * i
    delta: dict[int, int] = {}
    for t, h in start.items():
        if last.get(t, h) > h:
            delta[h] = delta.get(h, 0) + 1
            delta[last[t]] = delta.get(last[t], 0) - 1
    crossing: dict[int, int] = {}
    running = 0
    for h in sorted(set(delta) | set(start.values())):
        running += delta.get(h, 0)
        crossing[h] = running
    cut_pos = sorted({h // 2 for t, h in start.items() if h % 2 == 0 and last.get(t, h) > h and crossing[h] == 1}
                     | {start[t] // 2 for t in loss if t in start})
    cuts = [r(a.tensor) for p in cut_pos for a in g.nodes[p].outputs]
    kept = set(cuts)
    # segments: forward nodes up to each cut; the last one runs to the end of the loss
    seg_of: dict[int, int] = {}
    k = 0
    for i in fwd:
        seg_of[i] = k
        if k < len(cut_pos) and i == cut_pos[k]:
            k += 1
    writer = {a.tensor: i for i in fwd for a in g.nodes[i].outputs}
    first_bwd: dict[str, int] = {}
    for i, n in enumerate(g.nodes):
        if n.phase == "backward" and i > end:
            for a in n.inputs:
                first_bwd.setdefault(a.tensor, i)
    clones: dict[int, list[int]] = {}  # segment -> forward node indices to re-run
    for t, i in writer.items():
        if t in first_bwd and r(t) in act and r(t) not in kept and tmap[r(t)].role == "intermediate":
            clones.setdefault(seg_of[i], []).append(i)
    plan: dict[int, list[int]] = {}  # insertion index -> nodes to clone there, in order
    renamed: dict[str, str] = {}
    names = {t.name for t in g.tensors}
    node_names = {n.name for n in g.nodes}
    for seg, starts in clones.items():
        todo, chosen = list(starts), set()
        while todo:
            i = todo.pop()
            if i in chosen:
                continue
            chosen.add(i)
            for a in g.nodes[i].inputs:
                j = writer.get(a.tensor)
                if j is not None and seg_of.get(j) == seg and r(a.tensor) not in kept and r(a.tensor) in act:
                    todo.append(j)
        order = sorted(chosen)
        at = min(first_bwd[a.tensor] for i in order for a in g.nodes[i].outputs if a.tensor in first_bwd)
        plan.setdefault(at, []).extend(order)
        for i in order:
            for a in g.nodes[i].outputs:
                renamed[a.tensor] = _fresh(a.tensor, names)
    if not plan:
        rec = Recompute(cuts, len(cut_pos), 0, 0, before, before)
        return replace(g, assumptions=g.assumptions + (rec.assumption(),)), rec
    nodes: list[Node] = []
    cloned: set[str] = set()
    for i, n in enumerate(g.nodes):
        for j in plan.get(i, ()):
            src = g.nodes[j]
            nodes.append(_clone(src, renamed, _fresh(src.name, node_names)))
            cloned.add(nodes[-1].name)
        if n.phase == "backward" and i > end:
            n = _rename(n, renamed, inputs_only=True)
        nodes.append(n)
    tensors = list(g.tensors) + [replace(tmap[old], name=new, role="intermediate") for old, new in renamed.items()]
    nodes, tensors = _drop_unread(nodes, tensors, {g.nodes[i].name for i in fwd} | cloned)
    cloned &= {n.name for n in nodes}
    out = replace(g, tensors=tuple(tensors), nodes=tuple(nodes))
    macs = sum(node_metrics(out, n).macs for n in out.nodes if n.name in cloned)
    rec = Recompute(cuts, len(cut_pos), len(cloned), int(macs), before, live_activations(out).peak)
    return replace(out, assumptions=out.assumptions + (rec.assumption(),)), rec


def _drop_unread(nodes: list[Node], tensors: list, forward: set[str]) -> tuple[list[Node], list]:
    """Without the ``forward`` (and clone) nodes whose every result is an intermediate nothing reads
    any more (what only the backward read, now re-run there: a flash kernel's log-sum-exp), and
    their tensors."""
    role = {t.name: t.role for t in tensors}
    while True:
        read = {a.tensor for n in nodes for a in n.inputs} | {n.init for n in nodes if n.init}
        dead = {n.name for n in nodes if n.name in forward and n.outputs and all(
            role.get(a.tensor) == "intermediate" and a.tensor not in read for a in n.outputs)}
        if not dead:
            break
        gone = {a.tensor for n in nodes if n.name in dead for a in n.outputs}
        nodes = [n for n in nodes if n.name not in dead]
        tensors = [t for t in tensors if t.name not in gone]
    used = {a.tensor for n in nodes for a in (*n.inputs, *n.outputs)}
    return nodes, [t for t in tensors if t.name in used or t.role != "intermediate"]


def _fresh(name: str, taken: set[str]) -> str:
    """``'recompute:' + name`` (with a number when that is taken), reserved in ``taken``."""
    new, k = PREFIX + name, 1
    while new in taken:
        k += 1
        new = f"{PREFIX}{k}:{name}"
    taken.add(new)
    return new


def _acc(a: Access, m: dict[str, str]) -> Access:
    index = a.index
    if index is not None and any(isinstance(e, Indirect) and e.tensor in m for e in index):
        index = tuple(Indirect(m[e.tensor]) if isinstance(e, Indirect) and e.tensor in m else e for e in index)
    return Access(m.get(a.tensor, a.tensor), index)


def _rename(n: Node, m: dict[str, str], inputs_only: bool = False) -> Node:
    """``n`` reading (and, unless ``inputs_only``, writing) the tensors of ``m`` under their new names."""
    if not any(a.tensor in m for a in n.inputs) and (inputs_only or not any(a.tensor in m for a in n.outputs)):
        return n
    return replace(n, inputs=tuple(_acc(a, m) for a in n.inputs),
                   outputs=n.outputs if inputs_only else tuple(_acc(a, m) for a in n.outputs),
                   pad=tuple((m.get(t, t), dims) for t, dims in n.pad),
                   init=m.get(n.init, n.init) if n.init else n.init)


def _clone(n: Node, m: dict[str, str], name: str) -> Node:
    """The re-run of forward node ``n`` in the backward (see the module docstring)."""
    c = _rename(n, m)
    return replace(c, name=name, phase="backward", kernel=PREFIX + n.kernel if n.kernel else None,
                   attrs=tuple(n.attrs) + (("recompute", n.name),))


__all__ = ["PREFIX", "Recompute", "recompute"]
