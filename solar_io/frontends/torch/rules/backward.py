"""Backward ops of a training step that have no decomposition into ops we lower.

``aten.convolution_backward`` computes up to three gradients of ``y = conv(x, w) + b``, each its
own kernel (as cuDNN runs them), each named ``<call>_grad_input`` / ``_grad_weight`` / ``_grad_bias``:

- grad input: the transposed convolution of ``dy`` with ``w`` (same stride, padding, dilation,
  groups), lowered by the ``conv`` rule's ``conv_transpose`` (for a transposed forward: the forward
  ``conv``). MACs: the forward's.
- grad weight: ``dw[K, C, R] = sum_{N, P} dy[N, K, P] * x[N, C, s*P + d*R - p]``: the forward's
  iteration space with the output and the weight swapped (groups split as ``[G, Kg]``). For a
  transposed forward the roles of ``x`` and ``dy`` swap. MACs: the forward's.
- grad bias: ``sum_{N, P} dy``.

``FlopCounterMode`` counts the same: one forward convolution per requested gradient of input or
weight. Other backward ops (layer/group/batch norm, softmax, embedding, activations, losses) are
left to torch's core-ATen decompositions, which lower to einsums.

>>> from solar_io.frontends.torch.registry import RULES
>>> "aten.convolution_backward" in RULES
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...common.builder import access, family
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule
from .conv import _tuple, conv, conv_transpose


class _Part(LowerCtx):
    """The lowering context for one result of a multi-result op: its own name (so each result is
    its own kernel) and the dtype and shape of that result."""

    def __init__(self, ctx: LowerCtx, index: int, tag: str):  # noqa: D107 (shares every field of ctx)
        self.__dict__.update(ctx.__dict__)
        self.index, self.tag = index, tag

    @property
    def name(self) -> str:
        return f"{self.node.name}_{self.tag}"

    def out_dtype(self, i: int | None = None) -> str:
        return super().out_dtype(self.index if i is None else i)

    def out_shape(self, i: int | None = None) -> tuple[int, ...]:
        return super().out_shape(self.index if i is None else i)


def weight_grad(ctx: LowerCtx, dy: T, x: T, w_shape: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], groups: int) -> T:
    """``dw[K, C, R...] = sum_{N, P} dy[N, K, P...] * x[N, C, s*P + d*R - p]`` (see the module docstring)."""
    dys, dyr, xs = ctx.shape(dy), ctx.ranks(dy), ctx.shape(x)
    nsp = len(dys) - 2
    k_out, cg, ksz = w_shape[0], w_shape[1], list(w_shape[2:])
    stride, dilation, pads = _tuple(stride, nsp), _tuple(dilation, nsp), _tuple(padding, nsp)
    N, outs = dyr[0], list(dyr[2:])
    taken = {N, *outs}
    if groups == 1:
        head = [dyr[1]]
        dy_k: list[str] = [dyr[1]]
    else:
        g = ctx.b.rank("G", groups, taken)
        kg = ctx.b.rank(family(dyr[1]), k_out // groups, taken | {g})
        head = [g, kg]
        dy_k = [f"{k_out // groups}*{g} + {kg}"]
    taken |= set(head)
    cr = ctx.b.rank("C", cg, taken)
    taken.add(cr)
    kdims = []
    for i in range(nsp):
        kdims.append(ctx.b.rank(["KD", "KH", "KW"][i - nsp] if nsp <= 3 else "KW", ksz[i], taken))
        taken.add(kdims[-1])
    x_idx: list[str] = [N, cr if groups == 1 else f"{cg}*{head[0]} + {cr}"]
    border: dict[str, tuple[int, int]] = {}
    xr = ctx.ranks(x)
    for i in range(nsp):
        s, d, lo = stride[i], dilation[i], pads[i]
        x_idx.append(f"{s}*{outs[i]} + {d}*{kdims[i]} - {lo}")
        reach_hi = s * (dys[2 + i] - 1) + d * (ksz[i] - 1) - lo
        over = max(0, reach_hi - (xs[2 + i] - 1))
        if lo or over:
            border[xr[2 + i]] = (lo, over)
    out_ranks = head + [cr] + kdims
    grouped = groups != 1
    dw = ctx.tensor(out_ranks, ctx.out_dtype(), "grouped" if grouped else None)
    ctx.b.einsum(dw.name, ctx.op, out_ranks + [N] + outs, [access(dy.name, [N] + dy_k + outs), access(x.name, x_idx)],
                 access(dw.name, out_ranks), "mul", "add", pad={x.name: border} if border else None,
                 attrs={"stride": stride, "padding": pads, "dilation": dilation, "groups": groups,
                        "gradient": "weight"}, location=ctx.location)
    return ctx.reshape(dw, list(w_shape)) if grouped else dw


@rule("aten.convolution_backward")
def convolution_backward(ctx: LowerCtx, a: Args) -> tuple[Any, Any, Any]:
    dy, x, w = a.grad_output, a.input, a.weight
    mask = list(a.output_mask)
    if isinstance(a.padding, str) or len(ctx.shape(dy)) < 3:
        raise NoLowering("convolution_backward with string padding or an unbatched input")
    nsp = len(ctx.shape(dy)) - 2
    ws = ctx.shape(w)
    gi = gw = gb = None
    if mask[0]:
        part = _Part(ctx, 0, "grad_input")
        if a.transposed:
            gi = conv(part, dy, w, None, a.stride, a.padding, a.dilation, a.groups, part.out_shape())
        else:
            gi = conv_transpose(part, dy, w, None, a.stride, a.padding, a.output_padding, a.dilation, a.groups,
                                part.out_shape())
    if mask[1]:
        part = _Part(ctx, 1, "grad_weight")
        if a.transposed:  # y = conv_transpose(x, w): dw[Cin, Cout/g, R] pairs x as the gradient with dy
            gw = weight_grad(part, x, dy, ws, a.stride, a.padding, a.dilation, a.groups)
        else:
            gw = weight_grad(part, dy, x, ws, a.stride, a.padding, a.dilation, a.groups)
    if mask[2]:
        part = _Part(ctx, 2, "grad_bias")
        gb = part.reduce(dy, [0] + list(range(2, 2 + nsp)), False, "add", dtype=part.out_dtype())
    return gi, gw, gb
