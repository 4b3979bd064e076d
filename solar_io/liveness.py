"""Work whose results no output uses: demand carried back from the outputs, node by node.

A program may compute a whole tensor and use a part of it::

    emb = proj(q_former(encoder(audio)))   # [B, 43 windows * 40 queries, D]
    out[b].index_copy_(0, pos[b], emb[b, :80])

Only windows 0 and 1 of each batch reach the output, so a run that computes those (SOL-ExecBench L2/045's
baseline) does 2/43 of the projector's, the Q-Former's and the encoder's work. :func:`demands` finds, for
every tensor, the elements the graph's outputs depend on, as one digit box per dimension
(:mod:`solar_io.boxes`), walking the nodes from last to first:

- an einsum or an index copy: a point of its space is needed when the element it writes is; a rank
  the output indexes plainly (``r`` or ``r + c``) gets the demanded part of that dimension, every
  other rank (reduced, scattered through ``@t``, in a sum of ranks) all of it. Each input gets the
  image of that box under its index expressions (plain ranks exactly, a sum of ranks its interval
  hull, a gathered dimension all of it), clipped to the input (a padded border reads nothing); the
  ``init`` of a scatter, the output's own part;
- a reshape carries the part through the row-major regrouping (:func:`~solar_io.boxes.regroup`), a
  concat gives each piece its share of the axis;
- anything else (an opaque node, a node whose outputs nothing reads) needs its inputs whole.

Every approximation keeps a superset, so the demand is never smaller than what the outputs use.
:func:`live_ranks` turns a node's box into the counts of its ranks' values it must compute (the node field
``live``, format 1.6); the bounds count the node's work and bytes over those counts
(:func:`solar_io.metrics.node_sizes`).

>>> from solar_io.affine import parse_access
>>> from solar_io.graph import Graph, Node, Tensor
>>> g = Graph((("M", 8), ("K", 4), ("N", 2), ("R", 3)),
...           (Tensor("x", ("M", "K"), "fp32", "input"), Tensor("w", ("K", "N"), "fp32", "weight"),
...            Tensor("h", ("M", "N"), "fp32", "intermediate"), Tensor("y", ("R", "N"), "fp32", "output")),
...           (Node("mm", "einsum", "aten.mm", (parse_access("x[M, K]"), parse_access("w[K, N]")),
...                 (parse_access("h[M, N]"),), space=("M", "N", "K"), map="mul", reduce="add"),
...            Node("head", "data_movement", "aten.slice", (parse_access("h[R + 2, N]"),), (parse_access("y[R, N]"),),
...                 space=("R", "N"), movement="copy")))
>>> demands(g)["x"]
(((8, 2, 5),), ((4, 0, 4),))
>>> live_ranks(g)
{'mm': (('M', 3),)}
"""

from __future__ import annotations

from dataclasses import replace

from .affine import AffineExpr, Indirect
from .boxes import Digits, count, full, hull, interval, is_full, regroup, size, union
from .graph import Assumption, Graph, Node

#: the assumption kind listing the nodes that compute only the part of their space some output uses
LIVE_WORK = "live_work"

#: a tensor's demanded part: one digit box per dimension
Part = tuple[Digits, ...]


def _whole(g: Graph, tensor: str) -> Part:
    return tuple(full(n) for n in g.shape(tensor))


def _space(g: Graph, node: Node, need: dict[str, Part]) -> dict[str, Digits]:
    """The part of ``node``'s space whose results are needed: {rank: part}, a rank left out whole."""
    sizes = g.rank_sizes
    out: dict[str, Digits] = {}
    for a in node.outputs:
        part = need.get(a.tensor)
        if part is None:
            continue  # this output is not read: it asks for nothing
        box: dict[str, Digits] = {}
        for e, d in zip(a.index or (), part, strict=False):
            if type(e) is not AffineExpr or len(e.terms) != 1 or e.terms[0][1] != 1:
                continue  # scattered through @t, or a sum of ranks: the ranks stay whole
            r = e.terms[0][0]
            if r in box or r == node.scan:
                continue
            if e.const == 0 and sizes[r] == size(d):
                box[r] = d
            else:
                lo, hi = hull(d)
                got = interval(sizes[r], lo - e.const, hi - e.const)
                if got is None:
                    break  # no point of the space writes the needed part
                box[r] = got
        else:
            for r in node.space:  # the union over outputs, rank by rank (a superset of the union of boxes)
                mine = box.get(r, full(sizes[r])) if a.index is not None else full(sizes[r])
                out[r] = union(out[r], mine) if r in out else mine
    return {r: d for r, d in out.items() if not is_full(d)}


