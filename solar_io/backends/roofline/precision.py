"""The precision policy: at which precision a contraction may run without the user's code changing.

A lower bound must hold for the program as its framework runs it by default and under its common
fast settings, so by default a contraction is priced at the fastest precision a framework uses
for it unasked. Two rules, each on by default and each switched off by its strict option, and a
third that a file turns on:

``fp32->tf32`` (``strict_fp32=False``, ``--strict-fp32`` turns it off)
    fp32 matrix work runs at the larger of the chip's fp32 and tf32 matrix peaks. PyTorch runs
    fp32 convolutions as TF32 by default on NVIDIA GPUs since Ampere
    (``torch.backends.cudnn.allow_tf32 = True``) and harnesses commonly enable it for matmul
    (``torch.backends.cuda.matmul.allow_tf32``, ``torch.set_float32_matmul_precision('high')``;
    JAX's default matmul precision on GPUs is TF32 as well). Applied in :class:`.model.PeakModel`.

``fp32->bf16`` (only for a file that admits it, ``--strict-fp32`` turns it off)
    A graph whose ``precision`` assumption says ``fp32_matrix: bf16/fp16``
    (:func:`solar_io.node_lists.fp32_at_half`) has its fp32 matrix work priced at the fastest of the
    fp32, tf32, bf16 and fp16 matrix peaks: no framework does that unasked, but a benchmark
    definition admits any solution within its tolerances, and SOL-ExecBench's measured baselines run
    fp32 problems on 16-bit tensor cores (the trace frontend writes the assumption,
    ``frontends/trace/capture.py``).

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
    - any number of *concatenations* (a ``concat`` data movement, e.g. ``torch.stack`` of the low and
      high nibbles) whose every input is itself a dequantisation chain: each element is kept once;
    - ending in one *cast*: an einsum ``identity`` with reduce ``none`` reading a tensor of a
      low-precision class (``fp8_*``, ``mxfp8`` -> fp8; ``fp6_*`` -> fp6; ``fp4_e2m1``, ``nvfp4``,
      ``mxfp4`` -> fp4; ``int8``, ``uint8`` -> int8; ``int4``; and ``bf16``, ``fp16``, whose tensor
      cores multiply exactly and accumulate in fp32, so an fp32 GEMM of widened bf16 values is
      theirs) and writing a wider float. A cast with no scale is a dequantisation with scale 1;
    - or ending in one *table lookup* (``lut[codes]``, how references unpack NVFP4 held as packed
      bytes): a gather whose every index of the table is read from a code tensor, from a float table
      of at most :data:`.chains.LUT_MAX` (256) elements, where the codes are derived from a graph input of at
      most 8 bits (``uint8`` bytes of packed ``float4_e2m1fn_x2``, ``int8``, fp8, fp4, int4), or from a
      tensor of at most 8 bits the program computes (activations quantised by an earlier kernel), through
      integer casts, moves and the nibble operations the torch frontend lowers (``b & (2**k - 1)``
      as a remainder, ``b >> s`` of an unsigned byte as a division). The codes carry
      ``bits = min(ceil(log2 entries), bits left by the masks and shifts)`` bits, and the operand's
      origin is the float format of that width: <= 4 bits -> ``fp4_e2m1``, <= 6 -> ``fp6_e2m3``,
      <= 8 -> ``fp8_e4m3`` (the table's values are not in the file; a table of 2**b floats is taken
      as a b-bit float format, the fastest class a kernel could multiply such codes in). A gather
      from a larger table (an embedding lookup) or with codes from a wider tensor is no
      dequantisation and keeps its dtype. The report names the table and the code width.

    Not recognised (priced as written, so a kernel of the low-precision class could beat such a bound):
    a value decoded arithmetically from its bits (sign, exponent and mantissa by shifts, ``pow`` and
    ``where``), an affine dequantisation with a zero point (``(q - z) * s``: an add is no scale), and
    codes read from a tensor wider than 8 bits.

    A scale's distinct values are counted through the copies that only broadcast or reshape it
    (``repeat_interleave`` materialises an expanded view) and through its casts (an fp8 scale cast
    to fp32): the smallest tensor on that path is the scale, and its path joins the chain.

    The contraction's compute dtype is then the widest of its operands' *origin* dtypes (an operand
    that is not dequantised keeps its own): ``dequant(fp8) x dequant(fp8) -> fp8``,
    ``bf16 x dequant(fp8) -> bf16``, ``fp32 x dequant(int4) -> fp32`` (and then tf32 by the first
    rule). A chip that lists no matrix peak for an origin's class prices that operand at the fastest
    matrix class it lists that holds every value of the origin (``model.HOLDS``: fp8 on an A100 ->
    fp16/bf16, fp4 on an H100 -> fp8, int4 on a B200 -> int8), never at a class that cannot hold its
    values; the report's rule names the class used (``dequant fp8_e4m3 -> fp16``).

    An fp8 kernel applies the scales in its loop, so the wide dequantised tensors never cross DRAM:
    in the unfused bound the chain's nodes join the contraction's kernel, which reads
    the low-precision tensors and the scales. That holds only when every tensor of the chain is
    read by the chain or the contraction alone and is no graph output; otherwise the operand is
    still priced at its origin class but the chain keeps its own kernels (the report says so).
    The chain's own work (casts, the nibble operations and one multiply per element and scale) is
    then not priced at any unit: a kernel of the origin class needs none of it. Blackwell's
    block-scaled MMA (``tcgen05.mma`` with ``.block_scale``: MXFP8/6/4 and NVFP4) reads the codes
    and their per-block scales itself, and an fp8 GEMM with per-tensor or per-channel scales applies
    them once per output element in its epilogue (cuBLASLt's ``alpha`` and scale pointers), which
    the contraction's own output write covers. Its FLOPs stay in the counts; the node rows say
    ``dequant chain in <contraction>'s MMA``. A chain that is not folded keeps its work (it
    materialises the wide tensor), and ``--strict-dequant`` prices every chain as written.

Nothing here changes FLOP or byte counts; only the peaks a contraction is priced at and which
nodes form one kernel of the unfused bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from solar_io.graph import Graph
from solar_io.metrics import GraphMetrics

from .chains import LOW_CLASSES, LUT_MAX, LUT_ORIGIN, ChainView, Dequant
from .model import CLASS_OF, HOLDS, compute_class

#: A spec class -> the graph dtype that stands for it when an origin is priced at another class.
CLASS_DTYPE: dict[str, str] = {"fp64": "fp64", "fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16",
                               "fp8": "fp8_e4m3", "fp6": "fp6_e2m3", "fp4": "fp4_e2m1", "int8": "int8",
                               "int4": "int4"}


@dataclass(frozen=True, slots=True)
class Policy:
    """Which precision rules are on (both by default)."""

    tf32: bool = True
    dequant: bool = True
    half: bool = False  # fp32 matrix work at 16-bit peaks too: the file's assumption (node_lists.fp32_at_half)

    def describe(self) -> str:
        """One line: which rules are on."""
        tf = ("fp32->tf32 on (fp32 matrix work at the faster of the fp32 and tf32 matrix peaks; --strict-fp32 "
              "turns it off)" if self.tf32 else "fp32->tf32 off (--strict-fp32: fp32 matrix work at fp32 peaks)")
        if self.half:
            tf = ("fp32->tf32/bf16 on (fp32 matrix work at the fastest of the fp32, tf32, bf16 and fp16 matrix "
                  "peaks: the file's precision assumption; --strict-fp32 turns it off)")
        dq = ("dequant on (operands dequantised from fp8/fp6/fp4/int8/int4 or widened from bf16/fp16, by a cast or "
              "by a lookup in a table of "
              f"at most {LUT_MAX} entries, at their origin's peak or the fastest the chip lists that holds its values, "
              "the chain in the contraction's kernel; --strict-dequant turns it off)" if self.dequant
              else "dequant off (--strict-dequant: dequantised operands priced as written)")
        return f"{tf}; {dq}"


@dataclass(frozen=True, slots=True)
class Repriced:
    """Nodes one rule repriced: ``rule`` ('fp32->tf32' or 'dequant ORIGIN -> CLASS'), the nodes, and
    for dequant the scales and whether the chain was folded into the kernel."""

    rule: str
    nodes: tuple[str, ...]
    scales: tuple[str, ...] = ()
    folded: bool = True
    tables: tuple[str, ...] = ()

    def describe(self) -> str:
        """``fp32->tf32: 2 nodes (fc1, fc2)`` or ``dequant fp8_e4m3 -> fp8: mm (scales: s_a, s_b)``;
        a lookup adds ``table lookup: lut (16 entries, 4-bit codes of w), priced as the code width's
        float format``."""
        shown = ", ".join(self.nodes[:8]) + (" ..." if len(self.nodes) > 8 else "")
        head = f"{len(self.nodes)} nodes ({shown})" if len(self.nodes) > 1 else shown
        extra = []
        if self.tables:
            extra.append("table lookup: " + ", ".join(self.tables) + ", priced as the code width's float format")
        if self.scales:
            extra.append("scales: " + ", ".join(self.scales))
        elif self.rule.startswith("dequant"):
            extra.append("no scale" if self.tables else "no scale: a plain upcast, scale 1")
        if self.folded and self.rule.startswith("dequant"):
            extra.append("chain in the contraction's kernel, its work done by the MMA: not priced")
        if not self.folded:
            extra.append("chain not folded: a dequantised tensor is read elsewhere, its bytes and work count as "
                         "written")
        return f"{self.rule}: {head}" + (f" ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class PrecisionPlan:
    """What the dequant rule found in one graph: per contraction (node index) the dtypes its peaks are
    chosen from and its dequantised operands, and the chain nodes folded into each contraction."""

    policy: Policy
    operand_dtypes: dict[int, tuple[str, ...]] = field(default_factory=dict)
    dequants: dict[int, tuple[Dequant, ...]] = field(default_factory=dict)
    absorbed: dict[int, int] = field(default_factory=dict)  # chain node index -> contraction index
    dequantised: dict[int, tuple[bool, ...]] = field(default_factory=dict)  # per operand: an origin dtype

    def operands_on(self, idx: int, matrix_peaks: Mapping[str, float]) -> tuple[str, ...] | None:
        """The dtypes contraction ``idx`` is priced from on a chip whose matrix unit lists
        ``matrix_peaks`` (class -> peak): each origin whose class the unit lacks is replaced by the
        fastest class listed that holds all its values (``HOLDS``); None when no operand is dequantised.

        >>> plan = PrecisionPlan(Policy(), {0: ("fp8_e4m3", "bf16")}, dequantised={0: (True, False)})
        >>> plan.operands_on(0, {"fp16": 3.12e14, "bf16": 3.12e14, "int8": 6.24e14})
        ('fp16', 'bf16')
        """
        dts = self.operand_dtypes.get(idx)
        if dts is None:
            return None
        marks = self.dequantised.get(idx, (False,) * len(dts))
        return tuple(admitted(d, matrix_peaks) if m else d for d, m in zip(dts, marks, strict=True))


def admitted(origin: str, matrix_peaks: Mapping[str, float]) -> str:
    """``origin`` itself when the matrix unit lists its class (or none holds it), else the dtype of the
    fastest listed class holding every value of it: ``admitted('fp4_e2m1', {'fp8': 2e15, 'bf16': 1e15})
    == 'fp8_e4m3'``."""
    c = CLASS_OF.get(origin)
    if c is None or c in matrix_peaks or (c == "fp6" and "fp8" in matrix_peaks):
        return origin  # the model itself prices fp6 at the fp8 peaks where a chip lists no fp6
    wider = [k for k in HOLDS.get(c, ())[1:] if k in matrix_peaks]
    return CLASS_DTYPE[max(wider, key=lambda k: matrix_peaks[k])] if wider else origin


@dataclass(frozen=True, slots=True)
class PrecisionRecord:
    """The policy in force and what it repriced, as a report carries it."""

    policy: str
    tf32: bool
    dequant: bool
    repriced: tuple[Repriced, ...] = ()
    half: bool = False


def analyse(g: Graph, gm: GraphMetrics, policy: Policy) -> PrecisionPlan:
    """The dequantised operands of every contraction of ``g`` under ``policy`` (none when the dequant
    rule is off) and the chain nodes that join each contraction's kernel."""
    if not policy.dequant:
        return PrecisionPlan(policy)
    view = ChainView(g)
    operand_dtypes: dict[int, tuple[str, ...]] = {}
    dequants: dict[int, tuple[Dequant, ...]] = {}
    absorbed: dict[int, int] = {}
    dequantised: dict[int, tuple[bool, ...]] = {}
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
        dequantised[i] = tuple(found[a.tensor] is not None for a in n.inputs)
        chain = {v for d in ds for v in d.nodes}
        if view.exclusive(chain, i) and not chain & claimed:
            claimed |= chain
            absorbed.update((v, i) for v in chain)
            scale_path = {v for d in ds for v in d.scale_nodes} - claimed
            if scale_path and view.exclusive(chain | scale_path, i):  # a materialised scale joins the kernel too
                claimed |= scale_path
                absorbed.update((v, i) for v in scale_path)
    return PrecisionPlan(policy, operand_dtypes, dequants, absorbed, dequantised)


