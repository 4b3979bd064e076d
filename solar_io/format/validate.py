"""Semantic validation of a Graph, beyond the document's shape.

Checks: names unique; ranks declared and sized; accesses name existing tensors with one
index per dimension; affine indexes stay inside each tensor's extents over the iteration
space (plus any declared padding), which catches an off-by-one convolution padding; map
arity, reduce rules and output indexing per node kind; scans (``scan``) and scatters (an
``@t`` index in the output, with ``init``); every tensor produced at most once,
inputs/weights/constants never produced, outputs/intermediates produced exactly once and
before they are read (nodes are in topological order; a cycle is named as such); and that a
graph of version 1.0 uses nothing newer (fields, uses and map operators of 1.1).

This module runs the checks and holds those of each node kind; the checks of accesses and their
index bounds are :mod:`.validate_index`'s, those of the dataflow :mod:`.validate_dataflow`'s (both
mixed into the one validator).
"""

from __future__ import annotations

from math import isfinite

from ..affine import AffineExpr, Indirect
from ..dtypes import DTYPES
from ..errors import Issue
from ..fourier import problem as fft_problem
from ..graph import PHASES, Graph, Node, Tensor
from ..node_form import local_form
from ..node_lists import MASKED_WRITES, NODE_LISTS, UNCHARGED
from ..ops import MAP_OPS, REDUCE_OPS, arity_ok
from .kernels import split_kernels
from .kinds import fields_too_new
from .repeat import checked as checked_repeats
from .validate_dataflow import SOURCE_ROLES as SOURCE_ROLES  # re-exported: defined with the dataflow checks
from .validate_dataflow import _DataflowChecks
from .validate_index import _IndexChecks
from .versioning import CURRENT, OUTPUT_INDIRECT_SINCE, VersionError, parse_version, too_new

_LISTED = {UNCHARGED: "uncharged", MASKED_WRITES: "masked-write"}  # the word an error names each list by


def validate(g: Graph) -> list[Issue]:
    """Every semantic problem of ``g`` (errors and warnings); empty when valid."""
    (v := _Validator(g)).run()
    return v.issues


