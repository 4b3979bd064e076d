"""NVFP4 ``torch._scaled_mm`` on the CPU: two packed fp4 operands with 1x16 block scales.

On a Blackwell GPU, ``torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=...)`` with ``a``
``float4_e2m1fn_x2 [M, K/2]``, ``b`` ``float4_e2m1fn_x2 [K/2, N]`` (the transpose of an ``[N, K/2]``
weight) and ``float8_e4m3fn`` scales, one per 16 consecutive ``k`` of a row, is cuBLAS's block-scaled
fp4 GEMM::

    out[m, n] = sum_k E2M1[a[m, k]] * scale_a[m, k // 16] * E2M1[b[k, n]] * scale_b[n, k // 16]

(fp32 accumulation; then ``* scale_result``, ``+ bias``, cast to ``out_dtype``). Two fp4 values share
a byte, the first (even ``k``) in the low nibble. The scales are passed flat in cuBLAS's *blocked*
layout (what the SOL-ExecBench references' ``convert_to_blocked_format_for_pytorch_scaled_mm`` writes,
rows a multiple of 128, columns of 4): scale ``S[128*i + 32*p + q, 4*j + c]`` of an ``[R, C]`` matrix
is element ``(((i*C/4 + j)*32 + q)*4 + p)*4 + c`` of the flat tensor, so the flat tensor viewed as
``[R/128, C/4, 32, 4, 4]`` and permuted ``(0, 3, 2, 1, 4)`` is ``S``.

PyTorch has no CPU kernel for it ("Invalid scaling configuration"), so a program that calls it could
not be run here. :class:`CpuNvfp4` (a dispatch mode) answers exactly that call on CPU tensors with
:func:`scaled_mm_nvfp4`, the formula above in torch ops; the capture's eager runs (the values pass,
validation, the divergence rerun) run under it, and the graph's lowering (``rules/scaled_mm.py``)
spells the same formula as einsums, so validation compares the two. Every other call runs as is.

    >>> # a: fp4x2 [256, 32], b: fp4x2 [32, 128] (K = 64), scales fp8 [256*4], [128*4]
    >>> # with CpuNvfp4(): torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)  -> bf16 [256, 128]
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: The 16 values of an E2M1 code (sign bit 3, two exponent bits, one mantissa bit; OCP MX spec).
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
#: Elements of ``k`` one fp8 scale covers.
BLOCK = 16
#: The blocked scale layout's tile: rows, columns.
TILE = (128, 4)
_SCALED_MM = torch.ops.aten._scaled_mm.default


def is_nvfp4(a: Any, b: Any, scale_a: Any, scale_b: Any) -> bool:
    """Whether a ``_scaled_mm`` call is the NVFP4 form this module knows: fp4 operands ``[M, K/2]``,
    ``[K/2, N]``, e4m3 scales of ``M*K/16`` and ``N*K/16`` elements in the blocked layout."""
    ts = (a, b, scale_a, scale_b)
    if not all(isinstance(t, torch.Tensor) for t in ts):
        return False
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    if fp4 is None or a.dtype != fp4 or b.dtype != fp4 or a.dim() != 2 or b.dim() != 2:
        return False
    if scale_a.dtype != torch.float8_e4m3fn or scale_b.dtype != torch.float8_e4m3fn:
        return False
    (m, half), (half_b, n) = a.shape, b.shape
    k = 2 * half
    if half != half_b or k % BLOCK:
        return False
    return all(rows % TILE[0] == 0 and (k // BLOCK) % TILE[1] == 0 and s.numel() == rows * (k // BLOCK)
               for rows, s in ((m, scale_a), (n, scale_b)))


def unblock(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """The ``[rows, cols]`` scale matrix of a flat tensor in cuBLAS's blocked layout."""
    return flat.reshape(rows // TILE[0], cols // TILE[1], 32, 4, TILE[1]).permute(0, 3, 2, 1, 4).reshape(rows, cols)


def unpack(packed: torch.Tensor, dim: int) -> torch.Tensor:
    """fp32 values of packed fp4 bytes, the pairs unfolded along ``dim`` (low nibble first)."""
    codes = packed.view(torch.uint8)
    table = torch.tensor(E2M1, dtype=torch.float32, device=packed.device)
    lo, hi = table[(codes & 15).long()], table[(codes >> 4).long()]
    shape = list(codes.shape)
    shape[dim] *= 2
    return torch.stack([lo, hi], dim + 1).reshape(shape)


def scaled_mm_nvfp4(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                    bias: torch.Tensor | None = None, scale_result: torch.Tensor | None = None,
                    out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """The block-scaled fp4 GEMM of the module docstring, in fp32, cast to ``out_dtype`` (fp32 when None)."""
    m, n, k = a.shape[0], b.shape[1], 2 * a.shape[1]
    sa = unblock(scale_a, m, k // BLOCK).float().repeat_interleave(BLOCK, dim=1)  # [M, K]
    sb = unblock(scale_b, n, k // BLOCK).float().repeat_interleave(BLOCK, dim=1)  # [N, K]
    out = (unpack(a, 1) * sa) @ (unpack(b, 0) * sb.t())
    if scale_result is not None:
        out = out * scale_result.float()
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype or torch.float32)


class CpuNvfp4(TorchDispatchMode):
    """Runs NVFP4 ``_scaled_mm`` calls on CPU tensors with :func:`scaled_mm_nvfp4`; ``calls`` counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is _SCALED_MM and len(args) >= 4 and is_nvfp4(*args[:4]) and args[0].device.type == "cpu":
            names = ("bias", "scale_result", "out_dtype", "use_fast_accum")
            opts = dict(zip(names, args[4:], strict=False)) | kwargs
            self.calls += 1
            return scaled_mm_nvfp4(*args[:4], opts.get("bias"), opts.get("scale_result"), opts.get("out_dtype"))
        return func(*args, **kwargs)


__all__ = ["BLOCK", "E2M1", "TILE", "CpuNvfp4", "is_nvfp4", "scaled_mm_nvfp4", "unblock", "unpack"]
