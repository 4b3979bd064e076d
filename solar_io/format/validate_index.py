"""The index checks of semantic validation (:mod:`.validate`): a node's space (no rank twice) and
pads (of its inputs' ranks), its output index (plain, distinct ranks of the space, each output
element written once; a scatter's ``@t`` naming an integer input), and each input access: one
index per dimension, ``@t`` naming another integer input, affine indexes over the space that stay
inside the tensor's extents plus any declared padding (which catches an off-by-one convolution
padding).
"""

from __future__ import annotations

from ..affine import Access, AffineExpr, Indirect
from ..dtypes import DTYPES
from ..graph import Node


class _IndexChecks:
    """Access and index checks, mixed into :class:`.validate._Validator`: they use its ``g``,
    ``sizes``, ``tensors``, ``err`` and ``_indirect_output``."""

    # ------------------------------------------------------------------ indexing
    def _is_index_input(self, n: Node, tensor: str) -> bool:
        return any(isinstance(e, Indirect) and e.tensor == tensor
                   for a in n.inputs + n.outputs[:1] if a.index for e in a.index)

    def _reduced(self, n: Node) -> list[str]:
        out = n.outputs[0]
        used = {e.terms[0][0] for e in out.index or () if isinstance(e, AffineExpr) and e.is_rank()}
        return [r for r in n.space if r not in used]

    def _numel(self, tensor: str) -> int:
        out = 1
        for s in self.g.shape(tensor):
            out *= s
        return out

    def _indexed(self, path: tuple, n: Node) -> None:
        space = set(n.space)
        if len(space) != len(n.space):
            self.err(path + ("space",), f"node {n.name}: a rank appears twice in the space")
        input_names = {a.tensor for a in n.inputs}
        for t, dims in n.pad:
            if t not in input_names:
                self.err(path + ("pad", t), f"node {n.name}: pad names {t!r}, which the node does not read")
            for r, _, _ in dims:
                if t in self.tensors and r not in self.tensors[t].ranks:
                    self.err(path + ("pad", t, r), f"node {n.name}: {r} is not a rank of {t}")
        for j, a in enumerate(n.inputs):
            self._access(path + ("inputs", j), n, a, space, input_names)
        o = n.outputs[0]
        opath = path + ("output",)
        if o.index is None:
            self.err(opath, f"node {n.name}: write the output with its index, e.g. {o.tensor}[...]")
            return
        t = self.tensors[o.tensor]
        if len(o.index) != len(t.ranks):
            self.err(opath, f"node {n.name}: output {o.tensor} has {len(t.ranks)} dims, index has {len(o.index)}")
            return
        seen: set[str] = set()
        # A scatter writes only the elements it selects: its plain ranks may cover part of a dimension.
        scatter = self._indirect_output(n)
        for d, e in enumerate(o.index):
            if isinstance(e, Indirect) and n.kind == "einsum":
                self._index_tensor(opath, n, e, o.tensor, input_names, "an input")
                continue
            if not (isinstance(e, AffineExpr) and e.is_rank()):
                self.err(opath, f"node {n.name}: output index {e} must be a plain rank of the space"
                         + (" or @t (a scatter)" if n.kind == "einsum" else ""))
                continue
            r = e.terms[0][0]
            if r not in space or r in seen:
                self.err(opath, f"node {n.name}: output index {r} must be a distinct rank of the space")
                continue
            seen.add(r)
            want = self.sizes[t.ranks[d]]
            if scatter and self.sizes[r] > want:
                self.err(opath, f"node {n.name}: output {o.tensor} dim {d} ({t.ranks[d]}={want}) is indexed "
                         f"by {r}={self.sizes[r]}, beyond its extent")
            elif not scatter and self.sizes.get(r) != want:
                self.err(opath, f"node {n.name}: output {o.tensor} dim {d} ({t.ranks[d]}={want}) is indexed "
                         f"by {r}={self.sizes.get(r)}; every output element must be written once")

    def _index_tensor(self, path: tuple, n: Node, e: Indirect, indexed: str, input_names: set[str],
                      what: str) -> None:
        """``@e.tensor`` in an access of ``indexed``: it must be ``what`` of node ``n`` (not ``indexed``
        itself) and of an integer dtype."""
        src = self.tensors.get(e.tensor)
        if e.tensor not in input_names or e.tensor == indexed or src is None:
            self.err(path, f"node {n.name}: @{e.tensor} must name {what} of this node")
        elif DTYPES[src.dtype].family not in ("int", "uint"):
            self.err(path, f"node {n.name}: index tensor {e.tensor} must have an integer dtype")

    def _access(self, path: tuple, n: Node, a: Access, space: set[str], input_names: set[str]) -> None:
        t = self.tensors[a.tensor]
        if a.index is None:
            self.err(path, f"node {n.name}: read {a.tensor} with an index, e.g. {a.tensor}[...]")
            return
        if len(a.index) != len(t.ranks):
            self.err(path, f"node {n.name}: {a.tensor} has {len(t.ranks)} dims {list(t.ranks)}, "
                     f"index has {len(a.index)}")
            return
        pad = n.pad_of(a.tensor)
        for d, e in enumerate(a.index):
            dim = t.ranks[d]
            if isinstance(e, Indirect):
                self._index_tensor(path, n, e, a.tensor, input_names, "another input")
                continue
            missing = [r for r in e.ranks if r not in space]
            if missing:
                self.err(path, f"node {n.name}: {a} uses {', '.join(missing)}, not in the space {list(n.space)}")
                continue
            lo, hi = e.bounds(self.sizes)
            plo, phi = pad.get(dim, (0, 0))
            extent = self.sizes[dim]
            if lo < -plo or hi > extent - 1 + phi:
                padded = f" with pad [{plo}, {phi}]" if (plo or phi) else ""
                self.err(path, f"node {n.name}: index {e} of {a.tensor} dim {dim} spans [{lo}, {hi}], outside "
                         f"[{-plo}, {extent - 1 + phi}] (size {extent}{padded})")
