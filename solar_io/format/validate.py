"""Semantic validation of a Graph, beyond the document's shape.

Checks: names unique; ranks declared and sized; accesses name existing tensors with one
index per dimension; affine indexes stay inside each tensor's extents over the iteration
space (plus any declared padding), which catches an off-by-one convolution padding; map
arity, reduce rules and output indexing per node kind; scans (``scan``) and scatters (an
``@t`` index in the output, with ``init``); every tensor produced at most once,
inputs/weights/constants never produced, outputs/intermediates produced exactly once and
before they are read (nodes are in topological order; a cycle is named as such); and that a
graph of version 1.0 uses nothing newer (fields, uses and map operators of 1.1).
"""

from __future__ import annotations

from ..affine import Access, AffineExpr, Indirect
from ..dtypes import DTYPES
from ..errors import Issue
from ..graph import PHASES, Graph, Node
from ..ops import MAP_OPS, REDUCE_OPS, arity_ok
from .kernels import split_kernels
from .kinds import fields_too_new
from .repeat import checked as checked_repeats
from .versioning import CURRENT, OUTPUT_INDIRECT_SINCE, VersionError, parse_version, too_new

SOURCE_ROLES = ("input", "weight", "constant")


def validate(g: Graph) -> list[Issue]:
    """Every semantic problem of ``g`` (errors and warnings); empty when valid."""
    (v := _Validator(g)).run()
    return v.issues


