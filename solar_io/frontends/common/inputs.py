"""Input shape specs (``--input NAME=DTYPE[D1,D2,...]``) and ``--entry FILE:CALLABLE``, shared by the
frontends that run a Python program (torch, jax)."""

from __future__ import annotations

import re

from ...dtypes import FILE_TO_FRAMEWORK
from .errors import InputSpecError

#: The file dtypes an input spec may give.
INPUT_DTYPES = ("fp32", "fp16", "bf16", "fp64", "int64", "int32", "int8", "uint8", "bool")
#: Spec dtype names (the file's names, the framework names, ``int``/``long``) -> the file's dtype.
DTYPE_NAMES = {**{d: d for d in INPUT_DTYPES}, **{FILE_TO_FRAMEWORK[d]: d for d in INPUT_DTYPES},
               "int": "int64", "long": "int64"}
_SPEC = re.compile(r"^\s*(?:([A-Za-z_][A-Za-z0-9_]*)\s*=\s*)?([A-Za-z0-9_]+)\s*\[\s*([0-9,\s]*)\]\s*$")


def parse_input_spec(spec: str) -> tuple[str | None, str, list[int]]:
    """``"x=bf16[8,1024,4096]"`` -> (name, file dtype, shape); InputSpecError when malformed."""
    m = _SPEC.match(spec)
    if not m:
        raise InputSpecError(f"bad --input {spec!r}: expected NAME=DTYPE[D1,D2,...], e.g. x=bf16[8,1024,4096]")
    name, dt, dims = m.groups()
    if dt not in DTYPE_NAMES:
        raise InputSpecError(f"bad --input {spec!r}: unknown dtype {dt!r}; use one of {', '.join(INPUT_DTYPES)}")
    shape = [int(d) for d in dims.replace(" ", "").split(",") if d]
    if any(s <= 0 for s in shape):
        raise InputSpecError(f"bad --input {spec!r}: dimensions must be positive")
    return name, DTYPE_NAMES[dt], shape


def split_entry(entry: str) -> tuple[str, str]:
    """``"model.py:workload"`` -> ("model.py", "workload") (``":workload"``: the source file itself);
    InputSpecError when there is no callable."""
    where, sep, name = entry.rpartition(":")
    if not sep or not name.isidentifier():
        raise InputSpecError(f"bad --entry {entry!r}: expected module_or_file:callable")
    return where, name
