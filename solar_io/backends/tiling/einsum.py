"""One einsum as a tiling problem: operands, tile footprints and the traffic of a tiling.

The model (single on-chip buffer of S bytes between the compute and DRAM, Orojenesis-style):

- A *tiling* picks a tile size ``t_r`` for every rank ``r`` of the iteration space, any integer in
  ``[1, N_r]`` (``n_r = ceil(N_r / t_r)`` tiles, the last one ragged), and an order of the tile
  loops. The search (:mod:`.relax`, :mod:`.ilp`) bounds the traffic of every such tiling from below.
- The buffer holds one tile of every operand. The tile of operand T is the set of its elements the
  tile box touches: per group of dimensions that share ranks, the distinct values of the index
  expressions over the box ``0 <= r < t_r`` (so a window ``2*P + R - 1`` covers ``2(t_P-1) + t_R``
  rows), at most the tensor's extent. Capacity: ``sum_T bytes(tile of T) <= S``.
- T's tile is (re)fetched whenever one of T's *relevant* ranks (those in its index) changes tile.
  With the loop order fixed, that happens once per iteration of the loops at or outside T's
  innermost relevant loop, so ``traffic_T = Cover_T * M_T`` with ``Cover_T = tile bytes x the
  number of tile positions of its relevant ranks`` (the whole tensor, plus halo overlap for
  windows) and ``M_T = prod(n_r)`` over T's *irrelevant* loops placed outside its innermost
  relevant loop (``X_T``). The output is written once per visit and its partial sums read back on
  every visit but the first: ``traffic_O = Cover_O * (2 M_O - 1)``.

:func:`.sizes.candidates` (divisors and powers of two) is kept for the brute-force references of the tests;
the search itself takes interval breakpoints (:func:`.relax.breakpoints`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from solar_io.affine import AffineExpr
from solar_io.dtypes import DTYPES
from solar_io.footprint import expr_distinct
from solar_io.graph import Graph, Node

from .sizes import candidates, divisors, trips

_BIG = 1 << 40
_MAX_GROUP_POINTS = 1 << 16


# Per einsum object (keyed by id, the object kept so that the id stays its own): its signature and its merged
# form, which every capacity's solve and floor ask for again. Emptied when full.
_SIGNATURES: dict[int, tuple[Einsum, tuple]] = {}
_MERGED: dict[int, tuple[Einsum, tuple[Einsum, dict[str, tuple[str, ...]]]]] = {}
_MEMO_LIMIT = 1 << 14


@dataclass(frozen=True, slots=True)
class Group:
    """Dimensions of one operand that share ranks: ``exprs`` (one per dim) with ``extents``."""

    ranks: tuple[str, ...]
    exprs: tuple[AffineExpr, ...]
    extents: tuple[int, ...]

    @property
    def plain(self) -> bool:
        """A single dimension indexed by one rank with coefficient 1 (tile t covers t elements)."""
        return len(self.exprs) == 1 and len(self.ranks) == 1 and self.exprs[0].terms[0][1] == 1 \
            and len(self.exprs[0].terms) == 1

    def simple(self, size: dict[str, int]) -> bool:
        """Plain, and the dimension holds the whole rank: t tiles of a rank cover t elements each."""
        return self.plain and self.extents[0] >= size[self.ranks[0]]


@dataclass(frozen=True, slots=True)
class Operand:
    """One tensor access of the einsum: ``bpe`` bytes per element (width x density)."""

    tensor: str
    groups: tuple[Group, ...]
    bpe: float
    output: bool

    @property
    def ranks(self) -> tuple[str, ...]:
        """The relevant ranks (those in the index), in group order."""
        return tuple(r for g in self.groups for r in g.ranks)


@dataclass(frozen=True, slots=True)
class Einsum:
    """The tiling problem of one node: iteration ``space`` with ``sizes`` and the operands."""

    name: str
    space: tuple[str, ...]
    sizes: tuple[int, ...]
    operands: tuple[Operand, ...]

    @property
    def size(self) -> dict[str, int]:
        return dict(zip(self.space, self.sizes, strict=True))

    def irrelevant(self, op: Operand) -> tuple[str, ...]:
        """Ranks of the space (size > 1) that ``op`` is not indexed by."""
        rel = set(op.ranks)
        return tuple(r for r, n in zip(self.space, self.sizes, strict=True) if r not in rel and n > 1)

    def signature(self) -> tuple:
        """A key equal for einsums with the same shapes, accesses and dtypes (rank names dropped); kept
        per object (an einsum is solved and floored again at every capacity)."""
        return _kept(_SIGNATURES, self, Einsum._signature)

    def _signature(self) -> tuple:
        pos = {r: i for i, r in enumerate(self.space)}
        ops = tuple((tuple((tuple((tuple((pos[r], c) for r, c in e.terms), e.const) for e in g.exprs), g.extents)
                           for g in o.groups), o.bpe, o.output) for o in self.operands)
        return (self.sizes, ops)


def _groups(index: tuple[AffineExpr, ...], extents: tuple[int, ...]) -> tuple[Group, ...]:
    groups: list[tuple[list[str], list[int]]] = []
    for d, e in enumerate(index):
        hit = [g for g in groups if set(g[0]) & set(e.ranks)]
        ranks = list(e.ranks)
        dims = [d]
        for g in hit:
            groups.remove(g)
            ranks = g[0] + [r for r in ranks if r not in g[0]]
            dims = g[1] + dims
        groups.append((list(dict.fromkeys(ranks)), sorted(dims)))
    out = []
    for ranks, dims in groups:
        if not ranks:  # a constant index: one element of that dimension
            continue
        out.append(Group(tuple(ranks), tuple(index[d] for d in dims), tuple(extents[d] for d in dims)))
    return tuple(out)


# The node fields this model reads or may ignore safely (names, provenance, and the data-movement
# fields, which an einsum does not use). A field outside this set that a newer format version adds
# (a prefix scan along a rank, say) changes what the node computes in a way the model cannot see.
# ``kernel`` and ``phase`` (format 1.3) say which kernel and training phase a node belongs to, not
# what it computes or touches: they never make a node untileable nor two nodes structurally different.
MODELED_FIELDS = frozenset({"name", "kind", "op", "inputs", "outputs", "space", "map", "reduce", "movement", "axis",
                            "view", "pad", "fill", "reason", "location", "attrs", "kernel", "phase"})


@cache
def _extra_fields(cls: type) -> tuple[tuple[str, object], ...]:
    out = []
    for f in dataclasses.fields(cls):
        if f.name not in MODELED_FIELDS:
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
            out.append((f.name, default))
    return tuple(out)


def unmodeled_fields(node: Node) -> tuple[str, ...]:
    """The fields of ``node`` outside :data:`MODELED_FIELDS` that are set (differ from their default)."""
    return tuple(name for name, default in _extra_fields(type(node)) if getattr(node, name) != default)


def tileable(node: Node) -> bool:
    """True for an einsum node this model can tile: an iteration space, only affine indexes (no
    gather ``@t`` or scatter index, no whole-tensor access) and no field it does not model."""
    return node.kind == "einsum" and bool(node.space) and not unmodeled_fields(node) and all(
        a.index is not None and all(type(e) is AffineExpr for e in a.index) for a in (*node.inputs, *node.outputs))


def einsum_of(g: Graph, node: Node) -> Einsum | None:
    """The tiling problem of an einsum node, or None when it cannot be tiled by this model
    (:func:`tileable`); such a node is charged its unfused bytes by the cache-aware bound."""
    if not tileable(node):
        return None
    sizes = g.rank_sizes
    tmap = g.tensor_map
    ops: list[Operand] = []
    seen: set = set()
    for out, accesses in ((False, node.inputs), (True, node.outputs)):
        for a in accesses:
            t = tmap[a.tensor]
            if not t.stored or (out, a) in seen:
                continue  # an immediate or generated constant (no memory), or the same access twice (one operand)
            seen.add((out, a))
            if a.index is None or any(type(e) is not AffineExpr for e in a.index):
                return None
            bpe = DTYPES[t.dtype].bits / 8.0 * (1.0 if t.density is None else t.density)
            ext = tuple(sizes[r] for r in t.ranks)
            ops.append(Operand(a.tensor, _groups(a.index, ext), bpe, out))  # type: ignore[arg-type]
    return Einsum(node.name, node.space, tuple(sizes[r] for r in node.space), tuple(ops))


def merge_equivalent(e: Einsum) -> tuple[Einsum, dict[str, tuple[str, ...]]]:
    """``e`` with ranks of identical relevance merged into one rank (their sizes multiplied), and
    {merged rank: the original ranks, outermost first}.

    Exact for this model when every access of those ranks is a plain dimension: the products of
    divisors of a and b are exactly the divisors of ab (d = gcd(d, a) * d / gcd(d, a)), tile
    bytes and covers depend on the product only, and two loops that every operand sees alike can
    be made adjacent without raising any operand's traffic (moving the outer one inwards next to
    the inner one never puts it outside a relevant loop it was inside of).

    Kept per object: the same einsum is solved again at every capacity.
    """
    return _kept(_MERGED, e, _merge_equivalent)


def _kept(table: dict, e: Einsum, compute: Callable[[Einsum], Any]) -> Any:  # noqa: ANN401
    """``compute(e)``, kept in ``table`` by the object's id (with the object, so that the id stays its own)."""
    got = table.get(id(e))
    if got is None or got[0] is not e:
        if len(table) >= _MEMO_LIMIT:
            table.clear()
        got = table[id(e)] = (e, compute(e))
    return got[1]


