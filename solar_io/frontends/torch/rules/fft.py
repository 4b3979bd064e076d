"""Complex tensors and FFTs.

The graph holds a complex tensor of shape S as a real tensor of shape S + (2,): real and imaginary
parts in a trailing rank, each of the dtype :data:`solar_io.dtypes.COMPLEX_PARTS` names (complex64 ->
fp32: 8 bytes an element, exact). That is ``torch.view_as_real``'s layout, so ``view_as_real`` and
``view_as_complex`` are aliases (no node) and ``.real`` / ``.imag`` are views of one part. An op that
reads or writes a complex tensor is lowered only by a rule here (``registry.COMPLEX_RULES``), because
a rule written for real tensors would treat the pairs as two independent values; any other such op
is an opaque node (its bytes counted, its compute unknown and listed).

FFTs (``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``, which the ``fft_*`` ops decompose into) are ``fft``
nodes (format 1.7, :mod:`solar_io.fourier`): one whole tensor in and one out, the transform's type,
dims, direction and scaling in the node. Their bytes are the input read and the output written; their
compute floor is the additions of each transform's zero-frequency output, the one count every FFT
algorithm must reach (``5 N log2 N`` is no lower bound: a split-radix FFT does fewer, and FFTs also run
as matrix products on tensor cores). The executor runs them, so validation checks them like any node.
An ``fft_*`` op left undecomposed is opaque, with :data:`FFT_REASON`.

    >>> # y = torch.fft.rfft(x, n=2 * L) / (2 * L); return y.real, y.imag     (x: fp32 [B, C, L])
    >>> # graph: pad x to 2L; fft node r2c over dim 2 -> y: fp32 [B, C, L + 1, 2]; y / (2L) (2 divs an
    >>> # element); .real / .imag: views of one part; fused bytes 4BCL + 2 * 4BC(L + 1)
"""

from __future__ import annotations

from ....fourier import Fourier
from ..ctx import Args, LowerCtx, T, complex_part
from ..dtype_map import graph_shape
from ..registry import OPAQUE_REASONS, NoLowering, complex_rule
from .movement import constant_pad
from .shape import concat, expand_to, select_dim, slice_dim

FFT_REASON = ("an FFT op not decomposed into aten._fft_r2c / _fft_c2c / _fft_c2r (the fft node's ops): its "
              "bytes are counted and its compute is unknown")
#: ATen's fft_norm_mode (0, 1, 2) as the fft record's norm.
NORM_MODES = ("none", "by_sqrt_n", "by_n")

#: The composite FFT ops, which export decomposes into the three above.
FFT_OPS = ("aten.fft_fft", "aten.fft_ifft", "aten.fft_rfft", "aten.fft_irfft", "aten.fft_fftn", "aten.fft_ifftn",
           "aten.fft_rfftn", "aten.fft_irfftn", "aten.fft_fft2", "aten.fft_ifft2", "aten.fft_rfft2", "aten.fft_irfft2",
           "aten.fft_hfft", "aten.fft_ihfft")
OPAQUE_REASONS.update({op: FFT_REASON for op in FFT_OPS})


def _is_complex(ctx: LowerCtx, name: str) -> bool:
    """Whether argument ``name`` of the op being lowered is a complex tensor (from its fx value)."""
    schema = getattr(ctx.node.target, "_schema", None)
    names = [a.name for a in schema.arguments] if schema is not None else []
    pos = names.index(name) if name in names else -1
    v = ctx.node.kwargs.get(name, ctx.node.args[pos] if 0 <= pos < len(ctx.node.args) else None)
    return complex_part(getattr(v, "meta", {}).get("val")) is not None


def _part_dtype(ctx: LowerCtx) -> str:
    part = complex_part(ctx.node.meta.get("val"))
    if part is None:
        raise NoLowering("the result is not complex")
    return part


@complex_rule("aten.view_as_real", "aten.view_as_complex")
def view_as_real(ctx: LowerCtx, a: Args) -> T:
    """The pairs are the complex tensor's layout: the same graph tensor."""
    return a.self


@complex_rule("aten.real", "aten.imag")
def real_imag(ctx: LowerCtx, a: Args) -> T:
    """One part: a view selecting index 0 (real) or 1 (imaginary) of the trailing rank."""
    if not _is_complex(ctx, "self"):
        raise NoLowering(f"{ctx.op} of a real tensor")
    return select_dim(ctx, a.self, len(ctx.shape(a.self)) - 1, 0 if ctx.op == "aten.real" else 1)


