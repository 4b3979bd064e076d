"""What an attention mask keeps: its values where the program fixes them, else the least any mask keeps.

A flash kernel given a causal, offset-causal (chunked prefill) or block-sparse mask skips the
key blocks the mask hides, so a lower bound may only charge the attention work at the positions
the mask keeps, never the full S x T rectangle. :func:`mask_fact` decides that share:

- **From its construction.** The mask's fx ancestors are evaluated on the CPU when none is a graph
  input or weight (``arange`` comparisons, ``tril``/``triu`` of ``ones``/``full``, ``where``, casts;
  export bakes the step's ``kv_len`` into the graph as a constant). A specialised index
  (``solar_io::specialised_index``, :mod:`..specialise`) contributes the values the values pass
  recorded (the graph's ``specialised`` assumption), not its source's.
- **Unknown values** (a mask computed from a graph input or weight, or larger than ``LIMIT``
  elements): any mask whose softmax is defined keeps at least one key per query row, and a
  kernel that reads the mask may skip every other position, so the provable share is ``1 / T``.
  (A row that keeps nothing has no defined output: torch's math kernel gives NaN.) Unless
  interval bounds on the values (:func:`_range`: a boolean input is in [0, 1], arithmetic with
  finite numbers, ``where``, ``masked_fill``, casts and views) show that no entry can be masked
  (an additive ``m.float() * -2.0``): then every position is kept.

Kept entries: ``True`` of a boolean mask; of an additive mask every entry above the dtype's most
negative finite value (``-inf`` and ``finfo.min``, Hugging Face's fill, add ``exp(.) = 0`` to
every row that keeps anything; counting them as skippable only lowers the bound).

>>> from torch.fx.experimental.proxy_tensor import make_fx
>>> g = make_fx(lambda: torch.arange(4)[None, :] <= (torch.arange(2) + 2)[:, None])()
>>> f = mask_fact(_result(g))
>>> f.kept, f.total, f.known  # query i sees keys 0..2+i: 3 + 4 of 8
(7, 8, True)
>>> g = make_fx(lambda: (torch.arange(4)[None, :] <= (torch.arange(2) + 2)[:, None]).expand(64, 1, 2, 4))()
>>> f = mask_fact(_result(g))  # the batch's copies of one mask: counted once, 64 times
>>> f.kept, f.total
(448, 512)
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_map

from ...common.masks import MaskFact, fact_of_keep, one_key_per_row
from ..tables import TABLES

#: Masks (and their ancestors) of more elements than this are not evaluated (their values count as unknown).
LIMIT = 1 << 27

_RANDOM = ("rand", "randn", "randint", "normal", "uniform", "bernoulli", "multinomial", "randperm", "exponential",
           "random", "cauchy", "log_normal", "geometric", "poisson", "dropout")


class _Unknown(Exception):
    pass


def _evaluate(node: torch.fx.Node, memo: dict[torch.fx.Node, Any]) -> Any:
    if node in memo:
        return memo[node]
    if node.op == "placeholder":
        raise _Unknown(f"graph input {node.name}")
    if node.op != "call_function":
        raise _Unknown(f"{node.op} {node.name}")
    val = node.meta.get("val")
    target = node.target
    if isinstance(val, torch.Tensor) and val.numel() > LIMIT and not getattr(target, "is_view", False):
        raise _Unknown(f"{node.name} has {val.numel()} elements (over {LIMIT})")  # a view allocates nothing
    name = getattr(getattr(target, "_schema", None), "name", None) or getattr(target, "__name__", str(target))
    if name.split("::")[-1].rstrip("_").removesuffix("_like") in _RANDOM:  # CPU draws are not the program's
        raise _Unknown(f"random op {name}")
    if target is torch.ops.solar_io.specialised_index.default:
        out: Any = torch.from_numpy(TABLES[int(node.args[2])].copy())
    else:
        def conv(a: Any) -> Any:
            if isinstance(a, torch.fx.Node):
                return _evaluate(a, memo)
            if isinstance(a, torch.device) and a.type == "meta":
                return torch.device("cpu")
            return a

        args, kwargs = tree_map(conv, tuple(node.args)), tree_map(conv, dict(node.kwargs))
        if target is operator.getitem:
            out = args[0][args[1]]
        else:
            if "device" in kwargs:
                kwargs["device"] = torch.device("cpu")
            try:
                out = target(*args, **kwargs)
            except Exception as e:  # an op that will not run on the CPU: its values stay unknown
                raise _Unknown(f"{name} raised {type(e).__name__}") from e
    memo[node] = out
    return out


_INF = float("inf")
_SAME = ("_to_copy", "to", "clone", "contiguous", "alias", "lift_fresh_copy", "expand_copy", "detach")


def _range(node: Any, values: dict[Any, Any], memo: dict[Any, tuple[float, float]]) -> tuple[float, float]:
    """Bounds ``(lo, hi)`` on every value of an fx node (a scalar is its own), by interval arithmetic
    over what the mask is built from: exact where the values are known, ``[0, 1]`` for a boolean
    input, unbounded for other inputs and weights and for ops not followed here."""
    if not isinstance(node, torch.fx.Node):
        return (float(node), float(node)) if isinstance(node, (bool, int, float)) else (-_INF, _INF)
    if node in memo:
        return memo[node]
    val = node.meta.get("val")
    out = (-_INF, _INF)
    try:
        v = _evaluate(node, values)
        if isinstance(v, torch.Tensor) and v.numel():
            out = (float(v.min()), float(v.max()))
    except _Unknown:
        name = getattr(getattr(node.target, "_schema", None), "name", "").split("::")[-1]
        args = node.args
        if isinstance(val, torch.Tensor) and val.dtype == torch.bool:
            out = (0.0, 1.0)
        elif node.op != "call_function" or not args:
            pass
        elif name in _SAME or getattr(node.target, "is_view", False):
            out = _range(args[0], values, memo)
        elif name in ("add", "sub", "mul", "neg", "where", "masked_fill") and all(
                isinstance(a, (torch.fx.Node, bool, int, float)) for a in args[:3]):
            r = [_range(a, values, memo) for a in args[:3]]
            if name == "neg":
                out = (-r[0][1], -r[0][0])
            elif name == "where":
                out = (min(r[1][0], r[2][0]), max(r[1][1], r[2][1]))
            elif name == "masked_fill":
                out = (min(r[0][0], r[2][0]), max(r[0][1], r[2][1]))
            elif all(abs(x) < _INF for x in (*r[0], *r[1])):  # finite operands only (no 0 * inf)
                (a0, a1), (b0, b1) = r[0], r[1]
                if name == "add":
                    out = (a0 + b0, a1 + b1)
                elif name == "sub":
                    out = (a0 - b1, a1 - b0)
                else:
                    ps = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
                    out = (min(ps), max(ps))
    memo[node] = out
    return out


def mask_fact(mask: Any) -> MaskFact:
    """What the mask given by the fx node ``mask`` keeps (the module docstring); ``mask`` is the fx
    node of ``attn_mask`` (a tensor whose last two dims are the query and key positions)."""
    try:
        values = _evaluate(mask, {})
        if not isinstance(values, torch.Tensor) or values.dim() < 1:
            raise _Unknown(f"{mask} is not a tensor")
    except _Unknown as e:
        val = mask.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dim() < 1:
            raise ValueError(f"attention mask {mask}: no tensor of at least one dimension") from e
        total = int(val.numel())
        lo, _ = _range(mask, {}, {})
        if val.dtype == torch.bool and lo >= 1 or val.dtype != torch.bool and lo > torch.finfo(val.dtype).min:
            return MaskFact(total, total, False, why=f"{e}; every value is at least {lo:g}, none masked")
        return one_key_per_row(total, int(val.shape[-1]), str(e))
    total = int(values.numel())
    base = values
    for d in range(values.dim() - 1):  # a broadcast (stride-0) lead dim repeats the rest: count it once
        if values.stride(d) == 0 and values.shape[d] > 1:
            base = base.narrow(d, 0, 1)
    with torch.no_grad():
        keep = base if base.dtype == torch.bool else base > torch.finfo(base.dtype).min
        return fact_of_keep(keep.numpy(), repeat=total // int(base.numel()))


def _selftest() -> bool:
    """The fraction of an offset-causal mask equals the brute-force count.

    >>> _selftest()
    True
    """
    c, past = 5, 3
    brute = sum(1 for i in range(c) for j in range(past + c) if j <= past + i)
    from torch.fx.experimental.proxy_tensor import make_fx

    g = make_fx(lambda: torch.full((c, past + c), float("-inf")).triu(past + 1))()
    return mask_fact(_result(g)).kept == brute == int(np.tril(np.ones((c, past + c)), past).sum())


def _result(gm: torch.fx.GraphModule) -> torch.fx.Node:
    """The node an fx graph returns (doctests)."""
    return next(n for n in gm.graph.nodes if n.op == "output").args[0]
