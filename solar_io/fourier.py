"""The ``fft`` node kind (format 1.7): a discrete Fourier transform, its shapes, its values and its floor.

A complex tensor is held as a real one with a trailing rank of size 2 (real, imaginary), as everywhere
in the format (``torch.view_as_real``'s layout). An ``fft`` node reads one whole tensor and writes one,
and its ``fft`` record says which transform:

- ``type``: ``c2c`` (pairs in, pairs out, same shape), ``r2c`` (real in, pairs out; the last
  transformed dim keeps ``n // 2 + 1`` values, the one-sided spectrum, or all ``n``) or ``c2r``
  (pairs of a Hermitian spectrum in, real out; the output's last transformed dim gives the signal
  length ``n``, ``n // 2 + 1`` stored values in);
- ``dims``: the input's dims transformed, as positions among its ranks (the pair rank excluded);
- ``inverse``: the sign of the exponent, ``exp(-2 pi i jk / n)`` forward, ``exp(+...)`` inverse
  (``r2c`` is forward and ``c2r`` inverse in every framework; the other direction is the conjugate);
- ``norm``: ``none``, ``by_sqrt_n`` or ``by_n``, a scale of the result by 1, 1/sqrt(n) or 1/n, with
  n the product of the signal lengths of ``dims``.

**Compute floor.** The bounds charge each transform the additions of its zero-frequency output (the
sum of its inputs): every algorithm computes that output, and a fan-in-2 circuit whose outputs depend
on v values has at least v - (outputs) operations. That is 2n - 2 per ``c2c`` transform (real and
imaginary sums), n - 1 per ``r2c`` and m - 1 per ``c2r`` (m stored spectrum values), as vector FLOPs
like every sum in the format. No larger count is proven for every algorithm: ``5 n log2 n`` is the
radix-2 count, a split-radix FFT does about ``4 n log2 n - 6 n + 8`` real FLOPs, Morgenstern's
``(n/2) log2 n`` additions hold only for bounded coefficients, and FFTs also run as small matrix
products on tensor cores. Bytes are the input read and the output written once, at their sizes.

>>> spec = Fourier("r2c", (1,), False, "none")
>>> out_shape(spec, (4, 10), None)
(4, 6, 2)
>>> floor_flops(spec, (4, 10), (4, 6, 2))
36
>>> import numpy as np
>>> x = np.arange(8.0).reshape(2, 4)
>>> run(spec, x, (2, 3, 2))[:, 0, 0]
array([ 6., 22.])
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

TYPES = ("c2c", "r2c", "c2r")
NORMS = ("none", "by_sqrt_n", "by_n")


@dataclass(frozen=True, slots=True)
class Fourier:
    """The transform of an ``fft`` node (module docstring)."""

    type: str
    dims: tuple[int, ...]
    inverse: bool
    norm: str


def signal_dims(spec: Fourier, in_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of the input without its pair rank (c2c, c2r) — the dims ``spec.dims`` count in."""
    return tuple(in_shape[:-1]) if spec.type in ("c2c", "c2r") else tuple(in_shape)


def problem(spec: Fourier, in_shape: tuple[int, ...], out_shape_: tuple[int, ...] | None) -> str | None:
    """What is wrong with ``spec`` over these shapes (None when it is well formed); ``out_shape_`` may be
    None to check the input side only."""
    if spec.type not in TYPES:
        return f"fft type must be one of {', '.join(TYPES)}, got {spec.type!r}"
    if spec.norm not in NORMS:
        return f"fft norm must be one of {', '.join(NORMS)}, got {spec.norm!r}"
    if spec.type != "r2c" and (not in_shape or in_shape[-1] != 2):
        return (f"a {spec.type} input holds (real, imaginary) pairs: its last rank must have size 2, "
                f"got {list(in_shape)}")
    sig = signal_dims(spec, in_shape)
    if not spec.dims or len(set(spec.dims)) != len(spec.dims) or any(not 0 <= d < len(sig) for d in spec.dims):
        return f"fft dims must be distinct positions in [0, {len(sig) - 1}] of the input, got {list(spec.dims)}"
    if out_shape_ is None:
        return None
    if spec.type == "c2r":
        if len(out_shape_) != len(sig):
            return f"a c2r output has the input's dims without the pair rank, got {list(out_shape_)}"
        last = spec.dims[-1]
        other = [d for d in range(len(sig)) if d != last and out_shape_[d] != sig[d]]
        if other or out_shape_[last] // 2 + 1 != sig[last]:
            return (f"a c2r input of {list(in_shape)} over dims {list(spec.dims)} gives an output of the input's dims "
                    f"with the last transformed one of n values, n // 2 + 1 = {sig[last]}; got {list(out_shape_)}")
        return None
    want = out_shape(spec, in_shape, out_shape_)
    if tuple(out_shape_) != want:
        return (f"an {spec.type} of {list(in_shape)} over dims {list(spec.dims)} writes {list(want)}, "
                f"got {list(out_shape_)}")
    return None


