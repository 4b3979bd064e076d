"""Conversion between parsed YAML documents and ``Graph``, with structural checks.

``decode`` checks the shape of the document (required and unknown fields, types, names,
enumerations, and that a file of an older minor version uses no field or map operator added
after it) and collects every problem as an ``Issue`` with its path, raising one
``GraphError``. The graph keeps the file's version (a newer minor reads as the current one).
Semantic checks (references, DAG, index bounds) are in ``validate``.
The canonical document of a graph is :func:`solar_io.format.encode.encode`'s.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes
from ..affine import Access, is_rank_name, is_tensor_name, parse_access
from ..errors import GraphError, Issue
from ..graph import (
    FORMAT_NAME,
    KINDS,
    MOVEMENTS,
    PHASES,
    ROLES,
    VALIDATION_STATUS,
    Graph,
    Node,
    Producer,
    Repeat,
    SourceWorkload,
    Tensor,
    Unchecked,
    Validation,
)
from ..ops import MAP_OPS, REDUCE_OPS
from .assumptions import decode_assumptions
from .kernels import declare_kernels
from .kinds import COMMON_NODE, KIND_RULES, keys
from .limits import MAX_RANK_SIZE, check_index_space, check_numbers, echo
from .repeat_codec import decode_list
from .versioning import CURRENT, SINCE, VersionError, check_readable, parse_version, too_new, version_text

TOP_KEYS = keys("document")
PRODUCER_KEYS = keys("producer")
_PRODUCER_STRINGS = PRODUCER_KEYS[:-1]
WORKLOAD_KEYS = keys("workload")
TENSOR_KEYS = keys("tensor")
NODE_KEYS = keys("node")
VALIDATION_KEYS = keys("validation")
UNCHECKED_KEYS = keys("unchecked")
#: Node fields each kind requires / also allows (:data:`.kinds.KIND_RULES`).
KIND_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    kind: (rule.required, rule.allowed) for kind, rule in KIND_RULES.items()}


class _Decoder:
    def __init__(self, version: tuple[int, int]):
        self.issues: list[Issue] = []
        self.version = version
        self.lenient = version > CURRENT  # fields of a newer minor version are ignored with a warning
        self.rank_names: set[str] = set()  # names already found valid
        self.tensor_names: set[str] = set()

    def err(self, path: tuple, msg: str) -> None:
        self.issues.append(Issue(path, msg))

    def warn(self, path: tuple, msg: str) -> None:
        self.issues.append(Issue(path, msg, "warning"))

    def mapping(self, v: Any, path: tuple, keys: tuple[str, ...], what: str) -> dict | None:
        if not isinstance(v, dict):
            self.err(path, f"{what} must be a mapping, got {_kind(v)}")
            return None
        for k in v:
            if k not in keys:
                if self.lenient:
                    self.warn(path + (str(k),), f"unknown field {k!r} (from a newer minor version) ignored")
                else:
                    self.err(path + (str(k),), f"unknown field {k!r} in {what}; allowed: {', '.join(keys)}")
        return v

    def since(self, d: dict, record: str, path: tuple) -> None:
        """Refuse fields of ``d`` that are newer than the file's version."""
        if self.version >= CURRENT:  # a current file may use every field
            return
        for k in d:
            msg = too_new(f"field {k!r}", SINCE[(record, k)], self.version) if (record, k) in SINCE else None
            if msg:
                self.err(path + (k,), msg)

    def get(self, d: dict, key: str, path: tuple, types: tuple, required: bool, what: str) -> Any:
        if key not in d:
            if required:
                self.err(path, f"missing required field {key!r} in {what}")
            return None
        v = d[key]
        if not _is(v, types):
            self.err(path + (key,), f"{key} must be {_names(types)}, got {_kind(v)}")
            return None
        return v

    def name(self, v: Any, path: tuple, rank: bool = False) -> str | None:
        if type(v) is str and v in (self.rank_names if rank else self.tensor_names):
            return v
        if not isinstance(v, str):
            self.err(path, f"must be a string name, got {_kind(v)}")
            return None
        ok = is_rank_name(v) if rank else is_tensor_name(v)
        if not ok:
            self.err(path, f"bad {'rank' if rank else ''} name {v!r}".replace("  ", " ")
                     + (": use letters, digits and _" if rank else ": use letters, digits and _ . : / -"))
            return None
        (self.rank_names if rank else self.tensor_names).add(v)
        return v

    def rank_list(self, v: Any, path: tuple) -> tuple[str, ...] | None:
        if not isinstance(v, list):
            self.err(path, f"must be a list of rank names, got {_kind(v)}")
            return None
        out = [self.name(r, path + (i,), rank=True) for i, r in enumerate(v)]
        if any(r is None for r in out):
            return None
        if len(set(out)) != len(out):
            self.err(path, f"rank listed twice in {echo(v)}")
            return None
        return tuple(out)  # type: ignore[arg-type]


