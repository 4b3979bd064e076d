"""Export an einsum graph to Timeloop: v0.4 problem files and a LoopTree einsum list.

Two formats, both deterministic and stamped with solar-io's version and the graph's hash:

- **Classic v0.4 problems**, one file per expressible node (``STEM.NN-NODE.problem.yaml``):
  ``problem: {version: 0.4, shape: {name, dimensions, coefficients, data_spaces}, instance}``.
  Timeloop's parser accepts only single-character dimension names, so each node's ranks are
  renamed to letters deterministically (the rank's own initial when free, else the first free
  letter A-Z, then a-z) and the renaming is written as a comment. Projections are
  sums of products ``[[P, Coef2], [R]]``: a coefficient other than 1 is a declared coefficient
  ``Coef<k>`` with default ``k`` (strides and dilations). Timeloop data spaces start at 0 and
  have no offsets: constant terms are dropped, so a padded or sliced dimension is stated in
  shifted coordinates (a padded input's size becomes ``(P-1)*stride + R``, Timeloop's own
  convention). Nodes with more than :data:`MAX_DATA_SPACES` tensors, or a negative
  coefficient, are skipped with the reason.
- **LoopTree fused workload** (``STEM.fused.yaml``): the whole graph as a list of einsums,
  ``problem: [{shape: {name, dimensions, data_spaces: [{name, dimensions, projection,
  read_write}]}, instance}, ...]`` with ISL projection strings (``"[ 2*P1 + R1 - 1, ... ]"``,
  offsets exact) and ISL instance constraints. Dimension names are unique over the whole
  workload (Timeloop's fused parser requires it): einsum ``i``'s rank ``R`` is ``R<i>``
  (``R_<i>`` when ``R`` ends in a digit),
  tensor ``x``'s dimension ``H`` is ``x_H``.

Nodes without an affine form (opaque, gathers, concat, non-refining reshapes) are skipped
in both formats with a warning (an error under ``strict``). A node with ``live`` counts (format 1.6:
only that many values of a rank reach an output) has them as its instance sizes, as the bounds count it.
"""

from __future__ import annotations

from ..affine import AffineExpr
from ..graph import Graph
from ..metrics import node_sizes
from .common import (
    Export,
    ExportError,
    ExportResult,
    Names,
    Skip,
    check_strict,
    comment_text,
    graph_sha256,
    identifier,
    skip_lines,
    stamp_lines,
    yaml_scalar,
)
from .forms import AffineForm, Unexpressible, affine_form

MAX_DATA_SPACES = 5
"""Data spaces per problem that a default Timeloop build accepts."""

