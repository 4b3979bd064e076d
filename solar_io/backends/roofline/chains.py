"""Dequantisation chains: the walk behind the precision policy's dequant rule (:mod:`.precision`).

:class:`ChainView` reads one graph backwards from an operand of a contraction: moves, concatenations,
scale applications, and the cast or table lookup a chain ends in; :meth:`ChainView.trace` returns the
:class:`Dequant` it found or None. What counts as each step, and why, is written in
:mod:`.precision`'s docstring (the rule's one record).

    >>> # lo = lut[(b & 15).long()], hi = lut[(b >> 4).long()]      (b: packed fp4 bytes, uint8)
    >>> # w = stack([lo, hi], -1).reshape(N, K) * scale.float().repeat_interleave(16, 1)
    >>> # ChainView(g).trace("w") -> Dequant(origin='fp4_e2m1', sources=('b',), scales=('scale',), ...)
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, log2, prod

from solar_io.affine import Indirect
from solar_io.dtypes import DTYPES
from solar_io.graph import Graph, Node

from .model import CLASS_OF

#: Spec classes a dequantisation chain may start from. bf16 and fp16 too: a GEMM of values widened from
#: them to fp32 is exactly what their tensor cores compute (exact products, fp32 accumulation), and
#: measured runs do it (SOL-ExecBench L2/026's fp32 expert GEMMs of bf16 weights, 9.52 ms on a B200 at
#: 1500 MHz, below the 10.88 ms that TF32 pricing gave).
LOW_CLASSES: tuple[str, ...] = ("fp8", "fp6", "fp4", "int8", "int4", "bf16", "fp16")
#: The largest table (elements) a dequantising lookup may read: the 256 codes of a byte.
LUT_MAX = 256
#: Code bits -> the origin dtype a lookup of codes of at most that width dequantises from.
LUT_ORIGIN: tuple[tuple[int, str], ...] = ((4, "fp4_e2m1"), (6, "fp6_e2m3"), (8, "fp8_e4m3"))


@dataclass(frozen=True, slots=True)
class Dequant:
    """One dequantised operand of a contraction: the tensor it reads, the origin dtype of the chain's
    cast or lookup, the low-precision tensors, the scales, the chain's node indices and, for lookups,
    each table as text (``lut (16 entries, 4-bit codes of w)``)."""

    operand: str
    origin: str
    sources: tuple[str, ...]
    scales: tuple[str, ...]
    nodes: tuple[int, ...]
    tables: tuple[str, ...] = ()
    scale_nodes: tuple[int, ...] = ()  # copies and casts that materialise a scale (folded when exclusive)


class ChainView:
    """Producers, consumers and alias roots of one graph, for walking chains backwards."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.dtype = {t.name: t.dtype for t in g.tensors}
        self.role = {t.name: t.role for t in g.tensors}
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, set[int]] = {}
        for i, n in enumerate(g.nodes):
            for a in n.outputs:
                self.producer.setdefault(a.tensor, i)
            for a in n.inputs:
                self.consumers.setdefault(a.tensor, set()).add(i)

    def elements(self, tensor: str) -> int:
        return prod(self.g.shape(tensor))

    def root(self, tensor: str) -> str:
        """The tensor a chain of view nodes ends at."""
        seen = 0
        while seen < len(self.g.nodes):
            i = self.producer.get(tensor)
            n = None if i is None else self.g.nodes[i]
            if n is None or not (n.kind == "data_movement" and n.view and len(n.inputs) == 1):
                return tensor
            tensor = n.inputs[0].tensor
            seen += 1
        return tensor

    def is_move(self, n: Node) -> bool:
        """A view, or a copy/reshape that keeps every element once (permute, transpose, reshape)."""
        if n.kind != "data_movement" or len(n.inputs) != 1 or len(n.outputs) != 1 or n.movement == "concat":
            return False
        if n.view:
            return True
        if any(type(e) is Indirect for a in (*n.inputs, *n.outputs) for e in a.index or ()):
            return False
        return self.elements(n.inputs[0].tensor) == self.elements(n.outputs[0].tensor) and not n.pad

    def is_cast(self, n: Node) -> str | None:
        """The origin dtype when ``n`` casts a low-precision tensor to a wider float, else None."""
        if n.kind != "einsum" or n.map != "identity" or n.reduce not in (None, "none") or len(n.inputs) != 1:
            return None
        src, dst = self.dtype[n.inputs[0].tensor], self.dtype[n.outputs[0].tensor]
        s, d = DTYPES[src], DTYPES[dst]
        if CLASS_OF.get(src) in LOW_CLASSES and d.family == "float" and d.bits > s.bits:
            return src
        return None

    def is_int_cast(self, n: Node) -> bool:
        """An einsum ``identity`` between two integer dtypes (``codes.long()``)."""
        return (n.kind == "einsum" and n.map == "identity" and n.reduce in (None, "none") and len(n.inputs) == 1
                and DTYPES[self.dtype[n.inputs[0].tensor]].family in ("int", "uint")
                and DTYPES[self.dtype[n.outputs[0].tensor]].family in ("int", "uint"))

    def _power_of_two(self, tensor: str) -> int | None:
        """k when ``tensor`` is a constant scalar 2**k (k >= 0), else None."""
        t = next((t for t in self.g.tensors if t.name == tensor), None)
        if t is None or t.value is None or t.value < 1 or t.value != int(t.value):
            return None
        v = int(t.value)
        return v.bit_length() - 1 if v & (v - 1) == 0 else None

    def _narrow(self, tensor: str) -> bool:
        d = self.dtype[tensor]
        return DTYPES[d].bits <= 8 and (DTYPES[d].family in ("int", "uint") or CLASS_OF.get(d) in LOW_CLASSES)

    def codes(self, tensor: str, depth: int = 0) -> tuple[str, float, tuple[int, ...]] | None:
        """(source, code bits, nodes) when ``tensor`` holds codes of a packed source of at most 8 bits:
        an input, weight or constant, or a tensor of at most 8 bits the program computes (activations
        quantised in an earlier kernel: NVFP4's ``x_fp4``), reached through integer casts, moves,
        ``% 2**k`` and (unsigned) ``/ 2**s``; None otherwise."""
        i = self.producer.get(tensor)
        if i is None:
            return (tensor, DTYPES[self.dtype[tensor]].bits, ()) if self._narrow(tensor) else None
        if depth > 64:
            return None
        n = self.g.nodes[i]
        if not (self.is_move(n) or self.is_int_cast(n) or (n.map in ("remainder", "div") and n.kind == "einsum")):
            return (tensor, DTYPES[self.dtype[tensor]].bits, ()) if self._narrow(tensor) else None
        if self.is_move(n) or self.is_int_cast(n):
            c = self.codes(n.inputs[0].tensor, depth + 1)
            return None if c is None else (c[0], c[1], (*c[2], i))
        if (n.kind == "einsum" and n.reduce in (None, "none") and len(n.inputs) == 2 and n.init is None
                and n.map in ("remainder", "div") and DTYPES[self.dtype[tensor]].family in ("int", "uint")):
            k = self._power_of_two(n.inputs[1].tensor)
            c = None if k is None else self.codes(n.inputs[0].tensor, depth + 1)
            if c is None or (n.map == "div" and DTYPES[self.dtype[n.inputs[0].tensor]].family != "uint"):
                return None
            bits = min(c[1], k) if n.map == "remainder" else max(c[1] - k, 0)
            return (c[0], bits, (*c[2], i))
        return None

    def lookup(self, n: Node) -> tuple[str, str, str, tuple[int, ...]] | None:
        """(origin dtype, table text, source, code nodes) when ``n`` is a dequantising table lookup (see
        the module docstring), else None."""
        if n.kind != "data_movement" or n.view or len(n.outputs) != 1 or len(n.inputs) != 2:
            return None
        table = next((a for a in n.inputs if a.index and all(type(e) is Indirect for e in a.index)), None)
        if table is None or len({e.tensor for e in table.index}) != 1:  # type: ignore[union-attr]
            return None
        code_tensor = table.index[0].tensor  # type: ignore[union-attr, index]
        out = n.outputs[0].tensor
        entries = self.elements(self.root(table.tensor))
        if (entries > LUT_MAX or DTYPES[self.dtype[table.tensor]].family != "float"
                or DTYPES[self.dtype[out]].family != "float" or self.elements(out) != self.elements(code_tensor)
                or code_tensor not in {a.tensor for a in n.inputs}):
            return None
        c = self.codes(code_tensor)
        if c is None:
            return None
        source, bits, nodes = c
        bits = min(bits, ceil(log2(max(entries, 2))))
        origin = next(d for b, d in LUT_ORIGIN if bits <= b)
        text = f"{self.root(table.tensor)} ({entries} entries, {bits:g}-bit codes of {self.root(source)})"
        return origin, text, self.root(source), nodes

    def scale_of(self, tensor: str, depth: int = 0) -> tuple[str, int, tuple[int, ...]]:
        """(scale, its distinct elements, nodes): the smallest tensor on the path back from ``tensor``
        through single-input copies without a gathered index (broadcasts, reshapes) and casts."""
        best, size, nodes = tensor, self.elements(tensor), ()
        path: tuple[int, ...] = ()
        while depth < 64:
            i = self.producer.get(tensor)
            n = None if i is None else self.g.nodes[i]
            if n is None or len(n.inputs) != 1 or len(n.outputs) != 1:
                break
            copy = n.kind == "data_movement" and n.movement != "concat" and not any(
                type(e) is Indirect for a in (*n.inputs, *n.outputs) for e in a.index or ())
            cast = n.kind == "einsum" and n.map == "identity" and n.reduce in (None, "none")
            if not (copy or cast):
                break
            tensor, path, depth = n.inputs[0].tensor, (*path, i), depth + 1  # type: ignore[operator]
            if self.elements(tensor) <= size:
                best, size, nodes = tensor, self.elements(tensor), path
        return best, size, tuple(v for v in nodes if not self.g.nodes[v].view)

    def trace(self, tensor: str, depth: int = 0) -> Dequant | None:
        """The dequantisation chain that produces ``tensor``, or None (see the module docstring)."""
        i = self.producer.get(tensor)
        if i is None or depth > 64:
            return None
        n = self.g.nodes[i]
        if self.is_move(n):
            d = self.trace(n.inputs[0].tensor, depth + 1)
            return None if d is None else Dequant(tensor, d.origin, d.sources, d.scales, (*d.nodes, i), d.tables,
                                                  d.scale_nodes)
        if n.kind == "data_movement" and n.movement == "concat" and len(n.outputs) == 1 and n.inputs:
            parts = [self.trace(a.tensor, depth + 1) for a in n.inputs]
            if any(d is None for d in parts):
                return None
            ds = [d for d in parts if d is not None]
            origin = max((d.origin for d in ds), key=lambda o: DTYPES[o].bits)  # the widest piece prices all
            return Dequant(tensor, origin, tuple(dict.fromkeys(x for d in ds for x in d.sources)),
                           tuple(dict.fromkeys(x for d in ds for x in d.scales)),
                           tuple(dict.fromkeys((*(v for d in ds for v in d.nodes), i))),
                           tuple(dict.fromkeys(x for d in ds for x in d.tables)),
                           tuple(dict.fromkeys(v for d in ds for v in d.scale_nodes)))
        origin = self.is_cast(n)
        if origin is not None:
            return Dequant(tensor, origin, (self.root(n.inputs[0].tensor),), (), (i,))
        found = self.lookup(n)
        if found is not None:
            origin, table, source, nodes = found
            return Dequant(tensor, origin, (source,), (), (*nodes, i), (table,))
        if n.kind != "einsum" or n.reduce not in (None, "none") or len(n.inputs) != 2 or n.init is not None:
            return None
        ins = [a.tensor for a in n.inputs]
        orders = [(0, 1), (1, 0)] if n.map == "mul" else [(0, 1)] if n.map == "div" else []
        out = self.elements(n.outputs[0].tensor)
        for v, s in orders:
            scale, size, path = self.scale_of(ins[s])
            if size >= out:
                continue
            d = self.trace(ins[v], depth + 1)
            if d is not None:
                return Dequant(tensor, d.origin, d.sources, tuple(dict.fromkeys((*d.scales, self.root(scale)))),
                               (*d.nodes, i), d.tables, tuple(dict.fromkeys((*d.scale_nodes, *path))))
        return None

    def exclusive(self, chain: set[int], contraction: int) -> bool:
        """True when every tensor the chain writes is read only inside it or by the contraction."""
        inside = chain | {contraction}
        for i in chain:
            for a in self.g.nodes[i].outputs:
                if self.role.get(a.tensor) == "output" or self.consumers.get(a.tensor, set()) - inside:
                    return False
        return True


__all__ = ["LOW_CLASSES", "LUT_MAX", "LUT_ORIGIN", "ChainView", "Dequant"]