def _is(v: Any, types: tuple) -> bool:
    if isinstance(v, bool):
        return bool in types
    if float in types and isinstance(v, int):
        return True
    return isinstance(v, types)


def _kind(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _names(types: tuple) -> str:
    return " or ".join({str: "a string", int: "an integer", float: "a number", bool: "a boolean",
                        list: "a list", dict: "a mapping"}[t] for t in types)


def decode(doc: Any, file: str | None = None) -> tuple[Graph, list[Issue]]:
    """Build a Graph from a parsed document; GraphError listing every structural problem.

    Returns the graph and the warnings (fields ignored from a newer minor version).
    """
    if not isinstance(doc, dict):
        raise GraphError([Issue((), f"an einsum-graph file must be a YAML mapping, got {_kind(doc)}")], file)
    if doc.get("format") != FORMAT_NAME:
        raise GraphError([Issue(("format",), f"format must be {FORMAT_NAME!r}, got {doc.get('format')!r}")],
                         file)
    try:
        version = parse_version(doc.get("version"))
        check_readable(version)
    except VersionError as e:
        raise GraphError([Issue(("version",), str(e))], file) from None
    dec = _Decoder(version)
    check_numbers(dec, doc, ())
    if dec.issues:  # the field decoders below convert numbers, which these would break
        raise GraphError(dec.issues, file)
    top = dec.mapping(doc, (), TOP_KEYS, "the document") or {}
    name = dec.get(top, "name", (), (str,), False, "the document")
    producer = _producer(dec, top.get("producer"))
    dec.since(top, "document", ())
    assumptions = decode_assumptions(top["assumptions"], dec) if "assumptions" in top else ()
    ranks = _ranks(dec, top.get("ranks"))
    tensors, tensor_blocks = _tensors(dec, top.get("tensors"))
    nodes, node_blocks = _nodes(dec, top.get("nodes"))
    validation = _validation(dec, top.get("validation"))
    check_index_space(dec, dict(ranks), top, tensors, nodes)
    errors = [i for i in dec.issues if i.severity == "error"]
    if errors:
        raise GraphError(dec.issues, file)
    if version < SINCE[("node", "kernel")]:  # migration: a file before 1.3 names its kernels by prefix
        nodes = declare_kernels(nodes)
    g = Graph(ranks=ranks, tensors=tensors, nodes=nodes, producer=producer, validation=validation,
              name=name, version=version_text(min(version, CURRENT)), assumptions=assumptions,
              repeats=tensor_blocks + node_blocks)
    return g, dec.issues


def _required_record(dec: _Decoder, v: Any, record: str, first_fields: str) -> dict | None:
    """The mapping of a required top-level record (``producer``, ``validation``), its fields checked
    against the file's version; None (with the error) when it is missing or not a mapping."""
    path = (record,)
    if v is None:
        dec.err(path, f"missing required field {record!r} ({first_fields}, ...)")
        return None
    d = dec.mapping(v, path, keys(record), record)
    if d is not None:
        dec.since(d, record, path)
    return d


def _producer(dec: _Decoder, v: Any) -> Producer:
    path = ("producer",)
    d = _required_record(dec, v, "producer", "tool, tool_version, frontend")
    if d is None:
        return Producer()
    vals = {k: dec.get(d, k, path, (str,), k in ("tool", "tool_version", "frontend"), "producer")
            for k in _PRODUCER_STRINGS}
    sha = vals["source_sha256"]
    if sha is not None and (len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha)):
        dec.err(path + ("source_sha256",), "source_sha256 must be 64 lowercase hex digits")
    if "workload" in d:
        vals["workload"] = _source_workload(dec, d["workload"], path + ("workload",))
    return Producer(**{k: v for k, v in vals.items() if v is not None})


