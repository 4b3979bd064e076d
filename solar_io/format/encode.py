"""The canonical document of a ``Graph``: fixed key order, optional fields omitted (``decode``'s inverse).

A graph keeps the version it was read in, and its document is written in that version: fields the
version does not have (``kernel`` before 1.3, filled in when an older file is read) are left out,
so an archived file re-dumps byte for byte.
"""

from __future__ import annotations

from typing import Any

from ..graph import FORMAT_NAME, Graph, Node, Tensor
from .assumptions import encode_assumptions
from .kinds import SINCE, keys
from .repeat import usable
from .repeat_codec import encode_list, node_blocks, tensor_blocks
from .versioning import parse_version

_PRODUCER_STRINGS = keys("producer")[:-1]


def encode(g: Graph) -> dict:
    """The canonical document of ``g`` (fixed key order, optional fields omitted)."""
    doc: dict[str, Any] = {"format": FORMAT_NAME, "version": g.version}
    if g.name is not None:
        doc["name"] = g.name
    doc["producer"] = {k: getattr(g.producer, k) for k in _PRODUCER_STRINGS if getattr(g.producer, k) is not None}
    w = g.producer.workload
    if w is not None:
        wd: dict[str, Any] = {"definition": w.definition}
        if w.uuid is not None:
            wd["uuid"] = w.uuid
        if w.index is not None:
            wd["index"] = w.index
        if w.axes:
            wd["axes"] = dict(w.axes)
        if w.tolerance:
            wd["tolerance"] = dict(w.tolerance)
        doc["producer"]["workload"] = wd
    if g.assumptions:
        doc["assumptions"] = encode_assumptions(g.assumptions)
    doc["ranks"] = dict(g.ranks)
    blocks = usable(g)  # repeat blocks that still describe their items
    doc["tensors"] = encode_list(g.tensors, tensor_blocks(blocks), _encode_tensor)
    declared = parse_version(g.version) >= SINCE[("node", "kernel")]  # an older file keeps its bytes
    doc["nodes"] = encode_list(g.nodes, node_blocks(blocks), lambda n: _encode_node(n, declared))
    v = g.validation
    val: dict[str, Any] = {"status": v.status, "method": v.method}
    for k in ("reference", "model", "attempts", "seed", "rtol", "atol", "max_abs_error", "max_rel_error"):
        if getattr(v, k) is not None:
            val[k] = getattr(v, k)
    if v.reduced_ranks:
        val["reduced_ranks"] = dict(v.reduced_ranks)
    if v.unchecked:
        val["unchecked"] = [{"node": u.node, "op": u.op, "reason": u.reason} for u in v.unchecked]
    if v.reason is not None:
        val["reason"] = v.reason
    doc["validation"] = val
    return doc


def _encode_tensor(t: Tensor) -> dict:
    d: dict[str, Any] = {"name": t.name, "ranks": list(t.ranks), "dtype": t.dtype, "role": t.role}
    if t.density is not None:
        d["density"] = t.density
    if t.value is not None:
        d["value"] = t.value
    if t.generated:
        d["generated"] = True
    if t.updates is not None:
        d["updates"] = t.updates
    if t.prefilled is not None:
        d["prefilled"] = t.prefilled
    return d


def _encode_node(n: Node, kernels: bool = True) -> dict:
    d: dict[str, Any] = {"name": n.name, "kind": n.kind, "op": n.op}
    if n.location is not None:
        d["location"] = n.location
    if n.movement is not None:
        d["movement"] = n.movement
    if n.view:
        d["view"] = True
    if n.space or n.kind == "einsum" or n.movement == "copy":
        d["space"] = list(n.space)
    d["inputs"] = [str(a) for a in n.inputs]
    if n.kind == "opaque":  # fft nodes write one tensor: "output"
        d["outputs"] = [str(a) for a in n.outputs]
    else:
        d["output"] = str(n.outputs[0])
    if n.init is not None:
        d["init"] = n.init
    if n.map is not None:
        d["map"] = n.map
    if n.reduce is not None:
        d["reduce"] = n.reduce
    if n.scan is not None:
        d["scan"] = n.scan
    if n.axis is not None:
        d["axis"] = n.axis
    if n.pad:
        d["pad"] = {t: {r: [lo, hi] for r, lo, hi in dims} for t, dims in n.pad}
    if n.fill is not None:
        d["fill"] = n.fill
    if n.reason is not None:
        d["reason"] = n.reason
    if n.kernel is not None and kernels:
        d["kernel"] = n.kernel
    if n.phase is not None:
        d["phase"] = n.phase
    if n.live:
        d["live"] = dict(n.live)
    if n.fft is not None:
        d["fft"] = {"type": n.fft.type, "dims": list(n.fft.dims), "inverse": n.fft.inverse, "norm": n.fft.norm}
    if n.attrs:
        d["attrs"] = dict(n.attrs)
    return d

