"""Element types of the einsum-graph format and their storage widths.

Widths are in bits per element as stored in memory. Block-scaled formats count their
shared scale factors fractionally (nvfp4: 4-bit values plus one fp8 scale per 16 values
= 4.5 bits), so byte counts of sub-byte tensors are exact fractions, never rounded up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class DType:
    """One element type: its name in the file, storage bits, and numeric family."""

    name: str
    bits: float
    family: str  # "float", "int", "uint" or "bool"
    doc: str

    @property
    def bytes(self) -> float:
        """Storage bytes per element (fractional for sub-byte types)."""
        return self.bits / 8.0


_TABLE = [
    DType("fp64", 64, "float", "IEEE 754 binary64"),
    DType("fp32", 32, "float", "IEEE 754 binary32"),
    DType("tf32", 32, "float", "TensorFloat-32: stored as 32-bit fp32, multiplied with a 10-bit mantissa"),
    DType("bf16", 16, "float", "bfloat16: 8-bit exponent, 7-bit mantissa"),
    DType("fp16", 16, "float", "IEEE 754 binary16"),
    DType("fp8_e4m3", 8, "float", "OCP FP8 E4M3"),
    DType("fp8_e5m2", 8, "float", "OCP FP8 E5M2"),
    DType("fp6_e2m3", 6, "float", "OCP FP6 E2M3 (packed)"),
    DType("fp6_e3m2", 6, "float", "OCP FP6 E3M2 (packed)"),
    DType("fp4_e2m1", 4, "float", "OCP FP4 E2M1 (packed, no scale)"),
    DType("mxfp8", 8.25, "float", "OCP MX FP8: E4M3 values + one E8M0 scale per 32 values"),
    DType("mxfp4", 4.25, "float", "OCP MX FP4: E2M1 values + one E8M0 scale per 32 values"),
    DType("nvfp4", 4.5, "float", "NVIDIA NVFP4: E2M1 values + one E4M3 scale per 16 values"),
    DType("int64", 64, "int", "signed 64-bit integer"),
    DType("int32", 32, "int", "signed 32-bit integer"),
    DType("int16", 16, "int", "signed 16-bit integer"),
    DType("int8", 8, "int", "signed 8-bit integer"),
    DType("int4", 4, "int", "signed 4-bit integer (packed)"),
    DType("uint8", 8, "uint", "unsigned 8-bit integer"),
    DType("bool", 8, "bool", "boolean, one byte per element"),
]

DTYPES: dict[str, DType] = {d.name: d for d in _TABLE}

#: Short names that ``dtype()`` accepts (for command-line options such as ``--dtype``).
#: Files always carry the canonical names; the decoder refuses aliases so that text is byte-stable.
ALIASES: dict[str, str] = {"fp8": "fp8_e4m3", "fp4": "fp4_e2m1", "float32": "fp32", "float16": "fp16",
                           "bfloat16": "bf16", "float64": "fp64"}


#: Framework dtype names (the attribute spelling torch, numpy and jax share: ``torch.bfloat16``,
#: ``jnp.float8_e4m3fn``) -> the file's dtype. Every frontend's dtype map is derived from this one.
FRAMEWORK_TO_FILE: dict[str, str] = {
    "float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
    "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}
#: The file's dtype -> its framework name, for the dtypes a framework tensor can hold.
FILE_TO_FRAMEWORK: dict[str, str] = {v: k for k, v in FRAMEWORK_TO_FILE.items()}
#: Complex framework dtypes -> the file dtype of each of their two parts. The graph holds a complex
#: tensor of shape S as a real tensor of shape S + (2,) (real, imaginary: ``torch.view_as_real``'s
#: layout), so its bytes are exact with no complex dtype in the file: complex64 is 2 x fp32 = 8 bytes
#: an element, complex128 2 x fp64 = 16.
COMPLEX_PARTS: dict[str, str] = {"complex64": "fp32", "complex128": "fp64"}
#: File dtypes numpy holds natively (the others are computed in float32 by the executor).
NUMPY_NATIVE: tuple[str, ...] = ("fp64", "fp32", "fp16", "int64", "int32", "int16", "int8", "uint8", "bool")


def dtype(name: str) -> DType:
    """Return the DType called ``name`` (canonical or alias); KeyError names the known ones."""
    key = ALIASES.get(name, name)
    try:
        return DTYPES[key]
    except KeyError:
        raise KeyError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None


def numpy_dtype(name: str) -> str:
    """The numpy dtype the reference executor computes a tensor of this dtype in."""
    d = dtype(name)
    if d.family == "float":
        return "float64" if d.name == "fp64" else "float32"
    if d.family == "bool":
        return "bool"
    return "int64"


#: Formats whose values the executor rounds to (mantissa bits, smallest normal exponent, largest
#: finite value, what a larger value becomes): OCP FP8 as PyTorch converts to it — E4M3 (``fn``:
#: no infinity) saturates at 448, E5M2 overflows to infinity past its largest finite 57344.
ROUNDED: dict[str, tuple[int, int, float, float]] = {
    "fp8_e4m3": (3, -6, 448.0, 448.0),
    "fp8_e5m2": (2, -14, 57344.0, float("inf")),
}


def round_values(name: str, arr: np.ndarray) -> np.ndarray:
    """``arr`` (float32) rounded to the values of dtype ``name`` (nearest, ties to even), for the
    formats of :data:`ROUNDED`; other dtypes are returned unchanged (computed in float32).

    >>> round_values("fp8_e4m3", np.array([0.1, 300.0, 1e-3, 1e4], np.float32)).tolist()
    [0.1015625, 288.0, 0.001953125, 448.0]
    """
    spec = ROUNDED.get(name)
    if spec is None or arr.dtype.kind != "f":
        return arr
    mant, emin, top, over = spec
    a = np.abs(arr.astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), emin)
        step = np.exp2(e - mant)
        r = np.round(a / step) * step  # np.round: half to even, as the hardware conversion
    overflow = r > top
    if np.isinf(over):
        overflow = a >= top + np.exp2(np.floor(np.log2(top)) - mant) / 2  # past the halfway point to 2 * 2^e
    r = np.where(overflow, over, r)
    r = np.where(np.isnan(a), np.nan, np.copysign(r, arr))
    return r.astype(arr.dtype)
