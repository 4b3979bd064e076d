"""Which ranks may be split together: the constraints a graph puts on sharding its ranks.

Splitting a rank over ``n`` chips (each chip holds ``size / n`` of it, blocks in order) is only
consistent if every place the rank meets another rank agrees:

- an access ``t[..., R, ...]`` of tensor dim ``D`` by space rank ``R`` *links* D and R (equal split);
- a reshape links the groups of input and output dims whose sizes multiply to the same product:
  a split of the group lands on its outermost dims first (``D2 = H * E`` split 8 ways splits ``H``
  8 ways when 8 divides ``H``; ``H = H2 * H3`` split 8 ways with ``H2 = 2`` splits ``H2`` fully and
  ``H3`` 4 ways);
- a concat links its inputs' dims with the output's, and *fixes* its axis (split 1);
- an offset, strided or multi-term index (``E2 + 8``, ``2*P + R``), a gathered dim (``@ids``), a
  constant index and every dim an opaque node touches are fixed.

:class:`Constraints` is built once per graph; :meth:`Constraints.solve` extends a proposed split
of some ranks to every rank it forces, or says why it cannot.

>>> from solar_io import load
>>> c = Constraints(load("examples/graphs/mlp.yaml"))
>>> c.solve({"H": 2}, {})
({'H': 2}, None)
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod

from solar_io.affine import AffineExpr, Indirect
from solar_io.graph import WHOLE_TENSOR_KINDS, Graph


class Constraints:
    """Links, reshape groups and fixed ranks of ``g`` (see the module docstring)."""

    def __init__(self, g: Graph) -> None:
        self.sizes = g.rank_sizes
        self._parent = {r: r for r in self.sizes}
        self.fixed: dict[str, str] = {}  # rank -> why it cannot be split
        self.groups: list[tuple[tuple[str, ...], tuple[str, ...], str]] = []
        self._members: dict[str, list[str]] | None = None
        self._in_group: dict[str, list[int]] = {}
        tmap = g.tensor_map
        for n in g.nodes:
            if n.kind in WHOLE_TENSOR_KINDS:
                for a in (*n.inputs, *n.outputs):
                    for r in tmap[a.tensor].ranks:
                        self._fix(r, f"read or written by {n.kind} node {n.name}")
                continue
            if n.kind == "data_movement" and n.movement == "reshape":
                self._reshape(g, n.name, tmap[n.inputs[0].tensor].ranks, tmap[n.outputs[0].tensor].ranks)
                continue
            if n.kind == "data_movement" and n.movement == "concat":
                out = tmap[n.outputs[0].tensor].ranks
                for a in n.inputs:
                    for i, r in enumerate(tmap[a.tensor].ranks):
                        if i < len(out) and out[i] == n.axis:
                            self._fix(r, f"concatenated by {n.name}")
                        elif i < len(out):
                            self._link(r, out[i])
                if n.axis is not None:
                    self._fix(n.axis, f"the concat axis of {n.name}")
                continue
            for a in (*n.inputs, *n.outputs):
                dims = tmap[a.tensor].ranks
                for d, e in zip(dims, a.index or (), strict=False):
                    if type(e) is Indirect:
                        self._fix(d, f"gathered through @{e.tensor} in {n.name}")
                    elif isinstance(e, AffineExpr) and e.is_rank() and self.sizes[e.terms[0][0]] == self.sizes[d]:
                        self._link(d, e.terms[0][0])
                    elif isinstance(e, AffineExpr) and e.is_rank():  # a slice from 0 (chunk, narrow)
                        self._fix(d, f"sliced by {e} in {n.name}")
                        self._fix(e.terms[0][0], f"a slice of {d} in {n.name}")
                    else:
                        self._fix(d, f"indexed by '{e}' in {n.name}")
                        for r, _ in getattr(e, "terms", ()):
                            self._fix(r, f"in the index '{e}' of {n.name}")

    # ------------------------------------------------------------------ union-find
    def find(self, r: str) -> str:
        """The representative of ``r``'s link class."""
        p = self._parent
        while p[r] != r:
            p[r] = p[p[r]]
            r = p[r]
        return r

    def _link(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self._parent[rb] = ra

    def _fix(self, r: str, why: str) -> None:
        self.fixed.setdefault(r, why)

    def _reshape(self, g: Graph, node: str, a: tuple[str, ...], b: tuple[str, ...]) -> None:
        sizes = self.sizes
        i = j = 0
        while i < len(a) or j < len(b):
            ga, gb = [], []
            pa = pb = 1
            # take at least one dim of each side, then grow the smaller product until they agree
            while i < len(a) and sizes[a[i]] == 1 and (j >= len(b) or sizes[b[j]] != 1):
                i += 1  # unit dims carry nothing
            while j < len(b) and sizes[b[j]] == 1 and (i >= len(a) or sizes[a[i]] != 1):
                j += 1
            if i >= len(a) or j >= len(b):
                break
            ga.append(a[i]); pa *= sizes[a[i]]; i += 1  # noqa: E702
            gb.append(b[j]); pb *= sizes[b[j]]; j += 1  # noqa: E702
            while pa != pb:
                if pa < pb and i < len(a):
                    ga.append(a[i]); pa *= sizes[a[i]]; i += 1  # noqa: E702
                elif pb < pa and j < len(b):
                    gb.append(b[j]); pb *= sizes[b[j]]; j += 1  # noqa: E702
                else:
                    break
            if len(ga) == 1 and len(gb) == 1:
                self._link(ga[0], gb[0])
            else:
                self.groups.append((tuple(ga), tuple(gb), node))

    # ------------------------------------------------------------------ solving
    def _index(self) -> tuple[dict[str, list[str]], dict[str, list[int]]]:
        """(class -> its ranks, class -> the reshape groups it is in), built once."""
        if self._members is None:
            members: dict[str, list[str]] = {}
            for r in self.sizes:
                members.setdefault(self.find(r), []).append(r)
            in_group: dict[str, list[int]] = {}
            for i, (ga, gb, _) in enumerate(self.groups):
                for c in dict.fromkeys(self.find(x) for x in (*ga, *gb)):
                    in_group.setdefault(c, []).append(i)
            self._members, self._in_group = members, in_group
        return self._members, self._in_group

    def _spread(self, dims: tuple[str, ...], total: int) -> dict[str, int] | None:
        """Split ``total`` over ``dims`` outermost first (block sharding), or None if it cannot."""
        out, left = {}, total
        for d in dims:
            s = self.sizes[d]
            if left == 1:
                out[d] = 1
            elif s % left == 0:
                out[d], left = left, 1
            elif left % s == 0:
                out[d], left = s, left // s
            else:
                return None
        return out if left == 1 else None

    def solve(self, proposal: Mapping[str, int], known: Mapping[str, int]) -> tuple[dict[str, int], str | None]:
        """Extend ``known`` (rank -> split, already consistent) with ``proposal``: (every rank's split
        that differs from 1, None), or (``known``, why the proposal cannot be applied)."""
        by_class: dict[str, int] = {self.find(r): s for r, s in known.items()}
        queue: list[str] = []

        def assign(r: str, s: int) -> str | None:
            c = self.find(r)
            if c in by_class:
                return None if by_class[c] == s else f"rank {r} would be split both {by_class[c]} and {s} ways"
            by_class[c] = s
            queue.append(c)
            return None

        for r, s in proposal.items():
            err = assign(r, s)
            if err:
                return dict(known), err
        members, in_group = self._index()
        while queue:
            c = queue.pop(0)
            s = by_class[c]
            for x in members.get(c, ()):
                if s != 1 and x in self.fixed:
                    return dict(known), f"rank {x} cannot be split: {self.fixed[x]}"
                if self.sizes[x] % s:
                    return dict(known), f"rank {x} of size {self.sizes[x]} is not divisible by {s}"
            for gi in in_group.get(c, ()):
                ga, gb, node = self.groups[gi]
                for side, other in ((ga, gb), (gb, ga)):
                    if not any(self.find(x) == c for x in side):
                        continue
                    splits = [by_class.get(self.find(x), 1) for x in side]
                    total = prod(splits)
                    if self._spread(side, total) != dict(zip(side, splits, strict=True)):
                        return dict(known), f"the reshape {node} cannot keep {'x'.join(side)} split {total} ways"
                    spread = self._spread(other, total)
                    if spread is None:
                        return dict(known), f"the reshape {node} cannot split {'x'.join(other)} {total} ways"
                    for x, sx in spread.items():
                        cx = self.find(x)
                        if cx in by_class and by_class[cx] != sx and any(by_class.get(self.find(y)) is None
                                                                        for y in side):
                            continue  # the side is not settled yet; revisited when it is
                        err = assign(x, sx)
                        if err:
                            return dict(known), f"the reshape {node}: {err}"
        touched = {gi for c in by_class for gi in in_group.get(c, ())}
        for gi in sorted(touched):  # every reshape the split reaches agrees once all is settled
            ga, gb, node = self.groups[gi]
            sa = [by_class.get(self.find(x), 1) for x in ga]
            sb = [by_class.get(self.find(x), 1) for x in gb]
            if (prod(sa) != prod(sb) or self._spread(ga, prod(sa)) != dict(zip(ga, sa, strict=True))
                    or self._spread(gb, prod(sb)) != dict(zip(gb, sb, strict=True))):
                return dict(known), f"the reshape {node} cannot keep {'x'.join(ga)} and {'x'.join(gb)} split alike"
        out = {r: s for c, s in by_class.items() if s != 1 for r in members.get(c, ())}
        return out, None


__all__ = ["Constraints"]