def _source_workload(dec: _Decoder, v: Any, path: tuple) -> SourceWorkload | None:
    """``producer.workload`` (1.1): {definition, uuid, index, axes: {name: size}, tolerance: {name: value}}."""
    d = dec.mapping(v, path, WORKLOAD_KEYS, "producer.workload")
    if d is None:
        return None
    definition = dec.get(d, "definition", path, (str,), True, "producer.workload")
    uuid = dec.get(d, "uuid", path, (str,), False, "producer.workload")
    index = dec.get(d, "index", path, (int,), False, "producer.workload")
    pairs: dict[str, tuple] = {}
    for key, types in (("axes", (int,)), ("tolerance", (int, float, bool))):
        m = d.get(key, {})
        if not isinstance(m, dict):
            dec.err(path + (key,), f"{key} must be a mapping, got {_kind(m)}")
            continue
        good = []
        for name, x in m.items():
            if not isinstance(name, str) or not _is(x, types) or (key == "axes" and x < 0):
                dec.err(path + (key, str(name)), f"{key} values must be {_names(types)}"
                        f"{' >= 0' if key == 'axes' else ''}, got {_kind(x)}")
            else:
                good.append((name, x))
        pairs[key] = tuple(good)
    if definition is None:
        return None
    return SourceWorkload(definition, uuid, index, pairs.get("axes", ()), pairs.get("tolerance", ()))


def _ranks(dec: _Decoder, v: Any) -> tuple[tuple[str, int], ...]:
    path = ("ranks",)
    if v is None:
        dec.err(path, "missing required field 'ranks' (a mapping of rank name to size)")
        return ()
    if not isinstance(v, dict):
        dec.err(path, f"ranks must be a mapping of rank name to size, got {_kind(v)}")
        return ()
    out = []
    for k, size in v.items():
        if dec.name(k, path + (str(k),), rank=True) is None:
            continue
        if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= MAX_RANK_SIZE:
            dec.err(path + (k,), f"rank {k} must have a positive integer size at most 2**62, got {echo(size)}")
            continue
        out.append((k, size))
    return tuple(out)


def _list(dec: _Decoder, v: Any, key: str) -> list:
    if v is None:
        dec.err((key,), f"missing required field {key!r}")
        return []
    if not isinstance(v, list):
        dec.err((key,), f"{key} must be a list, got {_kind(v)}")
        return []
    return v


def _tensors(dec: _Decoder, v: Any) -> tuple[tuple[Tensor, ...], tuple[Repeat, ...]]:
    return decode_list(dec, _list(dec, v, "tensors"), "tensors", lambda t, path: _tensor(dec, t, path))


def _tensor(dec: _Decoder, t: Any, path: tuple) -> Tensor | None:
    d = dec.mapping(t, path, TENSOR_KEYS, "a tensor")
    if d is None:
        return None
    n0 = len(dec.issues)
    name = dec.name(d["name"], path + ("name",)) if "name" in d else dec.err(path, "missing 'name'")
    ranks = dec.rank_list(d["ranks"], path + ("ranks",)) if "ranks" in d else dec.err(path, "missing 'ranks'")
    dt = dec.get(d, "dtype", path, (str,), True, f"tensor {name}")
    if dt is not None and dt not in dtypes.DTYPES:
        dec.err(path + ("dtype",), f"unknown dtype {dt!r}; known: {', '.join(dtypes.DTYPES)}")
    role = dec.get(d, "role", path, (str,), True, f"tensor {name}")
    if role is not None and role not in ROLES:
        dec.err(path + ("role",), f"unknown role {role!r}; known: {', '.join(ROLES)}")
    density = dec.get(d, "density", path, (float,), False, f"tensor {name}")
    if density is not None and not (0.0 < density <= 1.0):
        dec.err(path + ("density",), f"density must be in (0, 1], got {density}")
    value = dec.get(d, "value", path, (float,), False, f"tensor {name}")
    if value is not None and role != "constant":
        dec.err(path + ("value",), "only tensors with role 'constant' may have a value")
    dec.since(d, "tensor", path)
    generated = dec.get(d, "generated", path, (bool,), False, f"tensor {name}")
    if generated is not None and (role != "constant" or value is not None or generated is not True):
        dec.err(path + ("generated",), "only constants without a value may be generated, as 'generated: true'")
    if len(dec.issues) != n0:
        return None
    return Tensor(name, ranks, dt, role, None if density is None else float(density),
                  None if value is None else float(value), bool(generated))


def _access(dec: _Decoder, v: Any, path: tuple) -> Access | None:
    if not isinstance(v, str):
        dec.err(path, f"a tensor access must be a string like x[B, 2*P + R], got {_kind(v)}")
        return None
    try:
        return parse_access(v)
    except ValueError as e:
        dec.err(path, str(e))
        return None


