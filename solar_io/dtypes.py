"""Element types of the einsum-graph format and their storage widths.

Widths are in bits per element as stored in memory. Block-scaled formats count their
shared scale factors fractionally (nvfp4: 4-bit values plus one fp8 scale per 16 values
= 4.5 bits), so byte counts of sub-byte tensors are exact fractions, never rounded up.
"""

from __future__ import annotations

from dataclasses import dataclass


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
