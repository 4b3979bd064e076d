"""Reading and writing repeat blocks (format 1.4; :mod:`.repeat` says what they mean).

A block is an entry ``{repeat: {var, start, step, count, nodes | tensors}}`` of the document's
``nodes`` or ``tensors`` list. Its items are decoded by the codec's own node/tensor decoder (every
check a plain item gets), with the slots ``{t}``, ``{t-1}`` read as name-safe tokens meanwhile;
the instances then take the block's place in the graph.

>>> from solar_io.graph import Repeat, Tensor
>>> encode_block(Repeat("t", 1, 1, 3, 0, tensors=(Tensor("h{t}", ("B",), "fp32", "intermediate"),)),
...              lambda t: {"name": t.name})
{'repeat': {'var': 't', 'start': 1, 'step': 1, 'count': 3, 'tensors': [{'name': 'h{t}'}]}}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..affine import Access
from ..graph import Node, Repeat
from .kinds import REPEAT_SINCE
from .limits import MAX_UNROLLED_ITEMS
from .repeat import SLOT, VAR_RE, instances, slots, tokens
from .versioning import too_new

SINCE = REPEAT_SINCE
KEYS = ("var", "start", "step", "count", "nodes", "tensors")


def is_block(raw: Any) -> bool:
    """True for a list entry that is a repeat block (``{repeat: {...}}``)."""
    return isinstance(raw, dict) and len(raw) == 1 and "repeat" in raw


def _tokenised(v: Any) -> Any:
    if isinstance(v, str):
        return tokens(v)
    if isinstance(v, list):
        return [_tokenised(x) for x in v]
    if isinstance(v, dict):
        return {_tokenised(k): _tokenised(x) for k, x in v.items()}
    return v


def _access(a: Access) -> Access:
    name = slots(a.tensor)
    return a if name == a.tensor else Access(name, a.index)


def _template_node(n: Node) -> Node:
    changes: dict[str, Any] = {"name": slots(n.name), "inputs": tuple(_access(a) for a in n.inputs),
                               "outputs": tuple(_access(a) for a in n.outputs)}
    if n.init is not None:
        changes["init"] = slots(n.init)
    if n.pad:
        changes["pad"] = tuple((slots(t), dims) for t, dims in n.pad)
    if n.kernel is not None:
        changes["kernel"] = slots(n.kernel)
    return replace(n, **changes)


def body_len(d: dict, items: str) -> int:
    """How many items a block's body lists (0 when it holds none or no list)."""
    body = d.get(items)
    return len(body) if isinstance(body, list) else 0


