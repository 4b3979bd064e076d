"""Conversion between parsed YAML documents and ``Graph``, with structural checks.

``decode`` checks the shape of the document (required and unknown fields, types, names,
enumerations, and that a file of an older minor version uses no field or map operator added
after it) and collects every problem as an ``Issue`` with its path, raising one
``GraphError``. The graph keeps the file's version (a newer minor reads as the current one).
The decoder's state and typed field reads are :mod:`.decoder`'s; one node record is decoded by
:mod:`.decode_node`. Semantic checks (references, DAG, index bounds) are in ``validate``.
The canonical document of a graph is :func:`solar_io.format.encode.encode`'s.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes
from ..errors import GraphError, Issue
from ..graph import (
    FORMAT_NAME,
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
from .assumptions import decode_assumptions
from .decode_node import KIND_FIELDS as KIND_FIELDS  # re-exported: the node decoder was part of this module
from .decode_node import NODE_KEYS as NODE_KEYS
from .decode_node import _node
from .decoder import _Decoder, _is, _kind, _names
from .kernels import declare_kernels
from .kinds import COMMON_NODE as COMMON_NODE
from .kinds import keys
from .limits import MAX_RANK_SIZE, check_index_space, check_numbers, echo
from .repeat_codec import decode_list
from .versioning import CURRENT, SINCE, VersionError, check_readable, parse_version, version_text

TOP_KEYS = keys("document")
PRODUCER_KEYS = keys("producer")
_PRODUCER_STRINGS = PRODUCER_KEYS[:-1]
WORKLOAD_KEYS = keys("workload")
TENSOR_KEYS = keys("tensor")
VALIDATION_KEYS = keys("validation")
UNCHECKED_KEYS = keys("unchecked")


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
    what = f"tensor {name}"
    dt = dec.get(d, "dtype", path, (str,), True, what)
    if dt is not None and dt not in dtypes.DTYPES:
        dec.err(path + ("dtype",), f"unknown dtype {dt!r}; known: {', '.join(dtypes.DTYPES)}")
    role = dec.get(d, "role", path, (str,), True, what)
    if role is not None and role not in ROLES:
        dec.err(path + ("role",), f"unknown role {role!r}; known: {', '.join(ROLES)}")
    density = dec.get(d, "density", path, (float,), False, what)
    if density is not None and not (0.0 < density <= 1.0):
        dec.err(path + ("density",), f"density must be in (0, 1], got {density}")
    value = dec.get(d, "value", path, (float,), False, what)
    if value is not None and role != "constant":
        dec.err(path + ("value",), "only tensors with role 'constant' may have a value")
    dec.since(d, "tensor", path)
    generated = dec.get(d, "generated", path, (bool,), False, what)
    if generated is not None and (role != "constant" or value is not None or generated is not True):
        dec.err(path + ("generated",), "only constants without a value may be generated, as 'generated: true'")
    updates = dec.get(d, "updates", path, (str,), False, what)
    if updates is not None and role != "output":
        dec.err(path + ("updates",), "only outputs may update an input in place ('updates: INPUT')")
    prefilled = dec.get(d, "prefilled", path, (float,), False, what)  # where it may stand: validate's rule
    if len(dec.issues) != n0:
        return None
    return Tensor(name, ranks, dt, role, None if density is None else float(density),
                  None if value is None else float(value), bool(generated), updates,
                  None if prefilled is None else float(prefilled))


def _nodes(dec: _Decoder, v: Any) -> tuple[tuple[Node, ...], tuple[Repeat, ...]]:
    return decode_list(dec, _list(dec, v, "nodes"), "nodes", lambda raw, path: _node(dec, raw, path))


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
