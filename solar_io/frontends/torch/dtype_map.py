"""Torch dtypes as the file's dtypes: the torch frontend's one mapping (from :mod:`solar_io.dtypes`).

A real dtype is one file dtype (``TORCH_TO_FILE``); a complex one is held as its two parts with a
trailing rank of 2, real and imaginary (``TORCH_COMPLEX``, :func:`graph_shape`); a dtype with no
file equivalent declines the op (``NoLowering``), which is then decomposed or left opaque.
:func:`to_numpy` is a torch tensor as the array the graph holds (complex as pairs, bf16, fp16 and
fp8 as float32, packed fp4 as its bytes), for validation.

>>> file_dtype(torch.bfloat16)
'bf16'
>>> graph_shape(torch.empty(2, 3, dtype=torch.complex64))
((2, 3, 2), 'fp32')
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...dtypes import COMPLEX_PARTS, FRAMEWORK_TO_FILE
from .registry import NoLowering

#: torch dtype -> the file's dtype (from :data:`solar_io.dtypes.FRAMEWORK_TO_FILE`).
TORCH_TO_FILE = {getattr(torch, name): file for name, file in FRAMEWORK_TO_FILE.items()}
#: Packed fp4 (two E2M1 values per byte): the graph holds its bytes as uint8 of the same shape, so its
#: bytes are exact (one per element, two values each); PyTorch itself only views such a tensor as
#: uint8 (unpacking it with bit operations) or hands it to a scaled matmul kernel.
if hasattr(torch, "float4_e2m1fn_x2"):
    TORCH_TO_FILE[torch.float4_e2m1fn_x2] = "uint8"


def file_dtype(dt: torch.dtype) -> str:
    """The einsum-graph dtype name of a torch dtype."""
    try:
        return TORCH_TO_FILE[dt]
    except KeyError:
        raise NoLowering(f"dtype {dt} has no einsum-graph equivalent") from None


#: torch complex dtype -> the file dtype of its two parts (:data:`solar_io.dtypes.COMPLEX_PARTS`).
TORCH_COMPLEX = {getattr(torch, name): part for name, part in COMPLEX_PARTS.items()}


def complex_part(val: Any) -> str | None:
    """The file dtype of each part when ``val`` (an fx node's value) is a complex tensor, else None.
    The graph holds such a tensor with a trailing rank of 2 (real, imaginary)."""
    return TORCH_COMPLEX.get(val.dtype) if isinstance(val, torch.Tensor) else None


def graph_shape(val: torch.Tensor) -> tuple[tuple[int, ...], str]:
    """(shape, dtype) the graph holds an fx tensor value as: complex ones with a trailing (re, im) rank."""
    shape = tuple(int(s) for s in val.shape)
    part = complex_part(val)
    return (shape + (2,), part) if part is not None else (shape, file_dtype(val.dtype))


def touches_complex(node: Any) -> bool:
    """True when the fx node reads or writes a complex tensor."""
    vals = [node.meta.get("val")]
    for a in (*node.args, *node.kwargs.values()):
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(x, torch.fx.Node):
                vals.append(x.meta.get("val"))
    flat = [v for x in vals for v in (x if isinstance(x, (list, tuple)) else (x,))]
    return any(complex_part(v) is not None for v in flat)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.is_complex():  # the graph holds a complex tensor as (real, imaginary) pairs
        t = torch.view_as_real(t)
    if t.dtype in (torch.bfloat16, torch.float16) or str(t.dtype).startswith("torch.float8"):
        t = t.float()
    elif str(t.dtype).startswith("torch.float4"):  # packed fp4 pairs: the graph holds their bytes (uint8)
        t = t.view(torch.uint8)
    return t.cpu().numpy()


def from_numpy(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """The torch tensor of ``dtype`` that :func:`to_numpy` wrote as ``a``: packed fp4 bytes viewed back
    as fp4 pairs (no conversion exists), (real, imaginary) pairs as complex, anything else converted."""
    t = torch.from_numpy(np.ascontiguousarray(a))
    if str(dtype).startswith("torch.float4"):
        return t.view(dtype)
    if dtype.is_complex:
        return torch.view_as_complex(t.to(torch.float64 if dtype == torch.complex128 else torch.float32))
    return t.to(dtype)
