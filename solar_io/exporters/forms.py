"""The affine form of a node: what loop-nest formats (Timeloop) can state about it.

``affine_form(g, node)`` gives the node's iteration ranks and, per distinct tensor, one
affine expression of the ranks per tensor dimension, the output last. Nodes without such a
form raise :class:`Unexpressible` with the reason: opaque nodes, indirect indexes (gathers and
scatters), scans (format 1.1), concat, reshapes whose shapes do not refine one another, a tensor
read twice with different indexes.
Constants with a ``value`` (immediates) touch no memory and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ..affine import AffineExpr, Indirect
from ..graph import Graph, Node


class Unexpressible(Exception):
    """A node that the target format cannot state; the message is the reason."""


@dataclass(frozen=True)
class TensorForm:
    """One tensor of a node: its name, per-dimension expressions and pads, and direction."""

    tensor: str
    dims: tuple[str, ...]
    exprs: tuple[AffineExpr, ...]
    pads: tuple[tuple[int, int], ...]
    output: bool = False


@dataclass(frozen=True)
class AffineForm:
    """A node as iteration ranks and tensor accesses (inputs first, the output last)."""

    name: str
    op: str
    space: tuple[str, ...]
    tensors: tuple[TensorForm, ...]
    copy: bool


def _tensor_form(g: Graph, node: Node, tensor: str, index: tuple, output: bool) -> TensorForm:
    dims = g.tensor_map[tensor].ranks
    pads = node.pad_of(tensor)
    exprs = []
    for e in index:
        if isinstance(e, Indirect):
            what = "scatter" if output else "gather"
            raise Unexpressible(f"indirect index @{e.tensor} ({what}) has no affine form")
        exprs.append(e)
    return TensorForm(tensor, dims, tuple(exprs), tuple(pads.get(d, (0, 0)) for d in dims), output)


def refinement(fine: list[int], coarse: list[int]) -> list[list[int]] | None:
    """Split ``fine`` (sizes) into consecutive groups whose products are ``coarse``; or None."""
    groups, i = [], 0
    for c in coarse:
        grp, p = [], 1
        while i < len(fine) and (p < c or (fine[i] == 1 and p == c and not grp)):
            grp.append(i)
            p *= fine[i]
            i += 1
        if p != c:
            return None
        groups.append(grp)
    return groups if i == len(fine) else None


def reshape_form(g: Graph, node: Node) -> AffineForm:
    """A row-major reshape as a copy over the finer shape's ranks, when one refines the other."""
    src, dst = node.inputs[0].tensor, node.outputs[0].tensor
    sr, dr = g.tensor_map[src].ranks, g.tensor_map[dst].ranks
    ss, ds = list(g.shape(src)), list(g.shape(dst))
    for fine_t, fine, fs, coarse_t, coarse, cs, src_fine in (
            (src, sr, ss, dst, dr, ds, True), (dst, dr, ds, src, sr, ss, False)):
        groups = refinement(fs, cs)
        if groups is None:
            continue
        fine_f = TensorForm(fine_t, fine, tuple(AffineExpr(((r, 1),)) for r in fine),
                            ((0, 0),) * len(fine), not src_fine)
        exprs = tuple(AffineExpr(tuple(sorted((fine[i], prod(fs[j] for j in grp if j > i)) for i in grp)))
                      for grp in groups)
        coarse_f = TensorForm(coarse_t, coarse, exprs, ((0, 0),) * len(coarse), src_fine)
        tensors = (fine_f, coarse_f) if src_fine else (coarse_f, fine_f)
        return AffineForm(node.name, node.op, tuple(fine), tensors, True)
    raise Unexpressible("reshape whose shapes do not refine one another is not affine")


def affine_form(g: Graph, node: Node) -> AffineForm:
    """The affine form of ``node``; raises :class:`Unexpressible` with the reason."""
    if node.kind == "opaque":
        raise Unexpressible(f"opaque: {node.reason}")
    if node.kind == "fft":
        raise Unexpressible("fft: a Fourier transform is no affine einsum (its floor is in solar_io.fourier)")
    if node.scan is not None:
        raise Unexpressible(f"scan along {node.scan} (an inclusive prefix {node.reduce}) has no affine form")
    if node.kind == "data_movement" and node.movement == "reshape":
        return reshape_form(g, node)
    if node.kind == "data_movement" and node.movement != "copy":
        raise Unexpressible(f"{node.movement}: several writers of one tensor have no affine form")
    tmap = g.tensor_map
    forms: list[TensorForm] = []
    seen: dict[str, TensorForm] = {}
    for a in node.inputs:
        if not tmap[a.tensor].stored:
            continue  # immediates and generated constants are made in the kernel, never read
        f = _tensor_form(g, node, a.tensor, a.index or (), False)
        if a.tensor in seen:
            if seen[a.tensor] != f:
                raise Unexpressible(f"reads {a.tensor} twice with different indexes")
            continue
        seen[a.tensor] = f
        forms.append(f)
    out = node.outputs[0]
    forms.append(_tensor_form(g, node, out.tensor, out.index or (), True))
    space = node.space or ()
    used = {r for f in forms for e in f.exprs for r in e.ranks}
    unused = [r for r in space if r not in used]
    if unused:
        raise Unexpressible(f"space rank(s) {', '.join(unused)} index no tensor")
    return AffineForm(node.name, node.op, tuple(space), tuple(forms), node.kind == "data_movement")