_LETTERS = [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [chr(c) for c in range(ord("a"), ord("z") + 1)]


def dimension_letters(space: tuple[str, ...]) -> dict[str, str]:
    """Single-character Timeloop dimension names for ``space``, deterministically."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for r in space:
        first = r[0].upper() if r[0].isalpha() else ""
        letter = first if first and first not in taken else next(c for c in _LETTERS if c not in taken)
        out[r] = letter
        taken.add(letter)
    return out


def _sop(e: AffineExpr, letters: dict[str, str], coeffs: set[int]) -> str:
    terms = []
    for r, c in e.terms:
        if c < 0:
            raise Unexpressible(f"negative coefficient of {r} has no Timeloop form")
        if c == 1:
            terms.append(f"[{letters[r]}]")
        else:
            coeffs.add(c)
            terms.append(f"[{letters[r]}, Coef{c}]")
    return "[" + ", ".join(terms) + "]"


def problem_text(g: Graph, form: AffineForm, name: str, dspace: dict[str, str], head: list[str]) -> str:
    """The v0.4 problem file of one node's affine form."""
    if len(form.tensors) > MAX_DATA_SPACES:
        raise Unexpressible(f"{len(form.tensors)} tensors: more than {MAX_DATA_SPACES} data spaces")
    letters = dimension_letters(form.space)
    coeffs: set[int] = set()
    spaces = []
    for t in form.tensors:
        proj = [_sop(e, letters, coeffs) for e in t.exprs]
        spaces.append((dspace[t.tensor], proj, t.output))
    offsets = [f"{t.tensor}[{', '.join(str(e) for e in t.exprs)}]" for t in form.tensors
               if any(e.const for e in t.exprs)]
    lines = head + [f"# node: {comment_text(form.name)} ({comment_text(form.op)})",
                    "# dimensions: " + ", ".join(f"{r} -> {letters[r]}" for r in form.space)]
    renamed = [f"{t.tensor} -> {dspace[t.tensor]}" for t in form.tensors if dspace[t.tensor] != t.tensor]
    if renamed:
        lines.append("# data spaces: " + comment_text(", ".join(renamed)))
    if offsets:
        lines.append("# constant offsets dropped (shifted coordinates): " + comment_text("; ".join(offsets)))
    lines += ["problem:", "  version: 0.4", "  shape:", f"    name: {yaml_scalar(name)}",
              f"    dimensions: [{', '.join(letters[r] for r in form.space)}]"]
    if coeffs:
        lines.append("    coefficients:")
        for c in sorted(coeffs):
            lines += [f"    - name: Coef{c}", f"      default: {c}"]
    lines.append("    data_spaces:")
    for ds, proj, out in spaces:
        lines.append(f"    - name: {yaml_scalar(ds)}")
        lines.append("      projection:" + ("" if proj else " []"))
        lines += [f"      - {p}" for p in proj]
        if out:
            lines.append("      read_write: true")
    lines.append("  instance:")
    sizes = node_sizes(g, g.node_map[form.name])  # a node's live counts (format 1.6): the part some output uses
    lines += [f"    {letters[r]}: {sizes[r]}" for r in form.space]
    return "\n".join(lines) + "\n"


def _isl_expr(e: AffineExpr, dims: dict[str, str]) -> str:
    return str(AffineExpr(tuple((dims[r], c) for r, c in e.terms), e.const))


def fused_text(g: Graph, forms: list[AffineForm], enames: dict[str, str], dspace: dict[str, str],
               head: list[str]) -> str:
    """The LoopTree (fused) workload: every einsum with ISL projections and instances."""
    ns = Names(set(enames.values()) | set(dspace.values()))
    declared: set[str] = set()
    lines = head + ["problem:"]
    for i, form in enumerate(forms, start=1):
        dims = {r: ns.take(identifier(f"{r}_{i}" if r[-1].isdigit() else f"{r}{i}", "D")) for r in form.space}
        lines += ["- shape:", f"    name: {yaml_scalar(enames[form.name])}",
                  f"    dimensions: [{', '.join(dims[r] for r in form.space)}]", "    data_spaces:"]
        for t in form.tensors:
            name = dspace[t.tensor]
            lines.append(f"    - name: {yaml_scalar(name)}")
            if name not in declared:
                declared.add(name)
                tdims = [ns.take(identifier(f"{name}_{d}", "D")) for d in t.dims]
                lines.append(f"      dimensions: [{', '.join(tdims)}]")
            lines.append(f"      projection: \"[ {', '.join(_isl_expr(e, dims) for e in t.exprs)} ]\"")
            if t.output:
                lines.append("      read_write: true")
        sizes = node_sizes(g, g.node_map[form.name])
        bounds = " and ".join(f"0 <= {dims[r]} < {sizes[r]}" for r in form.space)
        lines.append(f"  instance: \"{bounds}\"")
    return "\n".join(lines) + "\n"


def export_timeloop(g: Graph, stem: str, sha256: str | None = None, strict: bool = False) -> ExportResult:
    """``STEM.NN-NODE.problem.yaml`` per expressible node and ``STEM.fused.yaml``."""
    sha = sha256 or graph_sha256(g)
    ns = Names()
    dspace = {t.name: ns.take(identifier(t.name, "T")) for t in g.tensors}
    ens = Names()
    enames = {n.name: ens.take(identifier(n.name, "E")) for n in g.nodes}
    forms, skipped, files = [], [], []
    head = stamp_lines("Timeloop v0.4 problem", g, sha)
    for n in g.nodes:
        try:
            form = affine_form(g, n)
            text = problem_text(g, form, enames[n.name], dspace, head)
        except Unexpressible as e:
            skipped.append(Skip(n.name, str(e)))
            try:
                forms.append(affine_form(g, n))  # may still have an einsum-list form
            except Unexpressible:
                pass
            continue
        forms.append(form)
        files.append(Export(f"{stem}.{len(files) + 1:02d}-{enames[n.name]}.problem.yaml", text))
    check_strict(skipped, "Timeloop", strict)
    if not forms:
        raise ExportError("no node of the graph has an affine form for Timeloop")
    fhead = stamp_lines("Timeloop LoopTree fused workload", g, sha) + [
        "# einsum i's rank R is dimension R<i>; tensor x's dimension D is x_D"]
    fskip = [s for s in skipped if s.node not in {f.name for f in forms}]
    files.append(Export(f"{stem}.fused.yaml", fused_text(g, forms, enames, dspace, fhead + skip_lines(fskip))))
    return ExportResult(tuple(files), tuple(skipped))
