"""What the sharding rules find in a graph: linear layers, column/row pairs, experts, norms, layers.

Everything is read from the graph's structure, never from names:

- a **linear** node is a contraction (map ``mul``, reduce ``add``) of an activation with a
  *weight*: a tensor of role ``weight``, read directly or through data-movement nodes (a
  transpose view, a cast). Its *column* ranks are the weight's ranks that reach the output and
  are not in the activation; its *contracted* ranks the weight's reduced ranks; its *expert*
  ranks the weight's ranks that the activation and the output share (a batched expert weight
  ``w[X, D, F]`` with tokens ``x[X, C, D]``).
- a **column -> row pair** is a rank that one linear produces as a column rank and a later
  linear contracts (``fc1``'s ``H`` read by ``fc2``; ``q``'s ``D2`` through the attention heads to
  ``o``); tensor parallelism splits that rank (and all it forces, :mod:`.ranks`).
- the **token ranks** are the ranks of the first linear's activation that are neither contracted
  nor in its weight (``B, S``); sequence parallelism splits the last of them that the TP degree
  divides.
- a **layer boundary** is a point in node order where one activation alone crosses (made before,
  read after; a view counts as what it views) and it is no wider than the median such point: the
  residual stream between blocks, not the wide inner activation of an MLP.
- a **gradient** is a tensor a ``backward``-phase node writes that is a graph output or read by
  an ``optimizer``-phase node and has the shape of a weight.
"""

from __future__ import annotations

from dataclasses import dataclass

from solar_io.affine import AffineExpr, Indirect
from solar_io.graph import Graph, Node
from solar_io.metrics import tensor_bytes

from .shard import consumers, node_tensors, producers


@dataclass(frozen=True, slots=True)
class Linear:
    """A contraction with a weight (see the module docstring)."""

    node: str
    weight: str  # the weight tensor (role weight) the contraction's operand comes from
    activation: str
    column: tuple[str, ...]
    contracted: tuple[str, ...]
    expert: tuple[str, ...]
    tokens: tuple[str, ...]  # ranks of the activation neither contracted, in the weight nor expert


def phase(node: Node) -> str | None:
    """The node's training phase (format 1.3 ``phase``; ``attrs`` ``phase`` as a fallback), or None."""
    p = getattr(node, "phase", None)
    return p if p is not None else dict(node.attrs).get("phase")  # type: ignore[return-value]


def _ranks(a, g: Graph) -> list[str]:
    """Space ranks of an access's plain-rank dims (others skipped)."""
    return [e.terms[0][0] for e in a.index or () if isinstance(e, AffineExpr) and e.is_rank()]


def weight_source(g: Graph, tensor: str, made_by: dict[str, str] | None = None) -> str | None:
    """The weight ``tensor`` is (or is moved/viewed/cast from, through one-input nodes), or None."""
    made_by = producers(g) if made_by is None else made_by
    seen = 0
    while seen < 64:
        t = g.tensor_map[tensor]
        if t.role == "weight":
            return tensor
        p = made_by.get(tensor)
        if p is None:
            return None
        n = g.node_map[p]
        data = [a for a in n.inputs if not g.tensor_map[a.tensor].role == "constant"]
        if len(data) != 1 or not (n.kind == "data_movement" or (n.kind == "einsum" and n.reduce == "none")):
            return None
        tensor = data[0].tensor
        seen += 1
    return None


def linears(g: Graph) -> list[Linear]:
    """Every linear node of ``g`` in graph order."""
    made_by = producers(g)
    out = []
    for n in g.nodes:
        if n.kind != "einsum" or n.map != "mul" or n.reduce != "add" or n.init is not None:
            continue
        index_inputs = {e.tensor for a in n.inputs for e in a.index or () if type(e) is Indirect}
        data = [a for a in n.inputs if a.tensor not in index_inputs]
        if len(data) != 2:
            continue
        w = [(a, weight_source(g, a.tensor, made_by)) for a in data]
        weighted = [(a, src) for a, src in w if src is not None]
        if len(weighted) != 1:
            continue
        wa, src = weighted[0]
        xa = next(a for a in data if a is not wa)
        out_r = set(_ranks(n.outputs[0], g))
        w_r, x_r = _ranks(wa, g), _ranks(xa, g)
        reduced = [r for r in n.space if r not in out_r]
        column = tuple(r for r in w_r if r in out_r and r not in x_r)
        contracted = tuple(r for r in w_r if r in reduced)
        expert = tuple(r for r in w_r if r in out_r and r in x_r)
        tokens = tuple(r for r in x_r if r in out_r and r not in w_r)
        if contracted:
            out.append(Linear(n.name, src, xa.tensor, column, contracted, expert, tokens))
    return out