def decode_block(dec: Any, raw: dict, path: tuple, items: str, at: int,
                 decode_item: Callable[[Any, tuple], Any]) -> Repeat | None:
    """The block ``raw`` of the ``items`` list (``"nodes"`` or ``"tensors"``) whose first instance
    lands at index ``at``; errors go to ``dec``. ``decode_item(raw, path)`` decodes one item."""
    path = path + ("repeat",)
    if (msg := too_new("field 'repeat'", SINCE, dec.version)) is not None:
        dec.err(path, msg)
        return None
    d = dec.mapping(raw["repeat"], path, KEYS, "a repeat block")
    if d is None:
        return None
    var = dec.get(d, "var", path, (str,), True, "a repeat block")
    if var is not None and (not VAR_RE.match(var) or var in dec.rank_names):
        dec.err(path + ("var",), f"repeat var {var!r} must be letters and digits (e.g. t) and not a rank name")
        var = None
    nums = {k: dec.get(d, k, path, (int,), True, "a repeat block") for k in ("start", "step", "count")}
    if nums["count"] is not None and nums["count"] < 1:
        dec.err(path + ("count",), f"repeat count must be >= 1, got {nums['count']}")
    if nums["step"] == 0:
        dec.err(path + ("step",), "repeat step must be non-zero")
    size = body_len(d, items)
    if nums["count"] is not None and at + nums["count"] * size > MAX_UNROLLED_ITEMS:
        dec.err(path + ("count",), f"{nums['count']} instances of {size} {items} unroll past "
                f"{MAX_UNROLLED_ITEMS} {items} (the graph in memory is unrolled)")
        return None
    other = "tensors" if items == "nodes" else "nodes"
    if other in d:
        dec.err(path + (other,), f"a repeat block in the {items} list holds {items}, not {other}")
    body = dec.get(d, items, path, (list,), True, "a repeat block")
    if not body:
        if body is not None:
            dec.err(path + (items,), f"a repeat block needs at least one item in {items}")
        return None
    strays = sorted({m.group(1) for m in SLOT.finditer(str(body))} - {var})
    if strays:
        dec.err(path + (items,), f"slot {{{strays[0]}}} names no repeat variable (the block's var is {var!r})")
        return None
    n0 = len(dec.issues)
    decoded = [decode_item(_tokenised(x), path + (items, j)) for j, x in enumerate(body)]
    if len(dec.issues) != n0 or any(x is None for x in decoded) or var is None or None in nums.values() \
            or nums["count"] < 1 or nums["step"] == 0:
        return None
    if items == "nodes":
        return Repeat(var, nums["start"], nums["step"], nums["count"], at,
                      nodes=tuple(_template_node(n) for n in decoded))
    return Repeat(var, nums["start"], nums["step"], nums["count"], at,
                  tensors=tuple(replace(t, name=slots(t.name)) for t in decoded))


def decode_list(dec: Any, entries: list, key: str, decode_item: Callable[[Any, tuple], Any]
                ) -> tuple[tuple, tuple[Repeat, ...]]:
    """Every item of the document's ``key`` list (blocks expanded) and its blocks."""
    out: list = []
    blocks: list[Repeat] = []
    for i, raw in enumerate(entries):
        if is_block(raw):
            r = decode_block(dec, raw, (key, i), key, len(out), decode_item)
            if r is not None:
                blocks.append(r)
                out.extend(instances(r))
            continue
        item = decode_item(raw, (key, i))
        if item is not None:
            out.append(item)
    return tuple(out), tuple(blocks)


def encode_block(r: Repeat, encode_item: Callable[[Any], dict]) -> dict:
    """The document entry of block ``r``."""
    items = "nodes" if r.nodes else "tensors"
    return {"repeat": {"var": r.var, "start": r.start, "step": r.step, "count": r.count,
                       items: [encode_item(x) for x in (r.nodes or r.tensors)]}}


def encode_list(items: tuple, blocks: list[Repeat], encode_item: Callable[[Any], dict]) -> list[dict]:
    """The document list of ``items`` with each block's instances written as the block."""
    starts = {r.at: r for r in blocks}
    out: list[dict] = []
    i = 0
    while i < len(items):
        r = starts.get(i)
        if r is None:
            out.append(encode_item(items[i]))
            i += 1
        else:
            out.append(encode_block(r, encode_item))
            i += r.count * r.size
    return out


def node_blocks(repeats: tuple[Repeat, ...]) -> list[Repeat]:
    """The blocks of nodes."""
    return [r for r in repeats if r.nodes]


def tensor_blocks(repeats: tuple[Repeat, ...]) -> list[Repeat]:
    """The blocks of tensor declarations."""
    return [r for r in repeats if r.tensors]


def canonical(repeats: tuple[Repeat, ...] | list[Repeat]) -> tuple[Repeat, ...]:
    """Blocks in the order a file gives them: tensor blocks, then node blocks, each by position."""
    return tuple(sorted(tensor_blocks(tuple(repeats)), key=lambda r: r.at)) + \
        tuple(sorted(node_blocks(tuple(repeats)), key=lambda r: r.at))


__all__ = ["SINCE", "canonical", "decode_block", "decode_list", "encode_block", "encode_list", "is_block",
           "node_blocks", "tensor_blocks"]