def record(g: Graph, plan: PrecisionPlan, classes: Sequence[tuple[int, str, str]]) -> PrecisionRecord:
    """The report's record: ``classes`` gives per priced contraction (node index, compute class, the rule
    that priced its fp32 matrix work at a faster class, ``fp32->tf32`` or ``fp32->bf16``, or "")."""
    repriced: list[Repriced] = []
    for fp32_rule in dict.fromkeys(r for _, _, r in classes if r):
        repriced.append(Repriced(fp32_rule, tuple(g.nodes[i].name for i, _, r in classes if r == fp32_rule)))
    by_rule: dict[tuple[str, bool], tuple[list[str], list[str], list[str]]] = {}
    cls = {i: c for i, c, _ in classes}
    folded_into = set(plan.absorbed.values())
    for i, ds in plan.dequants.items():
        origins = "/".join(sorted({d.origin for d in ds}))
        target = cls.get(i) or "/".join(compute_class(plan.operand_dtypes[i]))
        key = (f"dequant {origins} -> {target}", i in folded_into)
        names, scales, tables = by_rule.setdefault(key, ([], [], []))
        names.append(g.nodes[i].name)
        scales.extend(s for d in ds for s in d.scales if s not in scales)
        tables.extend(t for d in ds for t in d.tables if t not in tables)
    for (rule, folded), (names, scales, tables) in by_rule.items():
        repriced.append(Repriced(rule, tuple(names), tuple(scales), folded, tuple(tables)))
    p = plan.policy
    return PrecisionRecord(p.describe(), p.tf32, p.dequant, tuple(repriced), p.half)


__all__ = ["CLASS_DTYPE", "LOW_CLASSES", "LUT_MAX", "LUT_ORIGIN", "Dequant", "Policy", "PrecisionPlan",
           "PrecisionRecord", "Repriced", "admitted", "analyse", "record"]