def out_shape(spec: Fourier, in_shape: tuple[int, ...], given: tuple[int, ...] | None) -> tuple[int, ...]:
    """The output's shape (c2r: ``given``'s, which names the signal length; r2c: one-sided unless ``given``
    keeps all n values)."""
    sig = list(signal_dims(spec, in_shape))
    if spec.type == "c2r":
        return tuple(given) if given is not None else tuple(sig[:-1] + [2 * (sig[-1] - 1)])
    if spec.type == "r2c":
        last = spec.dims[-1]
        full = given is not None and len(given) == len(sig) + 1 and given[last] == sig[last]
        sig[last] = sig[last] if full else sig[last] // 2 + 1
    return tuple(sig) + (2,)


def signal_lengths(spec: Fourier, in_shape: tuple[int, ...], out_shape_: tuple[int, ...]) -> tuple[int, ...]:
    """n of each transformed dim: the input's (c2c, r2c) or the output's (c2r)."""
    source = out_shape_ if spec.type == "c2r" else signal_dims(spec, in_shape)
    return tuple(source[d] for d in spec.dims)


def floor_flops(spec: Fourier, in_shape: tuple[int, ...], out_shape_: tuple[int, ...]) -> int:
    """The compute floor of the node, in FLOPs: per transform, the additions of its zero-frequency output
    (module docstring)."""
    sig = signal_dims(spec, in_shape)
    per = prod(sig[d] for d in spec.dims)  # input values (pairs for c2c, c2r) one transform reads
    transforms = prod(sig) // per if per else 0
    values, outputs = (2 * per, 2) if spec.type == "c2c" else (per, 1)
    return transforms * max(0, values - outputs)


def run(spec: Fourier, x: np.ndarray, out_shape_: tuple[int, ...]) -> np.ndarray:
    """The node's output for input array ``x`` (float64 arithmetic; the caller casts to the output's dtype)."""
    x = np.asarray(x, dtype=np.float64)
    axes = list(spec.dims)
    lengths = signal_lengths(spec, x.shape, out_shape_)
    n = prod(lengths)
    if spec.type == "r2c":  # a real signal: the inverse direction is the forward one's conjugate
        y = np.fft.fftn(x, axes=axes)
        last = spec.dims[-1]
        if out_shape_[last] != x.shape[last]:
            y = np.take(y, range(out_shape_[last]), axis=last)
        y = np.conj(y) if spec.inverse else y
    elif spec.type == "c2c":
        z = x[..., 0] + 1j * x[..., 1]
        y = np.fft.ifftn(z, axes=axes) * n if spec.inverse else np.fft.fftn(z, axes=axes)
    else:  # c2r: a real result, so the forward direction is the inverse of the conjugate spectrum
        z = x[..., 0] + 1j * x[..., 1]
        y = np.fft.irfftn(z if spec.inverse else np.conj(z), s=lengths, axes=axes) * n
    y = y * {"none": 1.0, "by_sqrt_n": 1.0 / np.sqrt(n), "by_n": 1.0 / n}[spec.norm]
    return y if spec.type == "c2r" else np.stack([y.real, y.imag], axis=-1)