@complex_rule("aten.clone", "aten.contiguous", "aten.alias", "aten.detach")
def complex_copy(ctx: LowerCtx, a: Args) -> T:
    """A copy of the pairs (clone; contiguous of a non-contiguous view) or the tensor itself."""
    x = a.self
    if ctx.op == "aten.clone" or (ctx.op == "aten.contiguous" and x.name in ctx.noncontig):
        return ctx.copy(x)
    return x


def _pairs_shape(ctx: LowerCtx) -> tuple[int, ...]:
    """The graph shape of the op's complex result: torch's shape and the trailing (re, im) rank."""
    _part_dtype(ctx)
    return (*(int(d) for d in ctx.node.meta["val"].shape), 2)


def _dim(ctx: LowerCtx, x: T, dim: int) -> int:
    """A complex tensor's dim (negative counts from its last complex dim) as a dim of its pairs."""
    return dim % (len(ctx.shape(x)) - 1)


@complex_rule("aten.view", "aten.reshape", "aten._unsafe_view", "aten.unsqueeze", "aten.squeeze", "aten.flatten",
              "aten.unflatten")
def complex_reshape(ctx: LowerCtx, a: Args) -> T:
    """A row-major reshape of a complex tensor is one of its pairs with the (re, im) rank kept last."""
    return ctx.reshape(a.self, _pairs_shape(ctx))


@complex_rule("aten.expand")
def complex_expand(ctx: LowerCtx, a: Args) -> T:
    return expand_to(ctx, a.self, _pairs_shape(ctx))


@complex_rule("aten.permute", "aten.transpose", "aten.t")
def complex_permute(ctx: LowerCtx, a: Args) -> T:
    """The complex dims permuted, the (re, im) rank kept last."""
    nd = len(ctx.shape(a.self)) - 1
    if ctx.op == "aten.permute":
        perm = [d % nd for d in a.dims]
    else:
        perm = list(range(nd))
        d0, d1 = (0, 1) if ctx.op == "aten.t" else (a.dim0 % nd, a.dim1 % nd)
        if nd >= 2 or ctx.op != "aten.t":
            perm[d0], perm[d1] = perm[d1], perm[d0]
    return ctx.permute(a.self, [*perm, nd])


@complex_rule("aten.slice")
def complex_slice(ctx: LowerCtx, a: Args) -> T:
    return slice_dim(ctx, a.self, _dim(ctx, a.self, a.dim), a.start, a.end, a.step or 1)


@complex_rule("aten.select")
def complex_select(ctx: LowerCtx, a: Args) -> T:
    return select_dim(ctx, a.self, _dim(ctx, a.self, a.dim), a.index)


def _trailing(ctx: LowerCtx, x: T) -> T:
    """A real tensor broadcast against pairs: a view with a trailing rank of 1."""
    return ctx.reshape(x, (*ctx.shape(x), 1), suffix="pair")


def _product(ctx: LowerCtx, x: T, y: T, part: str) -> T:
    """``x * y`` of two complex tensors as written in real arithmetic: ``re = x0 y0 - x1 y1``,
    ``im = x0 y1 + x1 y0`` (4 multiplies and 2 adds an element), the parts stacked back."""
    xd, yd = len(ctx.shape(x)) - 1, len(ctx.shape(y)) - 1
    x0, x1 = select_dim(ctx, x, xd, 0, suffix="x0"), select_dim(ctx, x, xd, 1, suffix="x1")
    y0, y1 = select_dim(ctx, y, yd, 0, suffix="y0"), select_dim(ctx, y, yd, 1, suffix="y1")
    re = ctx.ew("sub", ctx.ew("mul", x0, y0, dtype=part, suffix="rr"), ctx.ew("mul", x1, y1, dtype=part, suffix="ii"),
                dtype=part, suffix="re")
    im = ctx.ew("add", ctx.ew("mul", x0, y1, dtype=part, suffix="ri"), ctx.ew("mul", x1, y0, dtype=part, suffix="ir"),
                dtype=part, suffix="im")
    parts = [ctx.reshape(t, (*ctx.shape(t), 1), suffix=f"{k}1") for k, t in (("re", re), ("im", im))]
    return concat(ctx, parts, len(ctx.shape(re)))