def _merge_equivalent(e: Einsum) -> tuple[Einsum, dict[str, tuple[str, ...]]]:
    """The merge of :func:`merge_equivalent`, computed."""
    size = e.size
    halo = {r for op in e.operands for g in op.groups if not (g.simple(size) and g.exprs[0].const == 0)
            for r in g.ranks}
    key: dict[str, tuple[int, ...]] = {}
    for r, n in zip(e.space, e.sizes, strict=True):
        if r in halo or n == 1:
            continue
        key[r] = tuple(i for i, op in enumerate(e.operands) if r in op.ranks)
    classes: dict[tuple[int, ...], list[str]] = {}
    for r, k in key.items():
        classes.setdefault(k, []).append(r)
    merged = {rs[0]: tuple(rs) for rs in classes.values() if len(rs) > 1}
    if not merged:
        return e, {}
    gone = {r for rs in merged.values() for r in rs[1:]}
    space = tuple(r for r in e.space if r not in gone)
    sizes = tuple(math.prod(size[x] for x in merged.get(r, (r,))) for r in space)
    ops = []
    for op in e.operands:
        groups = []
        for g in op.groups:
            r = g.ranks[0]
            if r in gone:
                continue
            if r in merged:
                ext = math.prod(size[x] for x in merged[r])
                g = Group((r,), (AffineExpr(((r, 1),), 0),), (ext,))
            groups.append(g)
        ops.append(Operand(op.tensor, tuple(groups), op.bpe, op.output))
    return Einsum(e.name, space, sizes, tuple(ops)), merged


