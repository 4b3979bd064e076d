"""Export an einsum graph as an AccelForge workload (and optionally a two-level arch).

Mapping of the graph format onto AccelForge's workload YAML (``workload:`` with
``rank_sizes``, ``iteration_space_shape``, ``bits_per_value``, ``persistent_tensors`` and
``einsums``):

- A graph rank ``R`` becomes the AccelForge rank ``R.upper()`` (tensor dimensions) and the
  rank variable ``R.lower()`` (iteration); names that clash or that ISL/AccelForge reserve get
  a numeric suffix. Every rank variable is bounded in ``iteration_space_shape``, every rank
  (of a tensor or of an iteration space) sized in ``rank_sizes``, in the graph's order. Each
  tensor keeps its own ranks in every einsum (``x[B, T, D]`` of a tensor with ranks
  ``[B, S, D]`` is the projection ``{B: b, S: t, D: d}``).
- ``einsum`` nodes: one einsum each; accesses become projections, a list (``[m, k]``) when each
  dimension is indexed by its own rank's variable, else a dict of affine expressions
  (``{H: 2*p + r, ...}``). The output access has ``output: true``.
- Padding: AccelForge skips iteration points whose index leaves a rank's bounds, whereas a
  graph reads a filled border. A padded dimension is therefore written in padded coordinates:
  its expression is shifted by the low border and the einsum gets its own ``rank_sizes`` entry
  ``size + low + high``, so every iteration point (every MAC) stays in the operation space.
- ``data_movement`` ``copy`` (affine) and ``reshape`` (when one shape refines the other, so the
  row-major index map is affine) become einsums with ``is_copy_operation: true``.
- ``bits_per_value`` per tensor (disjoint keys: one tensor each) from the dtype width;
  ``persistent_tensors`` lists the weights and stored constants. Constants with a ``value``
  are immediates (no memory) and are left out of their einsums.
- Not expressible, skipped with a reason (a warning; an error under ``strict``): ``opaque``
  nodes (compute unknown), indirect indexes (gathers), ``concat`` (several writers of one
  tensor), reshapes that are not refinements, a tensor read twice with different indexes.
  A tensor whose writer was skipped becomes an input of the workload. ``density`` has no
  counterpart in the workload format and is noted in a comment, and so are ``live`` counts (format
  1.6; the workload's iteration space is shared by its einsums): such einsums are written whole.

AccelForge's format has no version field: the file opens with a comment naming solar-io,
its version and the source graph's SHA-256.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..affine import AffineExpr
from ..dtypes import DTYPES
from ..graph import Graph, Node
from .common import (
    ISL_WORDS,
    PY_WORDS,
    Export,
    ExportError,
    ExportResult,
    Names,
    Skip,
    check_strict,
    comment_text,
    flow_list,
    flow_map,
    graph_sha256,
    identifier,
    skip_lines,
    stamp_lines,
    yaml_scalar,
)
from .forms import TensorForm, Unexpressible, affine_form

AF_SET_WORDS = frozenset({"All", "Tensors", "Nothing", "Inputs", "Outputs", "Intermediates", "Shared",
                          "Persistent", "Total", "Above", "Einsum", "input", "output", "weight"})
_RESERVED = ISL_WORDS | PY_WORDS | AF_SET_WORDS
_RESERVED_LOWER = frozenset(w.lower() for w in _RESERVED)


@dataclass(frozen=True)
class AfNames:
    """Graph names -> AccelForge names (ranks, rank variables, tensors, einsums)."""

    rank: dict[str, str]
    var: dict[str, str]
    tensor: dict[str, str]
    einsum: dict[str, str]

    def renamed(self) -> tuple[tuple[str, str], ...]:
        """(graph name, AccelForge name) of every tensor and einsum whose name changed."""
        pairs = list(self.tensor.items()) + list(self.einsum.items())
        return tuple((a, b) for a, b in pairs if a != b)


def allocate_names(g: Graph) -> AfNames:
    """Deterministic AccelForge names for every rank, tensor and node of ``g``."""
    ranks = Names(_RESERVED | {w.upper() for w in _RESERVED_LOWER})
    rank, var = {}, {}
    for r, _ in g.ranks:
        base = identifier(r, "R").upper()
        if base.lower() in _RESERVED_LOWER:
            base += "X"
        rank[r] = ranks.take(base)
        var[r] = rank[r].lower()
    ns = Names(set(_RESERVED) | set(rank.values()) | set(var.values()))
    tensor = {t.name: ns.take(identifier(t.name, "T")) for t in g.tensors}
    einsum = {n.name: ns.take(identifier(n.name, "E")) for n in g.nodes}
    return AfNames(rank, var, tensor, einsum)


@dataclass
class AfAccess:
    """One tensor access: AccelForge tensor name, projection and direction."""

    tensor: str
    projection: list[tuple[str, str]]
    implied: bool
    output: bool = False

    def yaml(self) -> str:
        proj = (flow_list([v for _, v in self.projection]) if self.implied
                else flow_map(list(self.projection)))
        out = ", output: true" if self.output else ""
        return f"{{name: {yaml_scalar(self.tensor)}, projection: {proj}{out}}}"


@dataclass
class AfEinsum:
    """One AccelForge einsum."""

    name: str
    accesses: list[AfAccess]
    copy: bool = False
    rank_sizes: list[tuple[str, int]] = field(default_factory=list)
    source: str = ""


def expr_text(e: AffineExpr, var: dict[str, str], shift: int = 0) -> str:
    """An affine expression over rank variables, e.g. ``2*p + r - 1``."""
    parts: list[str] = []
    for r, c in e.terms:
        body = var[r] if abs(c) == 1 else f"{abs(c)}*{var[r]}"
        parts.append(("-" if c < 0 else "") + body if not parts else ("- " if c < 0 else "+ ") + body)
    const = e.const + shift
    if const or not parts:
        parts.append(str(const) if not parts else (f"+ {const}" if const > 0 else f"- {-const}"))
    return " ".join(parts)


def _access(f: TensorForm, names: AfNames, sizes: dict[str, int], g: Graph) -> AfAccess:
    """A tensor form as an AccelForge access; padded dimensions in padded coordinates."""
    proj, implied = [], True
    for dim, e, (lo, hi) in zip(f.dims, f.exprs, f.pads, strict=True):
        if lo or hi:
            key, size = names.rank[dim], g.rank_sizes[dim] + lo + hi
            if sizes.setdefault(key, size) != size:
                raise Unexpressible(f"rank {dim} is padded differently within one node")
        implied = implied and e.is_rank() and e.terms[0][0] == dim and not lo
        proj.append((names.rank[dim], expr_text(e, names.var, lo)))
    return AfAccess(names.tensor[f.tensor], proj, implied, f.output)


def node_einsum(g: Graph, node: Node, names: AfNames) -> AfEinsum:
    """The AccelForge einsum of ``node``; raises :class:`Unexpressible` with the reason."""
    form = affine_form(g, node)
    sizes: dict[str, int] = {}
    accesses = [_access(f, names, sizes, g) for f in form.tensors]
    for key in sizes:
        if sum(1 for a in accesses for k, _ in a.projection if k == key) > 1:
            raise Unexpressible(f"padded rank {key} also indexes another tensor of the node")
    return AfEinsum(names.einsum[node.name], accesses, form.copy, sorted(sizes.items()), node.op)


def bits_of(dtype: str) -> int | float:
    """Storage bits per value (an int where exact)."""
    b = DTYPES[dtype].bits
    return int(b) if float(b).is_integer() else float(b)


def _bits_text(bits: int | float) -> str:
    """An int plainly; a fraction (``4.5`` for nvfp4) as a quoted expression AccelForge evaluates."""
    return str(bits) if isinstance(bits, int) else f'"{bits!r}"'


def build_einsums(g: Graph, names: AfNames) -> tuple[list[AfEinsum], list[Skip]]:
    """Every expressible node as an einsum, and the nodes skipped with their reasons."""
    einsums, skipped = [], []
    for n in g.nodes:
        try:
            einsums.append(node_einsum(g, n, names))
        except Unexpressible as e:
            skipped.append(Skip(n.name, str(e)))
    return einsums, skipped


def workload_text(g: Graph, sha256: str | None = None, strict: bool = False) -> tuple[str, list[Skip], AfNames]:
    """The AccelForge workload YAML of ``g`` (deterministic), its skipped nodes and names."""
    names = allocate_names(g)
    einsums, skipped = build_einsums(g, names)
    check_strict(skipped, "AccelForge", strict)
    if not einsums:
        raise ExportError("no node of the graph can be expressed as an AccelForge einsum")
    af2graph_tensor = {v: k for k, v in names.tensor.items()}
    used_t = sorted({a.tensor for e in einsums for a in e.accesses},
                    key=lambda t: list(names.tensor.values()).index(t))
    tmap = g.tensor_map
    dim_ranks = {x for t in used_t for x in tmap[af2graph_tensor[t]].ranks}
    used_vars = [r for r, _ in g.ranks if any(names.var[r] in _vars_of(e) for e in einsums)]
    used_ranks = [r for r, _ in g.ranks if r in dim_ranks or r in used_vars]
    lines = stamp_lines("AccelForge workload", g, sha256 or graph_sha256(g))
    lines.append("# ranks: graph rank R is rank R.upper() indexed by variable R.lower(); "
                 "padded dimensions are in padded coordinates (einsum rank_sizes)")
    lines += [f"# renamed: {comment_text(a)} -> {b}" for a, b in names.renamed()]
    dens = [t.name for t in g.tensors if t.density is not None and names.tensor[t.name] in used_t]
    if dens:
        lines.append(f"# not represented: density of {', '.join(comment_text(d) for d in dens)}")
    live = [n.name for n in g.nodes if n.live and n.name in names.einsum]
    if live:
        lines.append(f"# not represented: live counts (written whole) of {', '.join(comment_text(n) for n in live)}")
    lines += skip_lines(skipped)
    lines.append("workload:")
    lines.append("  rank_sizes:")
    lines += [f"    {names.rank[r]}: {g.rank_sizes[r]}" for r in used_ranks]
    lines.append("  iteration_space_shape:")
    lines += [f"    {names.var[r]}: 0 <= {names.var[r]} < {g.rank_sizes[r]}" for r in used_vars]
    lines.append("  bits_per_value:")
    lines += [f"    {t}: {_bits_text(bits_of(tmap[af2graph_tensor[t]].dtype))}" for t in used_t]
    persistent = [t for t in used_t if tmap[af2graph_tensor[t]].role in ("weight", "constant")]
    if persistent:
        lines.append(f"  persistent_tensors: {yaml_scalar(' | '.join(persistent))}")
    lines.append("  einsums:")
    for e in einsums:
        lines.append(f"  - name: {e.name}")
        if e.copy:
            lines.append("    is_copy_operation: true")
        if e.rank_sizes:
            lines.append(f"    rank_sizes: {flow_map(e.rank_sizes)}")
        lines.append("    tensor_accesses:")
        lines += [f"    - {a.yaml()}" for a in e.accesses]
    return "\n".join(lines) + "\n", skipped, names


def _vars_of(e: AfEinsum) -> set[str]:
    import re

    return {w for a in e.accesses for _, v in a.projection for w in re.findall(r"[a-z][a-z0-9_]*", v)}


def export_accelforge(g: Graph, stem: str, sha256: str | None = None, strict: bool = False,
                      arch: str | None = None) -> ExportResult:
    """The workload file ``STEM.workload.yaml`` (and ``STEM.arch.yaml`` for hardware ``arch``)."""
    text, skipped, names = workload_text(g, sha256, strict)
    files = [Export(f"{stem}.workload.yaml", text)]
    if arch is not None:
        from .accelforge_arch import arch_text

        files.append(Export(f"{stem}.arch.yaml", arch_text(arch)))
    return ExportResult(tuple(files), tuple(skipped), names.renamed())