@complex_rule("aten.mul", "aten.div")
def scale(ctx: LowerCtx, a: Args) -> T:
    """Complex times or over a real number or real tensor: both parts scaled, 2 operations an element.
    Complex times complex: :func:`_product`. Complex over complex has no rule (an opaque node, listed)."""
    if a.rounding_mode is not None:
        raise NoLowering(f"div rounding_mode={a.rounding_mode} of a complex tensor")
    part = _part_dtype(ctx)
    left, right = _is_complex(ctx, "self"), _is_complex(ctx, "other")
    if left and right and ctx.op == "aten.mul":
        return _product(ctx, a.self, a.other, part)
    if left and right:
        raise NoLowering("a complex tensor over a complex tensor (no complex quotient rule)")
    if not left and ctx.op == "aten.div":
        raise NoLowering("a real number over a complex tensor")
    z, other = (a.self, a.other) if left else (a.other, a.self)
    if isinstance(other, complex):
        raise NoLowering(f"{ctx.op} by the complex number {other!r}")
    if isinstance(other, T):
        other = _trailing(ctx, other)
    return ctx.ew("mul" if ctx.op == "aten.mul" else "div", z, other, dtype=part)


@complex_rule("aten.add", "aten.sub")
def add_sub(ctx: LowerCtx, a: Args) -> T:
    """Complex plus or minus complex: each part added, 2 operations an element."""
    if not (_is_complex(ctx, "self") and _is_complex(ctx, "other")) or a.alpha not in (None, 1):
        raise NoLowering(f"{ctx.op} of a complex and a real tensor, or with alpha")
    return ctx.ew("add" if ctx.op == "aten.add" else "sub", a.self, a.other, dtype=_part_dtype(ctx))


@complex_rule("aten.abs", "aten.angle")
def magnitude_phase(ctx: LowerCtx, a: Args) -> T:
    """``|z| = sqrt(re^2 + im^2)`` (a square-and-sum over the pair rank, then a root: 3 operations and a
    root an element) or ``angle(z) = atan2(im, re)``; a real result of the parts' dtype."""
    if not _is_complex(ctx, "self"):
        raise NoLowering(f"{ctx.op} of a real tensor")
    z = a.self
    d = len(ctx.shape(z)) - 1
    if ctx.op == "aten.abs":
        return ctx.ew("sqrt", ctx.reduce(z, [d], False, "add", map="square", suffix="sq"))
    return ctx.ew("atan2", select_dim(ctx, z, d, 1, suffix="im"), select_dim(ctx, z, d, 0, suffix="re"))


@complex_rule("aten.constant_pad_nd")
def complex_pad(ctx: LowerCtx, a: Args) -> T:
    """Zero padding of the complex dims (``irfft(x, n)`` with n past the spectrum pads it): the pairs
    padded, the (re, im) rank not."""
    if complex(a.value or 0) != 0:
        raise NoLowering(f"complex padding with the value {a.value!r}")
    return constant_pad(ctx, a.self, [0, 0, *a.pad], 0.0)


@complex_rule("aten._fft_r2c", "aten._fft_c2c", "aten._fft_c2r")
def fourier_transform(ctx: LowerCtx, a: Args) -> T:
    """One ``fft`` node: ATen's transform of the input (``dim``, ``normalization``, and ``onesided``,
    ``forward`` or ``last_dim_size``) over whole tensors; the output's shape gives one-sidedness and the
    c2r signal length."""
    kind = ctx.op.removeprefix("aten._fft_")
    x = a.self
    nd = len(ctx.shape(x)) - (kind != "r2c")  # the pair rank is not a dim of the transform
    dims = tuple(int(d) % nd for d in a.dim)
    if not 0 <= int(a.normalization) < len(NORM_MODES):
        raise NoLowering(f"unknown FFT normalization {a.normalization!r}")
    inverse = kind == "c2r" or (kind == "c2c" and not a.forward)
    spec = Fourier(kind, dims, inverse, NORM_MODES[int(a.normalization)])
    shape, dtype = graph_shape(ctx.node.meta["val"])
    if ctx.dtype(x) != dtype:
        raise NoLowering(f"an FFT whose input parts ({ctx.dtype(x)}) and output parts ({dtype}) differ")
    if kind == "c2r":  # ATen reads the first n // 2 + 1 stored values of the last transformed dim
        stored, half = ctx.shape(x)[dims[-1]], shape[dims[-1]] // 2 + 1
        if stored < half:
            raise NoLowering(f"a c2r of {stored} stored values into {shape[dims[-1]]} (needs {half})")
        if stored > half:
            x = slice_dim(ctx, x, dims[-1], 0, half, suffix="half")
    b = ctx.b
    out = b.source(ctx.name, shape, dtype, "intermediate")
    b.ranks(out)
    b.fft(ctx.name, ctx.op, x.name, out, spec, location=ctx.location)
    return T(out)
