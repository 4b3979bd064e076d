"""Rewrite a graph with its contraction chains in their best order, and check the rewrite numerically.

:func:`rewrite` replaces the nodes of every chain whose best order beats the written one by one
pairwise einsum per contraction of the best order, placed where the chain's last node was (every
operand is available there). The last new node keeps the chain's node name and output tensor; the
others are named ``<root>_1, <root>_2, ...``; new intermediates are named after the operands they
combine (``c_q__w_uq``; ``<output>_part<k>`` when that is long), hold the labels still needed, in
canonical order (:mod:`.reorder`), and take the chain's intermediate dtype. The chain's old
intermediates, read by no other node, are removed. Every new node carries the attribute
``reordered_from`` (the names of the nodes it replaces).

:func:`check` runs the original and the rewritten graph with the reference executor on the same
seeded random inputs and compares the graph outputs and every chain output with the tolerances of
the dtype the executor computes them in (float32, or float64 for fp64; integers exactly; see
:mod:`solar_io.frontends.common.validation`). It runs the whole graphs at full size
when they fit ``BUDGET_BYTES`` and ``BUDGET_MACS``; otherwise the whole graphs with every rank
capped at 64, 16 or 4 (the first cap at which both graphs are still valid and fit); otherwise (or
when the graph has opaque nodes, which the executor cannot run) the chains alone, as stand-alone
graphs, at the first cap that fits. The result says which.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

import numpy as np

from ..affine import Indirect
from ..dtypes import DTYPES, numpy_dtype
from ..executor import execute
from ..format.validate import validate
from ..frontends.common.validation import compare
from ..graph import Graph, Node, Tensor, Validation
from ..metrics import graph_metrics
from .reorder import ChainCosting, ChainReport, ReorderError, contractions, leaf_mask
from .reorder_chains import Chain

#: Most bytes (all tensors at their executing width) one executed graph may hold.
BUDGET_BYTES = 256 << 20
#: Most MACs of the two executed graphs together.
BUDGET_MACS = 4_000_000_000
#: Rank caps tried, in order, when the graphs are too big at full size.
CAPS = (64, 16, 4)
#: Longest name of a new intermediate built from its operands' names.
MAX_NAME = 40


@dataclass(frozen=True, slots=True)
class Check:
    """How the rewrite was checked: ``scope`` ``graph`` or ``chains``, the ranks reduced (empty:
    full sizes) and the comparison record (status, tolerances, largest errors)."""

    scope: str
    reduced: tuple[tuple[str, int], ...]
    compared: tuple[str, ...]
    validation: Validation

    @property
    def passed(self) -> bool:
        return self.validation.status == "passed"

    def describe(self) -> str:
        """One line: what ran at which sizes, and the result."""
        v = self.validation
        where = "the whole graph" if self.scope == "graph" else "the reordered chains alone"
        sizes = "at full sizes" if not self.reduced else "at reduced sizes " + ", ".join(
            f"{r}={n}" for r, n in self.reduced)
        result = f"{v.status}: max abs error {v.max_abs_error:.3g}, max rel error {v.max_rel_error:.3g} " \
                 f"(rtol {v.rtol:g}, atol {v.atol:g} x scale)" if v.status != "skipped" else f"skipped: {v.reason}"
        return f"reference executor, {where} {sizes}, seed {v.seed}, outputs {', '.join(self.compared)}: {result}"


# ---------------------------------------------------------------------------- rewrite


def _unique(base: str, taken: set[str]) -> str:
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _chain_nodes(g: Graph, report: ChainReport, tensor_names: set[str], node_names: set[str]
                 ) -> tuple[list[Node], list[Tensor]]:
    """The nodes and new intermediates of ``report.best`` for its chain."""
    chain = report.chain
    costing = ChainCosting(g, chain)
    steps = contractions(report.best.order)
    root = g.node_map[chain.root]
    names: dict[int, str] = {}
    tensors: list[Tensor] = []
    for k, t in enumerate(steps[:-1], start=1):
        mask = leaf_mask(t)
        base = "__".join(o.tensor for i, o in enumerate(chain.operands) if mask >> i & 1)
        names[mask] = _unique(base if len(base) <= MAX_NAME else f"{chain.output.tensor}_part{k}", tensor_names)
        tensors.append(costing.tensor(mask, names[mask]))
    attrs = (("reordered_from", ",".join(chain.nodes)),)
    nodes = []
    for k, t in enumerate(steps, start=1):
        last = k == len(steps)
        name = chain.root if last else _unique(f"{chain.root}_{k}", node_names)
        n = costing.node(t, name, None if last else names[leaf_mask(t)], names)  # type: ignore[arg-type]
        nodes.append(replace(n, location=root.location, attrs=attrs))
    return nodes, tensors


def rewrite(g: Graph, reports: list[ChainReport]) -> Graph:
    """``g`` with every chain of ``reports`` whose best order improves on the written one rewritten."""
    todo = [r for r in reports if r.improves]
    tensor_names = {t.name for t in g.tensors}
    node_names = {n.name for n in g.nodes}
    new_nodes: dict[str, list[Node]] = {}
    removed_nodes: set[str] = set()
    new_tensors: dict[str, list[Tensor]] = {}  # inserted before this tensor
    removed_tensors: set[str] = set()
    ranks = dict(g.ranks)
    for r in todo:
        chain: Chain = r.chain
        nodes, tensors = _chain_nodes(g, r, tensor_names, node_names)
        new_nodes[chain.root] = nodes
        removed_nodes.update(chain.nodes)
        removed_tensors.update(chain.intermediates)
        anchor = chain.intermediates[0] if chain.intermediates else chain.output.tensor
        new_tensors.setdefault(anchor, []).extend(tensors)
        ranks.update(chain.new_ranks)
    out_tensors: list[Tensor] = []
    for t in g.tensors:
        out_tensors.extend(new_tensors.get(t.name, ()))
        if t.name not in removed_tensors:
            out_tensors.append(t)
    out_nodes: list[Node] = []
    for n in g.nodes:
        if n.name in new_nodes:
            out_nodes.extend(new_nodes[n.name])
        elif n.name not in removed_nodes:
            out_nodes.append(n)
    new = replace(g, ranks=tuple(ranks.items()), tensors=tuple(out_tensors), nodes=tuple(out_nodes))
    errors = [i for i in validate(new) if i.severity == "error"]
    if errors:
        raise ReorderError(f"the reordered graph is not valid: {errors[0].format()}")
    return new


# ---------------------------------------------------------------------------- numerical check


def random_inputs(g: Graph, seed: int) -> dict[str, np.ndarray]:
    """Seeded values for every source tensor: floats ~ N(0, 1/n) with n the largest dimension,
    integers in [-2, 2] (0 where they index another tensor), booleans fair coins."""
    rng = np.random.default_rng(seed)
    indexes = {e.tensor for n in g.nodes for a in n.inputs for e in a.index or () if isinstance(e, Indirect)}
    produced = {a.tensor for n in g.nodes for a in n.outputs}
    out = {}
    for t in g.tensors:
        if t.name in produced or t.value is not None:
            continue
        shape = g.shape(t.name)
        family = DTYPES[t.dtype].family
        if family == "float":
            out[t.name] = (rng.standard_normal(shape) / np.sqrt(max(shape, default=1))).astype(numpy_dtype(t.dtype))
        elif family == "bool":
            out[t.name] = rng.random(shape) < 0.5
        elif t.name in indexes:
            out[t.name] = np.zeros(shape, dtype=np.int64)
        else:
            out[t.name] = rng.integers(-2, 3, size=shape, dtype=np.int64)
    return out


def _held_bytes(g: Graph) -> int:
    return sum(prod(g.shape(t.name)) * np.dtype(numpy_dtype(t.dtype)).itemsize for t in g.tensors)


def _fits(*graphs: Graph) -> bool:
    return (all(_held_bytes(x) <= BUDGET_BYTES for x in graphs)
            and sum(graph_metrics(x).macs for x in graphs) <= BUDGET_MACS)


def _capped(g: Graph, cap: int | None) -> Graph:
    return g if cap is None else replace(g, ranks=tuple((r, min(n, cap)) for r, n in g.ranks))


def _valid(g: Graph) -> bool:
    return not [i for i in validate(g) if i.severity == "error"]


def _standalone(g: Graph, node_names: set[str], outputs: set[str]) -> Graph:
    """The nodes ``node_names`` of ``g`` as a graph of their own: what they read and no one of them
    writes becomes an input, ``outputs`` the outputs."""
    nodes = tuple(n for n in g.nodes if n.name in node_names)
    written = {a.tensor for n in nodes for a in n.outputs}
    used = written | {a.tensor for n in nodes for a in n.inputs}
    tensors = []
    for t in g.tensors:
        if t.name not in used:
            continue
        if t.name in outputs:
            role = "output"
        elif t.name in written:
            role = "intermediate"
        else:
            role = t.role if t.role in ("input", "weight", "constant") else "input"
        tensors.append(replace(t, role=role))
    return replace(g, tensors=tuple(tensors), nodes=nodes)


def _run(old: Graph, new: Graph, compared: tuple[str, ...], seed: int) -> Validation:
    inputs = random_inputs(old, seed)
    want = execute(old, inputs, outputs="all")
    got = execute(new, inputs, outputs="all")
    # Both sides run in the executor's arithmetic (float32, or float64 for fp64): its tolerances apply.
    computed = replace(new, tensors=tuple(
        replace(t, dtype="fp32") if DTYPES[t.dtype].family == "float" and t.dtype != "fp64" else t
        for t in new.tensors))
    record, _ = compare(computed, {n: got[n] for n in compared}, {n: want[n] for n in compared},
                        reference="the graph before reordering", seed=seed)
    return record


def check(old: Graph, new: Graph, chains: list[Chain], seed: int = 0) -> Check:
    """Compare ``new`` (a rewrite of ``old``) with ``old`` on seeded random inputs (module docstring)."""
    roots = tuple(c.output.tensor for c in chains)
    outs = tuple(t.name for t in old.tensors if t.role == "output")
    compared = tuple(dict.fromkeys(outs + roots))
    if not graph_metrics(old).opaque:
        for cap in (None, *CAPS):
            a, b = _capped(old, cap), _capped(new, cap)
            if (cap is None or (_valid(a) and _valid(b))) and _fits(a, b):
                return Check("graph", _reduced(old, a), compared, _run(a, b, compared, seed))
    new_names = {n.name for n in new.nodes} - {n.name for n in old.nodes} | {c.root for c in chains}
    a = _standalone(old, {n for c in chains for n in c.nodes}, set(roots))
    b = _standalone(new, new_names, set(roots))
    for cap in (None, *CAPS):
        sa, sb = _capped(a, cap), _capped(b, cap)
        if _fits(sa, sb):
            return Check("chains", _reduced(old, sa), roots, _run(sa, sb, roots, seed))
    return Check("chains", (), roots, Validation("skipped", "none", reason="too large even with every rank at 4"))


def _reduced(full: Graph, small: Graph) -> tuple[tuple[str, int], ...]:
    sizes = full.rank_sizes
    return tuple((r, n) for r, n in small.ranks if r in sizes and sizes[r] != n)


def apply(g: Graph, reports: list[ChainReport], seed: int = 0) -> tuple[Graph, Check]:
    """The rewritten graph and its check; ReorderError when nothing improves or the check fails."""
    if not reports:
        raise ReorderError("nothing to reorder: the graph has no contraction chain of 3 or more operands")
    todo = [r for r in reports if r.improves]
    if not todo:
        raise ReorderError(f"nothing to reorder: every contraction chain ({len(reports)}) is already in its best "
                           f"order by {reports[0].objective}")
    new = rewrite(g, reports)
    result = check(g, new, [r.chain for r in todo], seed)
    if not result.passed:
        raise ReorderError(f"the reordered graph does not match the original: {result.describe()}")
    return new, result


__all__ = ["BUDGET_BYTES", "BUDGET_MACS", "CAPS", "Check", "apply", "check", "random_inputs", "rewrite"]