class _Validator(_IndexChecks, _DataflowChecks):
    def __init__(self, g: Graph):
        self.g = g
        self.issues: list[Issue] = []
        self.sizes = g.rank_sizes
        self.tensors = g.tensor_map
        self._clean: set[tuple] = set()  # node keys (form, tensors' ranks and dtypes) whose checks found nothing
        try:
            self.version = parse_version(g.version)
        except VersionError as e:
            self.version = (1, 1)
            self.err(("version",), str(e))

    def err(self, path: tuple, msg: str) -> None:
        self.issues.append(Issue(path, msg))

    def warn(self, path: tuple, msg: str) -> None:
        self.issues.append(Issue(path, msg, "warning"))

    def run(self) -> None:
        g = self.g
        seen: set[str] = set()
        for i, t in enumerate(g.tensors):
            if t.name in seen:
                self.err(("tensors", i, "name"), f"tensor name {t.name!r} is used twice")
            seen.add(t.name)
            if t.dtype not in DTYPES:
                self.err(("tensors", i, "dtype"), f"unknown dtype {t.dtype!r}")
            for j, r in enumerate(t.ranks):
                if r not in self.sizes:
                    self.err(("tensors", i, "ranks", j), f"tensor {t.name}: rank {r} is not declared in ranks")
            if t.value is not None and t.role != "constant":
                self.err(("tensors", i, "value"), f"tensor {t.name}: only constants may have a value")
            if t.generated and (t.role != "constant" or t.value is not None):
                self.err(("tensors", i, "generated"), f"tensor {t.name}: only constants without a value may be "
                                                      "generated")
            if t.prefilled is not None and (t.role != "output" or t.updates is not None or not isfinite(t.prefilled)):
                self.err(("tensors", i, "prefilled"), f"tensor {t.name}: only an output that updates no input may be "
                                                      "prefilled, with a finite value ('prefilled: 0.0')")
        self.updates()
        names: set[str] = set()
        blocks, covered = checked_repeats(g)  # repeat blocks; the nodes their instances 0, 1 and last check
        for i, n in enumerate(g.nodes):
            if n.name in names:
                self.err(("nodes", i, "name"), f"node name {n.name!r} is used twice")
            names.add(n.name)
            if i not in covered:
                self.node(i, n)
            if n.phase is not None and n.phase not in PHASES:
                self.err(("nodes", i, "phase"), f"node {n.name}: unknown phase {n.phase!r}; known: {', '.join(PHASES)}")
            if n.fft is not None and n.kind != "fft":
                self.err(("nodes", i, "fft"), f"node {n.name}: field 'fft' is not allowed on a {n.kind} node")
            for r, c in n.live:
                if r not in n.space or c > self.sizes.get(r, 0):
                    self.err(("nodes", i, "live", r), f"node {n.name}: live rank {r} must be a rank of its space "
                                                      f"with at most its size ({self.sizes.get(r)}) values, got {c}")
        for k in split_kernels(g.nodes):
            self.err(("nodes",), f"kernel {k!r}: its nodes must stand consecutively in node order")
        self.issues += fields_too_new(g, self.version) + blocks  # fields against their versions; repeat blocks
        for j, u in enumerate(g.validation.unchecked):
            if u.node not in names:
                self.err(("validation", "unchecked", j, "node"), f"unchecked node {u.node!r} is not a graph node")
        for j, a in enumerate(g.assumptions):  # work left uncharged must name nodes
            for k, v in a.values:
                stray = [n for n in (v if isinstance(v, tuple) else (v,)) if str(n) not in names]
                if k in NODE_LISTS and stray:
                    self.err(("assumptions", j, "values", k), f"{_LISTED[k]} node {stray[0]!r} is not a graph node")
        self.dataflow()

    def updates(self) -> None:
        """``updates: X`` (1.5): an output that is input X updated in place has X's shape and dtype, and
        no two outputs are the same input's memory."""
        g, owner = self.g, {}  # input -> the output that is its memory
        for i, t in enumerate(g.tensors):
            if t.updates is None:
                continue
            x, path = self.tensors.get(t.updates), ("tensors", i, "updates")
            if t.role != "output":
                self.err(path, f"tensor {t.name}: only outputs may update an input in place")
            elif x is None or x.role != "input":
                self.err(path, f"tensor {t.name}: updates {t.updates!r}, which is not an input of the graph")
            elif self._shape(x) != self._shape(t) or x.dtype != t.dtype:
                self.err(path, f"tensor {t.name}: updates input {x.name} in place but is {t.dtype}"
                               f"{self._shape(t)}, the input {x.dtype}{self._shape(x)}")
            elif t.updates in owner:
                self.err(path, f"tensor {t.name}: input {t.updates} is already updated in place by output "
                               f"{owner[t.updates]}")
            else:
                owner[t.updates] = t.name

    def _shape(self, t: Tensor) -> list[int | None]:
        return [self.sizes.get(r) for r in t.ranks]

    # ------------------------------------------------------------------ per node
    def node(self, i: int, n: Node) -> None:
        path = ("nodes", i)
        sizes, tensors = self.sizes, self.tensors
        accesses = n.inputs + n.outputs
        if not (all(r in sizes for r in n.space) and all(a.tensor in tensors for a in accesses)):
            self._undeclared(path, n)
            return
        if any(r not in sizes for a in accesses for r in tensors[a.tensor].ranks):
            return  # reported with the tensor
        # A node of the same form over tensors of the same ranks and dtypes as one found clean (the same
        # layer again under other names) is clean too: its checks read nothing else (node_form).
        # (a graph of repeat blocks checks a few instances of each: the forms of the others are not needed)
        form, names = local_form(n) if self.g.repeats else self.g.node_forms[i]
        key = (form, tuple((tensors[t].ranks, tensors[t].dtype) if t in tensors else None for t in names))
        if key in self._clean:
            return
        before = len(self.issues)
        self._since(path, n)
        getattr(self, f"_{n.kind}")(path, n)
        if len(self.issues) == before:
            self._clean.add(key)

    def _undeclared(self, path: tuple, n: Node) -> None:
        """The errors of a node that names a rank or a tensor nothing declares."""
        for j, r in enumerate(n.space):
            if r not in self.sizes:
                self.err(path + ("space", j), f"node {n.name}: rank {r} is not declared in ranks")
        for key, accesses in (("inputs", n.inputs), ("outputs" if n.kind == "opaque" else "output", n.outputs)):
            for j, a in enumerate(accesses):
                if a.tensor not in self.tensors:
                    self.err(path + ((key, j) if key != "output" else (key,)),
                             f"node {n.name}: tensor {a.tensor!r} is not declared in tensors")

    def _since(self, path: tuple, n: Node) -> None:
        if self.version >= CURRENT:  # a current graph may use everything
            return
        if self._indirect_output(n) and (msg := too_new("an @ index in an output", OUTPUT_INDIRECT_SINCE,
                                                          self.version)):
            self.err(path + ("output",), f"node {n.name}: {msg}")
        if n.map in MAP_OPS and (msg := too_new(f"map op {n.map!r}", MAP_OPS[n.map].since, self.version)):
            self.err(path + ("map",), f"node {n.name}: {msg}")

    def _einsum(self, path: tuple, n: Node) -> None:
        op = MAP_OPS[n.map]  # type: ignore[index]
        n_data = sum(1 for a in n.inputs if not self._is_index_input(n, a.tensor) and a.tensor != n.init)
        if not arity_ok(op, n_data):
            want = "2 or more" if op.arity is None else str(op.arity)
            self.err(path + ("inputs",), f"node {n.name}: map {n.map} takes {want} inputs "
                     f"(besides index tensors read through @name{' and init' if n.init else ''}), got {n_data}")
        self._indexed(path, n)
        if self._indirect_output(n) or n.init is not None:
            self._scatter(path, n)
            return
        reduced = self._reduced(n)
        if n.scan is not None:
            self._scan(path, n)
        if n.reduce == "none" and reduced:
            self.err(path + ("reduce",), f"node {n.name}: reduce none, but ranks {', '.join(reduced)} are not "
                     "in the output; give a reduce op or index the output by them")
        if n.reduce in ("argmax", "argmin"):
            if len(reduced) != 1:
                self.err(path + ("reduce",), f"node {n.name}: {n.reduce} needs exactly one reduced rank, "
                         f"got {len(reduced)}")
            if DTYPES[self.tensors[n.outputs[0].tensor].dtype].family not in ("int", "uint"):
                self.err(path + ("output",), f"node {n.name}: {n.reduce} writes indices; the output dtype "
                         "must be an integer type")

    def _scan(self, path: tuple, n: Node) -> None:
        out_ranks = [e.terms[0][0] for e in n.outputs[0].index or () if isinstance(e, AffineExpr) and e.is_rank()]
        if n.scan not in out_ranks:
            self.err(path + ("scan",), f"node {n.name}: scan rank {n.scan} must be a rank of the space that "
                     "indexes the output (a scan keeps the rank)")
        if REDUCE_OPS[n.reduce].ufunc is None:  # type: ignore[index]
            self.err(path + ("scan",), f"node {n.name}: a scan needs reduce add, mul, max or min, got {n.reduce}")

    def _scatter(self, path: tuple, n: Node) -> None:
        """An output indexed through @t: points write the selected elements; the rest keep ``init``."""
        out = n.outputs[0]
        if n.scan is not None:
            self.err(path + ("scan",), f"node {n.name}: a scan cannot write through an @ index")
        if not self._indirect_output(n):
            self.err(path + ("init",), f"node {n.name}: init is only for outputs written through an @ index "
                     "(a scatter)")
            return
        if n.reduce != "none" and REDUCE_OPS[n.reduce].ufunc is None:  # type: ignore[index]
            self.err(path + ("reduce",), f"node {n.name}: a scatter combines with reduce none, add, mul, max "
                     f"or min, got {n.reduce}")
        if n.init is None:
            self.err(path, f"node {n.name}: an output written through an @ index needs init: the input tensor "
                     "whose values the elements no point writes keep")
            return
        inits = [a for a in n.inputs if a.tensor == n.init]
        if len(inits) != 1 or inits[0].index != out.index:
            self.err(path + ("init",), f"node {n.name}: init {n.init} must be read exactly once, with the "
                     f"output's index: {n.init}[{', '.join(str(e) for e in out.index or ())}]")
            return
        t, o = self.tensors[n.init], self.tensors[out.tensor]
        if self.g.shape(t.name) != self.g.shape(o.name) or t.dtype != o.dtype:
            self.err(path + ("init",), f"node {n.name}: init {t.name} ({t.dtype} {list(self.g.shape(t.name))}) "
                     f"must have the dtype and shape of output {o.name} ({o.dtype} {list(self.g.shape(o.name))})")

    def _indirect_output(self, n: Node) -> bool:
        return n.kind == "einsum" and any(isinstance(e, Indirect) for e in n.outputs[0].index or ())

    def _data_movement(self, path: tuple, n: Node) -> None:
        out = self.tensors[n.outputs[0].tensor]
        for j, a in enumerate(n.inputs):
            t = self.tensors[a.tensor]
            if t.dtype != out.dtype and not self._is_index_input(n, a.tensor):
                self.err(path + ("inputs", j), f"node {n.name}: data movement cannot change dtype "
                         f"({t.dtype} -> {out.dtype}); use an einsum with map identity to cast")
        if n.view and (n.movement == "concat" or n.pad or n.fill is not None
                       or any(self._is_index_input(n, a.tensor) for a in n.inputs)):
            self.err(path + ("view",), f"node {n.name}: a concat, pad or gather copies data; it cannot be a view")
        if n.axis is not None and n.movement != "concat":
            self.err(path + ("axis",), f"node {n.name}: axis is only for concat")
        if n.movement == "copy":
            if not n.space and self.tensors[n.outputs[0].tensor].ranks:
                self.err(path, f"node {n.name}: a copy needs a space")
            self._indexed(path, n)
            data = [a for a in n.inputs if not self._is_index_input(n, a.tensor)]
            if len(data) != 1:
                self.err(path + ("inputs",), f"node {n.name}: a copy reads exactly one data tensor "
                         f"(plus index tensors used as @name), got {len(data)}")
            reduced = self._reduced(n)
            if reduced:
                self.err(path + ("space",), f"node {n.name}: a copy reduces nothing, but ranks "
                         f"{', '.join(reduced)} are not in the output")
            return
        for key, a in [("inputs", a) for a in n.inputs] + [("output", n.outputs[0])]:
            if a.index is not None:
                self.err(path + (key,), f"node {n.name}: a {n.movement} takes whole tensors; write "
                         f"{a.tensor!r} without an index")
        if n.pad or n.fill is not None or n.space:
            self.err(path, f"node {n.name}: a {n.movement} has no space, pad or fill")
        if n.movement == "reshape":
            if len(n.inputs) != 1:
                self.err(path + ("inputs",), f"node {n.name}: a reshape reads exactly one tensor")
            elif self._numel(n.inputs[0].tensor) != self._numel(out.name):
                self.err(path, f"node {n.name}: reshape from {self._numel(n.inputs[0].tensor)} to "
                         f"{self._numel(out.name)} elements")
        else:
            self._concat(path, n)

    def _concat(self, path: tuple, n: Node) -> None:
        out = self.tensors[n.outputs[0].tensor]
        if n.axis not in out.ranks:
            self.err(path + ("axis",), f"node {n.name}: concat axis {n.axis!r} is not a rank of "
                     f"its output {out.name} {list(out.ranks)}")
            return
        k = out.ranks.index(n.axis)
        oshape = self.g.shape(out.name)
        total = 0
        for j, a in enumerate(n.inputs):
            shape = self.g.shape(a.tensor)
            if len(shape) != len(oshape) or any(
                    s != o for d, (s, o) in enumerate(zip(shape, oshape, strict=True)) if d != k):
                self.err(path + ("inputs", j), f"node {n.name}: input {a.tensor} {list(shape)} does not fit "
                         f"output {list(oshape)} outside axis {n.axis}")
                return
            total += shape[k]
        if total != oshape[k]:
            self.err(path + ("axis",), f"node {n.name}: inputs sum to {total} along {n.axis}, output has {oshape[k]}")

    def _fft(self, path: tuple, n: Node) -> None:
        """One whole input and output of float dtypes whose shapes fit the transform (:mod:`solar_io.fourier`)."""
        if n.fft is None:
            self.err(path, f"node {n.name}: an fft node needs its fft record (type, dims, inverse, norm)")
            return
        if len(n.inputs) != 1 or len(n.outputs) != 1 or any(a.index is not None for a in n.inputs + n.outputs):
            self.err(path + ("inputs",), f"node {n.name}: an fft node reads one whole tensor and writes one; write "
                     "them without an index")
            return
        x, y = self.tensors[n.inputs[0].tensor], self.tensors[n.outputs[0].tensor]
        for key, t in (("inputs", x), ("output", y)):
            if t.dtype in DTYPES and DTYPES[t.dtype].family != "float":  # an unknown dtype: the tensor's error
                self.err(path + (key,), f"node {n.name}: an fft transforms floating-point values; "
                         f"{t.name} is {t.dtype}")
        if msg := fft_problem(n.fft, self.g.shape(x.name), self.g.shape(y.name)):
            self.err(path + ("fft",), f"node {n.name}: {msg}")

    def _opaque(self, path: tuple, n: Node) -> None:
        for key, accesses in (("inputs", n.inputs), ("outputs", n.outputs)):
            for j, a in enumerate(accesses):
                if a.index is not None:
                    self.err(path + (key, j), f"node {n.name}: opaque nodes take whole tensors; write "
                             f"{a.tensor!r} without an index")
        if not n.outputs:
            self.err(path + ("outputs",), f"node {n.name}: an opaque node must write at least one tensor")
        if not (n.reason or "").strip():
            self.err(path + ("reason",), f"node {n.name}: say why the op is opaque")