def _nodes(dec: _Decoder, v: Any) -> tuple[tuple[Node, ...], tuple[Repeat, ...]]:
    return decode_list(dec, _list(dec, v, "nodes"), "nodes", lambda raw, path: _node(dec, raw, path))


def _node(dec: _Decoder, raw: Any, path: tuple) -> Node | None:
    d = dec.mapping(raw, path, NODE_KEYS, "a node")
    if d is None:
        return None
    n0 = len(dec.issues)
    dec.since(d, "node", path)
    name = dec.name(d["name"], path + ("name",)) if "name" in d else dec.err(path, "missing 'name'")
    what = f"node {name}"
    kind = dec.get(d, "kind", path, (str,), True, what)
    if kind is not None and kind not in KINDS:
        dec.err(path + ("kind",), f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
        return None
    op = dec.get(d, "op", path, (str,), True, what)
    if kind is None:
        return None
    required, allowed = KIND_FIELDS[kind]
    for k in required:
        if k not in d:
            dec.err(path, f"{what} ({kind}) is missing required field {k!r}")
    for k in d:
        if k in NODE_KEYS and k not in required | allowed | COMMON_NODE:
            dec.err(path + (k,), f"field {k!r} is not allowed on a {kind} node")
    location = dec.get(d, "location", path, (str,), False, what)
    space = dec.rank_list(d["space"], path + ("space",)) if "space" in d else ()
    ins = dec.get(d, "inputs", path, (list,), False, what) or []
    inputs = tuple(_access(dec, a, path + ("inputs", j)) for j, a in enumerate(ins))
    if "output" in d:
        outputs: tuple = (_access(dec, d["output"], path + ("output",)),)
    else:
        outs = dec.get(d, "outputs", path, (list,), False, what) or []
        outputs = tuple(_access(dec, a, path + ("outputs", j)) for j, a in enumerate(outs))
    map_op = dec.get(d, "map", path, (str,), False, what)
    if map_op is not None and map_op not in MAP_OPS:
        dec.err(path + ("map",), f"unknown map op {map_op!r}; known: {', '.join(MAP_OPS)}")
    elif map_op is not None and (msg := too_new(f"map op {map_op!r}", MAP_OPS[map_op].since, dec.version)):
        dec.err(path + ("map",), msg)
    reduce_op = dec.get(d, "reduce", path, (str,), False, what)
    if reduce_op is not None and reduce_op not in REDUCE_OPS:
        dec.err(path + ("reduce",), f"unknown reduce op {reduce_op!r}; known: {', '.join(REDUCE_OPS)}")
    movement = dec.get(d, "movement", path, (str,), False, what)
    if movement is not None and movement not in MOVEMENTS:
        dec.err(path + ("movement",), f"unknown movement {movement!r}; known: {', '.join(MOVEMENTS)}")
    axis = dec.get(d, "axis", path, (str,), False, what)
    view = dec.get(d, "view", path, (bool,), False, what)
    fill = dec.get(d, "fill", path, (float,), False, what)
    reason = dec.get(d, "reason", path, (str,), False, what)
    scan = dec.name(d["scan"], path + ("scan",), rank=True) if "scan" in d else None
    init = dec.name(d["init"], path + ("init",)) if "init" in d else None
    pad = _pad(dec, d.get("pad"), path + ("pad",)) if "pad" in d else ()
    attrs = _attrs(dec, d.get("attrs"), path + ("attrs",)) if "attrs" in d else ()
    kernel = dec.get(d, "kernel", path, (str,), False, what)
    if kernel is not None and not kernel:
        dec.err(path + ("kernel",), "kernel must be a non-empty string (the source-op call's name)")
    phase = dec.get(d, "phase", path, (str,), False, what)
    if phase is not None and phase not in PHASES:
        dec.err(path + ("phase",), f"unknown phase {phase!r}; known: {', '.join(PHASES)}")
    if len(dec.issues) != n0 or any(a is None for a in inputs + outputs):
        return None
    return Node(name=name, kind=kind, op=op, inputs=inputs, outputs=outputs, space=space or (),
                map=map_op, reduce=reduce_op, movement=movement, axis=axis, view=bool(view),
                pad=pad, fill=None if fill is None else float(fill), reason=reason, location=location,
                attrs=attrs, scan=scan, init=init, kernel=kernel, phase=phase)


def _pad(dec: _Decoder, v: Any, path: tuple) -> tuple:
    if not isinstance(v, dict):
        dec.err(path, f"pad must map tensor names to {{rank: [low, high]}}, got {_kind(v)}")
        return ()
    out = []
    if not all(dec.name(t, path + (str(t),)) for t in v):
        return ()
    for t in sorted(v):
        dims = v[t]
        if not isinstance(dims, dict):
            dec.err(path + (str(t),), f"pad of {t} must map its ranks to [low, high], got {_kind(dims)}")
            continue
        entries = []
        if not all(dec.name(r, path + (t, str(r)), rank=True) for r in dims):
            continue
        for r in sorted(dims):
            lohi = dims[r]
            if (not isinstance(lohi, list) or len(lohi) != 2
                    or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_RANK_SIZE
                               for x in lohi)):
                dec.err(path + (str(t), str(r)), f"pad must be [low, high] with integers >= 0, got {lohi!r}")
                continue
            entries.append((str(r), lohi[0], lohi[1]))
        out.append((str(t), tuple(entries)))
    return tuple(out)