def split_tile(merged: tuple[str, ...], size: dict[str, int], d: int) -> dict[str, int]:
    """Tiles of the original ranks whose product is d, the innermost rank taking the most."""
    out = {}
    for r in reversed(merged):
        t = math.gcd(d, size[r])
        out[r] = t
        d //= t
    return out


@lru_cache(maxsize=1 << 18)
def _expr_box(terms: tuple[tuple[str, int], ...], tiles: tuple[int, ...], extent: int) -> int:
    e = AffineExpr(terms, 0)
    count, _ = expr_distinct(e, dict(zip((r for r, _ in terms), tiles, strict=True)), _BIG)
    return min(count, extent)


def group_elements(gr: Group, tile: dict[str, int]) -> int:
    """Distinct elements of the group's dimensions that one (interior) tile box touches."""
    if len(gr.exprs) == 1:
        e = gr.exprs[0]
        return _expr_box(e.terms, tuple(tile[r] for r, _ in e.terms), gr.extents[0])
    points = math.prod(tile[r] for r in gr.ranks)
    if points > _MAX_GROUP_POINTS:  # coupled dims, too many points: per-dim product (an upper estimate)
        return math.prod(_expr_box(e.terms, tuple(tile[r] for r, _ in e.terms), x)
                         for e, x in zip(gr.exprs, gr.extents, strict=True))
    seen = set()
    for pt in itertools.product(*(range(tile[r]) for r in gr.ranks)):
        env = dict(zip(gr.ranks, pt, strict=True))
        seen.add(tuple(sum(c * env[r] for r, c in e.terms) for e in gr.exprs))
    return min(len(seen), math.prod(gr.extents))


def tile_bytes(op: Operand, tile: dict[str, int]) -> float:
    """Bytes of one tile of ``op``."""
    return op.bpe * math.prod(group_elements(gr, tile) for gr in op.groups)


def cover_bytes(op: Operand, tile: dict[str, int], size: dict[str, int]) -> float:
    """Bytes of all of ``op``'s tiles, each once: per group of dimensions, the whole rank for a
    simple dimension (ragged last tile included), else the tile footprint x its tile positions
    (halo overlap of windows counted; a ragged tile counted at its interior footprint)."""
    total = op.bpe
    for g in op.groups:
        if g.simple(size):
            total *= size[g.ranks[0]]
        else:
            total *= group_elements(g, tile) * math.prod(trips(size[r], tile[r]) for r in g.ranks)
    return total


def traffic(e: Einsum, tile: dict[str, int], order: tuple[str, ...]) -> tuple[float, ...]:
    """DRAM bytes of each operand under a tiling (``order``: tile loops, outermost first)."""
    size = e.size
    n = {r: trips(size[r], tile[r]) for r in e.space}
    live = [r for r in order if n[r] > 1]
    out = []
    for op in e.operands:
        rel = set(op.ranks)
        inner = max((i for i, r in enumerate(live) if r in rel), default=-1)
        m = math.prod(n[r] for r in live[:inner + 1] if r not in rel)
        cov = cover_bytes(op, tile, size)
        out.append(cov * (2 * m - 1) if op.output else cov * m)
    return tuple(out)


def working_set(e: Einsum, tile: dict[str, int]) -> float:
    """Bytes of one tile of every operand: what the buffer must hold."""
    return sum(tile_bytes(op, tile) for op in e.operands)


def compulsory_bytes(e: Einsum) -> float:
    """Traffic with the whole space as one tile: every operand's footprint once."""
    size = e.size
    return sum(tile_bytes(op, size) for op in e.operands)


__all__ = ["MODELED_FIELDS", "Einsum", "Group", "Operand", "candidates", "compulsory_bytes", "cover_bytes",
           "divisors", "einsum_of", "merge_equivalent", "split_tile", "tileable", "trips", "unmodeled_fields",
           "group_elements", "tile_bytes", "traffic", "working_set"]
