"""Decoding one node record of ``nodes``: its kind's fields, its accesses and its operators.

:func:`_node` checks a node mapping against the fields its kind requires and allows
(:data:`KIND_FIELDS`, from :data:`.kinds.KIND_RULES`), parses its accesses (``x[B, 2*P + R]``),
checks its map, reduce and movement operators (a map operator newer than the file's version is
refused), its ``pad``, ``attrs``, ``kernel`` and ``phase``, and builds the ``Node``; it returns None
when anything is wrong (the problems are in the decoder's issues).

>>> from solar_io.format.decoder import _Decoder
>>> node = {"name": "y", "kind": "einsum", "op": "add", "space": ["M"], "inputs": ["a[M]", "b[M]"],
...         "output": "y[M]", "map": "add", "reduce": "none"}
>>> _node(_Decoder((1, 4)), node, ("nodes", 0)).inputs[1].tensor
'b'
>>> dec = _Decoder((1, 4))
>>> _node(dec, {**node, "movement": "copy"}, ("nodes", 0)) is None, dec.issues[0].message
(True, "field 'movement' is not allowed on a einsum node")
"""

from __future__ import annotations

from typing import Any

from ..affine import Access, parse_access
from ..fourier import NORMS, TYPES, Fourier
from ..graph import KINDS, MOVEMENTS, PHASES, Node
from ..ops import MAP_OPS, REDUCE_OPS
from .decoder import _Decoder, _is, _kind
from .kinds import COMMON_NODE, KIND_RULES, keys
from .limits import MAX_RANK_SIZE
from .versioning import too_new

NODE_KEYS = keys("node")
#: Node fields each kind requires / also allows (:data:`.kinds.KIND_RULES`).
KIND_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    kind: (rule.required, rule.allowed) for kind, rule in KIND_RULES.items()}
#: Node fields a node of each kind may have: its required and allowed ones and the common ones.
_PERMITTED: dict[str, frozenset[str]] = {kind: req | ok | COMMON_NODE for kind, (req, ok) in KIND_FIELDS.items()}


def _access(dec: _Decoder, v: Any, path: tuple) -> Access | None:
    if not isinstance(v, str):
        dec.err(path, f"a tensor access must be a string like x[B, 2*P + R], got {_kind(v)}")
        return None
    try:
        return parse_access(v)
    except ValueError as e:
        dec.err(path, str(e))
        return None


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
    required = KIND_FIELDS[kind][0]
    for k in required:
        if k not in d:
            dec.err(path, f"{what} ({kind}) is missing required field {k!r}")
    permitted = _PERMITTED[kind]
    for k in d:
        if k in NODE_KEYS and k not in permitted:
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
    live = _live(dec, d.get("live"), path + ("live",)) if "live" in d else ()
    fft = _fft(dec, d.get("fft"), path + ("fft",)) if "fft" in d else None
    if len(dec.issues) != n0 or any(a is None for a in inputs + outputs):
        return None
    return Node(name=name, kind=kind, op=op, inputs=inputs, outputs=outputs, space=space or (),
                map=map_op, reduce=reduce_op, movement=movement, axis=axis, view=bool(view),
                pad=pad, fill=None if fill is None else float(fill), reason=reason, location=location,
                attrs=attrs, scan=scan, init=init, kernel=kernel, phase=phase, live=live, fft=fft)


def _fft(dec: _Decoder, v: Any, path: tuple) -> Fourier | None:
    d = dec.mapping(v, path, keys("fft"), "an fft record")
    if d is None:
        return None
    what = "the fft record"
    kind = dec.get(d, "type", path, (str,), True, what)
    if kind is not None and kind not in TYPES:
        dec.err(path + ("type",), f"unknown fft type {kind!r}; known: {', '.join(TYPES)}")
    dims = dec.get(d, "dims", path, (list,), True, what)
    if dims is not None and (not dims or not all(type(x) is int and x >= 0 for x in dims)):
        dec.err(path + ("dims",), f"fft dims must be a non-empty list of dim positions (integers >= 0), got {dims!r}")
    inverse = dec.get(d, "inverse", path, (bool,), True, what)
    norm = dec.get(d, "norm", path, (str,), True, what)
    if norm is not None and norm not in NORMS:
        dec.err(path + ("norm",), f"unknown fft norm {norm!r}; known: {', '.join(NORMS)}")
    if None in (kind, dims, inverse, norm):
        return None
    return Fourier(kind, tuple(dims), bool(inverse), norm)


def _live(dec: _Decoder, v: Any, path: tuple) -> tuple:
    if not isinstance(v, dict) or not v:
        dec.err(path, f"live must map ranks to how many of their values are computed, got {_kind(v)}")
        return ()
    out = []
    for r, n in v.items():
        if not dec.name(r, path + (str(r),), rank=True):
            continue
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_RANK_SIZE:
            dec.err(path + (str(r),), f"live count of {r} must be an integer >= 1, got {n!r}")
            continue
        out.append((str(r), n))
    return tuple(out)


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
