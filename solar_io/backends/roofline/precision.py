"""The precision policy: at which precision a contraction may run without the user's code changing.

A lower bound must hold for the program as its framework runs it by default and under its common
fast settings, so by default a contraction is priced at the fastest precision a framework uses
for it unasked. Two rules, each on by default and each switched off by its strict option:

``fp32->tf32`` (``strict_fp32=False``, ``--strict-fp32`` turns it off)
    fp32 matrix work runs at the larger of the chip's fp32 and tf32 matrix peaks. PyTorch runs
    fp32 convolutions as TF32 by default on NVIDIA GPUs since Ampere
    (``torch.backends.cudnn.allow_tf32 = True``) and harnesses commonly enable it for matmul
    (``torch.backends.cuda.matmul.allow_tf32``, ``torch.set_float32_matmul_precision('high')``;
    JAX's default matmul precision on GPUs is TF32 as well). Applied in :class:`.model.PeakModel`.

``dequant`` (``strict_dequant=False``, ``--strict-dequant`` turns it off)
    An operand of a contraction produced by a *dequantisation chain* is priced at the peak of its
    origin class, and the chain runs inside the contraction's kernel. A chain, read backwards
    from the operand the contraction reads:

    - any number of *moves*: view nodes (reshape, permute, transpose, unsqueeze, expand, slice
      views) and data-movement copies that keep every element exactly once (a permutation or a
      reshape: same element count, no gathered index);
    - any number of *scale applications*: an einsum ``mul`` of two inputs (either order) or
      ``div`` (value first) with reduce ``none``, one input being the rest of the chain and the
      other the scale, a tensor whose alias root (through views) has fewer elements than the
      product: per-tensor, per-channel or per-block scales broadcast by the access or by views;
    - ending in one *cast*: an einsum ``identity`` with reduce ``none`` reading a tensor of a
      low-precision class (``fp8_*``, ``mxfp8`` -> fp8; ``fp6_*`` -> fp6; ``fp4_e2m1``, ``nvfp4``,
      ``mxfp4`` -> fp4; ``int8``, ``uint8`` -> int8; ``int4``) and writing a wider float. A cast
      with no scale is a dequantisation with scale 1.

    The contraction's compute dtype is then the widest of its operands' *origin* dtypes (an operand
    that is not dequantised keeps its own): ``dequant(fp8) x dequant(fp8) -> fp8``,
    ``bf16 x dequant(fp8) -> bf16``, ``fp32 x dequant(int4) -> fp32`` (and then tf32 by the first
    rule). An fp8 kernel applies the scales in its loop, so the wide dequantised tensors never
    cross DRAM: in the unfused bound the chain's nodes join the contraction's kernel, which reads
    the low-precision tensors and the scales. That holds only when every tensor of the chain is
    read by the chain or the contraction alone and is no graph output; otherwise the operand is
    still priced at its origin class but the chain keeps its own kernels (the report says so).
    The chain's own vector work (one multiply per element and scale) is kept as written.

Nothing here changes FLOP or byte counts; only the peaks a contraction is priced at and which
nodes form one kernel of the unfused bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod

from solar_io.affine import Indirect
from solar_io.dtypes import DTYPES
from solar_io.graph import Graph, Node
from solar_io.metrics import GraphMetrics

from .model import CLASS_OF, compute_class

#: Spec classes a dequantisation chain may start from.
LOW_CLASSES: tuple[str, ...] = ("fp8", "fp6", "fp4", "int8", "int4")


@dataclass(frozen=True, slots=True)
class Policy:
    """Which precision rules are on (both by default)."""

    tf32: bool = True
    dequant: bool = True

    def describe(self) -> str:
        """One line: which rules are on."""
        tf = ("fp32->tf32 on (fp32 matrix work at the faster of the fp32 and tf32 matrix peaks; --strict-fp32 "
              "turns it off)" if self.tf32 else "fp32->tf32 off (--strict-fp32: fp32 matrix work at fp32 peaks)")
        dq = ("dequant on (operands dequantised from fp8/fp6/fp4/int8/int4 at their origin's peak, the chain in "
              "the contraction's kernel; --strict-dequant turns it off)" if self.dequant
              else "dequant off (--strict-dequant: dequantised operands priced as written)")
        return f"{tf}; {dq}"


@dataclass(frozen=True, slots=True)
class Dequant:
    """One dequantised operand of a contraction: the tensor it reads, the origin dtype of the chain's
    cast, the low-precision tensors, the scales, and the chain's node indices."""

    operand: str
    origin: str
    sources: tuple[str, ...]
    scales: tuple[str, ...]
    nodes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Repriced:
    """Nodes one rule repriced: ``rule`` ('fp32->tf32' or 'dequant ORIGIN -> CLASS'), the nodes, and
    for dequant the scales and whether the chain was folded into the kernel."""

    rule: str
    nodes: tuple[str, ...]
    scales: tuple[str, ...] = ()
    folded: bool = True

    def describe(self) -> str:
        """``fp32->tf32: 2 nodes (fc1, fc2)`` or ``dequant fp8_e4m3 -> fp8: mm (scales: s_a, s_b)``."""
        shown = ", ".join(self.nodes[:8]) + (" ..." if len(self.nodes) > 8 else "")
        head = f"{len(self.nodes)} nodes ({shown})" if len(self.nodes) > 1 else shown
        extra = []
        if self.scales:
            extra.append("scales: " + ", ".join(self.scales))
        elif self.rule.startswith("dequant"):
            extra.append("no scale: a plain upcast, scale 1")
        if not self.folded:
            extra.append("chain not folded: a dequantised tensor is read elsewhere, its bytes count as written")
        return f"{self.rule}: {head}" + (f" ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class PrecisionPlan:
    """What the dequant rule found in one graph: per contraction (node index) the dtypes its peaks are
    chosen from and its dequantised operands, and the chain nodes folded into each contraction."""

    policy: Policy
    operand_dtypes: dict[int, tuple[str, ...]] = field(default_factory=dict)
    dequants: dict[int, tuple[Dequant, ...]] = field(default_factory=dict)
    absorbed: dict[int, int] = field(default_factory=dict)  # chain node index -> contraction index


@dataclass(frozen=True, slots=True)
class PrecisionRecord:
    """The policy in force and what it repriced, as a report carries it."""

    policy: str
    tf32: bool
    dequant: bool
    repriced: tuple[Repriced, ...] = ()


class _Graph:
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

    def trace(self, tensor: str, depth: int = 0) -> Dequant | None:
        """The dequantisation chain that produces ``tensor``, or None (see the module docstring)."""
        i = self.producer.get(tensor)
        if i is None or depth > 64:
            return None
        n = self.g.nodes[i]
        if self.is_move(n):
            d = self.trace(n.inputs[0].tensor, depth + 1)
            return None if d is None else Dequant(tensor, d.origin, d.sources, d.scales, (*d.nodes, i))
        origin = self.is_cast(n)
        if origin is not None:
            return Dequant(tensor, origin, (self.root(n.inputs[0].tensor),), (), (i,))
        if n.kind != "einsum" or n.reduce not in (None, "none") or len(n.inputs) != 2 or n.init is not None:
            return None
        ins = [a.tensor for a in n.inputs]
        orders = [(0, 1), (1, 0)] if n.map == "mul" else [(0, 1)] if n.map == "div" else []
        out = self.elements(n.outputs[0].tensor)
        for v, s in orders:
            scale = self.root(ins[s])
            if self.elements(scale) >= out:
                continue
            d = self.trace(ins[v], depth + 1)
            if d is not None:
                return Dequant(tensor, d.origin, d.sources, tuple(dict.fromkeys((*d.scales, scale))), (*d.nodes, i))
        return None

    def exclusive(self, chain: set[int], contraction: int) -> bool:
        """True when every tensor the chain writes is read only inside it or by the contraction."""
        inside = chain | {contraction}
        for i in chain:
            for a in self.g.nodes[i].outputs:
                if self.role.get(a.tensor) == "output" or self.consumers.get(a.tensor, set()) - inside:
                    return False
        return True


def analyse(g: Graph, gm: GraphMetrics, policy: Policy) -> PrecisionPlan:
    """The dequantised operands of every contraction of ``g`` under ``policy`` (none when the dequant
    rule is off) and the chain nodes that join each contraction's kernel."""
    if not policy.dequant:
        return PrecisionPlan(policy)
    view = _Graph(g)
    operand_dtypes: dict[int, tuple[str, ...]] = {}
    dequants: dict[int, tuple[Dequant, ...]] = {}
    absorbed: dict[int, int] = {}
    claimed: set[int] = set()
    for i, (n, m) in enumerate(zip(g.nodes, gm.nodes, strict=True)):
        if m.flops_matrix <= 0:
            continue
        found = {a.tensor: view.trace(a.tensor) for a in n.inputs}
        ds = tuple(d for d in dict.fromkeys(found.values()) if d is not None)
        if not ds:
            continue
        dequants[i] = ds
        operand_dtypes[i] = tuple(found[a.tensor].origin if found[a.tensor] is not None  # type: ignore[union-attr]
                                  else view.dtype[a.tensor] for a in n.inputs)
        chain = {v for d in ds for v in d.nodes}
        if view.exclusive(chain, i) and not chain & claimed:
            claimed |= chain
            absorbed.update((v, i) for v in chain)
    return PrecisionPlan(policy, operand_dtypes, dequants, absorbed)


def record(g: Graph, plan: PrecisionPlan, classes: Sequence[tuple[int, str, bool]]) -> PrecisionRecord:
    """The report's record: ``classes`` gives per priced contraction (node index, compute class, whether
    its fp32 matrix work ran at the tf32 peak)."""
    repriced: list[Repriced] = []
    tf32 = [g.nodes[i].name for i, _, on_tf32 in classes if on_tf32]
    if tf32:
        repriced.append(Repriced("fp32->tf32", tuple(tf32)))
    by_rule: dict[tuple[str, bool], tuple[list[str], list[str]]] = {}
    cls = {i: c for i, c, _ in classes}
    folded_into = set(plan.absorbed.values())
    for i, ds in plan.dequants.items():
        origins = "/".join(sorted({d.origin for d in ds}))
        target = cls.get(i) or "/".join(compute_class(plan.operand_dtypes[i]))
        key = (f"dequant {origins} -> {target}", i in folded_into)
        names, scales = by_rule.setdefault(key, ([], []))
        names.append(g.nodes[i].name)
        scales.extend(s for d in ds for s in d.scales if s not in scales)
    for (rule, folded), (names, scales) in by_rule.items():
        repriced.append(Repriced(rule, tuple(names), tuple(scales), folded))
    p = plan.policy
    return PrecisionRecord(p.describe(), p.tf32, p.dequant, tuple(repriced))


__all__ = ["LOW_CLASSES", "Dequant", "Policy", "PrecisionPlan", "PrecisionRecord", "Repriced", "analyse", "record"]