def _attrs(dec: _Decoder, v: Any, path: tuple) -> tuple:
    if not isinstance(v, dict):
        dec.err(path, f"attrs must be a mapping of names to scalars, got {_kind(v)}")
        return ()
    ok = True
    for k, x in v.items():
        if not isinstance(k, str) or not _is(x, (str, int, float, bool)):
            dec.err(path + (str(k),), "attrs map string names to strings, numbers or booleans")
            ok = False
    return tuple(sorted(v.items(), key=lambda kv: kv[0])) if ok else ()


def _validation(dec: _Decoder, v: Any) -> Validation:
    path = ("validation",)
    d = _required_record(dec, v, "validation", "status, method")
    if d is None:
        return Validation()
    status = dec.get(d, "status", path, (str,), True, "validation")
    if status is not None and status not in VALIDATION_STATUS:
        dec.err(path + ("status",), f"unknown status {status!r}; known: {', '.join(VALIDATION_STATUS)}")
    method = dec.get(d, "method", path, (str,), True, "validation")
    vals: dict[str, Any] = {k: dec.get(d, k, path, (str,), False, "validation")
                            for k in ("reference", "reason", "model")}
    vals["seed"] = dec.get(d, "seed", path, (int,), False, "validation")
    vals["attempts"] = dec.get(d, "attempts", path, (int,), False, "validation")
    if vals["attempts"] is not None and vals["attempts"] < 1:
        dec.err(path + ("attempts",), f"attempts must be a positive integer, got {vals['attempts']}")
    for k in ("rtol", "atol", "max_abs_error", "max_rel_error"):
        x = dec.get(d, k, path, (float,), False, "validation")
        if x is not None and not (x >= 0):
            dec.err(path + (k,), f"{k} must be >= 0, got {x}")
        vals[k] = None if x is None else float(x)
    reduced: tuple = ()
    if "reduced_ranks" in d:
        rr = d["reduced_ranks"]
        if not isinstance(rr, dict) or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0
                                               for s in rr.values()):
            dec.err(path + ("reduced_ranks",), "reduced_ranks must map rank names to positive sizes")
        elif not all(dec.name(k, path + ("reduced_ranks", str(k)), rank=True) for k in rr):
            pass
        else:
            reduced = tuple((str(k), s) for k, s in rr.items())
    return Validation(status=status or "skipped", method=method or "none", reduced_ranks=reduced,
                      unchecked=_decode_unchecked(d, path, dec), **vals)


def _decode_unchecked(d: dict, path: tuple, dec: _Decoder) -> tuple[Unchecked, ...]:
    """``validation.unchecked``: a list of {node, op, reason} (1.1)."""
    if "unchecked" not in d:
        return ()
    items = d["unchecked"]
    if not isinstance(items, list):
        dec.err(path + ("unchecked",), f"unchecked must be a list of {{node, op, reason}}, got {_kind(items)}")
        return ()
    out = []
    for i, item in enumerate(items):
        where = path + ("unchecked", i)
        m = dec.mapping(item, where, UNCHECKED_KEYS, "an unchecked entry")
        if m is None:
            continue
        fields = [dec.get(m, k, where, (str,), True, "an unchecked entry") for k in UNCHECKED_KEYS]
        if all(f is not None for f in fields):
            out.append(Unchecked(*fields))
    return tuple(out)