def _image(g: Graph, node: Node, box: dict[str, Digits], a, shape: tuple[int, ...]) -> Part | None:
    """The part of input access ``a`` (of a tensor of ``shape``) the box of ``node``'s space reads."""
    sizes = g.rank_sizes
    dims: list[Digits] = []
    for e, n in zip(a.index, shape, strict=True):
        if type(e) is Indirect:
            dims.append(full(n))
            continue
        if len(e.terms) == 1 and e.terms[0][1] == 1 and e.const == 0 and sizes[e.terms[0][0]] == n:
            dims.append(box.get(e.terms[0][0], full(n)))
            continue
        lo = hi = e.const
        for r, c in e.terms:
            x, y = hull(box[r]) if r in box else (0, sizes[r])
            lo, hi = lo + min(c * x, c * (y - 1)), hi + max(c * x, c * (y - 1))
        d = interval(n, lo, hi + 1)
        if d is None:
            return None  # only the padded border: nothing of the tensor
        dims.append(d)
    return tuple(dims)


def _pieces(g: Graph, node: Node, part: Part) -> list[tuple[str, Part | None]]:
    """The part of each input a concat's output ``part`` reads."""
    out_t = g.tensor_map[node.outputs[0].tensor]
    k = out_t.ranks.index(node.axis or "")
    lo, hi = hull(part[k])
    found, at = [], 0
    for a in node.inputs:
        n = g.shape(a.tensor)[k]
        d = interval(n, lo - at, hi - at)
        found.append((a.tensor, None if d is None else part[:k] + (d,) + part[k + 1:]))
        at += n
    return found


def _reads(g: Graph, node: Node, need: dict[str, Part],
           boxes: dict[str, dict[str, Digits]]) -> list[tuple[str, Part | None]] | None:
    """(input, the part of it ``node`` needs) for each input; None where it needs them whole. The part of
    the space of an einsum or copy goes to ``boxes`` (final: every reader of its outputs comes later)."""
    outs = [need.get(a.tensor) for a in node.outputs]
    if all(p is None for p in outs):
        return None
    if node.kind == "data_movement" and node.movement == "reshape" and outs[0] is not None:
        src = node.inputs[0].tensor
        got = regroup(list(outs[0]), g.shape(node.outputs[0].tensor), g.shape(src))
        return None if got is None else [(src, tuple(got))]
    if node.kind == "data_movement" and node.movement == "concat" and outs[0] is not None:
        return _pieces(g, node, outs[0])
    if node.kind == "opaque" or not node.space or any(a.index is None for a in node.inputs + node.outputs):
        return None
    box = boxes[node.name] = _space(g, node, need)
    found: list[tuple[str, Part | None]] = []
    for a in node.inputs:
        shape = g.shape(a.tensor)
        if a.tensor == node.init and len(node.outputs) == 1 and g.shape(node.outputs[0].tensor) == shape:
            found.append((a.tensor, outs[0]))  # the elements of init that are not overwritten: the output's part
        else:
            found.append((a.tensor, _image(g, node, box, a, shape)))
    return found


def _walk(g: Graph) -> tuple[dict[str, Part], dict[str, dict[str, Digits]]]:
    """The demanded part of every tensor some output needs, and of the space of every einsum and copy."""
    need: dict[str, Part] = {}
    boxes: dict[str, dict[str, Digits]] = {}
    for t in g.tensors:
        if t.role == "output" or t.updates is not None:
            need[t.name] = _whole(g, t.name)
    for node in reversed(g.nodes):
        reads = _reads(g, node, need, boxes)
        if reads is None:
            reads = [(a.tensor, _whole(g, a.tensor)) for a in node.inputs]
        for name, part in reads:
            if part is None or any(count(d) == 0 for d in part):
                continue
            have = need.get(name)
            need[name] = part if have is None else tuple(union(x, y) for x, y in zip(have, part, strict=True))
    return need, boxes


def demands(g: Graph) -> dict[str, Part]:
    """{tensor: the part of it the graph's outputs depend on}; a tensor nothing needs is left out."""
    return _walk(g)[0]


def live_ranks(g: Graph) -> dict[str, tuple[tuple[str, int], ...]]:
    """{node: ((rank, how many of its values the node must compute), ...)} for each einsum and non-view copy
    that computes results no output uses (only ranks with fewer values than their size)."""
    boxes = _walk(g)[1]
    found: dict[str, tuple[tuple[str, int], ...]] = {}
    for node in g.nodes:
        box = boxes.get(node.name)
        if box is None or node.view:
            continue
        live = tuple((r, count(box[r])) for r in node.space if r in box and 0 < count(box[r]) < g.rank_sizes[r])
        if live:
            found[node.name] = live
    return found


def with_live_work(g: Graph) -> Graph:
    """``g`` with each node that computes results no output uses given its :func:`live_ranks` (node field
    ``live``) and listed in a ``live_work`` assumption; ``g`` itself when there is none."""
    found = live_ranks(g)
    if not found:
        return g
    nodes = tuple(replace(n, live=found[n.name]) if n.name in found else n for n in g.nodes)
    note = Assumption(LIVE_WORK, "outputs",
                      "only the elements some output depends on are computed: these nodes compute the part of "
                      "their space whose results are read (sliced, selected), and the rest is never computed",
                      (("nodes", tuple(found)),))
    return replace(g, nodes=nodes, assumptions=g.assumptions + (note,))


__all__ = ["LIVE_WORK", "Part", "demands", "live_ranks", "with_live_work"]