class _Validator:
    def __init__(self, g: Graph):
        self.g = g
        self.issues: list[Issue] = []
        self.sizes = g.rank_sizes
        self.tensors = g.tensor_map
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
        for k in split_kernels(g.nodes):
            self.err(("nodes",), f"kernel {k!r}: its nodes must stand consecutively in node order")
        self.issues += fields_too_new(g, self.version) + blocks  # fields against their versions; repeat blocks
        for j, u in enumerate(g.validation.unchecked):
            if u.node not in names:
                self.err(("validation", "unchecked", j, "node"), f"unchecked node {u.node!r} is not a graph node")
        self.dataflow()

    # ------------------------------------------------------------------ per node
    def node(self, i: int, n: Node) -> None:
        path = ("nodes", i)
        for j, r in enumerate(n.space):
            if r not in self.sizes:
                self.err(path + ("space", j), f"node {n.name}: rank {r} is not declared in ranks")
        for key, accesses in (("inputs", n.inputs), ("output" if n.kind != "opaque" else "outputs", n.outputs)):
            for j, a in enumerate(accesses):
                p = path + ((key, j) if key != "output" else (key,))
                if a.tensor not in self.tensors:
                    self.err(p, f"node {n.name}: tensor {a.tensor!r} is not declared in tensors")
        if any(a.tensor not in self.tensors or any(r not in self.sizes for r in self.tensors[a.tensor].ranks)
               for a in n.inputs + n.outputs):
            return  # already reported
        if any(r not in self.sizes for r in n.space):
            return
        self._since(path, n)
        getattr(self, f"_{n.kind}")(path, n)

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

    # ------------------------------------------------------------------ indexing
    def _is_index_input(self, n: Node, tensor: str) -> bool:
        return any(isinstance(e, Indirect) and e.tensor == tensor
                   for a in n.inputs + n.outputs[:1] if a.index for e in a.index)

    def _reduced(self, n: Node) -> list[str]:
        out = n.outputs[0]
        used = {e.terms[0][0] for e in out.index or () if isinstance(e, AffineExpr) and e.is_rank()}
        return [r for r in n.space if r not in used]

    def _numel(self, tensor: str) -> int:
        out = 1
        for s in self.g.shape(tensor):
            out *= s
        return out

    def _indexed(self, path: tuple, n: Node) -> None:
        space = set(n.space)
        if len(space) != len(n.space):
            self.err(path + ("space",), f"node {n.name}: a rank appears twice in the space")
        input_names = {a.tensor for a in n.inputs}
        for t, dims in n.pad:
            if t not in input_names:
                self.err(path + ("pad", t), f"node {n.name}: pad names {t!r}, which the node does not read")
            for r, _, _ in dims:
                if t in self.tensors and r not in self.tensors[t].ranks:
                    self.err(path + ("pad", t, r), f"node {n.name}: {r} is not a rank of {t}")
        for j, a in enumerate(n.inputs):
            self._access(path + ("inputs", j), n, a, space, input_names)
        o = n.outputs[0]
        opath = path + ("output",)
        if o.index is None:
            self.err(opath, f"node {n.name}: write the output with its index, e.g. {o.tensor}[...]")
            return
        t = self.tensors[o.tensor]
        if len(o.index) != len(t.ranks):
            self.err(opath, f"node {n.name}: output {o.tensor} has {len(t.ranks)} dims, index has {len(o.index)}")
            return
        seen: set[str] = set()
        # A scatter writes only the elements it selects: its plain ranks may cover part of a dimension.
        scatter = self._indirect_output(n)
        for d, e in enumerate(o.index):
            if isinstance(e, Indirect) and n.kind == "einsum":
                src = self.tensors.get(e.tensor)
                if e.tensor not in input_names or e.tensor == o.tensor or src is None:
                    self.err(opath, f"node {n.name}: @{e.tensor} must name an input of this node")
                elif DTYPES[src.dtype].family not in ("int", "uint"):
                    self.err(opath, f"node {n.name}: index tensor {e.tensor} must have an integer dtype")
                continue
            if not (isinstance(e, AffineExpr) and e.is_rank()):
                self.err(opath, f"node {n.name}: output index {e} must be a plain rank of the space"
                         + (" or @t (a scatter)" if n.kind == "einsum" else ""))
                continue
            r = e.terms[0][0]
            if r not in space or r in seen:
                self.err(opath, f"node {n.name}: output index {r} must be a distinct rank of the space")
                continue
            seen.add(r)
            want = self.sizes[t.ranks[d]]
            if scatter and self.sizes[r] > want:
                self.err(opath, f"node {n.name}: output {o.tensor} dim {d} ({t.ranks[d]}={want}) is indexed "
                         f"by {r}={self.sizes[r]}, beyond its extent")
            elif not scatter and self.sizes.get(r) != want:
                self.err(opath, f"node {n.name}: output {o.tensor} dim {d} ({t.ranks[d]}={want}) is indexed "
                         f"by {r}={self.sizes.get(r)}; every output element must be written once")

    def _access(self, path: tuple, n: Node, a: Access, space: set[str], input_names: set[str]) -> None:
        t = self.tensors[a.tensor]
        if a.index is None:
            self.err(path, f"node {n.name}: read {a.tensor} with an index, e.g. {a.tensor}[...]")
            return
        if len(a.index) != len(t.ranks):
            self.err(path, f"node {n.name}: {a.tensor} has {len(t.ranks)} dims {list(t.ranks)}, "
                     f"index has {len(a.index)}")
            return
        pad = n.pad_of(a.tensor)
        for d, e in enumerate(a.index):
            dim = t.ranks[d]
            if isinstance(e, Indirect):
                src = self.tensors.get(e.tensor)
                if e.tensor not in input_names or e.tensor == a.tensor or src is None:
                    self.err(path, f"node {n.name}: @{e.tensor} must name another input of this node")
                elif DTYPES[src.dtype].family not in ("int", "uint"):
                    self.err(path, f"node {n.name}: index tensor {e.tensor} must have an integer dtype")
                continue
            missing = [r for r in e.ranks if r not in space]
            if missing:
                self.err(path, f"node {n.name}: {a} uses {', '.join(missing)}, not in the space {list(n.space)}")
                continue
            lo, hi = e.bounds(self.sizes)
            plo, phi = pad.get(dim, (0, 0))
            extent = self.sizes[dim]
            if lo < -plo or hi > extent - 1 + phi:
                padded = f" with pad [{plo}, {phi}]" if (plo or phi) else ""
                self.err(path, f"node {n.name}: index {e} of {a.tensor} dim {dim} spans [{lo}, {hi}], outside "
                         f"[{-plo}, {extent - 1 + phi}] (size {extent}{padded})")

    # ------------------------------------------------------------------ dataflow
    def dataflow(self) -> None:
        g = self.g
        producer: dict[str, int] = {}
        for i, n in enumerate(g.nodes):
            for a in n.outputs:
                if a.tensor in producer:
                    self.err(("nodes", i), f"node {n.name}: tensor {a.tensor} is already produced by node "
                             f"{g.nodes[producer[a.tensor]].name}; every tensor is produced once")
                else:
                    producer[a.tensor] = i
        readers: dict[str, int] = {}
        late: list[tuple[int, str]] = []
        for i, n in enumerate(g.nodes):
            for a in n.inputs:
                readers[a.tensor] = readers.get(a.tensor, 0) + 1
                p = producer.get(a.tensor)
                if p is not None and p >= i:
                    late.append((i, a.tensor))
        for i, tensor in late:
            cycle = self._cycle(producer, i)
            n = g.nodes[i]
            if cycle:
                self.err(("nodes", i), f"cycle: {' -> '.join(cycle)}; the graph must be a DAG")
            elif producer[tensor] == i:
                self.err(("nodes", i), f"node {n.name} reads its own output {tensor}")
            else:
                self.err(("nodes", i), f"node {n.name} reads {tensor} before node "
                         f"{g.nodes[producer[tensor]].name} produces it; list nodes in topological order")
        for i, t in enumerate(g.tensors):
            p = producer.get(t.name)
            if t.role in SOURCE_ROLES and p is not None:
                self.err(("tensors", i, "role"), f"tensor {t.name} has role {t.role} but node "
                         f"{g.nodes[p].name} produces it; use role intermediate or output")
            elif t.role in ("output", "intermediate") and p is None:
                self.err(("tensors", i, "role"), f"tensor {t.name} has role {t.role} but no node produces it")
            elif t.role == "intermediate" and t.name not in readers:
                self.err(("tensors", i, "role"), f"intermediate tensor {t.name} is never read; make it an "
                         "output or remove it")
            elif t.role in ("input", "weight") and t.name not in readers:
                self.warn(("tensors", i), f"{t.role} tensor {t.name} is never read")
        for r, size in g.validation.reduced_ranks:
            if r not in self.sizes:
                self.err(("validation", "reduced_ranks", r), f"rank {r} is not declared in ranks")
            elif size > self.sizes[r]:
                self.err(("validation", "reduced_ranks", r), f"reduced size {size} of {r} exceeds its size "
                         f"{self.sizes[r]}")
        if not any(t.role == "output" for t in g.tensors):
            self.err(("tensors",), "the graph has no tensor with role output")

    def _cycle(self, producer: dict[str, int], start: int) -> list[str] | None:
        """Node names on a cycle through node ``start``, if there is one."""
        nodes = self.g.nodes
        stack = [(start, [nodes[start].name])]
        seen = set()
        while stack:
            i, trail = stack.pop()
            for a in nodes[i].inputs:
                p = producer.get(a.tensor)
                if p is None:
                    continue
                if p == start:
                    return trail + [nodes[start].name] if p != i else None
                if p not in seen:
                    seen.add(p)
                    stack.append((p, trail + [nodes[p].name]))
        return None
