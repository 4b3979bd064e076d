"""The tracer: runs ``model`` on symbolic tensors and collects the einsum graph.

Kernel calls and builtins record nodes instead of computing. Graph ranks are the IR's
dimension names; a name met again with another size gets a fresh rank (``D_4096``).
Tensors are named after the kernel call that writes them (``linear_2.y``); expression
temporaries add ``.t0``, ``.t1``; model parameters keep their names; returned tensors
are renamed to the keys of a returned dict. Nodes whose results nobody reads (dead
code) are dropped.
"""

from __future__ import annotations

from dataclasses import replace

from ...affine import Access
from ...format.kernels import declare_kernels
from ...graph import Graph, Node, Producer, Tensor
from ...metrics import with_index_assumptions
from ..common.contract import contract_products
from .ir import LoopIRError, Value


class Tracer:
    """Collects ranks, tensors and nodes while ``model`` runs symbolically."""

    def __init__(self) -> None:
        self.ranks: dict[str, int] = {}
        self._rank_key: dict[tuple[str, int], str] = {}
        self.tensors: dict[str, Tensor] = {}  # as traced; renamed when the graph is built
        self.nodes: list[Node] = []
        self._prefix: dict[str, int] = {}
        self._consts: dict[tuple[float, str], str] = {}
        self.opaque: dict[str, object] = {}  # opaque node name -> its numpy implementation

    # ------------------------------------------------------------------ names
    def rank(self, dim: str, size: int) -> str:
        """The graph rank of IR dim ``dim`` with ``size``."""
        key = (dim, size)
        r = self._rank_key.get(key)
        if r is None:
            r = dim
            if r in self.ranks:
                r = f"{dim}_{size}"
                i = 2
                while r in self.ranks:
                    r, i = f"{dim}_{size}_{i}", i + 1
            self.ranks[r] = size
            self._rank_key[key] = r
        return r

    def fresh_rank(self, dim: str, size: int) -> str:
        """A new rank of ``size``, named after ``dim``, distinct from every existing rank."""
        r, i = f"{dim}_{size}", 2
        while r in self.ranks:
            r, i = f"{dim}_{size}_{i}", i + 1
        self.ranks[r] = size
        return r

    def prefix(self, base: str) -> str:
        """A fresh call prefix: ``base``, then ``base_2``, ``base_3``..."""
        n = self._prefix.get(base, 0) + 1
        self._prefix[base] = n
        name = base if n == 1 else f"{base}_{n}"
        while name in self.tensors:
            n += 1
            self._prefix[base] = n
            name = f"{base}_{n}"
        return name

    def tensor(self, name: str, ranks: tuple[str, ...], dtype: str, role: str = "intermediate",
               density: float | None = None, value: float | None = None, generated: bool = False) -> str:
        if name in self.tensors:
            raise LoopIRError(f"tensor name {name} is used twice")
        self.tensors[name] = Tensor(name, ranks, dtype, role, density, value, generated)
        return name

    def const(self, value: float, dtype: str) -> Access:
        """A scalar constant (an immediate: no bytes) as an access."""
        if value != value:
            raise LoopIRError("NaN constants are not allowed")
        key = (value, dtype)
        name = self._consts.get(key)
        if name is None:
            name = f"const.{dtype}.{value!r}"
            self.tensor(name, (), dtype, "constant", value=value)
            self._consts[key] = name
        return Access(name, ())

    def input(self, name: str, dims: tuple[str, ...], shape: tuple[int, ...], dtype: str, role: str,
              density: float | None, value: float | None = None, generated: bool = False) -> Value:
        ranks = tuple(self.rank(d, n) for d, n in zip(dims, shape, strict=True))
        self.tensor(name, ranks, dtype, role, density, value, generated)
        return Value(dims, shape, dtype, name=name, ranks=ranks, density=density)

    def result(self, name: str, dims: tuple[str, ...], shape: tuple[int, ...], dtype: str,
               density: float | None = None, ranks: tuple[str, ...] | None = None) -> Value:
        """A new intermediate tensor and its Value (ranks: given, or those of ``dims``)."""
        if ranks is None:
            ranks = tuple(self.rank(d, n) for d, n in zip(dims, shape, strict=True))
        self.tensor(name, ranks, dtype, "intermediate", density)
        return Value(dims, shape, dtype, name=name, ranks=ranks, density=density)

    def node(self, node: Node) -> None:
        self.nodes.append(node)

    def kernel_call(self, k, b):
        from .lift import lift_call

        return lift_call(self, k, b)

    # ------------------------------------------------------------------ result
    def finish(self, outputs: dict[str, Value], name: str | None, producer: Producer) -> Graph:
        """The graph with ``outputs`` (new name -> traced Value) as its outputs."""
        rename: dict[str, str] = {}
        for key, v in outputs.items():
            t = self.tensors.get(v.name or "")
            if t is None or v.name in rename:
                raise LoopIRError(f"model output {key} is not a distinct tensor of the traced graph")
            if t.role != "intermediate":
                raise LoopIRError(f"model output {key} is the {t.role} {v.name}; return computed tensors only")
            rename[v.name] = key
        for old, new in rename.items():
            if new != old and new in self.tensors and new not in rename:
                raise LoopIRError(f"output name {new} is already the name of another tensor")
        nodes = contract_products(_live(self.nodes, set(rename)), set(rename), self.ranks,
                                  {t.name for t in self.tensors.values() if t.value is not None})
        read = {a.tensor for n in nodes for a in n.inputs}
        keep = read | {a.tensor for n in nodes for a in n.outputs} | {
            t.name for t in self.tensors.values() if t.role in ("input", "weight", "constant")
            and (t.value is None or not t.name.startswith("const."))}

        def acc(a: Access) -> Access:
            return replace(a, tensor=rename[a.tensor]) if a.tensor in rename else a

        out_nodes = []
        for n in nodes:
            out_nodes.append(replace(n, name=rename.get(n.name, n.name), inputs=tuple(acc(a) for a in n.inputs),
                                     outputs=tuple(acc(a) for a in n.outputs),
                                     pad=tuple(sorted((rename.get(t, t), d) for t, d in n.pad)),
                                     init=rename.get(n.init, n.init) if n.init is not None else None))
        tensors = []
        for t in self.tensors.values():
            if t.name not in keep and t.name not in rename:
                continue
            role = "output" if t.name in rename else t.role
            tensors.append(Tensor(rename.get(t.name, t.name), t.ranks, t.dtype, role, t.density, t.value,
                                  t.generated))
        self.opaque = {rename.get(k, k): fn for k, fn in self.opaque.items()}
        used = {r for t in tensors for r in t.ranks} | {r for n in out_nodes for r in n.space}
        ranks = tuple((r, s) for r, s in self.ranks.items() if r in used)
        return with_index_assumptions(Graph(ranks=ranks, tensors=tuple(tensors), nodes=declare_kernels(out_nodes),
                                            producer=producer, name=name))


def _live(nodes: list[Node], outputs: set[str]) -> list[Node]:
    """``nodes`` without those whose results reach no output."""
    needed = set(outputs)
    keep = []
    for n in reversed(nodes):
        if any(a.tensor in needed for a in n.outputs):
            keep.append(n)
            needed.update(a.tensor for a in n.inputs)
    return keep[::-1]
