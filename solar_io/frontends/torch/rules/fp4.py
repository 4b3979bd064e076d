"""Packed fp4 (``torch.float4_e2m1fn_x2``): two E2M1 values in one byte.

The graph holds a packed fp4 tensor as ``uint8`` of the same shape (``ctx.TORCH_TO_FILE``): one
element per byte, so its bytes are exact. PyTorch has no arithmetic on the packed dtype; a program
reinterprets it (``w.view(torch.uint8)``) and unpacks the nibbles with bit operations, or the
reverse. Such a reinterpretation between two dtypes the graph holds identically is an alias: it
emits nothing and moves no bytes. Any other ``view(dtype)`` (a bitcast between dtypes the graph
holds differently, e.g. int32 as float32) has no einsum-graph meaning and is one clear error.

    >>> # w: float4_e2m1fn_x2 [N, K//2]  ->  graph tensor w: uint8 [N, K//2]  (N*K/2 bytes)
    >>> # b = w.view(torch.uint8)        ->  b is w (no node)
"""

from __future__ import annotations

from ..ctx import Args, LowerCtx, T, file_dtype
from ..registry import NoLowering, rule


@rule("aten.view.dtype")
def view_dtype(ctx: LowerCtx, a: Args) -> T:
    src, dst = ctx.dtype(a.self), file_dtype(a.dtype)
    if src == dst and ctx.shape(a.self) == ctx.out_shape():
        return a.self
    raise NoLowering(f"view as {a.dtype} of a {src} tensor reinterprets its bits ({src} -> {dst}); only "
                     "reinterpretations the graph holds identically (packed fp4 as uint8) are lowered")


# ----------------------------------------------------------------------------- unpacking nibbles
# ``b & (2**k - 1)`` is ``b mod 2**k`` (Python's remainder, the sign of the divisor: two's complement
# masking for signed integers too): one vector operation, as the AND it replaces. ``b >> k`` of an
# unsigned integer is ``b / 2**k`` written to an integer (truncation = floor for b >= 0): one
# operation, as the shift. A signed right shift would need a floor as well (two operations where the
# chip does one), an AND with any other mask has no single map operator, and a left shift wraps in the
# integer's width, which a multiply in the executor does not: these stay without a rule (opaque, listed).

_UNSIGNED = ("uint8",)


def _int_scalar(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@rule("aten.bitwise_and.Scalar")
def bitwise_and_scalar(ctx: LowerCtx, a: Args) -> T:
    if ctx.out_dtype() == "bool":
        return ctx.ew("and", a.self, a.other, dtype="bool")
    m = _int_scalar(a.other)
    if m is None or m < 0 or (m + 1) & m:
        raise NoLowering(f"bitwise and with {a.other!r} (only masks 2**k - 1 are lowered, as a remainder)")
    return ctx.ew("remainder", a.self, m + 1, dtype=ctx.out_dtype())


@rule("aten.__rshift__.Scalar", "aten.bitwise_right_shift.Tensor_Scalar")
def right_shift(ctx: LowerCtx, a: Args) -> T:
    k = _int_scalar(a.other)
    if k is None or k < 0 or ctx.dtype(a.self) not in _UNSIGNED:
        raise NoLowering(f"right shift by {a.other!r} of a {ctx.dtype(a.self)} tensor (only constant shifts of "
                         "unsigned integers are lowered)")
    return ctx.ew("div", a.self, 1 << k, dtype=ctx.out_dtype())

