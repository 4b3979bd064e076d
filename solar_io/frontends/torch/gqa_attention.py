"""A fused attention op with a mask *and* grouped-query heads, for training captures.

PyTorch has no such kernel: its memory-efficient kernel takes a mask but its meta backward gives
K and V gradients the query's heads, and the flash kernel takes no mask. A lower bound must still
price what a fused kernel does (FlexAttention runs a mask with grouped-query heads): never write
the ``S x T`` probabilities, read K, V once per KV head and the mask once. So a training capture
(``train.py``'s ``FlashAttention`` mode) routes ``scaled_dot_product_attention(..., attn_mask=M,
enable_gqa=True)`` with fewer K/V heads than query heads to ``solar_io::masked_attention``, whose
autograd formula calls ``solar_io::masked_attention_backward``; ``rules/flash.py`` lowers both as
the memory-efficient kernel's forward and backward (scores recomputed), grouped.

The eager implementations below are the math they stand for (run only if someone calls the ops on
real tensors; validation runs the model's own ``scaled_dot_product_attention``)::

    S = Q K^T * scale (+ B, or where(M, ., -inf)), lse = logsumexp(S), O = exp(S - lse) V
    P = exp(S - lse), dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale,
    dK = dS^T Q * scale (dK, dV summed over each KV head's query group), dB = dS (summed over the
    dims B broadcasts)

>>> q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 5, 8)
>>> m = torch.rand(3, 5) > 0.3
>>> m[:, 0] = True
>>> o, lse = torch.ops.solar_io.masked_attention(q, k, k, m, 0.3)
>>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=m, scale=0.3, enable_gqa=True)
>>> bool(torch.allclose(o, ref, atol=1e-5)), tuple(lse.shape)
(True, (1, 4, 3))
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def _scores(query: Tensor, key: Tensor, attn_bias: Tensor, scale: float) -> Tensor:
    g = query.shape[1] // key.shape[1]
    s = (query.float() @ key.float().repeat_interleave(g, 1).transpose(-1, -2)) * scale
    return s.masked_fill(~attn_bias, float("-inf")) if attn_bias.dtype == torch.bool else s + attn_bias.float()


def _sum_to(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``x`` summed over the leading dims ``shape`` lacks and the dims it has as 1."""
    lead = x.dim() - len(shape)
    x = x.sum(tuple(range(lead))) if lead else x
    dims = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    return x.sum(dims, keepdim=True) if dims else x


def _group_sum(x: Tensor, heads: int) -> Tensor:
    """[B, H, T, E] summed over each KV head's query group: [B, heads, T, E]."""
    b, h = x.shape[:2]
    return x.reshape(b, heads, h // heads, *x.shape[2:]).sum(2)


@torch.library.custom_op("solar_io::masked_attention", mutates_args=())
def masked_attention(query: Tensor, key: Tensor, value: Tensor, attn_bias: Tensor,
                     scale: float) -> tuple[Tensor, Tensor]:
    """(O, lse) of masked attention with grouped-query heads (see the module docstring)."""
    s = _scores(query, key, attn_bias, scale)
    lse = torch.logsumexp(s, -1)
    g = query.shape[1] // key.shape[1]
    return (torch.exp(s - lse[..., None]) @ value.float().repeat_interleave(g, 1)).to(query.dtype), lse


@masked_attention.register_fake
def _(query: Tensor, key: Tensor, value: Tensor, attn_bias: Tensor, scale: float) -> tuple[Tensor, Tensor]:
    return (query.new_empty((*query.shape[:-1], value.shape[-1])),
            query.new_empty(query.shape[:-1], dtype=torch.float32))


@torch.library.custom_op("solar_io::masked_attention_backward", mutates_args=())
def masked_attention_backward(grad_out: Tensor, query: Tensor, key: Tensor, value: Tensor, attn_bias: Tensor,
                              out: Tensor, logsumexp: Tensor, scale: float,
                              bias_grad: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(dQ, dK, dV, dB) of :func:`masked_attention` (dB empty unless ``bias_grad``)."""
    hk, g = key.shape[1], query.shape[1] // key.shape[1]
    p = torch.exp(_scores(query, key, attn_bias, scale) - logsumexp[..., None])
    d_o = grad_out.float()
    dv = _group_sum(p.transpose(-1, -2) @ d_o, hk)
    dp = d_o @ value.float().repeat_interleave(g, 1).transpose(-1, -2)
    du = p * (dp - (d_o * out.float()).sum(-1, keepdim=True))
    dq = (du @ key.float().repeat_interleave(g, 1)) * scale
    dk = _group_sum(du.transpose(-1, -2) @ query.float(), hk) * scale
    db = _sum_to(du, tuple(attn_bias.shape)).to(attn_bias.dtype) if bias_grad else attn_bias.new_empty((0,))
    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype), db


@masked_attention_backward.register_fake
def _(grad_out: Tensor, query: Tensor, key: Tensor, value: Tensor, attn_bias: Tensor, out: Tensor,
      logsumexp: Tensor, scale: float, bias_grad: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return (torch.empty_like(query), torch.empty_like(key), torch.empty_like(value),
            torch.empty_like(attn_bias) if bias_grad else attn_bias.new_empty((0,)))


def _setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    q, k, v, b, scale = inputs
    ctx.save_for_backward(q, k, v, b, output[0], output[1])
    ctx.scale, ctx.bias_grad = scale, bool(b.requires_grad)


def _backward(ctx: Any, grad_out: Tensor, _grad_lse: Tensor) -> tuple:
    q, k, v, b, o, lse = ctx.saved_tensors
    dq, dk, dv, db = masked_attention_backward(grad_out, q, k, v, b, o, lse, ctx.scale, ctx.bias_grad)
    return dq, dk, dv, db if ctx.bias_grad else None, None


masked_attention.register_autograd(_backward, setup_context=_setup)

__all__ = ["masked_attention", "masked_attention_backward"]