def pairs(lins: list[Linear]) -> list[tuple[str, Linear, Linear]]:
    """(rank, column linear, row linear) for every rank a linear produces and a later one contracts."""
    out, seen = [], set()
    for i, a in enumerate(lins):
        for r in a.column:
            for b in lins[i + 1:]:
                if r in b.contracted and r not in seen:
                    out.append((r, a, b))
                    seen.add(r)
                    break
    return out


def reduced_ranks(g: Graph, n: Node) -> list[str]:
    """The ranks an einsum reduces (in its space, not in its output)."""
    if n.kind != "einsum" or n.reduce in (None, "none") or not n.outputs:
        return []
    out = set(_ranks(n.outputs[0], g))
    return [r for r in n.space if r not in out]


def touched_ranks(g: Graph, n: Node) -> set[str]:
    """Ranks of the node's space and of every tensor it touches."""
    return set(n.space) | {r for t in node_tensors(n) for r in g.tensor_map[t].ranks}


def layer_cuts(g: Graph) -> list[tuple[int, float, list[str]]]:
    """(cut after node index i, bytes crossing, tensors crossing) at every layer boundary (module
    docstring; graph inputs, weights and constants, which every stage can read, do not cross). A
    graph with no single-activation cut falls back to the cuts of the fewest bytes."""
    index = {n.name: i for i, n in enumerate(g.nodes)}
    made_by = producers(g)
    last: dict[str, int] = {}
    for t, users in consumers(g).items():
        if t in made_by:
            last[t] = max(index[u] for u in users)
    cuts = []
    n = len(g.nodes)
    starts: dict[int, list[str]] = {}
    for t, p in made_by.items():
        starts.setdefault(index[p], []).append(t)
    live: set[str] = set()
    for i in range(n - 1):
        live |= {t for t in starts.get(i, []) if last.get(t, -1) > i}
        live = {t for t in live if last[t] > i}
        if not live:
            continue
        crossing = sorted(live, key=lambda t: index[made_by[t]])
        bases = {_base(g, t, made_by) for t in crossing}  # a view crosses as the tensor it views
        nbytes = sum(tensor_bytes(g, g.tensor_map[t]) for t in bases)
        cuts.append((i, nbytes, crossing, len(bases)))
    single = [c for c in cuts if c[3] == 1]
    if not single:
        best = min((c[1] for c in cuts), default=0.0)
        return [c[:3] for c in cuts if c[1] <= best]
    widths = sorted(c[1] for c in single)
    median = widths[(len(widths) - 1) // 2]
    return [c[:3] for c in single if c[1] <= median]


def _base(g: Graph, t: str, made_by: dict[str, str]) -> str:
    """The tensor whose memory the view ``t`` aliases (``t`` itself when it is no view)."""
    for _ in range(256):
        p = made_by.get(t)
        if p is None or not g.node_map[p].view or not g.node_map[p].inputs:
            return t
        t = g.node_map[p].inputs[0].tensor
    return t


def gradients(g: Graph) -> list[str]:
    """Weight gradients of a training graph (see the module docstring), in graph order."""
    shapes = {tuple(sorted(g.shape(t.name))) for t in g.tensors if t.role == "weight"}
    readers = consumers(g)
    out = []
    for n in g.nodes:
        if phase(n) != "backward":
            continue
        for a in n.outputs:
            t = g.tensor_map[a.tensor]
            by_opt = any(phase(g.node_map[r]) == "optimizer" for r in readers.get(t.name, ()))
            if (t.role == "output" or by_opt) and tuple(sorted(g.shape(t.name))) in shapes:
                out.append(t.name)
    return out


__all__ = ["Linear", "gradients", "layer_cuts", "linears", "pairs", "phase", "reduced_ranks", "touched_ranks",
           "weight_source"]
